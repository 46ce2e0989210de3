package app

import (
	"context"
	"fmt"
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
)

// An App's Deployment (spec.deploymentTemplate) runs its pods: named as the template
// says, claimed by name (the oldest App that names it wins it), carrying the config hash
// of the pods' ConfigMaps and Secrets (config.go) so that their change rolls the pods.
// Its rollout is what the App's Progressing and Ready report (status.go), and its pods'
// problems what Ready names (pods.go). Its replica count is the App's only while the App
// dictates it (deploymentReplicas): otherwise it goes to whoever else takes it (the
// HorizontalPodAutoscaler of spec.autoscaling, kubectl scale) without a reset.

// deploymentChild is the App's Deployment.
type deploymentChild struct {
	*childReconciler[*appsv1.Deployment, *appsv1ac.DeploymentApplyConfiguration]
}

// newDeploymentChild wires the Deployment informers; c.deployments is the one it
// returns, whose cache syncApp reads the live Deployment from (liveDeployment).
func newDeploymentChild(c *Controller, inf Informers, _ Options) (appChild, error) {
	k, err := newChildReconciler[*appsv1.Deployment](c, "Deployment", inf.Deployments.Informer(), inf.UnmanagedDeployments.Informer(),
		c.kubeClient.AppsV1().Deployments, appsv1ac.Deployment)
	if err != nil {
		return nil, err
	}
	// The cache keeps who owns spec.replicas (deploymentReplicas reads it), also of the
	// Deployments the controller writes.
	k.trim = func(obj metav1.Object) { _, _ = controller.StripManagedFieldsButReplicas(obj) }
	c.deployments = &deploymentChild{k}
	return c.deployments, nil
}

// liveDeployment returns the cached Deployment app controls under the name its spec
// gives, or nil.
func (c *Controller) liveDeployment(app *appv1.App) *appsv1.Deployment {
	t := app.Spec.DeploymentTemplate
	if t == nil {
		return nil
	}
	return c.deployments.controlled(app, t.Name)
}

// deploymentName is the name of the Deployment app asks for; "" for none.
func deploymentName(app *appv1.App) string {
	if t := app.Spec.DeploymentTemplate; t != nil {
		return t.Name
	}
	return ""
}

func (d *deploymentChild) claim(app *appv1.App) string {
	return claimKey("Deployment", app.Namespace, deploymentName(app))
}

// sync writes the Deployment app asks for, with the config hashes of in, and reports
// it: its status in status.deploymentStatus, its rollout in Progressing and Ready.
func (d *deploymentChild) sync(ctx context.Context, app *appv1.App, in *syncInput) (childOutcome, error) {
	desired, err := desiredDeployment(app, in.hashes, in.live)
	if p := in.rollout; p != nil && err == nil {
		// A canary rollout: the stable version's template, the plan's replicas.
		if p.holdStable {
			return deploymentOutcome(childResult[*appsv1.Deployment]{name: deploymentName(app), obj: in.live}), nil
		}
		desired, err = stableDeployment(app, in, p)
	}
	if err != nil {
		return childOutcome{}, fmt.Errorf("building the Deployment of App %s/%s: %w", app.Namespace, app.Name, err)
	}
	res, err := d.reconcileWith(ctx, app, deploymentName(app), desired, d.claim(app), reconcileOptions{planned: in.rollout != nil})
	return deploymentOutcome(res), err
}

// deploymentOutcome is what the App's status reads of res, the App's Deployment.
func deploymentOutcome(res childResult[*appsv1.Deployment]) childOutcome {
	out := res.outcome()
	out.rollout = true
	out.report = func(status *appv1.AppStatus) { status.DeploymentStatus = deploymentStatusOf(res.obj) }
	return out
}

// deploymentStatusOf returns status.deploymentStatus for the App's Deployment d (nil:
// none).
func deploymentStatusOf(d *appsv1.Deployment) *appsv1.DeploymentStatus {
	if d == nil {
		return nil
	}
	st := d.Status.DeepCopy()
	// The old pods still stopping after a rollout are not the App's: their count would
	// cost a status write after every rollout that is over.
	st.TerminatingReplicas = nil
	return st
}

// DesiredDeployment returns the apply configuration of the Deployment that app wants, with
// exactly the fields the controller owns, or nil when app has no deploymentTemplate; as
// it is created when its pods reference no ConfigMap or Secret.
func DesiredDeployment(app *appv1.App) (*appsv1ac.DeploymentApplyConfiguration, error) {
	return desiredDeployment(app, configHashes{}, nil)
}

// desiredDeployment is DesiredDeployment with the config hashes of the Deployment and its
// pod template (config.go), given live, the App's Deployment as cached (nil: none yet),
// whose replica count it may keep (deploymentReplicas).
func desiredDeployment(app *appv1.App, hashes configHashes, live *appsv1.Deployment) (*appsv1ac.DeploymentApplyConfiguration, error) {
	t := app.Spec.DeploymentTemplate
	if t == nil {
		return nil, nil
	}
	template, err := desiredPodTemplate(app, hashes.pods, app.Annotations[appv1.RestartedAtAnnotation])
	if err != nil {
		return nil, err
	}
	return appDeployment(app, template, hashes.seen, live)
}

// appDeployment returns the App's Deployment running template, with the config hash
// seen and the replica count of the handover (deploymentReplicas) from live, the App's
// Deployment as cached (nil: none yet): the App's own, and a canary rollout's stable
// Deployment at the App's count.
func appDeployment(app *appv1.App, template *corev1ac.PodTemplateSpecApplyConfiguration, seen string, live *appsv1.Deployment) (*appsv1ac.DeploymentApplyConfiguration, error) {
	t := app.Spec.DeploymentTemplate
	// The applied-config hash covers the App's count, whatever the handover applies.
	d, err := buildDeployment(app, t.Name, template, selectorLabels(app), t.Replicas, seen)
	if err != nil {
		return nil, err
	}
	replicas, resourceVersion := deploymentReplicas(app, live)
	return withReplicas(d, replicas, resourceVersion), nil
}

// withReplicas sets the replica count of d, built with its applied-config hash, to the
// handover's (deploymentReplicas): a count (nil: none) and the resourceVersion the apply
// must carry ("": none).
func withReplicas(d *appsv1ac.DeploymentApplyConfiguration, replicas *int32, resourceVersion string) *appsv1ac.DeploymentApplyConfiguration {
	d.Spec.Replicas = replicas
	if resourceVersion != "" {
		d.WithResourceVersion(resourceVersion)
	}
	return d
}

// deploymentReplicas returns the replica count the controller applies to live, app's
// Deployment as cached (nil: not created yet), nil for none, and the resourceVersion the
// apply must carry ("": none). It hands the count over without a reset
// (docs/autoscaling.md): a manager that alone owns spec.replicas and applies without it
// resets it to 1, so the controller never drops the count while it alone owns it.
//
//   - The App dictates the count (deploymentTemplate.replicas, no spec.autoscaling):
//     that count, applied with force, which takes it back from any other writer.
//   - Otherwise (autoscaling on, or replicas unset) and no Deployment yet: the starting
//     size, deploymentTemplate.replicas, else autoscaling.minReplicas, else none (the
//     API server's default, 1).
//   - Otherwise, while the controller alone owns the count (the autoscaler has not
//     changed it yet, or the App has just unset replicas): the live count, with live's
//     resourceVersion, so that an apply built from a cache that has not seen another
//     writer's change is refused (a conflict, retried from a fresher cache) instead of
//     forcing the old count back.
//   - Otherwise (the autoscaler, kubectl scale deployment or anyone else has taken or
//     shares the count): none.
//
// The applied-config hash is computed before: it covers the App's replicas, not what the
// handover applies, so that the handover itself is never a write.
func deploymentReplicas(app *appv1.App, live *appsv1.Deployment) (*int32, string) {
	t, as := app.Spec.DeploymentTemplate, app.Spec.Autoscaling
	switch {
	case t.Replicas != nil && as == nil:
		return ptr.To(*t.Replicas), ""
	case live == nil && t.Replicas != nil:
		return ptr.To(*t.Replicas), ""
	case live == nil && as != nil:
		return ptr.To(autoscalingMin(as)), ""
	case live == nil:
		return nil, ""
	case controller.OwnsReplicasAlone(live, appv1.FieldManager):
		return ptr.To(ptr.Deref(live.Spec.Replicas, 1)), live.ResourceVersion
	}
	return nil, ""
}

// buildDeployment returns the apply configuration of a Deployment of app named name,
// running template, selecting its pods by selector, with replicas (nil: not ours) and
// the config hash seen ("": none); the rest of the Deployment's spec is the App's
// (strategy, minReadySeconds, revisionHistoryLimit). The App's Deployment is one; a
// canary rollout's canary Deployment another (child_canary.go).
func buildDeployment(app *appv1.App, name string, template *corev1ac.PodTemplateSpecApplyConfiguration, selector map[string]string,
	replicas *int32, seen string) (*appsv1ac.DeploymentApplyConfiguration, error) {
	t := app.Spec.DeploymentTemplate
	spec := appsv1ac.DeploymentSpec().
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(selector)).
		WithTemplate(template)
	if replicas != nil {
		spec.WithReplicas(*replicas)
	}
	if t.Strategy != nil {
		strategy := &appsv1ac.DeploymentStrategyApplyConfiguration{}
		if err := controller.Convert(t.Strategy, strategy); err != nil {
			return nil, fmt.Errorf("converting strategy: %w", err)
		}
		spec.WithStrategy(strategy)
	}
	if t.MinReadySeconds != nil {
		spec.WithMinReadySeconds(*t.MinReadySeconds)
	}
	if t.RevisionHistoryLimit != nil {
		spec.WithRevisionHistoryLimit(*t.RevisionHistoryLimit)
	}
	d := appsv1ac.Deployment(name, app.Namespace).
		WithLabels(childLabels(app)).
		WithOwnerReferences(controller.OwnerReference(app, appKind)).
		WithSpec(spec)
	if seen != "" {
		d.WithAnnotations(map[string]string{appv1.ConfigHashAnnotation: seen})
	}

	return controller.WithAppliedHash(d)
}

// desiredPodTemplate returns the pod template of the Deployment app's spec describes,
// its pods rolled for the config hash podsHash ("": none) and the restart restartedAt
// (the App's kubectl.kubernetes.io/restartedAt annotation; "": none). A canary rollout
// builds the stable's template from the stable revision's spec with its own hash and
// restart (pkg/rollout).
func desiredPodTemplate(app *appv1.App, podsHash, restartedAt string) (*corev1ac.PodTemplateSpecApplyConfiguration, error) {
	if copies, ok := decodeCopies(podsHash); ok {
		app = withCopies(app, copies) // versioned config: the pods read their copies (configcopy.go)
	}
	t := app.Spec.DeploymentTemplate
	container := corev1ac.Container().
		WithName(appv1.ContainerName).
		WithImage(t.Image)
	container.WithPorts(containerPorts(app)...)
	if len(t.Command) > 0 {
		container.WithCommand(t.Command...)
	}
	if len(t.Args) > 0 {
		container.WithArgs(t.Args...)
	}
	for i := range t.Env {
		env := &corev1ac.EnvVarApplyConfiguration{}
		if err := controller.Convert(&t.Env[i], env); err != nil {
			return nil, fmt.Errorf("converting env %q: %w", t.Env[i].Name, err)
		}
		container.WithEnv(env)
	}
	if t.Resources != nil {
		resources := &corev1ac.ResourceRequirementsApplyConfiguration{}
		if err := controller.Convert(t.Resources, resources); err != nil {
			return nil, fmt.Errorf("converting resources: %w", err)
		}
		container.WithResources(resources)
	}
	if err := setContainerOptions(container, t); err != nil {
		return nil, err
	}
	podSpec := corev1ac.PodSpec().WithContainers(container)
	if err := setPodOptions(podSpec, t); err != nil {
		return nil, err
	}
	// Native sidecars first, so that an init container can use one (a database proxy),
	// then the init containers, each in the order given.
	for i := range t.Sidecars {
		sidecar, err := podContainer(&t.Sidecars[i])
		if err != nil {
			return nil, fmt.Errorf("converting sidecar %q: %w", t.Sidecars[i].Name, err)
		}
		podSpec.WithInitContainers(sidecar.WithRestartPolicy(corev1.ContainerRestartPolicyAlways))
	}
	for i := range t.InitContainers {
		init, err := podContainer(&t.InitContainers[i])
		if err != nil {
			return nil, fmt.Errorf("converting init container %q: %w", t.InitContainers[i].Name, err)
		}
		podSpec.WithInitContainers(init)
	}

	// The App's own labels are set last: they win over podLabels (which the schema
	// already forbids to set them).
	podLabels := make(map[string]string, len(t.PodLabels)+3)
	maps.Copy(podLabels, appv1.LabelMap(t.PodLabels))
	maps.Copy(podLabels, childLabels(app))
	template := corev1ac.PodTemplateSpec().
		WithLabels(podLabels).
		WithSpec(podSpec)
	if len(t.PodAnnotations) > 0 {
		template.WithAnnotations(t.PodAnnotations)
	}
	if podsHash != "" {
		template.WithAnnotations(map[string]string{appv1.ConfigHashAnnotation: podsHash})
	}
	if restartedAt != "" {
		template.WithAnnotations(map[string]string{appv1.RestartedAtAnnotation: restartedAt})
	}
	return template, nil
}

// podContainer returns the apply configuration of an init container or a sidecar: its
// fields have the names a Pod's container has, so it converts field by field.
func podContainer(c *appv1.Container) (*corev1ac.ContainerApplyConfiguration, error) {
	out := &corev1ac.ContainerApplyConfiguration{}
	if err := controller.Convert(c, out); err != nil {
		return nil, err
	}
	for i := range out.Ports {
		if out.Ports[i].Protocol == nil {
			out.Ports[i].WithProtocol(corev1.ProtocolTCP)
		}
	}
	return out, nil
}

// setContainerOptions sets the optional container fields of t that are set: envFrom,
// probes, security context, volume mounts and image pull policy.
func setContainerOptions(container *corev1ac.ContainerApplyConfiguration, t *appv1.DeploymentTemplate) error {
	for i := range t.EnvFrom {
		envFrom := &corev1ac.EnvFromSourceApplyConfiguration{}
		if err := controller.Convert(&t.EnvFrom[i], envFrom); err != nil {
			return fmt.Errorf("converting envFrom[%d]: %w", i, err)
		}
		container.WithEnvFrom(envFrom)
	}
	probes := []struct {
		name  string
		probe *corev1.Probe
		set   func(*corev1ac.ProbeApplyConfiguration) *corev1ac.ContainerApplyConfiguration
	}{
		{"readinessProbe", t.ReadinessProbe, container.WithReadinessProbe},
		{"livenessProbe", t.LivenessProbe, container.WithLivenessProbe},
		{"startupProbe", t.StartupProbe, container.WithStartupProbe},
	}
	for _, p := range probes {
		if p.probe == nil {
			continue
		}
		probe := &corev1ac.ProbeApplyConfiguration{}
		if err := controller.Convert(p.probe, probe); err != nil {
			return fmt.Errorf("converting %s: %w", p.name, err)
		}
		p.set(probe)
	}
	if t.SecurityContext != nil {
		sc := &corev1ac.SecurityContextApplyConfiguration{}
		if err := controller.Convert(t.SecurityContext, sc); err != nil {
			return fmt.Errorf("converting securityContext: %w", err)
		}
		container.WithSecurityContext(sc)
	}
	for _, m := range t.VolumeMounts {
		mount := corev1ac.VolumeMount().WithName(m.Name).WithMountPath(m.MountPath)
		if m.SubPath != "" {
			mount.WithSubPath(m.SubPath)
		}
		if m.ReadOnly != nil {
			mount.WithReadOnly(*m.ReadOnly)
		}
		container.WithVolumeMounts(mount)
	}
	if t.ImagePullPolicy != "" {
		container.WithImagePullPolicy(t.ImagePullPolicy)
	}
	return nil
}

// setPodOptions sets the optional pod fields of t that are set: volumes, security
// context, service account, image pull secrets and scheduling.
func setPodOptions(spec *corev1ac.PodSpecApplyConfiguration, t *appv1.DeploymentTemplate) error {
	for i := range t.Volumes {
		v, err := volume(&t.Volumes[i])
		if err != nil {
			return err
		}
		spec.WithVolumes(v)
	}
	if t.PodSecurityContext != nil {
		sc := &corev1ac.PodSecurityContextApplyConfiguration{}
		if err := controller.Convert(t.PodSecurityContext, sc); err != nil {
			return fmt.Errorf("converting podSecurityContext: %w", err)
		}
		spec.WithSecurityContext(sc)
	}
	if t.ServiceAccountName != "" {
		// The deprecated alias too: the apiserver copies each into the other, so
		// owning only serviceAccountName would leave the alias behind when the field is
		// removed from the App, and the alias would set it again.
		spec.WithServiceAccountName(t.ServiceAccountName).
			WithDeprecatedServiceAccount(t.ServiceAccountName)
	}
	for _, s := range t.ImagePullSecrets {
		spec.WithImagePullSecrets(corev1ac.LocalObjectReference().WithName(s.Name))
	}
	if len(t.NodeSelector) > 0 {
		spec.WithNodeSelector(appv1.LabelMap(t.NodeSelector))
	}
	for i := range t.Tolerations {
		toleration := &corev1ac.TolerationApplyConfiguration{}
		if err := controller.Convert(&t.Tolerations[i], toleration); err != nil {
			return fmt.Errorf("converting tolerations[%d]: %w", i, err)
		}
		spec.WithTolerations(toleration)
	}
	if t.Affinity != nil {
		affinity := &corev1ac.AffinityApplyConfiguration{}
		if err := controller.Convert(t.Affinity, affinity); err != nil {
			return fmt.Errorf("converting affinity: %w", err)
		}
		spec.WithAffinity(affinity)
	}
	for i := range t.TopologySpreadConstraints {
		c := &corev1ac.TopologySpreadConstraintApplyConfiguration{}
		if err := controller.Convert(&t.TopologySpreadConstraints[i], c); err != nil {
			return fmt.Errorf("converting topologySpreadConstraints[%d]: %w", i, err)
		}
		spec.WithTopologySpreadConstraints(c)
	}
	if t.PriorityClassName != "" {
		spec.WithPriorityClassName(t.PriorityClassName)
	}
	return nil
}

// volume returns the pod volume of v, with its one source.
func volume(v *appv1.Volume) (*corev1ac.VolumeApplyConfiguration, error) {
	out := corev1ac.Volume().WithName(v.Name)
	var err error
	switch {
	case v.ConfigMap != nil:
		src := &corev1ac.ConfigMapVolumeSourceApplyConfiguration{}
		err = controller.Convert(v.ConfigMap, src)
		out.WithConfigMap(src)
	case v.Secret != nil:
		src := &corev1ac.SecretVolumeSourceApplyConfiguration{}
		err = controller.Convert(v.Secret, src)
		out.WithSecret(src)
	case v.EmptyDir != nil:
		src := &corev1ac.EmptyDirVolumeSourceApplyConfiguration{}
		err = controller.Convert(v.EmptyDir, src)
		out.WithEmptyDir(src)
	case v.PersistentVolumeClaim != nil:
		src := &corev1ac.PersistentVolumeClaimVolumeSourceApplyConfiguration{}
		err = controller.Convert(v.PersistentVolumeClaim, src)
		out.WithPersistentVolumeClaim(src)
	default:
		return nil, fmt.Errorf("volume %q has no source", v.Name)
	}
	if err != nil {
		return nil, fmt.Errorf("converting volume %q: %w", v.Name, err)
	}
	return out, nil
}

// stableDeployment returns the stable Deployment of plan p: the App's, with the stable
// template and the plan's replicas, else the App's by the handover (deploymentReplicas):
// an autoscaled App's stable count stays the autoscaler's during a rollout too.
func stableDeployment(app *appv1.App, in *syncInput, p *rolloutPlan) (*appsv1ac.DeploymentApplyConfiguration, error) {
	if p.StableReplicas != nil {
		return buildDeployment(app, app.Spec.DeploymentTemplate.Name, p.stableTemplate, in.selector, p.StableReplicas, in.hashes.seen)
	}
	return appDeployment(app, p.stableTemplate, in.hashes.seen, in.live)
}

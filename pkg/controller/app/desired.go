package app

import (
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
)

const (
	// defaultServicePort is the seed's Service port, also the schema default.
	defaultServicePort int32 = 8080
)

// selectorLabels are the labels that select an App's pods: they name the App, so two
// Apps never select each other's pods.
func selectorLabels(app *appv1.App) map[string]string {
	return map[string]string{
		appv1.NameLabel:     app.Name,
		appv1.InstanceLabel: app.Name,
	}
}

// childLabels are the labels of an App's Deployment, Service and pods.
func childLabels(app *appv1.App) map[string]string {
	l := selectorLabels(app)
	l[appv1.ManagedByLabel] = appv1.ManagedByValue
	return l
}

// desiredChildren is what an App asks for: its Deployment and Service (nil: none) under the
// names its spec gives them ("": none), and the labels that select its pods.
type desiredChildren struct {
	deployment                  *appsv1ac.DeploymentApplyConfiguration
	service                     *corev1ac.ServiceApplyConfiguration
	deploymentName, serviceName string
	// disruptionBudget is the PodDisruptionBudget (nil: none) under budgetName ("":
	// none), the Deployment's name.
	disruptionBudget *policyv1ac.PodDisruptionBudgetApplyConfiguration
	budgetName       string
	// route is the Ingress of spec.route (nil: none) under routeName ("": none), the
	// App's name.
	route     *networkingv1ac.IngressApplyConfiguration
	routeName string
	selector  map[string]string
}

// desiredState returns what app asks for, its Deployment carrying the config hashes
// (config.go).
func desiredState(app *appv1.App, hashes configHashes) (desiredChildren, error) {
	want := desiredChildren{selector: selectorLabels(app)}
	var err error
	if want.deployment, err = desiredDeployment(app, hashes); err != nil {
		return want, fmt.Errorf("building the Deployment of App %s/%s: %w", app.Namespace, app.Name, err)
	}
	if want.service, err = DesiredService(app); err != nil {
		return want, fmt.Errorf("building the Service of App %s/%s: %w", app.Namespace, app.Name, err)
	}
	if want.disruptionBudget, err = DesiredDisruptionBudget(app); err != nil {
		return want, fmt.Errorf("building the PodDisruptionBudget of App %s/%s: %w", app.Namespace, app.Name, err)
	}
	if want.route, err = DesiredRoute(app); err != nil {
		return want, fmt.Errorf("building the route of App %s/%s: %w", app.Namespace, app.Name, err)
	}
	if want.route != nil {
		want.routeName = app.Name
	}
	if t := app.Spec.DeploymentTemplate; t != nil {
		want.deploymentName = t.Name
		if want.disruptionBudget != nil {
			want.budgetName = t.Name
		}
	}
	if t := app.Spec.ServiceTemplate; t != nil {
		want.serviceName = t.Name
	}
	return want, nil
}

// DesiredDeployment returns the apply configuration of the Deployment that app wants, with
// exactly the fields the controller owns, or nil when app has no deploymentTemplate; as
// it is created when its pods reference no ConfigMap or Secret.
func DesiredDeployment(app *appv1.App) (*appsv1ac.DeploymentApplyConfiguration, error) {
	return desiredDeployment(app, configHashes{})
}

// desiredDeployment is DesiredDeployment with the config hashes of the Deployment and its
// pod template (config.go).
func desiredDeployment(app *appv1.App, hashes configHashes) (*appsv1ac.DeploymentApplyConfiguration, error) {
	t := app.Spec.DeploymentTemplate
	if t == nil {
		return nil, nil
	}
	container := corev1ac.Container().
		WithName(appv1.ContainerName).
		WithImage(t.Image)
	if t.ContainerPort != nil {
		container.WithPorts(corev1ac.ContainerPort().
			WithName(appv1.PortName).
			WithContainerPort(*t.ContainerPort).
			WithProtocol(portProtocol(app)))
	}
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
	for _, p := range t.Ports {
		container.WithPorts(containerPort(p))
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
	if hashes.pods != "" {
		template.WithAnnotations(map[string]string{appv1.ConfigHashAnnotation: hashes.pods})
	}
	spec := appsv1ac.DeploymentSpec().
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(selectorLabels(app))).
		WithTemplate(template)
	if t.Replicas != nil {
		// Unset: the replica count is not ours (an autoscaler of the Deployment owns it).
		spec.WithReplicas(*t.Replicas)
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
	d := appsv1ac.Deployment(t.Name, app.Namespace).
		WithLabels(childLabels(app)).
		WithOwnerReferences(controller.OwnerReference(app, appKind)).
		WithSpec(spec)
	if hashes.seen != "" {
		d.WithAnnotations(map[string]string{appv1.ConfigHashAnnotation: hashes.seen})
	}

	return controller.WithAppliedHash(d)
}

// firstServicePort returns the number and the name of the first port of the Service t
// describes (port and portName), defaults applied; the ports of t.Ports follow it.
func firstServicePort(t *appv1.ServiceTemplate) (int32, string) {
	port, name := t.Port, t.PortName
	if port == 0 {
		port = defaultServicePort
	}
	if name == "" {
		name = appv1.PortName
	}
	return port, name
}

// DesiredService returns the apply configuration of the Service that app wants, or nil when
// app has no serviceTemplate. The Service selects the App's pods; its target port is
// serviceTemplate.targetPort, else the container port, else the Service port.
func DesiredService(app *appv1.App) (*corev1ac.ServiceApplyConfiguration, error) {
	t := app.Spec.ServiceTemplate
	if t == nil {
		return nil, nil
	}
	port, portName := firstServicePort(t)
	targetPort := port
	switch {
	case t.TargetPort != nil:
		targetPort = *t.TargetPort
	case app.Spec.DeploymentTemplate != nil && app.Spec.DeploymentTemplate.ContainerPort != nil:
		targetPort = *app.Spec.DeploymentTemplate.ContainerPort
	}
	serviceType := t.Type
	if serviceType == "" {
		serviceType = corev1.ServiceTypeClusterIP
	}
	servicePort := corev1ac.ServicePort().
		WithName(portName).
		WithProtocol(portProtocol(app)).
		WithPort(port).
		WithTargetPort(intstr.FromInt32(targetPort))
	if t.NodePort != nil {
		servicePort.WithNodePort(*t.NodePort)
	}
	spec := corev1ac.ServiceSpec().
		WithType(serviceType).
		WithSelector(selectorLabels(app)).
		WithPorts(servicePort)
	for _, p := range t.Ports {
		spec.WithPorts(extraServicePort(p))
	}
	if t.SessionAffinity != "" {
		spec.WithSessionAffinity(t.SessionAffinity)
	}
	// The App's own labels are set last: they win over serviceTemplate.labels (which the
	// schema already forbids to set them).
	labels := make(map[string]string, len(t.Labels)+3)
	maps.Copy(labels, appv1.LabelMap(t.Labels))
	maps.Copy(labels, childLabels(app))
	s := corev1ac.Service(t.Name, app.Namespace).
		WithLabels(labels).
		WithOwnerReferences(controller.OwnerReference(app, appKind)).
		WithSpec(spec)
	if len(t.Annotations) > 0 {
		s.WithAnnotations(t.Annotations)
	}

	return controller.WithAppliedHash(s)
}

// containerPort returns the apply configuration of a container port.
func containerPort(p appv1.ContainerPort) *corev1ac.ContainerPortApplyConfiguration {
	return corev1ac.ContainerPort().
		WithName(p.Name).
		WithContainerPort(p.ContainerPort).
		WithProtocol(protocolOrTCP(p.Protocol))
}

// extraServicePort returns the apply configuration of a port of serviceTemplate.ports:
// its targetPort defaults to its port.
func extraServicePort(p appv1.ServicePort) *corev1ac.ServicePortApplyConfiguration {
	target := intstr.FromInt32(p.Port)
	if p.TargetPort != nil {
		target = *p.TargetPort
	}
	port := corev1ac.ServicePort().
		WithName(p.Name).
		WithProtocol(protocolOrTCP(p.Protocol)).
		WithPort(p.Port).
		WithTargetPort(target)
	if p.NodePort != nil {
		port.WithNodePort(*p.NodePort)
	}
	return port
}

// protocolOrTCP returns p, or TCP when it is empty.
func protocolOrTCP(p corev1.Protocol) corev1.Protocol {
	if p == "" {
		return corev1.ProtocolTCP
	}
	return p
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

// DesiredDisruptionBudget returns the apply configuration of the PodDisruptionBudget
// that app wants, named as its Deployment and selecting its pods, or nil when app asks
// for none.
func DesiredDisruptionBudget(app *appv1.App) (*policyv1ac.PodDisruptionBudgetApplyConfiguration, error) {
	b, t := app.Spec.DisruptionBudget, app.Spec.DeploymentTemplate
	if b == nil || t == nil {
		return nil, nil
	}
	spec := policyv1ac.PodDisruptionBudgetSpec().
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(selectorLabels(app)))
	if b.MinAvailable != nil {
		spec.WithMinAvailable(*b.MinAvailable)
	}
	if b.MaxUnavailable != nil {
		spec.WithMaxUnavailable(*b.MaxUnavailable)
	}
	pdb := policyv1ac.PodDisruptionBudget(t.Name, app.Namespace).
		WithLabels(childLabels(app)).
		WithOwnerReferences(controller.OwnerReference(app, appKind)).
		WithSpec(spec)
	return controller.WithAppliedHash(pdb)
}

// portProtocol is the protocol of the App's container port and Service port:
// serviceTemplate.protocol, else TCP.
func portProtocol(app *appv1.App) corev1.Protocol {
	if t := app.Spec.ServiceTemplate; t != nil && t.Protocol != "" {
		return t.Protocol
	}
	return corev1.ProtocolTCP
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

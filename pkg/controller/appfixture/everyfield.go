package appfixture

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// EveryField is what WithEveryField needs from the cluster: objects the App's pods refer
// to, which admission checks (the ServiceAccount, the PriorityClass) or the scheduler
// waits for (a bound claim).
type EveryField struct {
	ServiceAccount string
	PriorityClass  string
	Claim          string
}

// WithEveryField sets every optional field of app's templates that the seed's App did
// not have, with values the apiserver keeps as they are (each defaulted field is given
// its default), so a test can compare the children field by field. The pods satisfy the
// restricted Pod Security Standard and schedule on the local cluster's kwok node.
func WithEveryField(app *appv1.App, refs EveryField) *appv1.App {
	probe := func(path string) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: path, Port: intstr.FromString(appv1.PortName), Scheme: corev1.URISchemeHTTP,
			}},
			InitialDelaySeconds: 1, TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3,
		}
	}
	d := app.Spec.DeploymentTemplate
	d.ContainerPort = ptr.To[int32](8080)
	d.ReadinessProbe = probe("/ready")
	d.LivenessProbe = probe("/live")
	d.StartupProbe = probe("/started")
	d.SecurityContext = &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		ReadOnlyRootFilesystem:   ptr.To(true),
	}
	d.PodSecurityContext = &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		RunAsUser:      ptr.To[int64](10001),
		FSGroup:        ptr.To[int64](10001),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	d.EnvFrom = []corev1.EnvFromSource{
		{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}},
		{Prefix: "DB_", SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Optional: ptr.To(true)}},
	}
	d.Volumes = []appv1.Volume{
		{Name: "config", ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}, DefaultMode: ptr.To[int32](0o644)}},
		{Name: "tls", Secret: &corev1.SecretVolumeSource{SecretName: "tls", DefaultMode: ptr.To[int32](0o400), Optional: ptr.To(true)}}, //nolint:goconst // a fixture's names are its data
		{Name: "cache", EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}},
		{Name: "data", PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: refs.Claim}},
	}
	d.VolumeMounts = []appv1.VolumeMount{
		{Name: "config", MountPath: "/etc/app", ReadOnly: ptr.To(true)},
		{Name: "tls", MountPath: "/etc/tls", ReadOnly: ptr.To(true)},
		{Name: "cache", MountPath: "/tmp"},
		{Name: "data", MountPath: "/data", SubPath: "app"},
	}
	d.ServiceAccountName = refs.ServiceAccount
	d.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "registry"}}
	d.ImagePullPolicy = corev1.PullIfNotPresent
	d.PodLabels = map[string]appv1.LabelValue{"team": "payments", "tier": "web"}
	d.PodAnnotations = map[string]string{"prometheus.io/scrape": "true"}
	d.NodeSelector = map[string]appv1.LabelValue{"type": "kwok"}
	d.Tolerations = []corev1.Toleration{{Key: "kwok.x-k8s.io/node", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	d.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
			Weight: 10,
			Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: "type", Operator: corev1.NodeSelectorOpIn, Values: []string{"kwok"}},
			}},
		}},
	}}
	d.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
		MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.ScheduleAnyway,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{appv1.InstanceLabel: app.Name}},
	}}
	d.PriorityClassName = refs.PriorityClass
	d.Strategy = &appsv1.DeploymentStrategy{
		Type: appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{
			MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0)),
		},
	}
	d.MinReadySeconds = ptr.To[int32](1)
	d.RevisionHistoryLimit = ptr.To[int32](3)

	s := app.Spec.ServiceTemplate
	s.Type = corev1.ServiceTypeNodePort
	s.PortName = "web"
	s.Protocol = corev1.ProtocolTCP
	s.SessionAffinity = corev1.ServiceAffinityClientIP
	s.Labels = map[string]appv1.LabelValue{"team": "payments"}
	s.Annotations = map[string]string{"ingress/http": "true", "ingress/host": app.Name + ".example.com"}
	return app
}

// EveryFieldDiffs returns, for each optional field of app's templates, a description of
// how the Deployment d or the Service s differs from it; none when both carry exactly
// the App's settings. Fields the App leaves unset must be unset (or the apiserver's
// default) in the child.
func EveryFieldDiffs(app *appv1.App, d *appsv1.Deployment, s *corev1.Service) []string {
	var diffs []string
	check := func(field string, got, want any) {
		if !equality.Semantic.DeepEqual(got, want) {
			diffs = append(diffs, fmt.Sprintf("%s = %s, want %s", field, dump(got), dump(want)))
		}
	}
	if t := app.Spec.DeploymentTemplate; t != nil {
		pod := d.Spec.Template.Spec
		c := pod.Containers[0]
		check("readinessProbe", c.ReadinessProbe, t.ReadinessProbe)
		check("livenessProbe", c.LivenessProbe, t.LivenessProbe)
		check("startupProbe", c.StartupProbe, t.StartupProbe)
		check("securityContext", c.SecurityContext, t.SecurityContext)
		check("podSecurityContext", pod.SecurityContext, orEmpty(t.PodSecurityContext))
		check("envFrom", c.EnvFrom, t.EnvFrom)
		volumes := make([]corev1.Volume, 0, len(t.Volumes))
		for _, v := range t.Volumes {
			volumes = append(volumes, corev1.Volume{Name: v.Name, VolumeSource: corev1.VolumeSource{
				ConfigMap: v.ConfigMap, Secret: v.Secret, EmptyDir: v.EmptyDir, PersistentVolumeClaim: v.PersistentVolumeClaim,
			}})
		}
		check("volumes", pod.Volumes, volumes)
		mounts := make([]corev1.VolumeMount, 0, len(t.VolumeMounts))
		for _, m := range t.VolumeMounts {
			mounts = append(mounts, corev1.VolumeMount{Name: m.Name, MountPath: m.MountPath, SubPath: m.SubPath, ReadOnly: ptr.Deref(m.ReadOnly, false)})
		}
		check("volumeMounts", c.VolumeMounts, mounts)
		check("serviceAccountName", pod.ServiceAccountName, t.ServiceAccountName)
		check("imagePullSecrets", pod.ImagePullSecrets, t.ImagePullSecrets)
		if t.ImagePullPolicy != "" {
			check("imagePullPolicy", c.ImagePullPolicy, t.ImagePullPolicy)
		}
		podLabels := appv1.LabelMap(t.PodLabels)
		if podLabels == nil {
			podLabels = map[string]string{}
		}
		maps.Copy(podLabels, appLabels(app))
		check("podLabels", d.Spec.Template.Labels, podLabels)
		// The controller's own: the config hash that rolls the pods when their ConfigMaps
		// and Secrets change.
		podAnnotations := maps.Clone(d.Spec.Template.Annotations)
		delete(podAnnotations, appv1.ConfigHashAnnotation)
		if len(podAnnotations) == 0 {
			podAnnotations = nil
		}
		check("podAnnotations", podAnnotations, t.PodAnnotations)
		check("nodeSelector", pod.NodeSelector, appv1.LabelMap(t.NodeSelector))
		check("tolerations", pod.Tolerations, t.Tolerations)
		check("affinity", pod.Affinity, t.Affinity)
		check("topologySpreadConstraints", pod.TopologySpreadConstraints, t.TopologySpreadConstraints)
		check("priorityClassName", pod.PriorityClassName, t.PriorityClassName)
		if t.Strategy != nil {
			check("strategy", d.Spec.Strategy, *t.Strategy)
		}
		check("minReadySeconds", d.Spec.MinReadySeconds, ptr.Deref(t.MinReadySeconds, 0))
		if t.RevisionHistoryLimit != nil {
			check("revisionHistoryLimit", d.Spec.RevisionHistoryLimit, t.RevisionHistoryLimit)
		}
	}
	if t := app.Spec.ServiceTemplate; t != nil {
		p := s.Spec.Ports[0]
		check("portName", p.Name, cmp.Or(t.PortName, appv1.PortName))
		check("protocol", p.Protocol, cmp.Or(t.Protocol, corev1.ProtocolTCP))
		if t.NodePort != nil {
			check("nodePort", p.NodePort, *t.NodePort)
		}
		if t.SessionAffinity != "" {
			check("sessionAffinity", s.Spec.SessionAffinity, t.SessionAffinity)
		}
		labels := appv1.LabelMap(t.Labels)
		if labels == nil {
			labels = map[string]string{}
		}
		maps.Copy(labels, appLabels(app))
		check("service labels", s.Labels, labels)
		for k, v := range t.Annotations {
			check("service annotation "+k, s.Annotations[k], v)
		}
	}
	return diffs
}

// appLabels are the labels the controller puts on an App's children and pods, whatever
// the templates add.
func appLabels(app *appv1.App) map[string]string {
	return map[string]string{appv1.NameLabel: app.Name, appv1.InstanceLabel: app.Name, appv1.ManagedByLabel: appv1.ManagedByValue}
}

// orEmpty returns p, or a pointer to a zero T when p is nil: fields the apiserver
// defaults to an empty struct.
func orEmpty[T any](p *T) *T {
	if p == nil {
		return new(T)
	}
	return p
}

// dump renders v as JSON for a diff message.
func dump(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%#v", v)
	}
	return string(data)
}

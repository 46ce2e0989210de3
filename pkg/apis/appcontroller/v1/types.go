package v1

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// App describes an application: a Deployment that runs its pods and a Service that
// exposes them. The App controls both; deleting the App deletes them.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.deploymentTemplate.replicas,statuspath=.status.deploymentStatus.replicas,selectorpath=.status.selector
// +kubebuilder:resource:path=apps,singular=app,scope=Namespaced,shortName=ap
// +kubebuilder:metadata:annotations="api-approved.kubernetes.io=unapproved, experimental-only"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.deploymentTemplate.image`
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.deploymentTemplate.replicas`
// +kubebuilder:printcolumn:name="Available",type=integer,JSONPath=`.status.deploymentStatus.availableReplicas`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63",message="metadata.name must be no more than 63 characters: it is the value of the app.kubernetes.io/instance label of the App's children"
type App struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is what the user wants: the Deployment and the Service of the application.
	// +required
	Spec AppSpec `json:"spec"`

	// Status is what the controller last observed. A new App gets observedGeneration -1
	// from the schema default, so that kstatus-based tools (Flux, kubectl wait, cli-utils)
	// see it InProgress, not Current, until the controller has observed it.
	// +optional
	// +default={"observedGeneration": -1}
	Status AppStatus `json:"status,omitempty"`
}

// AppSpec describes the children of an App. At least one template must be given.
//
// +kubebuilder:validation:XValidation:rule="has(self.deploymentTemplate) || has(self.serviceTemplate)",message="at least one of deploymentTemplate and serviceTemplate must be set"
// +kubebuilder:validation:XValidation:rule="!has(self.route) || has(self.serviceTemplate)",message="route requires serviceTemplate: it routes to the App's Service",fieldPath=".route"
// +kubebuilder:validation:XValidation:rule="!has(self.disruptionBudget) || has(self.deploymentTemplate)",message="disruptionBudget requires deploymentTemplate: it protects the App's pods",fieldPath=".disruptionBudget"
// +kubebuilder:validation:XValidation:rule="!has(self.rollout) || has(self.deploymentTemplate)",message="rollout requires deploymentTemplate: it rolls the App's pods out",fieldPath=".rollout"
// +kubebuilder:validation:XValidation:rule="!has(self.rollout) || has(self.rollout.blueGreen) || !has(self.deploymentTemplate) || has(self.deploymentTemplate.replicas) || has(self.autoscaling) || (has(self.route) && has(self.route.parentRefs))",message="rollout.canary without an HTTPRoute (route.parentRefs) splits the traffic by replicas: set deploymentTemplate.replicas, the total the canary's share is taken from, or autoscaling",fieldPath=".rollout"
// +kubebuilder:validation:XValidation:rule="!has(self.rollout) || !has(self.rollout.canary) || !self.rollout.canary.steps.exists(s, has(s.setHeaderRoute) || has(s.setMirrorRoute)) || (has(self.route) && has(self.route.parentRefs))",message="rollout.canary.steps: setHeaderRoute and setMirrorRoute need an HTTPRoute (route.parentRefs): they are rules and filters of the App's HTTPRoute",fieldPath=".rollout.canary.steps"
// +kubebuilder:validation:XValidation:rule="!has(self.rollout) || !has(self.serviceTemplate) || size(self.serviceTemplate.name) <= 56",message="serviceTemplate.name must be at most 56 characters with a rollout: the canary's Service is named NAME-canary and the stable's NAME-stable",fieldPath=".serviceTemplate.name"
// +kubebuilder:validation:XValidation:rule="!has(self.rollout) || !has(self.rollout.blueGreen) || !has(self.rollout.blueGreen.previewHosts) || (has(self.route) && has(self.route.parentRefs))",message="rollout.blueGreen.previewHosts needs an HTTPRoute (route.parentRefs): the preview's hosts are an HTTPRoute beside the App's, attached to the same Gateways",fieldPath=".rollout.blueGreen.previewHosts"
// +kubebuilder:validation:XValidation:rule="!has(self.rollout) || !has(self.rollout.blueGreen) || !has(self.rollout.blueGreen.previewHosts) || !has(self.route) || self.rollout.blueGreen.previewHosts.all(h, !(h in self.route.hosts))",message="rollout.blueGreen.previewHosts must not repeat a host of route.hosts: those reach the active version; give the preview hosts of its own",fieldPath=".rollout.blueGreen.previewHosts"
// +kubebuilder:validation:XValidation:rule="!has(self.rollout) || !has(self.rollout.blueGreen) || !has(self.serviceTemplate) || size(self.serviceTemplate.name) <= 55",message="serviceTemplate.name must be at most 55 characters with rollout.blueGreen: the preview Service is named NAME-preview",fieldPath=".serviceTemplate.name"
// +kubebuilder:validation:XValidation:rule="!has(self.serviceTemplate) || !has(self.serviceTemplate.ports) || self.serviceTemplate.ports.all(p, !has(p.targetPort) || type(p.targetPort) == int || (has(self.deploymentTemplate) && ((p.targetPort == 'http' && has(self.deploymentTemplate.containerPort)) || (has(self.deploymentTemplate.ports) && self.deploymentTemplate.ports.exists(c, c.name == p.targetPort)) || (has(self.deploymentTemplate.sidecars) && self.deploymentTemplate.sidecars.exists(s, has(s.ports) && s.ports.exists(c, c.name == p.targetPort))))))",message="serviceTemplate.ports: a targetPort given by name must name a container port of the App's pods (http for deploymentTemplate.containerPort, deploymentTemplate.ports or a sidecar's ports)",fieldPath=".serviceTemplate.ports"
// +kubebuilder:validation:XValidation:rule="!has(self.rollout) || !has(self.rollout.versionedConfig) || !self.rollout.versionedConfig || !has(self.deploymentTemplate) || !has(self.deploymentTemplate.configChangePolicy) || self.deploymentTemplate.configChangePolicy != 'Ignore'",message="rollout.versionedConfig copies the ConfigMaps and Secrets for each version of the pods, which configChangePolicy Ignore turns off: set one or the other",fieldPath=".rollout.versionedConfig"
// +kubebuilder:validation:XValidation:rule="!has(self.autoscaling) || has(self.deploymentTemplate)",message="autoscaling requires deploymentTemplate: it scales the App's Deployment",fieldPath=".autoscaling"
// +kubebuilder:validation:XValidation:rule="!has(self.autoscaling) || !has(self.deploymentTemplate) || !has(self.deploymentTemplate.replicas) || (self.deploymentTemplate.replicas >= (has(self.autoscaling.minReplicas) ? self.autoscaling.minReplicas : 1) && self.deploymentTemplate.replicas <= self.autoscaling.maxReplicas)",message="deploymentTemplate.replicas is the starting size with autoscaling: it must be from autoscaling.minReplicas (default 1) to autoscaling.maxReplicas, or unset",fieldPath=".deploymentTemplate.replicas"
// +kubebuilder:validation:XValidation:rule="!has(self.autoscaling) || !has(oldSelf.autoscaling) || !has(self.deploymentTemplate) || !has(self.deploymentTemplate.replicas) || (has(oldSelf.deploymentTemplate) && has(oldSelf.deploymentTemplate.replicas) && self.deploymentTemplate.replicas == oldSelf.deploymentTemplate.replicas)",message="deploymentTemplate.replicas cannot change while autoscaling is on (kubectl scale app included): the HorizontalPodAutoscaler sets the Deployment's replicas. Change autoscaling.minReplicas or maxReplicas, or remove autoscaling in the same change",fieldPath=".deploymentTemplate.replicas"
type AppSpec struct {
	// DeploymentTemplate describes the Deployment that runs the application's pods.
	// Removing it deletes the Deployment the App controls.
	// +optional
	DeploymentTemplate *DeploymentTemplate `json:"deploymentTemplate,omitempty"`

	// ServiceTemplate describes the Service that exposes the application's pods.
	// Removing it deletes the Service the App controls.
	// +optional
	ServiceTemplate *ServiceTemplate `json:"serviceTemplate,omitempty"`

	// RevisionHistoryLimit is how many revisions of the App's spec the controller keeps,
	// the current one included: ControllerRevisions owned by the App, which `kubectl app
	// history` lists and `kubectl app rollback` writes back. The oldest are deleted
	// first. Defaults to 10. A change of this field alone is not a revision.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	RevisionHistoryLimit *int32 `json:"revisionHistoryLimit,omitempty"`

	// DisruptionBudget is the PodDisruptionBudget of the App's pods (named as the
	// Deployment), so that a node drain does not take every replica at once. Removing
	// it deletes the PodDisruptionBudget.
	// +optional
	DisruptionBudget *DisruptionBudget `json:"disruptionBudget,omitempty"`

	// Route publishes the App's Service under hosts and paths, with TLS: an Ingress
	// named as the App, owned by it, or an HTTPRoute attached to Gateways (parentRefs).
	// Removing it deletes the Ingress or HTTPRoute.
	// +optional
	Route *Route `json:"route,omitempty"`

	// Autoscaling scales the App's Deployment with its load: a HorizontalPodAutoscaler
	// named as the Deployment, owned by the App, between minReplicas and maxReplicas.
	// With it, deploymentTemplate.replicas is only the starting size and cannot change.
	// Removing it deletes the autoscaler; the Deployment keeps its count, or goes to
	// deploymentTemplate.replicas if set. Requires deploymentTemplate.
	// +optional
	Autoscaling *Autoscaling `json:"autoscaling,omitempty"`

	// Rollout rolls a change of the pods out in canary steps, with traffic weights and
	// an automatic abort on failing pods. Unset, a change rolls every pod at once.
	// Adding or removing it rolls no pod.
	// +optional
	Rollout *Rollout `json:"rollout,omitempty"`
}

// ConfigChangePolicy is what a change of a ConfigMap or Secret that an App's pods
// reference does to the pods.
// +kubebuilder:validation:Enum=Rollout;Ignore
type ConfigChangePolicy string

const (
	// ConfigChangeRollout rolls the pods (a new ReplicaSet), so that they read the new
	// data. The default.
	ConfigChangeRollout ConfigChangePolicy = "Rollout"
	// ConfigChangeIgnore leaves the pods running with what they read when they started;
	// mounted files still follow the change, as the kubelet updates them.
	ConfigChangeIgnore ConfigChangePolicy = "Ignore"
)

// DeploymentTemplate describes the Deployment of an App. Its pods run the App's own
// container (app-deploy-container), which the fields below describe, and the
// containers of initContainers and sidecars.
//
// +kubebuilder:validation:XValidation:rule="!has(self.volumeMounts) || self.volumeMounts.all(m, has(self.volumes) && self.volumes.exists(v, v.name == m.name))",message="every volumeMounts[].name must name a volume of deploymentTemplate.volumes",fieldPath=".volumeMounts"
// +kubebuilder:validation:XValidation:rule="(!has(self.initContainers) || self.initContainers.all(c, !has(c.volumeMounts) || c.volumeMounts.all(m, has(self.volumes) && self.volumes.exists(v, v.name == m.name)))) && (!has(self.sidecars) || self.sidecars.all(c, !has(c.volumeMounts) || c.volumeMounts.all(m, has(self.volumes) && self.volumes.exists(v, v.name == m.name))))",message="every volumeMounts[].name of an init container or a sidecar must name a volume of deploymentTemplate.volumes"
// +kubebuilder:validation:XValidation:rule="(!has(self.initContainers) || self.initContainers.all(c, c.name != 'app-deploy-container' && (!has(self.sidecars) || !self.sidecars.exists(s, s.name == c.name)))) && (!has(self.sidecars) || self.sidecars.all(c, c.name != 'app-deploy-container'))",message="container names must be unique in the pod: initContainers and sidecars may not share a name, nor use app-deploy-container (the App's own)"
// +kubebuilder:validation:XValidation:rule="!has(self.initContainers) || self.initContainers.all(c, !has(c.readinessProbe) && !has(c.livenessProbe) && !has(c.startupProbe))",message="initContainers may not have probes: they run to completion before the App's container starts (a sidecar may have them)",fieldPath=".initContainers"
// +kubebuilder:validation:XValidation:rule="!has(self.ports) || !has(self.containerPort) || self.ports.all(p, p.name != 'http')",message="ports: http is the name of containerPort",fieldPath=".ports"
// +kubebuilder:validation:XValidation:rule="!has(self.sidecars) || self.sidecars.all(s, !has(s.ports) || s.ports.all(p, !(has(self.containerPort) && p.name == 'http') && !(has(self.ports) && self.ports.exists(q, q.name == p.name)) && !self.sidecars.exists(o, o.name != s.name && has(o.ports) && o.ports.exists(q, q.name == p.name))))",message="a port name is used by two containers of the pod: port names must be unique in the pod (http is containerPort's)",fieldPath=".sidecars"
type DeploymentTemplate struct {
	// Name of the Deployment, a DNS-1123 label. Changing it replaces the Deployment.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// Image of the application's container.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^\S+$`
	Image string `json:"image"`

	// Replicas is the number of pods. When set, the controller owns the Deployment's
	// replica count: the App's scale subresource reads and writes this field, so
	// `kubectl scale app/NAME` and a HorizontalPodAutoscaler whose scaleTargetRef is the
	// App set it, and the controller applies it to the Deployment. When unset, the
	// controller leaves the Deployment's replica count alone (1 when the Deployment is
	// created): autoscale the Deployment itself then. Either way only one writer owns the
	// count, so the controller and an autoscaler never fight. With spec.autoscaling it
	// is only the size the Deployment starts with, from minReplicas to maxReplicas, and
	// cannot change while autoscaling is on.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Replicas *int32 `json:"replicas,omitempty"`

	// ContainerPort is the port the container listens on. The Service targets it
	// unless serviceTemplate.targetPort says otherwise.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	ContainerPort *int32 `json:"containerPort,omitempty"`

	// Ports are more ports of the container, beside containerPort (named http): a
	// metrics or gRPC port that a port of serviceTemplate.ports targets by name.
	// +optional
	// +listType=map
	// +listMapKey=containerPort
	// +listMapKey=protocol
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.all(p, self.filter(q, q.name == p.name).size() == 1)",message="ports: each port name may be used once"
	Ports []ContainerPort `json:"ports,omitempty"`

	// Command overrides the image's entrypoint.
	// +optional
	// +listType=atomic
	Command []string `json:"command,omitempty"`

	// Args overrides the image's default arguments.
	// +optional
	// +listType=atomic
	Args []string `json:"args,omitempty"`

	// Env is the container's environment.
	// +optional
	// +listType=map
	// +listMapKey=name
	Env []corev1.EnvVar `json:"env,omitempty"`

	// Resources are the container's compute resource requests and limits.
	// +optional
	Resources *ResourceRequirements `json:"resources,omitempty"`

	// EnvFrom fills the container's environment from every key of ConfigMaps and
	// Secrets. A key also named in env takes env's value.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	EnvFrom []corev1.EnvFromSource `json:"envFrom,omitempty"`

	// ReadinessProbe tells when the container is ready for traffic: the Service sends
	// none to a pod that is not ready, and a rollout waits for new pods to be ready.
	// +optional
	// +kubebuilder:validation:XValidation:rule="(!has(self.httpGet) || (type(self.httpGet.port) == int ? (self.httpGet.port >= 1 && self.httpGet.port <= 65535) : (size(self.httpGet.port) <= 15 && self.httpGet.port.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$') && self.httpGet.port.matches('[a-z]')))) && (!has(self.tcpSocket) || (type(self.tcpSocket.port) == int ? (self.tcpSocket.port >= 1 && self.tcpSocket.port <= 65535) : (size(self.tcpSocket.port) <= 15 && self.tcpSocket.port.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$') && self.tcpSocket.port.matches('[a-z]')))) && (!has(self.grpc) || (self.grpc.port >= 1 && self.grpc.port <= 65535))",message="readinessProbe: the port of httpGet, tcpSocket or grpc must be from 1 to 65535, or the name of a port (at most 15 lowercase alphanumerics or '-', with a letter)"
	ReadinessProbe *corev1.Probe `json:"readinessProbe,omitempty"`

	// LivenessProbe tells when the container must be restarted.
	// +optional
	// +kubebuilder:validation:XValidation:rule="(!has(self.httpGet) || (type(self.httpGet.port) == int ? (self.httpGet.port >= 1 && self.httpGet.port <= 65535) : (size(self.httpGet.port) <= 15 && self.httpGet.port.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$') && self.httpGet.port.matches('[a-z]')))) && (!has(self.tcpSocket) || (type(self.tcpSocket.port) == int ? (self.tcpSocket.port >= 1 && self.tcpSocket.port <= 65535) : (size(self.tcpSocket.port) <= 15 && self.tcpSocket.port.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$') && self.tcpSocket.port.matches('[a-z]')))) && (!has(self.grpc) || (self.grpc.port >= 1 && self.grpc.port <= 65535))",message="livenessProbe: the port of httpGet, tcpSocket or grpc must be from 1 to 65535, or the name of a port (at most 15 lowercase alphanumerics or '-', with a letter)"
	LivenessProbe *corev1.Probe `json:"livenessProbe,omitempty"`

	// StartupProbe holds the other probes off until the container has started; a
	// container that fails it is restarted.
	// +optional
	// +kubebuilder:validation:XValidation:rule="(!has(self.httpGet) || (type(self.httpGet.port) == int ? (self.httpGet.port >= 1 && self.httpGet.port <= 65535) : (size(self.httpGet.port) <= 15 && self.httpGet.port.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$') && self.httpGet.port.matches('[a-z]')))) && (!has(self.tcpSocket) || (type(self.tcpSocket.port) == int ? (self.tcpSocket.port >= 1 && self.tcpSocket.port <= 65535) : (size(self.tcpSocket.port) <= 15 && self.tcpSocket.port.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$') && self.tcpSocket.port.matches('[a-z]')))) && (!has(self.grpc) || (self.grpc.port >= 1 && self.grpc.port <= 65535))",message="startupProbe: the port of httpGet, tcpSocket or grpc must be from 1 to 65535, or the name of a port (at most 15 lowercase alphanumerics or '-', with a letter)"
	StartupProbe *corev1.Probe `json:"startupProbe,omitempty"`

	// SecurityContext is the container's security context. Under the restricted Pod
	// Security Standard set allowPrivilegeEscalation: false, capabilities.drop: [ALL],
	// runAsNonRoot: true and seccompProfile.type: RuntimeDefault (here or in
	// podSecurityContext).
	// +optional
	SecurityContext *corev1.SecurityContext `json:"securityContext,omitempty"`

	// PodSecurityContext is the pod's security context: user and group IDs, fsGroup,
	// seccomp profile and sysctls shared by the pod.
	// +optional
	PodSecurityContext *corev1.PodSecurityContext `json:"podSecurityContext,omitempty"`

	// Volumes of the pod, each mounted into the container by volumeMounts.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	Volumes []Volume `json:"volumes,omitempty"`

	// VolumeMounts mount volumes into the container. Each names a volume of volumes.
	// +optional
	// +listType=map
	// +listMapKey=mountPath
	// +kubebuilder:validation:MaxItems=32
	VolumeMounts []VolumeMount `json:"volumeMounts,omitempty"`

	// ServiceAccountName is the ServiceAccount the pods run as. Defaults to the
	// namespace's "default".
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// ImagePullSecrets name Secrets in the App's namespace that hold registry
	// credentials for pulling the image.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`

	// ImagePullPolicy is when the kubelet pulls the image: Always, IfNotPresent or
	// Never. Defaults to Always for a :latest or untagged image, else IfNotPresent.
	// +optional
	// +kubebuilder:validation:Enum=Always;IfNotPresent;Never
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`

	// PodLabels are added to the labels of the pods. They may not set the labels the
	// controller uses to select the App's pods: app.kubernetes.io/name,
	// app.kubernetes.io/instance and app.kubernetes.io/managed-by.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, !format.qualifiedName().validate(k).hasValue())",messageExpression="'podLabels: ' + self.filter(k, format.qualifiedName().validate(k).hasValue())[0] + ' is not a valid label key (an optional DNS subdomain prefix and /, then a name of at most 63 characters: alphanumerics, -, _ or ., starting and ending with an alphanumeric)'"
	// +kubebuilder:validation:XValidation:rule="!('app.kubernetes.io/name' in self) && !('app.kubernetes.io/instance' in self) && !('app.kubernetes.io/managed-by' in self)",message="podLabels must not set app.kubernetes.io/name, app.kubernetes.io/instance or app.kubernetes.io/managed-by: the controller sets them to select the App's pods"
	PodLabels map[string]LabelValue `json:"podLabels,omitempty"`

	// PodAnnotations are added to the annotations of the pods. Changing them rolls the
	// pods out.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="!('appcontroller.k8s.io/config-hash' in self)",message="podAnnotations must not set appcontroller.k8s.io/config-hash: the controller sets it to roll the pods when their ConfigMaps and Secrets change"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !format.qualifiedName().validate(k.lowerAscii()).hasValue())",messageExpression="'podAnnotations: ' + self.filter(k, format.qualifiedName().validate(k.lowerAscii()).hasValue())[0] + ' is not a valid annotation key (an optional DNS subdomain prefix and /, then a name of at most 63 characters: alphanumerics, -, _ or ., starting and ending with an alphanumeric)'"
	PodAnnotations map[string]string `json:"podAnnotations,omitempty"`

	// NodeSelector restricts the pods to nodes with all of these labels.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, !format.qualifiedName().validate(k).hasValue())",messageExpression="'nodeSelector: ' + self.filter(k, format.qualifiedName().validate(k).hasValue())[0] + ' is not a valid label key (an optional DNS subdomain prefix and /, then a name of at most 63 characters: alphanumerics, -, _ or ., starting and ending with an alphanumeric)'"
	NodeSelector map[string]LabelValue `json:"nodeSelector,omitempty"`

	// Tolerations let the pods run on nodes with matching taints.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// Affinity is the pods' node affinity, pod affinity and pod anti-affinity.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`

	// TopologySpreadConstraints spread the pods across zones, nodes or other topology
	// domains. Their labelSelector usually selects the App's pods by
	// app.kubernetes.io/instance: NAME.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`

	// PriorityClassName is the PriorityClass of the pods.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	PriorityClassName string `json:"priorityClassName,omitempty"`

	// Strategy is how the Deployment replaces old pods with new ones: RollingUpdate
	// (the default; rollingUpdate.maxSurge and maxUnavailable, each 25% by default) or
	// Recreate (every old pod stops before a new one starts).
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.rollingUpdate) || !has(self.type) || self.type == 'RollingUpdate'",message="strategy.rollingUpdate may only be set when strategy.type is RollingUpdate",fieldPath=".rollingUpdate"
	// +kubebuilder:validation:XValidation:rule="!has(self.rollingUpdate) || !has(self.rollingUpdate.maxSurge) || !has(self.rollingUpdate.maxUnavailable) || !(self.rollingUpdate.maxSurge == 0 || self.rollingUpdate.maxSurge == '0%') || !(self.rollingUpdate.maxUnavailable == 0 || self.rollingUpdate.maxUnavailable == '0%')",message="strategy.rollingUpdate.maxSurge and maxUnavailable must not both be 0: the rollout could never start",fieldPath=".rollingUpdate"
	Strategy *appsv1.DeploymentStrategy `json:"strategy,omitempty"`

	// MinReadySeconds is how long a new pod must be ready, without a container
	// crashing, to count as available. Defaults to 0.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MinReadySeconds *int32 `json:"minReadySeconds,omitempty"`

	// RevisionHistoryLimit is how many old ReplicaSets the Deployment keeps for
	// rollback. Defaults to 10.
	// +optional
	// +kubebuilder:validation:Minimum=0
	RevisionHistoryLimit *int32 `json:"revisionHistoryLimit,omitempty"`

	// ConfigChangePolicy is what a change of a ConfigMap or Secret the pods reference
	// (env valueFrom, envFrom, configMap and secret volumes) does: Rollout (the default)
	// rolls the pods within seconds, so that they read the new data; Ignore leaves them
	// running with what they read when they started. The controller watches only the
	// metadata of ConfigMaps and Secrets: a new resourceVersion is a change. A
	// referenced object that does not exist, unless optional, makes the App not Ready
	// (reason ConfigNotFound): the pods wait for it.
	// +optional
	ConfigChangePolicy ConfigChangePolicy `json:"configChangePolicy,omitempty"`

	// InitContainers run one after the other, each to completion, before the App's
	// container and the sidecars start: a migration, a wait for a dependency. They take
	// no probes.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	InitContainers []Container `json:"initContainers,omitempty"`

	// Sidecars run beside the App's container for the pod's whole life: a log shipper,
	// a proxy. They are Kubernetes native sidecars (init containers with restartPolicy
	// Always): they start, in order, before the App's container and stop after it.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	Sidecars []Container `json:"sidecars,omitempty"`
}

// Volume is a volume of the App's pods: a name and exactly one source.
//
// +kubebuilder:validation:XValidation:rule="[has(self.configMap), has(self.secret), has(self.emptyDir), has(self.persistentVolumeClaim)].filter(x, x).size() == 1",message="volume must set exactly one of configMap, secret, emptyDir and persistentVolumeClaim"
type Volume struct {
	// Name of the volume, a DNS-1123 label, unique in the pod; volumeMounts refer to it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// ConfigMap mounts the keys of a ConfigMap as files.
	// +optional
	ConfigMap *corev1.ConfigMapVolumeSource `json:"configMap,omitempty"`

	// Secret mounts the keys of a Secret as files.
	// +optional
	Secret *corev1.SecretVolumeSource `json:"secret,omitempty"`

	// EmptyDir is a scratch directory that lives as long as the pod.
	// +optional
	EmptyDir *corev1.EmptyDirVolumeSource `json:"emptyDir,omitempty"`

	// PersistentVolumeClaim mounts a PersistentVolumeClaim of the App's namespace. With
	// more than one replica, the claim must allow ReadOnlyMany or ReadWriteMany.
	// +optional
	PersistentVolumeClaim *corev1.PersistentVolumeClaimVolumeSource `json:"persistentVolumeClaim,omitempty"`
}

// VolumeMount mounts a volume of the App's pods into its container.
type VolumeMount struct {
	// Name of the volume to mount: one of deploymentTemplate.volumes.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`

	// MountPath is the absolute path in the container where the volume appears.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^/`
	MountPath string `json:"mountPath"`

	// SubPath mounts this path inside the volume instead of its root.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	SubPath string `json:"subPath,omitempty"`

	// ReadOnly mounts the volume read-only.
	// +optional
	ReadOnly *bool `json:"readOnly,omitempty"`
}

// ResourceRequirements are the compute resources of the App's container, as in a Pod.
//
// +kubebuilder:validation:XValidation:rule="!has(self.requests) || !has(self.limits) || ['cpu', 'memory', 'ephemeral-storage'].all(r, !(r in self.requests) || !(r in self.limits) || quantity(string(self.requests[r])).compareTo(quantity(string(self.limits[r]))) <= 0)",message="requests must not exceed limits"
type ResourceRequirements struct {
	// Limits are the most the container may use.
	// +optional
	Limits corev1.ResourceList `json:"limits,omitempty"`
	// Requests are what the container is guaranteed; at most the limits.
	// +optional
	Requests corev1.ResourceList `json:"requests,omitempty"`
}

// ServiceTemplate describes the Service of an App. It selects the App's own pods.
//
// +kubebuilder:validation:XValidation:rule="!has(self.nodePort) || (has(self.type) && self.type != 'ClusterIP')",message="nodePort requires type NodePort or LoadBalancer",fieldPath=".nodePort"
// +kubebuilder:validation:XValidation:rule="!has(self.ports) || self.ports.all(p, self.ports.filter(q, q.port == p.port && (has(q.protocol) ? q.protocol : 'TCP') == (has(p.protocol) ? p.protocol : 'TCP')).size() == 1)",message="ports: each port number (and protocol) may be used once: give each entry its own number",fieldPath=".ports"
// +kubebuilder:validation:XValidation:rule="!has(self.ports) || !has(self.portName) || self.ports.exists(p, p.name == self.portName) || !self.ports.exists(p, p.port == (has(self.port) ? self.port : 8080) && (has(p.protocol) ? p.protocol : 'TCP') == (has(self.protocol) ? self.protocol : 'TCP'))",message="ports: an entry has the first port's number and protocol (port, 8080 by default) under another name than portName: name it as portName to list the first port there, or give it another number",fieldPath=".ports"
// +kubebuilder:validation:XValidation:rule="!has(self.ports) || !has(self.port) || self.port == 8080 || self.ports.all(p, p.name != (has(self.portName) ? self.portName : 'http') || p.port == self.port)",message="ports: the entry named as the first port (portName, http by default) is the first port, with another number than port: write the number once, in the entry (drop port) or the same in both",fieldPath=".ports"
// +kubebuilder:validation:XValidation:rule="!has(self.ports) || !has(self.protocol) || self.ports.all(p, p.name != (has(self.portName) ? self.portName : 'http') || (has(p.protocol) ? p.protocol : 'TCP') == self.protocol)",message="ports: the entry named as the first port (portName, http by default) is the first port, with another protocol than protocol: write the same protocol in both, or drop protocol",fieldPath=".ports"
// +kubebuilder:validation:XValidation:rule="!has(self.ports) || !has(self.targetPort) || self.ports.all(p, !(p.name == (has(self.portName) ? self.portName : 'http') || (!self.ports.exists(q, q.name == (has(self.portName) ? self.portName : 'http')) && p.port == (has(self.port) ? self.port : 8080) && (has(p.protocol) ? p.protocol : 'TCP') == (has(self.protocol) ? self.protocol : 'TCP'))) || !has(p.targetPort) || (type(p.targetPort) == int && p.targetPort == self.targetPort))",message="ports: the entry that restates the first port has another targetPort than targetPort: write it once, in the entry (drop targetPort) or the same in both",fieldPath=".ports"
// +kubebuilder:validation:XValidation:rule="!has(self.ports) || !has(self.nodePort) || self.ports.all(p, !(p.name == (has(self.portName) ? self.portName : 'http') || (!self.ports.exists(q, q.name == (has(self.portName) ? self.portName : 'http')) && p.port == (has(self.port) ? self.port : 8080) && (has(p.protocol) ? p.protocol : 'TCP') == (has(self.protocol) ? self.protocol : 'TCP'))) || !has(p.nodePort) || p.nodePort == self.nodePort)",message="ports: the entry that restates the first port has another nodePort than nodePort: write it once, in the entry (drop nodePort) or the same in both",fieldPath=".ports"
// +kubebuilder:validation:XValidation:rule="!has(self.ports) || !self.ports.exists(p, has(p.nodePort)) || (has(self.type) && self.type != 'ClusterIP')",message="nodePort requires type NodePort or LoadBalancer",fieldPath=".ports"
type ServiceTemplate struct {
	// Name of the Service, a DNS-1035 label. Changing it replaces the Service.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// Port the Service listens on. Defaults to 8080. The entry of ports that restates the
	// first port may give it instead (see ports).
	// +optional
	// +kubebuilder:default=8080
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port,omitempty"`

	// TargetPort is the pod port traffic goes to. Defaults to
	// deploymentTemplate.containerPort, else to port.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	TargetPort *int32 `json:"targetPort,omitempty"`

	// Type of the Service. Defaults to ClusterIP.
	// +optional
	// +kubebuilder:default=ClusterIP
	// +kubebuilder:validation:Enum=ClusterIP;NodePort;LoadBalancer
	Type corev1.ServiceType `json:"type,omitempty"`

	// PortName names the Service port (and is how an Ingress refers to it), an IANA
	// service name. Defaults to http.
	// +optional
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self.matches('[a-z]') && !self.contains('--')",message="portName must contain a letter and no '--' (an IANA service name)"
	PortName string `json:"portName,omitempty"`

	// Protocol of the Service port and of the container port: TCP, UDP or SCTP.
	// Defaults to TCP.
	// +optional
	// +kubebuilder:validation:Enum=TCP;UDP;SCTP
	Protocol corev1.Protocol `json:"protocol,omitempty"`

	// NodePort is the port opened on every node for a NodePort or LoadBalancer Service,
	// within the cluster's node port range (30000-32767 by default). Unset, the cluster
	// picks one. Not allowed with type ClusterIP.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	NodePort *int32 `json:"nodePort,omitempty"`

	// Ports are the Service's ports beyond the first, which port, targetPort, portName,
	// protocol and nodePort describe: a metrics or gRPC port. Or the whole list, as a
	// Service lists them, when an entry restates the first port: the entry named
	// portName (http by default) or, if none is, the entry with port's number and
	// protocol (8080 and TCP by default). That entry is the first port, for instance
	// [{name: http, port: 80, targetPort: 8080}, {name: metrics, port: 9090}]; where it
	// and port, protocol, targetPort or nodePort are both set, they must agree (port
	// 8080, its default, gives way to the entry's). Names, and numbers with their
	// protocol, are each used once.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	Ports []ServicePort `json:"ports,omitempty"`

	// SessionAffinity ClientIP sends each client's connections to the same pod;
	// None (the default) spreads them.
	// +optional
	// +kubebuilder:validation:Enum=None;ClientIP
	SessionAffinity corev1.ServiceAffinity `json:"sessionAffinity,omitempty"`

	// Labels are added to the Service's labels. They may not set
	// app.kubernetes.io/name, app.kubernetes.io/instance or app.kubernetes.io/managed-by.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, !format.qualifiedName().validate(k).hasValue())",messageExpression="'serviceTemplate.labels: ' + self.filter(k, format.qualifiedName().validate(k).hasValue())[0] + ' is not a valid label key (an optional DNS subdomain prefix and /, then a name of at most 63 characters: alphanumerics, -, _ or ., starting and ending with an alphanumeric)'"
	// +kubebuilder:validation:XValidation:rule="!('app.kubernetes.io/name' in self) && !('app.kubernetes.io/instance' in self) && !('app.kubernetes.io/managed-by' in self)",message="serviceTemplate.labels must not set app.kubernetes.io/name, app.kubernetes.io/instance or app.kubernetes.io/managed-by: the controller sets them"
	Labels map[string]LabelValue `json:"labels,omitempty"`

	// Annotations are added to the Service's annotations, for instance ingress/http:
	// "true" for an Ingress from the Service->Ingress controller, or a cloud load
	// balancer's settings.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, !format.qualifiedName().validate(k.lowerAscii()).hasValue())",messageExpression="'serviceTemplate.annotations: ' + self.filter(k, format.qualifiedName().validate(k.lowerAscii()).hasValue())[0] + ' is not a valid annotation key (an optional DNS subdomain prefix and /, then a name of at most 63 characters: alphanumerics, -, _ or ., starting and ending with an alphanumeric)'"
	// +kubebuilder:validation:XValidation:rule="!('appcontroller.k8s.io/applied-config-hash' in self)",message="serviceTemplate.annotations must not set appcontroller.k8s.io/applied-config-hash: the controller sets it"
	Annotations map[string]string `json:"annotations,omitempty"`
}

// AppStatus is the observed state of an App.
type AppStatus struct {
	// ObservedGeneration is the metadata.generation this status describes; -1 (the schema
	// default) until the controller first observes the App.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready, Progressing and NamesAccepted; Contested, present only while
	// another writer keeps changing a child (reason CompetingWriter, the message names
	// its field manager); and for kstatus-based tools (Flux, Argo CD, kubectl wait)
	// Reconciling and Stalled. With spec.autoscaling, ScalingActive and ScalingLimited
	// (docs/autoscaling.md).
	//
	// When the App's pods are not ready, Ready=False names the first problem of the pods
	// of the newest pod template, read from their status, with pod and container:
	// ImagePullFailed (ErrImagePull, ImagePullBackOff, InvalidImageName: the registry's
	// answer), ContainerConfigError (CreateContainerConfigError, say a missing ConfigMap
	// or Secret key), OOMKilled, CrashLoopBackOff (exit code, restart count, termination
	// message), Unschedulable (the scheduler's message, say "0/1 nodes are available: 1
	// Insufficient cpu.") and ContainerNotReady (running but its readiness or startup
	// probe has not passed 20 s after it started; with the probe's output, which the
	// kubelet reports only in an Event, say "HTTP probe failed with statuscode: 503").
	// Pods refused by a quota or PodSecurity keep the Deployment's reason. kstatus reads
	// such an App InProgress (Reconciling=True with the same reason) while the problem
	// may still go away by itself; it becomes
	// Stalled=True (kstatus Failed, Argo CD Degraded) with the same reason when it will
	// not: at once for InvalidImageName, after 2 minutes of ImagePullFailed or
	// ContainerConfigError (a registry hiccup, a ConfigMap applied a moment later),
	// after 3 restarts and at least a minute since the pod started for CrashLoopBackOff
	// and OOMKilled (a dependency that comes up late), after 5 minutes of Unschedulable
	// (time for a cluster autoscaler), and
	// never for ContainerNotReady (a dependency may come up; the progress deadline
	// still applies). When the problem is fixed, the reason goes and Stalled with it.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// DeploymentStatus is the status of the Deployment the App controls, but for
	// terminatingReplicas (the old pods still stopping after a rollout). During a
	// rollout its counts are refreshed at least every 30 s; the conditions at once.
	// +optional
	DeploymentStatus *appsv1.DeploymentStatus `json:"deploymentStatus,omitempty"`

	// ServiceStatus is the status of the Service the App controls.
	// +optional
	ServiceStatus *corev1.ServiceStatus `json:"serviceStatus,omitempty"`

	// Selector is the label selector of the App's pods, as a string
	// ("app.kubernetes.io/instance=NAME,app.kubernetes.io/name=NAME"). The scale
	// subresource reports it, so a HorizontalPodAutoscaler finds the App's pods.
	// +optional
	Selector string `json:"selector,omitempty"`

	// CurrentRevision is the name of the ControllerRevision that records the App's
	// current spec (see spec.revisionHistoryLimit).
	// +optional
	CurrentRevision string `json:"currentRevision,omitempty"`

	// DisruptionBudget is the name of the PodDisruptionBudget the App controls, when
	// spec.disruptionBudget asks for one.
	// +optional
	DisruptionBudget string `json:"disruptionBudget,omitempty"`

	// Route is the name of the Ingress or HTTPRoute of spec.route the App controls
	// (RouteAccepted says which).
	// +optional
	Route string `json:"route,omitempty"`

	// Rollout is the state of the canary rollout of spec.rollout: its phase, step,
	// weight, and the stable and canary versions. Present while spec.rollout is.
	// +optional
	Rollout *RolloutStatus `json:"rollout,omitempty"`

	// Autoscaling is what the HorizontalPodAutoscaler of spec.autoscaling last reported:
	// its name, the current and desired replicas and when it last scaled. The conditions
	// ScalingActive and ScalingLimited say whether it works and whether maxReplicas caps
	// it.
	// +optional
	Autoscaling *AutoscalingStatus `json:"autoscaling,omitempty"`
}

// AppList is a list of Apps.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type AppList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []App `json:"items"`
}

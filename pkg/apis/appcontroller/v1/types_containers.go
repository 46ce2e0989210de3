package v1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Container is an init container or a sidecar of an App's pods. Its fields are the App's
// own container's, under the names they have in a Pod, so that each is copied to the
// child as it is: a field users ask for next is one line here.
//
// +kubebuilder:validation:XValidation:rule="!has(self.ports) || self.ports.all(p, self.ports.filter(q, q.name == p.name).size() == 1)",message="ports: each port name may be used once",fieldPath=".ports"
type Container struct {
	// Name of the container, a DNS-1123 label, unique among the containers of the pod
	// (the App's own is app-deploy-container).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// Image of the container.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^\S+$`
	Image string `json:"image"`

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

	// EnvFrom fills the container's environment from every key of ConfigMaps and Secrets.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	EnvFrom []corev1.EnvFromSource `json:"envFrom,omitempty"`

	// Ports the container listens on; a Service port may target one by name.
	// +optional
	// +listType=map
	// +listMapKey=containerPort
	// +listMapKey=protocol
	// +kubebuilder:validation:MaxItems=16
	Ports []ContainerPort `json:"ports,omitempty"`

	// Resources are the container's compute resource requests and limits.
	// +optional
	Resources *ResourceRequirements `json:"resources,omitempty"`

	// ReadinessProbe tells when the container is ready (sidecars only).
	// +optional
	ReadinessProbe *corev1.Probe `json:"readinessProbe,omitempty"`

	// LivenessProbe tells when the container must be restarted (sidecars only).
	// +optional
	LivenessProbe *corev1.Probe `json:"livenessProbe,omitempty"`

	// StartupProbe holds the other probes off until the container has started (sidecars
	// only).
	// +optional
	StartupProbe *corev1.Probe `json:"startupProbe,omitempty"`

	// SecurityContext is the container's security context.
	// +optional
	SecurityContext *corev1.SecurityContext `json:"securityContext,omitempty"`

	// VolumeMounts mount volumes of deploymentTemplate.volumes into the container.
	// +optional
	// +listType=map
	// +listMapKey=mountPath
	// +kubebuilder:validation:MaxItems=32
	VolumeMounts []VolumeMount `json:"volumeMounts,omitempty"`

	// ImagePullPolicy is when the kubelet pulls the image: Always, IfNotPresent or Never.
	// +optional
	// +kubebuilder:validation:Enum=Always;IfNotPresent;Never
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`
}

// ContainerPort is a port a container listens on.
type ContainerPort struct {
	// Name of the port, an IANA service name (at most 15 lowercase alphanumerics or '-',
	// with a letter), unique among the ports of the pod's containers; a Service port's
	// targetPort may name it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self.matches('[a-z]') && !self.contains('--')",message="a port name must contain a letter and no '--' (an IANA service name)"
	Name string `json:"name"`

	// ContainerPort is the port number.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	ContainerPort int32 `json:"containerPort"`

	// Protocol: TCP (the default), UDP or SCTP.
	// +optional
	// +kubebuilder:default=TCP
	// +kubebuilder:validation:Enum=TCP;UDP;SCTP
	Protocol corev1.Protocol `json:"protocol,omitempty"`
}

// ServicePort is a port of an App's Service: one beyond the first (serviceTemplate.port),
// or the first when it restates it (serviceTemplate.ports).
//
// +kubebuilder:validation:XValidation:rule="!has(self.targetPort) || type(self.targetPort) != int || (self.targetPort >= 1 && self.targetPort <= 65535)",message="targetPort must be from 1 to 65535 or the name of a container port",fieldPath=".targetPort"
type ServicePort struct {
	// Name of the Service port, an IANA service name; an Ingress or a route refers to
	// the port by it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self.matches('[a-z]') && !self.contains('--')",message="a port name must contain a letter and no '--' (an IANA service name)"
	Name string `json:"name"`

	// Port the Service listens on.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`

	// TargetPort is the pod port traffic goes to: a number, or the name of a container
	// port of the App's pods (deploymentTemplate.ports, a sidecar's ports, or http for
	// deploymentTemplate.containerPort). Defaults to port; for the entry that restates
	// the first port, to serviceTemplate.targetPort, else deploymentTemplate.containerPort,
	// else port.
	// +optional
	// +kubebuilder:validation:XIntOrString
	TargetPort *intstr.IntOrString `json:"targetPort,omitempty"`

	// Protocol: TCP (the default), UDP or SCTP.
	// +optional
	// +kubebuilder:default=TCP
	// +kubebuilder:validation:Enum=TCP;UDP;SCTP
	Protocol corev1.Protocol `json:"protocol,omitempty"`

	// NodePort for a NodePort or LoadBalancer Service; unset, the cluster picks one.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	NodePort *int32 `json:"nodePort,omitempty"`
}

// DisruptionBudget is the PodDisruptionBudget of an App's pods: exactly one of
// minAvailable and maxUnavailable, a number of pods or a percentage.
//
// +kubebuilder:validation:XValidation:rule="has(self.minAvailable) != has(self.maxUnavailable)",message="disruptionBudget must set exactly one of minAvailable and maxUnavailable"
type DisruptionBudget struct {
	// MinAvailable pods must stay available during a voluntary disruption (a node
	// drain): an eviction that would leave fewer is refused.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^[0-9]+%$')",message="minAvailable must be a number of pods or a percentage"
	MinAvailable *intstr.IntOrString `json:"minAvailable,omitempty"`

	// MaxUnavailable pods may be unavailable during a voluntary disruption.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^[0-9]+%$')",message="maxUnavailable must be a number of pods or a percentage"
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
}

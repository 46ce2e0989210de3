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
type AppSpec struct {
	// DeploymentTemplate describes the Deployment that runs the application's pods.
	// Removing it deletes the Deployment the App controls.
	// +optional
	DeploymentTemplate *DeploymentTemplate `json:"deploymentTemplate,omitempty"`

	// ServiceTemplate describes the Service that exposes the application's pods.
	// Removing it deletes the Service the App controls.
	// +optional
	ServiceTemplate *ServiceTemplate `json:"serviceTemplate,omitempty"`
}

// DeploymentTemplate describes the Deployment of an App. Its pods run one container.
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

	// Replicas is the number of pods. Defaults to 1.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	Replicas *int32 `json:"replicas,omitempty"`

	// ContainerPort is the port the container listens on. The Service targets it
	// unless serviceTemplate.targetPort says otherwise.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	ContainerPort *int32 `json:"containerPort,omitempty"`

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
type ServiceTemplate struct {
	// Name of the Service, a DNS-1035 label. Changing it replaces the Service.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// Port the Service listens on. Defaults to 8080.
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
}

// AppStatus is the observed state of an App.
type AppStatus struct {
	// ObservedGeneration is the metadata.generation this status describes; -1 (the schema
	// default) until the controller first observes the App.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready, Progressing and NamesAccepted, and for kstatus-based tools
	// (Flux, Argo CD, kubectl wait) Reconciling and Stalled.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// DeploymentStatus is the status of the Deployment the App controls.
	// +optional
	DeploymentStatus *appsv1.DeploymentStatus `json:"deploymentStatus,omitempty"`

	// ServiceStatus is the status of the Service the App controls.
	// +optional
	ServiceStatus *corev1.ServiceStatus `json:"serviceStatus,omitempty"`
}

// AppList is a list of Apps.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type AppList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []App `json:"items"`
}

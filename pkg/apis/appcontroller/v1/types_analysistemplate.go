package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Reusable query checks (docs/progressive-delivery.md, "Templates"): an AnalysisTemplate
// holds a PromQL query with its success and failure conditions and the arguments it
// declares, for the Apps of its namespace; a ClusterAnalysisTemplate the same for every
// namespace. A check refers to one by templateRef and passes its arguments. The API
// checks each object on its own; that a referenced template exists is known only when the
// controller resolves it: a check whose template is missing (or whose arguments do not
// fit it) holds its step, says so in the App's conditions and in a Warning Event, and
// aborts the rollout at the progress deadline (AnalysisInconclusive).

// AnalysisTemplate is a query check that the Apps of its namespace refer to by name
// (templateRef: {kind: AnalysisTemplate, name}).
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=analysistemplates,singular=analysistemplate,scope=Namespaced,shortName=at
// +kubebuilder:metadata:annotations="api-approved.kubernetes.io=unapproved, experimental-only"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type AnalysisTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the query, its conditions and its arguments.
	// +required
	Spec AnalysisTemplateSpec `json:"spec"`
}

// AnalysisTemplateList is a list of AnalysisTemplates.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type AnalysisTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AnalysisTemplate `json:"items"`
}

// ClusterAnalysisTemplate is a query check that the Apps of every namespace refer to by
// name (templateRef: {kind: ClusterAnalysisTemplate, name}).
//
// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=clusteranalysistemplates,singular=clusteranalysistemplate,scope=Cluster,shortName=cat
// +kubebuilder:metadata:annotations="api-approved.kubernetes.io=unapproved, experimental-only"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ClusterAnalysisTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the query, its conditions and its arguments.
	// +required
	Spec AnalysisTemplateSpec `json:"spec"`
}

// ClusterAnalysisTemplateList is a list of ClusterAnalysisTemplates.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type ClusterAnalysisTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterAnalysisTemplate `json:"items"`
}

// AnalysisTemplateSpec is a query check to reuse: the query, with the App's variables
// and the template's arguments ({{.Args.NAME}}), and its conditions.
type AnalysisTemplateSpec struct {
	// Args the query takes, each written {{.Args.NAME}} in it. A check that refers to
	// the template gives a value to each argument without a default, and to no argument
	// the template does not declare.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	Args []AnalysisTemplateArg `json:"args,omitempty"`

	// Query is the PromQL, with the App's variables ({{.Namespace}}, {{.App}},
	// {{.CanaryService}}, {{.StableService}}, {{.CanaryDeployment}},
	// {{.StableDeployment}}, {{.Interval}}) and the arguments, and the ranges its value
	// passes or fails in.
	// +required
	Query QueryCheck `json:"query"`
}

// AnalysisTemplateArg is an argument a template declares.
type AnalysisTemplateArg struct {
	// Name of the argument, as the query writes it ({{.Args.NAME}}): a letter, then
	// letters, digits and underscores.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-zA-Z][a-zA-Z0-9_]*$`
	Name string `json:"name"`

	// Default is the value of an argument the check does not give; unset, the check
	// must give it.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Default *string `json:"default,omitempty"`
}

// AnalysisTemplateKind is the kind of template a check refers to.
// +kubebuilder:validation:Enum=AnalysisTemplate;ClusterAnalysisTemplate
type AnalysisTemplateKind string

const (
	// AnalysisTemplateKindNamespaced is an AnalysisTemplate of the App's namespace.
	AnalysisTemplateKindNamespaced AnalysisTemplateKind = "AnalysisTemplate"
	// AnalysisTemplateKindCluster is a ClusterAnalysisTemplate.
	AnalysisTemplateKindCluster AnalysisTemplateKind = "ClusterAnalysisTemplate"
)

// AnalysisTemplateRef is a check's template: its kind, its name, the values of its
// arguments.
type AnalysisTemplateRef struct {
	// Kind of the template: AnalysisTemplate (of the App's namespace, the default) or
	// ClusterAnalysisTemplate.
	// +optional
	// +kubebuilder:default=AnalysisTemplate
	Kind AnalysisTemplateKind `json:"kind,omitempty"`

	// Name of the template.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`

	// Args are the values of the template's arguments.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	Args []AnalysisArg `json:"args,omitempty"`
}

// AnalysisArg is the value of a template's argument.
type AnalysisArg struct {
	// Name of the argument, as the template declares it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-zA-Z][a-zA-Z0-9_]*$`
	Name string `json:"name"`

	// Value of the argument, written into the query as it is.
	// +required
	// +kubebuilder:validation:MaxLength=1024
	Value string `json:"value"`
}

// String names the template as status and messages do: "AnalysisTemplate/error-rate".
func (r *AnalysisTemplateRef) String() string {
	kind := r.Kind
	if kind == "" {
		kind = AnalysisTemplateKindNamespaced
	}
	return string(kind) + "/" + r.Name
}

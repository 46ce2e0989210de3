package v1

import "k8s.io/apimachinery/pkg/util/intstr"

// Route publishes an App's Service under hosts and paths: the controller writes an
// Ingress owned by the App, named as the App, or, with parentRefs (or the controller's
// --default-gateway), a Gateway API HTTPRoute attached to those Gateways. A host belongs
// to the namespace that claimed it first (the oldest Ingress or HTTPRoute routing it,
// of an App's route or a Service's ingress/* annotations): a route to a host held by
// another namespace is refused (RouteAccepted=False, reason HostConflict).
//
// +kubebuilder:validation:XValidation:rule="!has(self.tls) || !has(self.tls.issuer) || !has(self.tls.clusterIssuer)",message="route.tls: set one of issuer and clusterIssuer, not both",fieldPath=".tls"
// +kubebuilder:validation:XValidation:rule="!has(self.parentRefs) || (!has(self.tls) && !has(self.ingressClassName))",message="route.parentRefs: an HTTPRoute takes neither tls nor ingressClassName (TLS is terminated by the Gateway's listener); drop them, or drop parentRefs for an Ingress",fieldPath=".parentRefs"
type Route struct {
	// Hosts the route answers for: DNS names, or a wildcard of one leading label
	// ("*.example.com").
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	Hosts []Hostname `json:"hosts"`

	// Paths routed to the App's Service. Defaults to "/" (Prefix).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Paths []RoutePath `json:"paths,omitempty"`

	// Port of the App's Service the route sends traffic to, by name or number.
	// Defaults to the Service's first port (serviceTemplate.portName, http by default).
	// A port the App's Service does not have is refused, for an Ingress and an
	// HTTPRoute alike: the route gets neither, RouteAccepted=False (RouteRefused) names
	// the port, and the App is not Ready.
	// +optional
	// +kubebuilder:validation:XIntOrString
	Port *intstr.IntOrString `json:"port,omitempty"`

	// TLS terminates TLS for every host with the certificate of a Secret, which a
	// cert-manager issuer may issue.
	// +optional
	TLS *RouteTLS `json:"tls,omitempty"`

	// IngressClassName is the class of the Ingress; unset, the cluster's default class.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	IngressClassName string `json:"ingressClassName,omitempty"`

	// ParentRefs are the Gateways (Gateway API) the route attaches to: the controller
	// writes an HTTPRoute named as the App instead of an Ingress, and reads back whether
	// each Gateway accepted it (RouteAccepted). Unset, the controller's --default-gateway,
	// if any, is the parent of a route without tls and ingressClassName.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	ParentRefs []GatewayRef `json:"parentRefs,omitempty"`
}

// GatewayRef names a Gateway (gateway.networking.k8s.io), and optionally one of its
// listeners.
type GatewayRef struct {
	// Name of the Gateway.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`

	// Namespace of the Gateway; the App's when unset. A Gateway of another namespace
	// accepts the route only if its listeners allow routes from the App's namespace.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace,omitempty"`

	// SectionName names one listener of the Gateway; unset, every listener that allows
	// the route.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	SectionName string `json:"sectionName,omitempty"`
}

// String returns ref as NAMESPACE/NAME[/SECTION], namespace defaulting to ns.
func (ref GatewayRef) String(ns string) string {
	if ref.Namespace != "" {
		ns = ref.Namespace
	}
	s := ns + "/" + ref.Name
	if ref.SectionName != "" {
		s += "/" + ref.SectionName
	}
	return s
}

// Hostname is a DNS name, or a wildcard of one leading label.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=253
// +kubebuilder:validation:Pattern=`^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
type Hostname string

// RoutePath is a path routed to the App's Service.
type RoutePath struct {
	// Path, absolute.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^/`
	Path string `json:"path"`

	// Type: Prefix (the default) or Exact.
	// +optional
	// +kubebuilder:default=Prefix
	// +kubebuilder:validation:Enum=Prefix;Exact
	Type string `json:"type,omitempty"`
}

// RouteTLS is the certificate of a route.
type RouteTLS struct {
	// SecretName is the Secret, in the App's namespace, that holds the certificate (and
	// that cert-manager issues it into, with issuer or clusterIssuer).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	SecretName string `json:"secretName"`

	// Issuer names a cert-manager Issuer of the App's namespace that issues the
	// certificate (cert-manager's ingress-shim reads it on the Ingress).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Issuer string `json:"issuer,omitempty"`

	// ClusterIssuer names a cert-manager ClusterIssuer that issues the certificate.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ClusterIssuer string `json:"clusterIssuer,omitempty"`
}

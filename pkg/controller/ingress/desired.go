package ingress

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
)

// settings are what a Service's annotations ask of its Ingress, validated.
type settings struct {
	// host is the host the rule matches; "" matches every host.
	host string
	// path is the path prefix routed to the Service.
	path string
	// class is the IngressClass name; "" leaves the choice to the cluster's default class.
	class string
	// tlsSecret is the Secret of the host's certificate; "": no TLS.
	tlsSecret string
	// issuer and clusterIssuer name the cert-manager issuer of the certificate; at most
	// one is set, and only with tlsSecret.
	issuer, clusterIssuer string
}

// invalidServiceError says why the Ingress a Service asks for cannot be built. Retrying
// does not help: the user must change the Service. reason is the Event reason.
type invalidServiceError struct {
	reason string
	msg    string
}

// Error returns the message, which is also the Event's.
func (e *invalidServiceError) Error() string { return e.msg }

// wantsIngress reports whether svc asks for an Ingress: the seed's ingress/http
// annotation set to exactly "true".
func wantsIngress(svc *corev1.Service) bool {
	return svc.Annotations[AnnotationHTTP] == "true"
}

// parseSettings reads and validates the ingress/* annotations of svc. defaultClass is the
// class used when the Service names none ("" for the cluster's default). Every invalid
// annotation is reported in one invalidServiceError.
func parseSettings(svc *corev1.Service, defaultClass string) (settings, error) {
	s := settings{
		host:          svc.Annotations[AnnotationHost],
		path:          svc.Annotations[AnnotationPath],
		class:         svc.Annotations[AnnotationClass],
		tlsSecret:     svc.Annotations[AnnotationTLSSecret],
		issuer:        svc.Annotations[AnnotationIssuer],
		clusterIssuer: svc.Annotations[AnnotationClusterIssuer],
	}
	if s.path == "" {
		s.path = defaultPath
	}
	if s.class == "" {
		s.class = defaultClass
	}

	var problems []string
	for _, check := range []struct {
		annotation, value string
		errs              []string
	}{
		{AnnotationHost, s.host, validateHost(s.host)},
		{AnnotationPath, s.path, validatePath(s.path)},
		{AnnotationClass, s.class, validateClass(s.class)},
		{AnnotationTLSSecret, s.tlsSecret, validateTLS(s)},
		{AnnotationIssuer, s.issuer, validateIssuer(s.issuer, s)},
		{AnnotationClusterIssuer, s.clusterIssuer, validateIssuer(s.clusterIssuer, s)},
	} {
		if len(check.errs) > 0 {
			problems = append(problems, fmt.Sprintf("annotation %s: invalid value %q: %s",
				check.annotation, check.value, strings.Join(check.errs, ", ")))
		}
	}
	if len(problems) > 0 {
		return settings{}, &invalidServiceError{reason: ReasonInvalidAnnotation, msg: strings.Join(problems, "; ")}
	}
	return s, nil
}

// validateHost checks an Ingress rule host as the API server does: a DNS subdomain,
// optionally with a leading "*." wildcard label, and not an IP address. "" is valid: it
// matches every host.
func validateHost(host string) []string {
	switch {
	case host == "":
		return nil
	case net.ParseIP(host) != nil:
		return []string{"must be a DNS name, not an IP address"}
	case strings.HasPrefix(host, "*."):
		return validation.IsWildcardDNS1123Subdomain(host)
	}
	return validation.IsDNS1123Subdomain(host)
}

// validateTLS checks ingress/tls-secret: a Secret name, for a named host.
func validateTLS(s settings) []string {
	if s.tlsSecret == "" {
		return nil
	}
	if s.host == "" {
		return []string{"needs " + AnnotationHost + ": a certificate is for a host, and a rule without one catches every host"}
	}
	return validation.IsDNS1123Subdomain(s.tlsSecret)
}

// validateIssuer checks ingress/issuer or ingress/cluster-issuer (value name): a name,
// with ingress/tls-secret (where cert-manager puts the certificate), and not both.
func validateIssuer(name string, s settings) []string {
	switch {
	case name == "":
		return nil
	case s.issuer != "" && s.clusterIssuer != "":
		return []string{"set one of " + AnnotationIssuer + " and " + AnnotationClusterIssuer + ", not both"}
	case s.tlsSecret == "":
		return []string{"needs " + AnnotationTLSSecret + ": the Secret cert-manager issues the certificate into"}
	}
	return validation.IsDNS1123Subdomain(name)
}

// invalidPathSequences and invalidPathSuffixes are what the API server rejects in a
// Prefix path besides a missing leading "/".
var (
	invalidPathSequences = []string{"//", "/./", "/../", "%2f", "%2F"}
	invalidPathSuffixes  = []string{"/..", "/."}
)

// validatePath checks a Prefix path: absolute, without empty, "." or ".." segments, and
// without encoded slashes.
func validatePath(path string) []string {
	if !strings.HasPrefix(path, "/") {
		return []string{`must be an absolute path starting with "/"`}
	}
	var errs []string
	for _, seq := range invalidPathSequences {
		if strings.Contains(path, seq) {
			errs = append(errs, fmt.Sprintf("must not contain %q", seq))
		}
	}
	for _, suffix := range invalidPathSuffixes {
		if strings.HasSuffix(path, suffix) {
			errs = append(errs, fmt.Sprintf("must not end with %q", suffix))
		}
	}
	return errs
}

// validateClass checks an IngressClass name. "" is valid: the cluster's default class.
func validateClass(class string) []string {
	if class == "" {
		return nil
	}
	return validation.IsDNS1123Subdomain(class)
}

// backendPort returns the Service port the Ingress routes to: the one annotation
// ingress/port names (by name or number), else the Service's first TCP
// port (an Ingress carries HTTP, which runs over TCP: a UDP or SCTP port is never a
// backend), by its name when it has one that an Ingress backend accepts (a name keeps
// pointing at the right port when the Service renumbers it), else by number. A Service
// port name need not be a valid backend port name: kubectl create service names its
// ports "8080-8080", which has no letter, and the API server rejects an Ingress naming
// it. A Service without a TCP port gets no Ingress: an invalidServiceError says why.
func backendPort(svc *corev1.Service) (*networkingv1ac.ServiceBackendPortApplyConfiguration, error) {
	if len(svc.Spec.Ports) == 0 {
		return nil, &invalidServiceError{
			reason: ReasonNoServicePort,
			msg:    fmt.Sprintf("Service has no port for Ingress %q to route to; add a port or remove annotation %s", svc.Name, AnnotationHTTP),
		}
	}
	if want := svc.Annotations[AnnotationPort]; want != "" {
		for _, port := range svc.Spec.Ports {
			if (port.Name == want || strconv.Itoa(int(port.Port)) == want) && (port.Protocol == "" || port.Protocol == corev1.ProtocolTCP) {
				if port.Name != "" && len(validation.IsValidPortName(port.Name)) == 0 {
					return networkingv1ac.ServiceBackendPort().WithName(port.Name), nil
				}
				return networkingv1ac.ServiceBackendPort().WithNumber(port.Port), nil
			}
		}
		return nil, &invalidServiceError{
			reason: ReasonNoServicePort,
			msg:    fmt.Sprintf("annotation %s: the Service has no TCP port named or numbered %q for Ingress %q to route to", AnnotationPort, want, svc.Name),
		}
	}
	for _, port := range svc.Spec.Ports {
		if port.Protocol != "" && port.Protocol != corev1.ProtocolTCP {
			continue
		}
		if port.Name != "" && len(validation.IsValidPortName(port.Name)) == 0 {
			return networkingv1ac.ServiceBackendPort().WithName(port.Name), nil
		}
		return networkingv1ac.ServiceBackendPort().WithNumber(port.Port), nil
	}
	return nil, &invalidServiceError{
		reason: ReasonNoServicePort,
		msg: fmt.Sprintf("Service has no TCP port for Ingress %q to route to (an Ingress carries HTTP over TCP; protocol %s is not routed); add a TCP port or remove annotation %s",
			svc.Name, svc.Spec.Ports[0].Protocol, AnnotationHTTP),
	}
}

// checkServiceType returns an invalidServiceError for a Service type that an Ingress
// cannot route to: ExternalName, an alias of a DNS name outside the cluster with no
// endpoints, which Ingress implementations handle differently or not at all, and which
// would publish an outside host under the cluster's ingress.
func checkServiceType(svc *corev1.Service) error {
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return &invalidServiceError{
			reason: ReasonUnsupportedServiceType,
			msg: fmt.Sprintf("Service of type ExternalName (%s) gets no Ingress: it has no endpoints in the cluster; remove annotation %s",
				svc.Spec.ExternalName, AnnotationHTTP),
		}
	}
	return nil
}

// DesiredIngress returns the apply configuration of the Ingress that svc asks for with
// its ingress/* annotations, defaultClass being the controller's --ingress-class. When
// svc cannot have an Ingress (invalid annotation, ExternalName, no TCP port) the error
// says why and InvalidServiceReason gives the reason of the Warning Event the
// controller emits instead of retrying.
func DesiredIngress(svc *corev1.Service, defaultClass string) (*networkingv1ac.IngressApplyConfiguration, error) {
	s, err := parseSettings(svc, defaultClass)
	if err != nil {
		return nil, err
	}
	if err := checkServiceType(svc); err != nil {
		return nil, err
	}
	return newIngress(svc, s)
}

// InvalidServiceReason returns the Event reason of err when it says that the Service
// cannot have an Ingress (retrying cannot help), else "".
func InvalidServiceReason(err error) string {
	var invalid *invalidServiceError
	if errors.As(err, &invalid) {
		return invalid.reason
	}
	return ""
}

// serviceKind is the kind of the owner of every Ingress the controller makes.
var serviceKind = corev1.SchemeGroupVersion.WithKind("Service")

// newIngress returns the apply configuration of the Ingress that svc asks for, with
// exactly the fields the controller owns: one rule routing s.path (pathType Prefix) on
// s.host to the Service's first TCP port, the managed-by label, the Service as controller,
// and the hash of all that. It returns an invalidServiceError when the Service has no
// TCP port.
func newIngress(svc *corev1.Service, s settings) (*networkingv1ac.IngressApplyConfiguration, error) {
	port, err := backendPort(svc)
	if err != nil {
		return nil, err
	}
	rule := networkingv1ac.IngressRule().
		WithHTTP(networkingv1ac.HTTPIngressRuleValue().
			WithPaths(networkingv1ac.HTTPIngressPath().
				WithPath(s.path).
				WithPathType(networkingv1.PathTypePrefix).
				WithBackend(networkingv1ac.IngressBackend().
					WithService(networkingv1ac.IngressServiceBackend().
						WithName(svc.Name).
						WithPort(port)))))
	if s.host != "" {
		rule.WithHost(s.host)
	}
	spec := networkingv1ac.IngressSpec().WithRules(rule)
	if s.class != "" {
		spec.WithIngressClassName(s.class)
	}
	if s.tlsSecret != "" {
		spec.WithTLS(networkingv1ac.IngressTLS().WithHosts(s.host).WithSecretName(s.tlsSecret))
	}
	ing := networkingv1ac.Ingress(svc.Name, svc.Namespace).
		WithLabels(map[string]string{appv1.ManagedByLabel: appv1.ManagedByValue}).
		WithOwnerReferences(controller.OwnerReference(svc, serviceKind)).
		WithSpec(spec)
	switch {
	case s.issuer != "":
		ing.WithAnnotations(map[string]string{certManagerIssuer: s.issuer})
	case s.clusterIssuer != "":
		ing.WithAnnotations(map[string]string{certManagerClusterIssuer: s.clusterIssuer})
	}

	return controller.WithAppliedHash(ing)
}

// TrimService is the transform of this controller's Service informer, which holds every
// Service of the cluster, the App controller's among them (whose own informer holds
// those too, in full). It drops managedFields and kubectl's last-applied-configuration
// (StripWriteRecords) and, of a Service that does not ask for an Ingress, everything but
// its identity (name, namespace, UID, resourceVersion, generation, creation and deletion
// times): of such a Service the controller reads only that it does not ask (to remove an
// Ingress it controls) and its identity (the Ingress's owner, the Events). Adding the
// annotation is an update that brings the whole Service again.
func TrimService(obj interface{}) (interface{}, error) {
	obj, err := controller.StripWriteRecords(obj)
	if svc, ok := obj.(*corev1.Service); ok && !wantsIngress(svc) {
		svc.ObjectMeta = metav1.ObjectMeta{
			Name: svc.Name, Namespace: svc.Namespace, UID: svc.UID, ResourceVersion: svc.ResourceVersion,
			Generation: svc.Generation, CreationTimestamp: svc.CreationTimestamp, DeletionTimestamp: svc.DeletionTimestamp,
		}
		svc.Spec = corev1.ServiceSpec{}
		svc.Status = corev1.ServiceStatus{}
	}
	return obj, err
}

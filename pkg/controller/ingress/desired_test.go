package ingress

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
)

func TestWantsIngress(t *testing.T) {
	tests := []struct {
		annotations map[string]string
		want        bool
	}{
		{map[string]string{AnnotationHTTP: "true"}, true},
		{map[string]string{AnnotationHTTP: "True"}, false},
		{map[string]string{AnnotationHTTP: "yes"}, false},
		{map[string]string{AnnotationHTTP: "false"}, false},
		{map[string]string{AnnotationHTTP: ""}, false},
		{map[string]string{AnnotationHost: "example.com"}, false},
		{nil, false},
	}
	for _, tt := range tests {
		if got := wantsIngress(newService("s", tt.annotations)); got != tt.want {
			t.Errorf("wantsIngress(%v) = %v, want %v", tt.annotations, got, tt.want)
		}
	}
}

func TestParseSettings(t *testing.T) {
	tests := []struct {
		name         string
		annotations  map[string]string
		defaultClass string
		want         settings
		// wantErr are substrings of the error; none: valid.
		wantErr []string
	}{
		{name: "defaults", annotations: annotated(), want: settings{path: "/"}},
		{name: "default class from the flag", annotations: annotated(), defaultClass: "nginx", want: settings{path: "/", class: "nginx"}},
		{
			name:         "annotations",
			annotations:  annotated(AnnotationHost, "shop.example.com", AnnotationPath, "/api", AnnotationClass, "traefik"),
			defaultClass: "nginx",
			want:         settings{host: "shop.example.com", path: "/api", class: "traefik"},
		},
		{
			name:         "empty annotations mean the defaults",
			annotations:  annotated(AnnotationHost, "", AnnotationPath, "", AnnotationClass, ""),
			defaultClass: "nginx",
			want:         settings{path: "/", class: "nginx"},
		},
		{name: "wildcard host", annotations: annotated(AnnotationHost, "*.example.com"), want: settings{host: "*.example.com", path: "/"}},
		{name: "path with a trailing slash", annotations: annotated(AnnotationPath, "/api/"), want: settings{path: "/api/"}},
		{name: "relative path", annotations: annotated(AnnotationPath, "api"),
			wantErr: []string{`annotation ingress/path: invalid value "api": must be an absolute path starting with "/"`}},
		{name: "double slash", annotations: annotated(AnnotationPath, "/a//b"), wantErr: []string{`ingress/path`, `must not contain "//"`}},
		{name: "dot segment", annotations: annotated(AnnotationPath, "/a/./b"), wantErr: []string{`must not contain "/./"`}},
		{name: "dot-dot segment", annotations: annotated(AnnotationPath, "/a/../b"), wantErr: []string{`must not contain "/../"`}},
		{name: "trailing dot-dot", annotations: annotated(AnnotationPath, "/a/.."), wantErr: []string{`must not end with "/.."`}},
		{name: "encoded slash", annotations: annotated(AnnotationPath, "/a%2Fb"), wantErr: []string{`must not contain "%2F"`}},
		{name: "IP host", annotations: annotated(AnnotationHost, "10.0.0.1"),
			wantErr: []string{`annotation ingress/host: invalid value "10.0.0.1": must be a DNS name, not an IP address`}},
		{name: "IPv6 host", annotations: annotated(AnnotationHost, "::1"), wantErr: []string{"not an IP address"}},
		{name: "upper-case host", annotations: annotated(AnnotationHost, "Shop.Example.com"), wantErr: []string{`annotation ingress/host: invalid value "Shop.Example.com"`}},
		{name: "host with a port", annotations: annotated(AnnotationHost, "example.com:8080"), wantErr: []string{`ingress/host`}},
		{name: "bad wildcard", annotations: annotated(AnnotationHost, "*.*.example.com"), wantErr: []string{`ingress/host`}},
		{name: "bad class", annotations: annotated(AnnotationClass, "My Class"), wantErr: []string{`annotation ingress/class: invalid value "My Class"`}},
		{
			name:        "every problem is reported",
			annotations: annotated(AnnotationHost, "1.2.3.4", AnnotationPath, "x", AnnotationClass, "_"),
			wantErr:     []string{"ingress/host", "ingress/path", "ingress/class"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseSettings(newService("s", tt.annotations), tt.defaultClass)
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("parseSettings: %v", err)
				}
				if got != tt.want {
					t.Errorf("parseSettings = %+v, want %+v", got, tt.want)
				}
				return
			}
			var invalid *invalidServiceError
			if !errors.As(err, &invalid) || invalid.reason != ReasonInvalidAnnotation {
				t.Fatalf("error = %v, want an invalidServiceError with reason %s", err, ReasonInvalidAnnotation)
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
}

// toIngress converts an apply configuration to the Ingress it describes.
func toIngress(t *testing.T, config any) *networkingv1.Ingress {
	t.Helper()
	data, err := json.Marshal(config)
	if err != nil {
		t.Fatal(err)
	}
	ing := &networkingv1.Ingress{}
	if err := json.Unmarshal(data, ing); err != nil {
		t.Fatal(err)
	}
	return ing
}

func TestNewIngress(t *testing.T) {
	prefix := networkingv1.PathTypePrefix
	svc := newService("shop", annotated())
	rule := func(host, path string, port networkingv1.ServiceBackendPort) networkingv1.IngressRule {
		return networkingv1.IngressRule{
			Host: host,
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
				Paths: []networkingv1.HTTPIngressPath{{
					Path:     path,
					PathType: &prefix,
					Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
						Name: "shop", Port: port,
					}},
				}},
			}},
		}
	}
	tests := []struct {
		name     string
		ports    []corev1.ServicePort
		settings settings
		want     networkingv1.IngressSpec
	}{
		{
			name:     "defaults: every host, first port by number, cluster default class",
			ports:    []corev1.ServicePort{{Port: 8080}, {Port: 9090}},
			settings: settings{path: "/"},
			want:     networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{rule("", "/", networkingv1.ServiceBackendPort{Number: 8080})}},
		},
		{
			name:     "named first port, host, path and class",
			ports:    []corev1.ServicePort{{Name: "http", Port: 80}, {Name: "metrics", Port: 9090}},
			settings: settings{host: "shop.example.com", path: "/api", class: "nginx"},
			want: networkingv1.IngressSpec{
				IngressClassName: ptr.To("nginx"),
				Rules:            []networkingv1.IngressRule{rule("shop.example.com", "/api", networkingv1.ServiceBackendPort{Name: "http"})},
			},
		},
		{
			// kubectl create service clusterip shop --tcp=8080:8080
			name:     "port named by kubectl: no letter, not a valid backend port name, so by number",
			ports:    []corev1.ServicePort{{Name: "8080-8080", Port: 8080}},
			settings: settings{path: "/"},
			want:     networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{rule("", "/", networkingv1.ServiceBackendPort{Number: 8080})}},
		},
		{
			name:     "UDP first, then TCP: the first TCP port",
			ports:    []corev1.ServicePort{{Name: "dns-udp", Port: 53, Protocol: corev1.ProtocolUDP}, {Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP}},
			settings: settings{path: "/"},
			want:     networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{rule("", "/", networkingv1.ServiceBackendPort{Name: "dns-tcp"})}},
		},
		{
			name:     "port name longer than 15 characters: by number",
			ports:    []corev1.ServicePort{{Name: "http-frontend-public", Port: 443}},
			settings: settings{path: "/"},
			want:     networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{rule("", "/", networkingv1.ServiceBackendPort{Number: 443})}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := svc.DeepCopy()
			svc.Spec.Ports = tt.ports
			config, err := newIngress(svc, tt.settings)
			if err != nil {
				t.Fatalf("newIngress: %v", err)
			}
			ing := toIngress(t, config)
			if ing.Name != "shop" || ing.Namespace != testNamespace {
				t.Errorf("Ingress %s/%s, want %s/shop", ing.Namespace, ing.Name, testNamespace)
			}
			if !reflect.DeepEqual(ing.Spec, tt.want) {
				t.Errorf("spec =\n%+v\nwant\n%+v", ing.Spec, tt.want)
			}
			if want := map[string]string{appv1.ManagedByLabel: appv1.ManagedByValue}; !reflect.DeepEqual(ing.Labels, want) {
				t.Errorf("labels = %v, want %v", ing.Labels, want)
			}
			ref := metav1.GetControllerOf(ing)
			if ref == nil || ref.Kind != "Service" || ref.APIVersion != "v1" || ref.Name != "shop" || ref.UID != svc.UID ||
				ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
				t.Errorf("controller reference = %+v, want the Service, blocking owner deletion", ref)
			}
			if ing.Annotations[controller.AppliedConfigHashAnnotation] == "" {
				t.Errorf("no %s annotation", controller.AppliedConfigHashAnnotation)
			}
		})
	}
}

func TestNewIngressHash(t *testing.T) {
	svc := newService("shop", annotated())
	hash := func(s settings) string {
		config, err := newIngress(svc, s)
		if err != nil {
			t.Fatal(err)
		}
		return config.Annotations[controller.AppliedConfigHashAnnotation]
	}
	if first, again := hash(settings{path: "/"}), hash(settings{path: "/"}); first != again {
		t.Errorf("same configuration, different hashes")
	}
	if hash(settings{path: "/"}) == hash(settings{path: "/api"}) {
		t.Errorf("different paths, same hash")
	}
	if hash(settings{path: "/", class: "nginx"}) == hash(settings{path: "/"}) {
		t.Errorf("dropping the class does not change the hash")
	}
}

// TestDesiredIngressRefused checks the Services that get a Warning instead of an
// Ingress, and the reason of that Warning.
func TestDesiredIngressRefused(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*corev1.Service)
		want   string
	}{
		{"no port", func(s *corev1.Service) { s.Spec.Ports = nil }, ReasonNoServicePort},
		{"UDP only", func(s *corev1.Service) {
			s.Spec.Ports = []corev1.ServicePort{{Port: 53, Protocol: corev1.ProtocolUDP}}
		}, ReasonNoServicePort},
		{"SCTP and UDP", func(s *corev1.Service) {
			s.Spec.Ports = []corev1.ServicePort{{Name: "a", Port: 1, Protocol: corev1.ProtocolSCTP}, {Name: "b", Port: 2, Protocol: corev1.ProtocolUDP}}
		}, ReasonNoServicePort},
		{"ExternalName", func(s *corev1.Service) {
			s.Spec.Type, s.Spec.ExternalName = corev1.ServiceTypeExternalName, "db.example.com"
		}, ReasonUnsupportedServiceType},
		{"ExternalName with a port", func(s *corev1.Service) {
			s.Spec.Type, s.Spec.ExternalName = corev1.ServiceTypeExternalName, "db.example.com"
			s.Spec.Ports = []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}}
		}, ReasonUnsupportedServiceType},
		{"invalid annotation first", func(s *corev1.Service) {
			s.Spec.Ports = nil
			s.Annotations[AnnotationPath] = "relative"
		}, ReasonInvalidAnnotation},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := newService("shop", annotated())
			tt.mutate(svc)
			_, err := DesiredIngress(svc, "")
			if got := InvalidServiceReason(err); got != tt.want {
				t.Fatalf("DesiredIngress error = %v (reason %q), want reason %q", err, got, tt.want)
			}
		})
	}
	if got := InvalidServiceReason(errors.New("other")); got != "" {
		t.Errorf("InvalidServiceReason(other error) = %q, want \"\"", got)
	}
}

// TestBackendPortAnnotation checks that ingress/port picks the Service port the Ingress
// routes to, by name or by number, and that a port the Service lacks is refused.
func TestBackendPortAnnotation(t *testing.T) {
	ports := []corev1.ServicePort{{Name: "http", Port: 80}, {Name: "metrics", Port: 9090}, {Name: "9443-9443", Port: 9443}, {Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}}
	for _, tt := range []struct {
		annotation string
		want       networkingv1.ServiceBackendPort
		refused    bool
	}{
		{"", networkingv1.ServiceBackendPort{Name: "http"}, false},
		{"metrics", networkingv1.ServiceBackendPort{Name: "metrics"}, false},
		{"9090", networkingv1.ServiceBackendPort{Name: "metrics"}, false},
		{"9443", networkingv1.ServiceBackendPort{Number: 9443}, false},
		{"grpc", networkingv1.ServiceBackendPort{}, true},
		{"dns", networkingv1.ServiceBackendPort{}, true}, // UDP: not HTTP
	} {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "shop", Annotations: map[string]string{AnnotationPort: tt.annotation}}, Spec: corev1.ServiceSpec{Ports: ports}}
		got, err := backendPort(s)
		if tt.refused {
			var invalid *invalidServiceError
			if !errors.As(err, &invalid) || invalid.reason != ReasonNoServicePort || !strings.Contains(invalid.msg, AnnotationPort) {
				t.Errorf("ingress/port %q: %v, want a NoServicePort refusal naming the annotation", tt.annotation, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("ingress/port %q: %v", tt.annotation, err)
		}
		var port networkingv1.ServiceBackendPort
		if got.Name != nil {
			port.Name = *got.Name
		}
		if got.Number != nil {
			port.Number = *got.Number
		}
		if port != tt.want {
			t.Errorf("ingress/port %q: %+v, want %+v", tt.annotation, port, tt.want)
		}
	}
}

package ingress

import (
	"errors"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
)

func TestIngressTLS(t *testing.T) {
	for _, tt := range []struct {
		name        string
		annotations map[string]string
		wantTLS     []networkingv1.IngressTLS
		wantIssuer  map[string]string
		invalid     string // a part of the refusal's message
	}{
		{name: "no TLS: the Ingress is as before", annotations: annotated(AnnotationHost, "shop.example.com")},
		{name: "a Secret", annotations: annotated(AnnotationHost, "shop.example.com", AnnotationTLSSecret, "shop-tls"),
			wantTLS: []networkingv1.IngressTLS{{Hosts: []string{"shop.example.com"}, SecretName: "shop-tls"}}},
		{name: "a cert-manager ClusterIssuer", annotations: annotated(AnnotationHost, "shop.example.com", AnnotationTLSSecret, "shop-tls", AnnotationClusterIssuer, "letsencrypt"),
			wantTLS:    []networkingv1.IngressTLS{{Hosts: []string{"shop.example.com"}, SecretName: "shop-tls"}},
			wantIssuer: map[string]string{certManagerClusterIssuer: "letsencrypt"}},
		{name: "a cert-manager Issuer", annotations: annotated(AnnotationHost, "shop.example.com", AnnotationTLSSecret, "shop-tls", AnnotationIssuer, "ca"),
			wantTLS:    []networkingv1.IngressTLS{{Hosts: []string{"shop.example.com"}, SecretName: "shop-tls"}},
			wantIssuer: map[string]string{certManagerIssuer: "ca"}},
		{name: "TLS without a host", annotations: annotated(AnnotationTLSSecret, "shop-tls"), invalid: "needs ingress/host"},
		{name: "an issuer without a Secret", annotations: annotated(AnnotationHost, "shop.example.com", AnnotationIssuer, "ca"), invalid: "needs ingress/tls-secret"},
		{name: "both issuers", annotations: annotated(AnnotationHost, "shop.example.com", AnnotationTLSSecret, "t", AnnotationIssuer, "a", AnnotationClusterIssuer, "b"), invalid: "not both"},
		{name: "a Secret name that is no name", annotations: annotated(AnnotationHost, "shop.example.com", AnnotationTLSSecret, "Not_A_Name"), invalid: "annotation ingress/tls-secret: invalid value"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			config, err := DesiredIngress(newService("shop", tt.annotations), "")
			if tt.invalid != "" {
				var invalid *invalidServiceError
				if !errors.As(err, &invalid) || invalid.reason != ReasonInvalidAnnotation || !strings.Contains(invalid.msg, tt.invalid) {
					t.Errorf("error %v, want an InvalidAnnotation refusal saying %q", err, tt.invalid)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			ing := toIngress(t, config)
			if !equalTLS(ing.Spec.TLS, tt.wantTLS) {
				t.Errorf("tls = %+v, want %+v", ing.Spec.TLS, tt.wantTLS)
			}
			for _, k := range []string{certManagerIssuer, certManagerClusterIssuer} {
				if ing.Annotations[k] != tt.wantIssuer[k] {
					t.Errorf("annotation %s = %q, want %q", k, ing.Annotations[k], tt.wantIssuer[k])
				}
			}
		})
	}
}

func equalTLS(a, b []networkingv1.IngressTLS) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].SecretName != b[i].SecretName || strings.Join(a[i].Hosts, ",") != strings.Join(b[i].Hosts, ",") {
			return false
		}
	}
	return true
}

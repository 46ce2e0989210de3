package harness

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// TestTraefikManifest: each option adds its objects and its pod settings, and every
// document of the stream parses.
func TestTraefikManifest(t *testing.T) {
	for _, tc := range []struct {
		name      string
		opts      TraefikOptions
		wantKinds []string
		wantArgs  []string // among the pod's
		noArgs    []string
		priority  string
	}{{
		name:      "the end-to-end tests': ingress and metrics",
		opts:      TraefikOptions{Namespace: "ns", Image: "reg/traefik:1", Ingress: true, Metrics: true},
		wantKinds: []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "IngressClass", "GatewayClass", "Gateway", "Service", "Pod"},
		wantArgs:  []string{"--providers.kubernetesingress=true", "--metrics.prometheus=true", "--providers.kubernetesgateway=true"},
	}, {
		name:      "the soak's: its namespace, a critical pod",
		opts:      TraefikOptions{Namespace: "ns", Image: "reg/traefik:1", CreateNamespace: true, PriorityClass: "system-cluster-critical"},
		wantKinds: []string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "GatewayClass", "Gateway", "Pod"},
		wantArgs:  []string{"--providers.kubernetesgateway=true"},
		noArgs:    []string{"--providers.kubernetesingress=true", "--metrics.prometheus=true"},
		priority:  "system-cluster-critical",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var kinds []string
			var pod corev1.Pod
			for _, doc := range strings.Split(TraefikManifest(tc.opts), "\n---\n") {
				var obj struct {
					Kind string `json:"kind"`
				}
				if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
					t.Fatalf("a document does not parse: %v\n%s", err, doc)
				}
				kinds = append(kinds, obj.Kind)
				if obj.Kind == "Pod" {
					if err := yaml.UnmarshalStrict([]byte(doc), &pod); err != nil {
						t.Fatalf("the pod does not parse: %v\n%s", err, doc)
					}
				}
			}
			if !slices.Equal(kinds, tc.wantKinds) {
				t.Errorf("kinds %q, want %q", kinds, tc.wantKinds)
			}
			if pod.Namespace != tc.opts.Namespace || pod.Spec.Containers[0].Image != tc.opts.Image || pod.Spec.PriorityClassName != tc.priority {
				t.Errorf("pod in %q, image %q, priority class %q", pod.Namespace, pod.Spec.Containers[0].Image, pod.Spec.PriorityClassName)
			}
			args := pod.Spec.Containers[0].Args
			for _, a := range tc.wantArgs {
				if !slices.Contains(args, a) {
					t.Errorf("the pod's args %q lack %s", args, a)
				}
			}
			for _, a := range tc.noArgs {
				if slices.Contains(args, a) {
					t.Errorf("the pod's args %q have %s", args, a)
				}
			}
			if got := pod.Annotations["prometheus.io/scrape"] == "true"; got != tc.opts.Metrics {
				t.Errorf("annotated for Prometheus: %t, want %t", got, tc.opts.Metrics)
			}
		})
	}
}

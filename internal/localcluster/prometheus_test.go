package localcluster

import (
	"strings"
	"testing"
)

// TestPrometheusManifest checks the manifest the end-to-end tests and the soak apply:
// its objects in the namespace, the images from the registry, the configuration indented
// into the ConfigMap.
func TestPrometheusManifest(t *testing.T) {
	m := string(PrometheusManifest("mon", "127.0.0.1:5000", PrometheusOptions{}))
	for _, want := range []string{
		"metadata: {name: prometheus, namespace: mon}",
		"metadata: {name: prometheus-mon}",
		"image: 127.0.0.1:5000/" + PrometheusImage,
		"image: 127.0.0.1:5000/" + DemoappImage,
		"  prometheus.yml: |\n    global:\n      scrape_interval: 2s\n",
		"    - job_name: kubernetes-pods\n",
	} {
		if !strings.Contains(m, want) {
			t.Errorf("the manifest lacks %q:\n%s", want, m)
		}
	}
	if n := strings.Count(m, "\n---\n"); n != 5 {
		t.Errorf("%d objects, want 6 (service account, cluster role and binding, ConfigMap, Service, pod)", n+1)
	}
}

// TestPrometheusManifestOptions checks what the options add: the relabelling that keeps
// Ready pods alone, in the scrape job after the phase's, and the pod's priority class.
func TestPrometheusManifestOptions(t *testing.T) {
	plain := string(PrometheusManifest("mon", "r", PrometheusOptions{}))
	for _, unwanted := range []string{"__meta_kubernetes_pod_ready", "priorityClassName"} {
		if strings.Contains(plain, unwanted) {
			t.Errorf("the manifest without options has %q", unwanted)
		}
	}
	m := string(PrometheusManifest("mon", "r", PrometheusOptions{ReadyOnly: true, PriorityClassName: "system-cluster-critical"}))
	for _, want := range []string{
		"        regex: Running\n        action: keep\n      - source_labels: [__meta_kubernetes_pod_ready]\n        regex: \"true\"\n        action: keep\n      - source_labels: [__address__,",
		"  terminationGracePeriodSeconds: 0\n  priorityClassName: system-cluster-critical\n  containers:\n",
	} {
		if !strings.Contains(m, want) {
			t.Errorf("the manifest lacks %q:\n%s", want, m)
		}
	}
}

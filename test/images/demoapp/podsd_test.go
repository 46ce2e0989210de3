package main

import (
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// TestPodsSD serves two pods, one with two ports and one with none, and one pod without
// an IP yet: the targets and labels kubernetes_sd_configs' role pod would give.
func TestPodsSD(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	running := corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.244.0.7", HostIP: "10.200.0.2",
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	yes := true
	for _, p := range []*corev1.Pod{
		{
			ObjectMeta: metav1.ObjectMeta{Name: "web-canary-abc", Namespace: "shop", UID: "u1",
				Labels:          map[string]string{"app.kubernetes.io/instance": "web", "appcontroller.k8s.io/track": "canary"},
				Annotations:     map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": "8080"},
				OwnerReferences: []metav1.OwnerReference{{Name: "web-canary-5d8", Controller: &yes}}},
			Spec: corev1.PodSpec{NodeName: "real-node-0", Containers: []corev1.Container{{Name: "app", Ports: []corev1.ContainerPort{
				{Name: "http", ContainerPort: 8080}, {Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP}, {Name: "admin", ContainerPort: 9000, Protocol: corev1.ProtocolTCP}}}}},
			Status: running,
		},
		{ObjectMeta: metav1.ObjectMeta{Name: "bare", Namespace: "a"}, Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.244.0.9"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "pending", Namespace: "a"}, Status: corev1.PodStatus{Phase: corev1.PodPending}},
	} {
		if err := indexer.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	rec := httptest.NewRecorder()
	podsSDHandler(corelisters.NewPodLister(indexer)).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	var got []targetGroup
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	bare := map[string]string{
		"__meta_kubernetes_namespace": "a", "__meta_kubernetes_pod_name": "bare", "__meta_kubernetes_pod_ip": "10.244.0.9",
		"__meta_kubernetes_pod_phase": "Running", "__meta_kubernetes_pod_ready": "false", "__meta_kubernetes_pod_node_name": "",
		"__meta_kubernetes_pod_uid": "", "__meta_kubernetes_pod_host_ip": "", "__meta_kubernetes_pod_controller": "",
	}
	web := map[string]string{
		"__meta_kubernetes_namespace": "shop", "__meta_kubernetes_pod_name": "web-canary-abc", "__meta_kubernetes_pod_ip": "10.244.0.7",
		"__meta_kubernetes_pod_phase": "Running", "__meta_kubernetes_pod_ready": "true", "__meta_kubernetes_pod_node_name": "real-node-0",
		"__meta_kubernetes_pod_uid": "u1", "__meta_kubernetes_pod_host_ip": "10.200.0.2", "__meta_kubernetes_pod_controller": "web-canary-5d8",
		"__meta_kubernetes_pod_label_app_kubernetes_io_instance": "web",
		"__meta_kubernetes_pod_label_appcontroller_k8s_io_track": "canary",
		"__meta_kubernetes_pod_annotation_prometheus_io_scrape":  "true",
		"__meta_kubernetes_pod_annotation_prometheus_io_port":    "8080",
		"__meta_kubernetes_pod_container_name":                   "app",
	}
	withPort := func(name, number string) map[string]string {
		l := maps.Clone(web)
		l["__meta_kubernetes_pod_container_port_name"], l["__meta_kubernetes_pod_container_port_number"] = name, number
		return l
	}
	want := []targetGroup{
		{Targets: []string{"10.244.0.9"}, Labels: bare},
		{Targets: []string{"10.244.0.7:8080"}, Labels: withPort("http", "8080")},
		{Targets: []string{"10.244.0.7:9000"}, Labels: withPort("admin", "9000")},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("targets:\n%+v\nwant\n%+v", got, want)
	}
}

package ingress

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// TestTrimService: a Service that asks for an Ingress keeps its metadata, spec and
// status; any other keeps only its identity; managedFields go from both; tombstones
// pass.
func TestTrimService(t *testing.T) {
	created := metav1.Unix(100, 0)
	deleted := metav1.Unix(200, 0)
	identity := metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "u1", ResourceVersion: "7", Generation: 1,
		CreationTimestamp: created, DeletionTimestamp: &deleted}
	svc := func(annotations map[string]string) *corev1.Service {
		return &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "u1", ResourceVersion: "7", Generation: 1,
				CreationTimestamp: created, DeletionTimestamp: &deleted,
				Annotations: annotations, Labels: map[string]string{"a": "b"}, Finalizers: []string{"f"},
				OwnerReferences: []metav1.OwnerReference{{Kind: "App", Name: "web", UID: "u0"}},
				ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
			Spec:   corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}, ClusterIP: "10.96.0.10"},
			Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "1.2.3.4"}}}},
		}
	}
	for _, tt := range []struct {
		name        string
		annotations map[string]string
		keepSpec    bool
	}{
		{"asks for an Ingress", map[string]string{AnnotationHTTP: "true"}, true},
		{"no annotation", nil, false},
		{"annotation not true", map[string]string{AnnotationHTTP: "false", AnnotationHost: "a.example.com"}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, err := TrimService(svc(tt.annotations))
			if err != nil {
				t.Fatal(err)
			}
			got := out.(*corev1.Service)
			if got.ManagedFields != nil {
				t.Errorf("managedFields kept: %v", got.ManagedFields)
			}
			want := svc(tt.annotations).ObjectMeta
			want.ManagedFields = nil
			if !tt.keepSpec {
				want = identity
			}
			if !apiequality.Semantic.DeepEqual(got.ObjectMeta, want) {
				t.Errorf("metadata = %+v, want %+v", got.ObjectMeta, want)
			}
			if kept := len(got.Spec.Ports) == 1 && got.Spec.ClusterIP != "" && len(got.Status.LoadBalancer.Ingress) == 1; kept != tt.keepSpec {
				t.Errorf("spec and status kept: %v, want %v (%+v %+v)", kept, tt.keepSpec, got.Spec, got.Status)
			}
		})
	}
	tombstone := cache.DeletedFinalStateUnknown{Key: "ns/web", Obj: svc(nil)}
	if out, err := TrimService(tombstone); err != nil || out.(cache.DeletedFinalStateUnknown).Key != "ns/web" {
		t.Errorf("tombstone: %v, %v", out, err)
	}
}

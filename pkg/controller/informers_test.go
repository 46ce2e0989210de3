package controller

import (
	"os"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/yaml"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller/controllertest"
)

// managedDeployment is a Deployment as the apiserver returns it once the App controller
// has applied it and kube-controller-manager has rolled it out (captured from `make
// bench`), managedFields included.
func managedDeployment(tb testing.TB) *appsv1.Deployment {
	tb.Helper()
	data, err := os.ReadFile("testdata/managed-deployment.yaml")
	if err != nil {
		tb.Fatal(err)
	}
	var d appsv1.Deployment
	if err := yaml.Unmarshal(data, &d); err != nil {
		tb.Fatalf("decoding testdata/managed-deployment.yaml: %v", err)
	}
	if len(d.ManagedFields) == 0 {
		tb.Fatal("testdata/managed-deployment.yaml has no managedFields")
	}
	return &d
}

func TestStripManagedFields(t *testing.T) {
	d := managedDeployment(t)
	want := d.DeepCopy()
	want.ManagedFields = nil

	got, err := StripManagedFields(d)
	if err != nil {
		t.Fatal(err)
	}
	gotD, ok := got.(*appsv1.Deployment)
	if !ok {
		t.Fatalf("StripManagedFields returned %T, want *appsv1.Deployment", got)
	}
	if gotD.ManagedFields != nil {
		t.Errorf("managedFields kept: %d entries", len(gotD.ManagedFields))
	}
	// Everything the controllers read stays: spec, status, labels, annotations, owners.
	if !equality.Semantic.DeepEqual(gotD, want) {
		t.Errorf("StripManagedFields changed more than managedFields:\n got %+v\nwant %+v", gotD, want)
	}

	// Tombstones and objects without metadata pass through unchanged.
	tomb := cache.DeletedFinalStateUnknown{Key: "ns/name", Obj: managedDeployment(t)}
	if got, err := StripManagedFields(tomb); err != nil || got != tomb {
		t.Errorf("tombstone: got %v, %v; want it unchanged", got, err)
	}
	if got, err := StripManagedFields("not an object"); err != nil || got != "not an object" {
		t.Errorf("non-object: got %v, %v; want it unchanged", got, err)
	}
}

func TestStripToIdentity(t *testing.T) {
	d := managedDeployment(t)
	d.Annotations = map[string]string{"deployment.kubernetes.io/revision": "1"}
	got, err := StripToIdentity(&metav1.PartialObjectMetadata{ObjectMeta: d.ObjectMeta})
	if err != nil {
		t.Fatal(err)
	}
	meta := got.(*metav1.PartialObjectMetadata)
	if meta.ManagedFields != nil || meta.Annotations != nil {
		t.Errorf("managedFields or annotations kept: %+v", meta.ObjectMeta)
	}
	if meta.Name != d.Name || meta.Namespace != d.Namespace || meta.UID != d.UID ||
		meta.ResourceVersion != d.ResourceVersion || len(meta.Labels) != len(d.Labels) ||
		len(meta.OwnerReferences) != len(d.OwnerReferences) || len(meta.OwnerReferences) == 0 {
		t.Errorf("identity not kept: %+v", meta.ObjectMeta)
	}
}

// BenchmarkManagedCacheFootprint measures the heap that 1000 managed Deployments take
// in an informer's store, as the apiserver sends them and after StripManagedFields (the
// transform of the managed informers): the lever behind rss_mb_per_1000_apps in `make
// bench`. Reported as heap-bytes/object (the time per op is not the figure).
func BenchmarkManagedCacheFootprint(b *testing.B) {
	const n = 1000
	for _, c := range []struct {
		name      string
		transform cache.TransformFunc
	}{
		{"as-sent", nil},
		{"stripped", StripManagedFields},
	} {
		b.Run(c.name, func(b *testing.B) {
			raw, err := managedDeployment(b).Marshal()
			if err != nil {
				b.Fatal(err)
			}
			controllertest.StoreFootprint[*appsv1.Deployment](b, n, raw, c.transform)
		})
	}
}

func TestSelectors(t *testing.T) {
	managed := map[string]string{appv1.ManagedByLabel: appv1.ManagedByValue}
	other := map[string]string{appv1.ManagedByLabel: "helm"}
	none := map[string]string{}
	for _, l := range []map[string]string{managed, other, none} {
		m, u := ManagedSelector().Matches(labelSet(l)), UnmanagedSelector().Matches(labelSet(l))
		if m == u {
			t.Errorf("labels %v: managed=%v unmanaged=%v, want exactly one", l, m, u)
		}
	}
}

type labelSet map[string]string

func (l labelSet) Has(k string) bool              { _, ok := l[k]; return ok }
func (l labelSet) Get(k string) string            { return l[k] }
func (l labelSet) Lookup(k string) (string, bool) { v, ok := l[k]; return v, ok }

// TestStripWriteRecords: managedFields and kubectl's last-applied-configuration go;
// every other annotation, and the rest of the object, stay.
func TestStripWriteRecords(t *testing.T) {
	for _, tt := range []struct {
		name        string
		annotations map[string]string
		want        map[string]string
	}{
		{"last-applied and others", map[string]string{corev1.LastAppliedConfigAnnotation: `{"spec":{}}`, appv1.ChangeCauseAnnotation: "v2"},
			map[string]string{appv1.ChangeCauseAnnotation: "v2"}},
		{"last-applied alone", map[string]string{corev1.LastAppliedConfigAnnotation: `{"spec":{}}`}, nil},
		{"none", nil, nil},
		{"others only", map[string]string{"a": "b"}, map[string]string{"a": "b"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := managedDeployment(t)
			d.Annotations = tt.annotations
			want := d.DeepCopy()
			want.ManagedFields = nil
			want.Annotations = tt.want
			got, err := StripWriteRecords(d)
			if err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(got, want) {
				t.Errorf("StripWriteRecords:\n got %+v\nwant %+v", got.(*appsv1.Deployment).ObjectMeta, want.ObjectMeta)
			}
		})
	}
	tomb := cache.DeletedFinalStateUnknown{Key: "ns/name", Obj: managedDeployment(t)}
	if got, err := StripWriteRecords(tomb); err != nil || got != tomb {
		t.Errorf("tombstone: %v, %v", got, err)
	}
}

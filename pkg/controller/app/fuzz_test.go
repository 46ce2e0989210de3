package app

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
)

// FuzzSyncApp feeds arbitrary App specs (as JSON, so any shape the API could hold,
// including what the schema would reject) through a full sync against fake clientsets:
// the controller must never panic, whatever the input. `go test` runs the seeds;
// `go test -fuzz FuzzSyncApp ./pkg/controller/app/` explores.
func FuzzSyncApp(f *testing.F) {
	for _, seed := range []string{
		`{"deploymentTemplate":{"name":"app-deploy","image":"nginx","replicas":2},"serviceTemplate":{"name":"app-service"}}`,
		`{}`,
		`{"deploymentTemplate":{"name":"","image":""}}`,
		`{"deploymentTemplate":{"name":"x","image":"y","replicas":-5,"containerPort":0}}`,
		`{"serviceTemplate":{"name":"s","port":0,"targetPort":-1,"type":"ExternalName"}}`,
		`{"deploymentTemplate":{"name":"d","image":"i","env":[{"name":"A","valueFrom":{}}],"resources":{"limits":{"cpu":"1"},"requests":{"cpu":"2"}}}}`,
		`{"deploymentTemplate":{"name":"same","image":"i"},"serviceTemplate":{"name":"same"}}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		app := newApp("fuzz", time.Now())
		app.Spec = appv1.AppSpec{}
		if err := json.Unmarshal([]byte(spec), &app.Spec); err != nil {
			t.Skip()
		}
		fx := newFixture(t)
		fx.addApps(app)
		_ = fx.sync(app.Namespace, app.Name) // errors are fine; panics are not
		_ = fx.sync(app.Namespace, app.Name)
	})
}

// FuzzDesiredChildren checks the invariants of the desired children for any App spec:
// building them never panics and is deterministic (same configuration, same hash), the
// Deployment's selector is exactly the App's selector labels and its pod template
// carries them (the API server rejects a template its selector does not match; pod
// labels from the spec must not override them), and the Service selects the same pods.
func FuzzDesiredChildren(f *testing.F) {
	for _, seed := range []string{
		`{"deploymentTemplate":{"name":"d","image":"nginx","replicas":2},"serviceTemplate":{"name":"s"}}`,
		`{"deploymentTemplate":{"name":"d","image":"i","podLabels":{"app.kubernetes.io/instance":"other","app.kubernetes.io/name":"x","team":"a"}}}`,
		`{"serviceTemplate":{"name":"s","labels":{"app.kubernetes.io/managed-by":"me"},"annotations":{"appcontroller.k8s.io/applied-config-hash":"x"}}}`,
		`{"deploymentTemplate":{"name":"d","image":"i","containerPort":8080},"serviceTemplate":{"name":"s","port":80,"protocol":"UDP","nodePort":30000,"type":"NodePort"}}`,
	} {
		f.Add(seed, "fuzz")
	}
	f.Fuzz(func(t *testing.T, spec, name string) {
		app := newApp("fuzz", time.Now())
		app.Name = name
		app.Spec = appv1.AppSpec{}
		if err := json.Unmarshal([]byte(spec), &app.Spec); err != nil {
			t.Skip()
		}
		d1, err1 := DesiredDeployment(app)
		d2, err2 := DesiredDeployment(app)
		if (err1 == nil) != (err2 == nil) {
			t.Fatalf("DesiredDeployment is not deterministic: %v, then %v", err1, err2)
		}
		want := selectorLabels(app)
		if d1 != nil {
			if d1.Annotations[controller.AppliedConfigHashAnnotation] != d2.Annotations[controller.AppliedConfigHashAnnotation] {
				t.Fatalf("two hashes for one Deployment configuration")
			}
			if d1.Spec == nil || d1.Spec.Selector == nil || !maps.Equal(d1.Spec.Selector.MatchLabels, want) {
				t.Fatalf("Deployment selector = %+v, want exactly %v", d1.Spec, want)
			}
			for k, v := range want {
				if d1.Spec.Template.Labels[k] != v {
					t.Fatalf("pod label %s = %q, want %q: the selector would not match the template", k, d1.Spec.Template.Labels[k], v)
				}
			}
		}
		s1, err1 := DesiredService(app)
		s2, err2 := DesiredService(app)
		if (err1 == nil) != (err2 == nil) {
			t.Fatalf("DesiredService is not deterministic: %v, then %v", err1, err2)
		}
		if s1 != nil {
			if s1.Annotations[controller.AppliedConfigHashAnnotation] != s2.Annotations[controller.AppliedConfigHashAnnotation] {
				t.Fatalf("two hashes for one Service configuration")
			}
			if s1.Spec == nil || !maps.Equal(s1.Spec.Selector, want) {
				t.Fatalf("Service selector = %+v, want exactly %v", s1.Spec, want)
			}
			if s1.Labels[appv1.ManagedByLabel] != appv1.ManagedByValue {
				t.Fatalf("Service label %s = %q: the controller would not see its own Service", appv1.ManagedByLabel, s1.Labels[appv1.ManagedByLabel])
			}
		}
	})
}

// FuzzArbitrationOrder checks that the winner of a contested name is the same whatever
// the order of the claimants: creation times (some equal) and names come from the
// fuzzer, the order from a seeded shuffle.
func FuzzArbitrationOrder(f *testing.F) {
	f.Add([]byte{0, 0, 1, 2, 2}, "abcde", uint64(1))
	f.Add([]byte{5, 5, 5}, "aab", uint64(7))
	f.Fuzz(func(t *testing.T, ages []byte, names string, seed uint64) {
		if len(ages) == 0 || len(ages) > 16 {
			t.Skip()
		}
		apps := make([]*appv1.App, len(ages))
		for i, age := range ages {
			name := fmt.Sprintf("%s-%d", names, i%3) // names repeat: only UID tells them apart
			apps[i] = newApp(name, testNow.Add(time.Duration(age)*time.Second))
			apps[i].UID = types.UID(fmt.Sprint(i))
		}
		want := oldestApp(apps)
		r := rand.New(rand.NewPCG(seed, 0))
		for range 5 {
			r.Shuffle(len(apps), func(i, j int) { apps[i], apps[j] = apps[j], apps[i] })
			got := oldestApp(apps)
			if !got.CreationTimestamp.Equal(&want.CreationTimestamp) || got.Name != want.Name {
				t.Fatalf("winner %s (%v) after a shuffle, %s (%v) before", got.Name, got.CreationTimestamp, want.Name, want.CreationTimestamp)
			}
		}
	})
}

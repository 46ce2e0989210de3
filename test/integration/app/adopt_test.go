package app

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// TestNoAdoptionInCreateRace is the adoption race on the real API server: another writer
// creates a Service of the App's child name after the controller's caches were read and
// just before its apply meant to create the child is sent (the test's hook on the
// controller's transport creates it then), with the same ports and no field that
// conflicts with the App's. The apply, not forced, merges into the other writer's
// Service; the controller sees the other writer's fields in the answer and gives back
// what it took. At the end the Service carries no controller reference, no field of the
// controller (its selector is gone again) and its creator's fields, and the App reports
// the name as taken.
func TestNoAdoptionInCreateRace(t *testing.T) {
	c := newClients(t)
	ns := framework.Namespace(t)
	ctx := context.Background()
	m := startManager(t, 10*time.Minute)

	// The ports the controller gives an App's Service, read from a reference App's.
	c.Create(t, newApp(ns, "ref", "nginx", 1))
	c.WaitReady(t, ns, "ref")
	ref, err := c.Kube.CoreV1().Services(ns).Get(ctx, "ref-svc", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	applyPath := "/api/v1/namespaces/" + ns + "/services/race-svc"
	var once sync.Once
	raced := make(chan error, 1)
	m.SetBeforeWrite(func(req *http.Request) {
		if req.Method != http.MethodPatch || req.URL.Path != applyPath {
			return
		}
		once.Do(func() {
			foreign := &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: "race-svc", Namespace: ns, Labels: map[string]string{"team": "other"}},
				Spec:       corev1.ServiceSpec{Ports: ref.Spec.Ports},
			}
			_, err := c.Kube.CoreV1().Services(ns).Create(req.Context(), foreign, metav1.CreateOptions{FieldManager: "kubectl-create"})
			raced <- err
		})
	})

	app := newApp(ns, "race", "nginx", 1)
	c.Create(t, app)
	select {
	case err := <-raced:
		if err != nil {
			t.Fatalf("creating the other writer's Service before the controller's apply: %v", err)
		}
	case <-time.After(converge):
		t.Fatal("the controller never applied Service race-svc")
	}
	got := c.WaitCondition(t, ns, "race", appv1.ConditionNamesAccepted, "False/NameConflict")
	if msg := conditionMessage(got, appv1.ConditionNamesAccepted); !strings.Contains(msg, `Service "race-svc" already exists and is not managed by this App`) {
		t.Errorf("NamesAccepted message %q does not name the Service", msg)
	}
	framework.Eventually(t, converge, func() (bool, error) {
		return slices.ContainsFunc(c.Events(t, ns, "App", "race"), func(e string) bool {
			return strings.HasPrefix(e, `Warning ErrResourceExists Resource "race-svc" already exists`)
		}), nil
	})
	m.waitQuiet(t, ns)

	svc, err := c.Kube.CoreV1().Services(ns).Get(ctx, "race-svc", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(svc.OwnerReferences) != 0 {
		t.Errorf("the other writer's Service has owner references %+v, want none", svc.OwnerReferences)
	}
	if len(svc.Spec.Selector) != 0 {
		t.Errorf("the other writer's Service kept the App's selector %v", svc.Spec.Selector)
	}
	if svc.Labels["team"] != "other" {
		t.Errorf("the other writer's label is gone: %v", svc.Labels)
	}
	for _, e := range svc.ManagedFields {
		if e.Manager == appv1.FieldManager && e.FieldsV1 != nil && e.FieldsV1.GetRawString() != "{}" {
			t.Errorf("the controller still owns fields of the other writer's Service: %s", e.FieldsV1.GetRawString())
		}
	}
	applies := len(m.WritesTo("PATCH " + applyPath))
	t.Logf("the controller sent %d applies to Service race-svc (the one that merged and the give-back); its managers now: %s", applies, managers(svc.ManagedFields))
	if applies != 2 {
		t.Errorf("the controller applied Service race-svc %d times, want 2 (the apply that merged, the give-back)", applies)
	}
}

// managers lists the managers of managed fields, as "manager/operation".
func managers(entries []metav1.ManagedFieldsEntry) string {
	var out []string
	for _, e := range entries {
		out = append(out, e.Manager+"/"+string(e.Operation))
	}
	return strings.Join(out, ", ")
}

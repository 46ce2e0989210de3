package app

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// permutations returns every order of n items, as index slices.
func permutations(n int) [][]int {
	if n == 0 {
		return [][]int{{}}
	}
	var out [][]int
	for _, p := range permutations(n - 1) {
		for i := 0; i <= len(p); i++ {
			q := append(append(append([]int{}, p[:i]...), n-1), p[i:]...)
			out = append(out, q)
		}
	}
	return out
}

func TestOldestApp(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	mk := func(name string, created time.Time) *appv1.App {
		a := newApp(name, created)
		a.UID = types.UID(name)
		return a
	}
	tests := []struct {
		name string
		apps []*appv1.App
		want string
	}{
		{"older wins", []*appv1.App{mk("b", t0.Add(time.Second)), mk("a", t0.Add(2*time.Second))}, "b"},
		{"tie broken by name", []*appv1.App{mk("z", t0), mk("m", t0)}, "m"},
		{"order does not matter", []*appv1.App{mk("m", t0), mk("z", t0)}, "m"},
		{"single", []*appv1.App{mk("x", t0)}, "x"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := oldestApp(tc.apps).Name; got != tc.want {
				t.Errorf("oldestApp = %s, want %s", got, tc.want)
			}
		})
	}
	if oldestApp(nil) != nil {
		t.Error("oldestApp(nil) != nil")
	}
}

// TestOldestAppAnyOrder checks that the winner of a contested name does not depend on
// the order in which the claimants are listed, ties in creation time included.
func TestOldestAppAnyOrder(t *testing.T) {
	t0 := testNow
	apps := []*appv1.App{
		newApp("charlie", t0), newApp("alpha", t0), newApp("bravo", t0.Add(-time.Minute)),
		newApp("bravo-2", t0.Add(-time.Minute)), newApp("delta", t0.Add(time.Hour)),
	}
	for _, p := range permutations(len(apps)) {
		order := make([]*appv1.App, len(p))
		for i, j := range p {
			order[i] = apps[j]
		}
		if got := oldestApp(order); got.Name != "bravo" {
			t.Fatalf("order %v: winner %s, want bravo (oldest, then first by name)", p, got.Name)
		}
	}
}

// arbitrationWorld runs the controller over fake clientsets as the informers would feed
// it: after every sync the caches catch up with what the fake API server holds.
// Every resourceVersion it hands out comes from the fixture's counter of status writes,
// so that an own write is always newer than what the informer held before it.
type arbitrationWorld struct {
	*fixture
}

// refresh copies the fake API server's Deployments and Services into the managed
// caches (as their informers would), and the Apps' last status into the App cache.
func (w *arbitrationWorld) refresh(apps []*appv1.App) {
	w.t.Helper()
	for _, kind := range []struct {
		resource string
		indexer  interface {
			Replace([]interface{}, string) error
		}
	}{
		{"deployments", w.inf.Deployments.Informer().GetIndexer()},
		{"services", w.inf.Services.Informer().GetIndexer()},
	} {
		gvr := appsv1.SchemeGroupVersion.WithResource(kind.resource)
		gvk := appsv1.SchemeGroupVersion.WithKind("Deployment")
		if kind.resource == "services" {
			gvr.Group, gvr.Version, gvk.Group, gvk.Version, gvk.Kind = "", "v1", "", "v1", "Service"
		}
		list, err := w.kubeClient.Tracker().List(gvr, gvk, "tcs")
		if err != nil {
			w.t.Fatal(err)
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			w.t.Fatal(err)
		}
		var objs []interface{}
		for _, item := range items {
			obj := item.DeepCopyObject()
			m, _ := meta.Accessor(obj)
			w.statusRV++
			m.SetResourceVersion(strconv.Itoa(w.statusRV)) // newer than anything remembered
			m.SetManagedFields(nil)
			objs = append(objs, obj)
		}
		if err := kind.indexer.Replace(objs, ""); err != nil {
			w.t.Fatal(err)
		}
	}
	for _, a := range apps {
		if got, _, _ := w.c.getApp(nameOf(a)); got != nil {
			got = got.DeepCopy()
			w.statusRV++
			got.ResourceVersion = strconv.Itoa(w.statusRV)
			w.addApps(got)
		}
	}
}

// settle syncs every App that has arrived until a whole round writes nothing.
func (w *arbitrationWorld) settle(arrived []*appv1.App) {
	w.t.Helper()
	for round := range 20 {
		writes := 0
		for _, a := range arrived {
			if err := w.sync(a.Namespace, a.Name); err != nil {
				w.t.Fatalf("sync %s: %v", a.Name, err)
			}
			for _, act := range w.writes() {
				if act.GetResource().Resource != "apps" {
					writes++
				}
			}
			w.refresh(arrived)
		}
		if writes == 0 {
			return
		}
		if round == 19 {
			w.t.Fatalf("no fixed point after 20 rounds: the Apps keep writing")
		}
	}
}

// TestArbitrationAnyEventOrder has four Apps claim the same Deployment name and arrive in
// every possible order, each arrival followed by the syncs its events cause until nothing
// changes. Whatever the order, the end is the same: the oldest App (ties broken by name)
// holds the one Deployment of that name, every other App reports NamesAccepted=False
// naming it, and a younger App that held the name first gave it up.
func TestArbitrationAnyEventOrder(t *testing.T) {
	t0 := testNow
	claimants := []*appv1.App{
		newApp("late-but-oldest", t0.Add(-time.Hour)),
		newApp("alpha", t0), newApp("bravo", t0), // same age: alpha wins over bravo
		newApp("young", t0.Add(time.Hour)),
	}
	for _, a := range claimants {
		a.Spec.DeploymentTemplate.Name = "shared"
	}
	for _, p := range permutations(len(claimants)) {
		names := make([]string, len(p))
		for i, j := range p {
			names[i] = claimants[j].Name
		}
		t.Run(strings.Join(names, ","), func(t *testing.T) {
			w := &arbitrationWorld{fixture: newFixture(t)}
			var arrived []*appv1.App
			for _, j := range p {
				a := claimants[j].DeepCopy()
				arrived = append(arrived, a)
				w.addApps(a)
				w.settle(arrived)
			}

			gvr := appsv1.SchemeGroupVersion.WithResource("deployments")
			obj, err := w.kubeClient.Tracker().Get(gvr, "tcs", "shared")
			if err != nil {
				t.Fatalf("Deployment shared: %v", err)
			}
			if ref := metav1.GetControllerOf(obj.(*appsv1.Deployment)); ref == nil || ref.Name != "late-but-oldest" {
				t.Errorf("Deployment shared controlled by %+v, want late-but-oldest", ref)
			}
			for _, a := range arrived {
				got, _, _ := w.c.getApp(nameOf(a))
				c := meta.FindStatusCondition(got.Status.Conditions, appv1.ConditionNamesAccepted)
				want := metav1.ConditionFalse
				if a.Name == "late-but-oldest" {
					want = metav1.ConditionTrue
				}
				if c == nil || c.Status != want {
					t.Errorf("App %s NamesAccepted = %+v, want %s", a.Name, c, want)
					continue
				}
				if want == metav1.ConditionFalse && !strings.Contains(c.Message, fmt.Sprintf("%q", "late-but-oldest")) {
					t.Errorf("App %s NamesAccepted message %q, want the winner named", a.Name, c.Message)
				}
			}
		})
	}
}

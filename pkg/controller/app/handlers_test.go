package app

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
	"github.com/app-controller/app-controller/pkg/controller/controllertest"
)

// queued drains the controller's queue and returns the keys it held.
func queued(c *Controller) sets.Set[string] {
	return sets.New(controllertest.DrainQueue(c.loop.Queue())...)
}

func TestChildHandlers(t *testing.T) {
	owner := newApp("owner", time.Now())
	claimant := newApp("claimant", time.Now().Add(time.Minute))
	claimant.Spec.DeploymentTemplate.Name = "owner-deploy" // also claims the owner's Deployment name
	recreated := newApp("owner", time.Now())
	recreated.UID = "other-uid"

	owned := func(rv string) *appsv1.Deployment {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{
			Namespace: "tcs", Name: "owner-deploy", ResourceVersion: rv, UID: "d-uid",
			OwnerReferences: controlledBy(owner),
		}}
		return d
	}
	orphan := owned("2")
	orphan.OwnerReferences = nil

	tests := []struct {
		name    string
		apps    []*appv1.App
		managed bool
		event   func(h cache.ResourceEventHandler)
		want    []string
	}{
		{
			name: "add of an owned child queues its App and the Apps claiming its name",
			apps: []*appv1.App{owner, claimant}, managed: true,
			event: func(h cache.ResourceEventHandler) { h.OnAdd(owned("1"), false) },
			want:  []string{"tcs/owner", "tcs/claimant"},
		},
		{
			name: "update of an owned child queues its App only",
			apps: []*appv1.App{owner, claimant}, managed: true,
			event: func(h cache.ResourceEventHandler) { h.OnUpdate(owned("1"), owned("2")) },
			want:  []string{"tcs/owner"},
		},
		{
			name: "periodic resync is skipped",
			apps: []*appv1.App{owner, claimant}, managed: true,
			event: func(h cache.ResourceEventHandler) { h.OnUpdate(owned("1"), owned("1")) },
		},
		{
			name: "controller removed: old owner and claimants queued",
			apps: []*appv1.App{owner, claimant}, managed: true,
			event: func(h cache.ResourceEventHandler) { h.OnUpdate(owned("1"), orphan) },
			want:  []string{"tcs/owner", "tcs/claimant"},
		},
		{
			name: "tombstone of a deleted child is unwrapped",
			apps: []*appv1.App{owner}, managed: true,
			event: func(h cache.ResourceEventHandler) {
				h.OnDelete(cache.DeletedFinalStateUnknown{Key: "tcs/owner-deploy", Obj: owned("1")})
			},
			want: []string{"tcs/owner"},
		},
		{
			name: "owner recreated with another UID: the new App is not the owner",
			apps: []*appv1.App{recreated}, managed: true,
			event: func(h cache.ResourceEventHandler) { h.OnUpdate(owned("1"), owned("2")) },
		},
		{
			name: "delete of an unmanaged object frees the name for its claimants",
			apps: []*appv1.App{owner, claimant}, managed: false,
			event: func(h cache.ResourceEventHandler) {
				h.OnDelete(unmanaged("Deployment", "owner-deploy"))
			},
			want: []string{"tcs/owner", "tcs/claimant"},
		},
		{
			name: "update of an unmanaged object is ignored",
			apps: []*appv1.App{owner, claimant}, managed: false,
			event: func(h cache.ResourceEventHandler) {
				old, cur := unmanaged("Deployment", "owner-deploy"), unmanaged("Deployment", "owner-deploy")
				old.ResourceVersion, cur.ResourceVersion = "1", "2"
				h.OnUpdate(old, cur)
			},
		},
		{
			name: "garbage in the cache is ignored",
			apps: []*appv1.App{owner}, managed: true,
			event: func(h cache.ResourceEventHandler) {
				h.OnAdd("not an object", false)
				h.OnDelete(cache.DeletedFinalStateUnknown{Key: "x", Obj: 42})
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.addApps(tc.apps...)
			var writes *controller.WriteCache
			if tc.managed {
				writes = f.c.deployments.managed
			}
			h := f.c.childHandler(klog.FromContext(f.ctx), "Deployment", writes)
			tc.event(h)
			if got, want := queued(f.c), sets.New(tc.want...); !got.Equal(want) {
				t.Errorf("queued %v, want %v", sets.List(got), sets.List(want))
			}
		})
	}
}

func TestAppHandlers(t *testing.T) {
	a := newApp("a", time.Now())
	b := newApp("b", time.Now().Add(time.Minute))
	b.Spec.ServiceTemplate.Name = "a-service"
	aRenamed := withRV(a, "2")
	aRenamed.Spec.ServiceTemplate = aRenamed.Spec.ServiceTemplate.DeepCopy()
	aRenamed.Spec.ServiceTemplate.Name = "a-service-2"
	aRenamed.Generation = 2

	f := newFixture(t)
	f.addApps(a, b)
	logger := klog.FromContext(f.ctx)

	f.c.addApp(logger, a)
	if got := queued(f.c); !got.Equal(sets.New("tcs/a")) {
		t.Errorf("add: queued %v", sets.List(got))
	}
	f.c.updateApp(logger, a, a)
	if got := queued(f.c); !got.Equal(sets.New("tcs/a")) {
		t.Errorf("resync: queued %v, want the App (the resync re-examines every App)", sets.List(got))
	}
	statusWritten := withRV(a, "3")
	statusWritten.Status.ObservedGeneration = 1
	f.c.updateApp(logger, a, statusWritten)
	if got := queued(f.c); got.Len() != 0 {
		t.Errorf("status-only update: queued %v, want nothing", sets.List(got))
	}
	relabelled := withRV(a, "4")
	relabelled.Labels = map[string]string{"team": "x"}
	f.c.updateApp(logger, a, relabelled)
	if got := queued(f.c); !got.Equal(sets.New("tcs/a", "tcs/b")) {
		t.Errorf("label change: queued %v, want the App and the other claimant of its names", sets.List(got))
	}
	f.c.updateApp(logger, a, aRenamed)
	if got := queued(f.c); !got.Equal(sets.New("tcs/a", "tcs/b")) {
		t.Errorf("rename: queued %v, want the App and the claimant of the freed name", sets.List(got))
	}
	f.c.deleteApp(logger, cache.DeletedFinalStateUnknown{Key: "tcs/a", Obj: a})
	if got := queued(f.c); !got.Equal(sets.New("tcs/a", "tcs/b")) {
		t.Errorf("delete: queued %v", sets.List(got))
	}
}

// TestResyncRepairsLostEvent: an App whose Deployment vanished without the controller
// seeing the event (a missed watch event, a write that failed unseen) is repaired by the
// next resync, which queues every App, not only those whose retries ran out.
func TestResyncRepairsLostEvent(t *testing.T) {
	app := syncedApp(t, newApp("lost", time.Now().Add(-time.Hour)))
	f := newFixture(t)
	f.addApps(app)
	f.addServices(liveService(t, app)) // the Deployment is gone, and no event said so
	f.c.updateApp(klog.FromContext(f.ctx), app, app)
	if got := queued(f.c); !got.Equal(sets.New("tcs/lost")) {
		t.Fatalf("resync queued %v, want the App", sets.List(got))
	}
	f.mustSync("lost")
	var got []action
	for _, a := range f.writes() {
		got = append(got, describe(a))
	}
	if len(got) == 0 || got[0] != (action{"patch", "deployments", "", "lost-deploy"}) {
		t.Errorf("writes %v, want the Deployment re-created first", got)
	}
}

// TestDeleteEventForgetsOwnWrite: the deletion of a child the controller has just
// written is known to its cache before the App is queued, so the sync it causes creates
// the child again rather than trusting the own write.
func TestDeleteEventForgetsOwnWrite(t *testing.T) {
	app := newApp("gone", time.Now())
	f := newFixture(t)
	f.addApps(app)
	if err := f.syncOnce("tcs", "gone"); err != nil {
		t.Fatal(err)
	}
	key := "tcs/gone-deploy"
	if _, exists, _ := f.c.deployments.managed.GetByKey(key); !exists {
		t.Fatalf("the Deployment just created is not in the cache")
	}
	h := f.c.childHandler(klog.FromContext(f.ctx), "Deployment", f.c.deployments.managed)
	d := liveDeployment(t, app)
	d.OwnerReferences = controlledBy(app)
	h.OnDelete(d)
	if _, exists, _ := f.c.deployments.managed.GetByKey(key); exists {
		t.Errorf("the deleted Deployment is still in the cache after its delete event")
	}
	if got := queued(f.c); !got.Has("tcs/gone") {
		t.Errorf("delete queued %v, want the App", sets.List(got))
	}
}

// TestEchoOfOwnWriteQueuesNothing: the informer's delivery of the Deployment the
// controller just wrote (the same resourceVersion as the API server's answer) queues no
// sync of its App, which saw that object in the answer; a later version of it (the
// deployment controller's status) does.
func TestEchoOfOwnWriteQueuesNothing(t *testing.T) {
	app := newApp("web", time.Now())
	f := newFixture(t)
	f.addApps(app)
	d := func(rv string) *appsv1.Deployment {
		d := liveDeployment(t, app)
		d.OwnerReferences = controlledBy(app)
		d.ResourceVersion = rv
		return d
	}
	h := f.c.childHandler(klog.FromContext(f.ctx), "Deployment", f.c.deployments.managed)
	queued(f.c)                              // drain the App's own add
	f.c.deployments.managed.Mutation(d("5")) // the sync's apply, answered with resourceVersion 5
	h.OnAdd(d("5"), false)
	if got := queued(f.c); got.Len() != 0 {
		t.Errorf("the echo of the own create queued %v, want nothing", sets.List(got))
	}
	later := d("6")
	later.Status.ObservedGeneration = 1
	h.OnUpdate(d("5"), later)
	if got := queued(f.c); !got.Has("tcs/web") {
		t.Errorf("the deployment controller's status update queued %v, want the App", sets.List(got))
	}
	h.OnAdd(d("7"), false) // an add the controller did not write (a relist, say)
	if got := queued(f.c); !got.Has("tcs/web") {
		t.Errorf("an add that is no echo queued %v, want the App", sets.List(got))
	}
}

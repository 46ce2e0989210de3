package app

import (
	"fmt"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller/controllertest"
)

// world drives one App through the events a real cluster delivers, on a fixture whose
// informers never run: the test says when the informers catch up and what the
// deployment controller reports, and runs the syncs the queue would run. It counts every
// write of the controller (API writes and Events) and checks what kstatus reads from the
// App after each step.
type world struct {
	t   *testing.T
	f   *fixture
	key cache.ObjectName
	// writes are the writes made so far, as "verb resource[/subresource]".
	writes []string
	events []string
	// statusWrites counts the App status writes.
	statusWrites int
	rv           int
}

func newWorld(t *testing.T, f *fixture, app *appv1.App) *world {
	return &world{t: t, f: f, key: nameOf(app), rv: 100}
}

// sync runs one sync, as a queued key does, and records its writes and Events.
func (w *world) sync() {
	w.t.Helper()
	if err := w.f.syncOnce(w.key.Namespace, w.key.Name); err != nil {
		w.t.Fatalf("syncApp: %v", err)
	}
	for _, a := range w.f.writes() {
		d := describe(a)
		s := d.verb + " " + d.resource
		if d.subresource != "" {
			s += "/" + d.subresource
			w.statusWrites++
		}
		w.writes = append(w.writes, s)
	}
	w.events = append(w.events, w.f.events()...)
}

// at moves the fake clock to t0+d.
func (w *world) at(d time.Duration) {
	w.f.clock.SetTime(testNow.Add(d))
}

// informersCatchUp delivers what the API server holds to the child caches.
func (w *world) informersCatchUp() { w.f.catchUp() }

// deploymentReports sets the status the deployment controller reports for the App's
// Deployment: replicas updated, of which available are available; Available=True when
// every desired replica is.
func (w *world) deploymentReports(name string, updated, available int32) {
	w.t.Helper()
	d := w.trackedDeployment(name)
	desired := ptr.Deref(d.Spec.Replicas, 1)
	cond := corev1.ConditionFalse
	if available >= desired {
		cond = corev1.ConditionTrue
	}
	w.deploymentStatus(d, appsv1.DeploymentStatus{
		ObservedGeneration: d.Generation, Replicas: updated, UpdatedReplicas: updated,
		ReadyReplicas: available, AvailableReplicas: available, UnavailableReplicas: desired - available,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: cond, Reason: "MinimumReplicasAvailable"},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "ReplicaSetUpdated"},
		},
	})
}

// trackedDeployment returns a copy of the Deployment name as the fake API server holds
// it.
func (w *world) trackedDeployment(name string) *appsv1.Deployment {
	w.t.Helper()
	obj, err := w.f.kubeClient.Tracker().Get(appsv1.SchemeGroupVersion.WithResource("deployments"), w.key.Namespace, name)
	if err != nil {
		w.t.Fatalf("getting Deployment %s: %v", name, err)
	}
	return obj.(*appsv1.Deployment).DeepCopy()
}

// deploymentStatus gives d the status st in the fake API server and the cache, with a
// new resourceVersion, as the deployment controller's write arrives.
func (w *world) deploymentStatus(d *appsv1.Deployment, st appsv1.DeploymentStatus) {
	w.t.Helper()
	w.rv++
	d.ResourceVersion = fmt.Sprint(w.rv)
	d.Status = st
	if err := w.f.kubeClient.Tracker().Update(appsv1.SchemeGroupVersion.WithResource("deployments"), d, w.key.Namespace); err != nil {
		w.t.Fatalf("updating Deployment %s: %v", d.Name, err)
	}
	if err := w.f.inf.Deployments.Informer().GetIndexer().Update(d); err != nil {
		w.t.Fatal(err)
	}
}

// app returns the App as the controller sees it (its own status writes included).
func (w *world) app() *appv1.App {
	w.t.Helper()
	app, exists, err := w.f.c.getApp(w.key)
	if err != nil || !exists {
		w.t.Fatalf("App %s: exists %v, err %v", w.key, exists, err)
	}
	return app
}

// kstatus computes the App's status as kstatus-based tools (Flux, Argo CD) do.
func (w *world) kstatus() kstatus.Status {
	w.t.Helper()
	return controllertest.KStatus(w.t, w.app())
}

// expectKStatus fails unless kstatus reads want.
func (w *world) expectKStatus(step string, want kstatus.Status) {
	w.t.Helper()
	if got := w.kstatus(); got != want {
		w.t.Errorf("%s: kstatus %s, want %s (conditions %+v)", step, got, want, w.app().Status.Conditions)
	}
}

// total is every write so far, Events included.
func (w *world) total() int { return len(w.writes) + len(w.events) }

// newAPIApp returns an App as the API server holds it right after its creation: the
// schema's status default observedGeneration -1 applied.
func newAPIApp(name string, replicas int32) *appv1.App {
	app := newApp(name, testNow.Add(-time.Hour))
	app.Spec.DeploymentTemplate.Replicas = ptr.To(replicas)
	app.Status.ObservedGeneration = -1
	return app
}

// TestWritesCreateToReady pins the writes an App costs from its creation to Ready: the
// Deployment, the Service, the Synced Event, the first revision of its spec and one
// status write when the children settle within the coalescing window, whatever the
// replica count, with a canary strategy or without (its first rollout state rides on
// that status write); and kstatus reads InProgress until the App is Ready.
func TestWritesCreateToReady(t *testing.T) {
	for _, tc := range []struct {
		replicas int32
		canary   bool
	}{{1, false}, {3, false}, {1, true}, {3, true}} {
		replicas := tc.replicas
		name := fmt.Sprintf("replicas %d", replicas)
		if tc.canary {
			name += ", canary strategy"
		}
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			app := newAPIApp("fast", replicas)
			if tc.canary {
				app.Spec.Rollout = &appv1.Rollout{Canary: canaryStrategy()}
			}
			f.addApps(app)
			w := newWorld(t, f, app)
			deploy := app.Spec.DeploymentTemplate.Name

			w.at(0)
			w.sync() // the App's add event
			w.expectKStatus("children created", kstatus.InProgressStatus)
			w.at(50 * time.Millisecond)
			w.sync() // the Deployment's add event: the informer has not delivered the Service yet
			w.informersCatchUp()
			w.sync() // the Service's add event
			for i := int32(1); i <= replicas; i++ {
				w.at(time.Duration(100+100*i) * time.Millisecond)
				w.deploymentReports(deploy, i, i-1)
				w.sync()
				w.expectKStatus(fmt.Sprintf("%d of %d replicas", i-1, replicas), kstatus.InProgressStatus)
				w.deploymentReports(deploy, i, i)
				w.sync()
				if i < replicas {
					w.expectKStatus(fmt.Sprintf("%d of %d replicas", i, replicas), kstatus.InProgressStatus)
					if w.statusWrites != 0 {
						t.Errorf("status written %d times before the App was Ready or the window ended", w.statusWrites)
					}
				}
			}
			// Ready is written at once (a condition changed): the one status write.
			w.expectKStatus("Ready", kstatus.CurrentStatus)
			w.at(StatusCoalesceWindow)
			w.sync() // queued by the Result's RequeueAfter when the status was first held back: nothing left
			w.expectKStatus("Ready", kstatus.CurrentStatus)

			// The status write comes back as an App update: status only, so updateApp
			// does not queue it (TestAppHandlers; the queue itself may hold the key
			// already, from the held-back write's RequeueAfter, in real time).
			if !statusOnly(app, w.app()) {
				t.Errorf("the App's own status write is not seen as a status-only update")
			}
			w.at(StatusCoalesceWindow + 30*time.Second)
			w.sync() // a resync: nothing to do

			// The seed's four (children, Event, status) and the App's first revision.
			wantWrites := []string{"patch deployments", "patch services", "create controllerrevisions", "patch apps/status"}
			if !sameMultiset(w.writes, wantWrites) {
				t.Errorf("writes %q, want %q", w.writes, wantWrites)
			}
			if want := []string{"Normal Synced App synced successfully"}; !equalStrings(w.events, want) {
				t.Errorf("events %q, want %q", w.events, want)
			}
			if w.total() != 5 {
				t.Errorf("%d writes including Events from creation to Ready, want 5", w.total())
			}
			if r := w.app().Status.Rollout; tc.canary && (r == nil || r.Phase != appv1.RolloutHealthy || r.Stable == nil || r.Canary != nil ||
				r.Stable.Revision != w.app().Status.CurrentRevision) {
				t.Errorf("rollout %+v, want Healthy on the current revision %s", r, w.app().Status.CurrentRevision)
			}
		})
	}
}

// TestWritesSlowRollout checks that a rollout slower than the coalescing window shows
// Progressing within the window, writes intermediate counts at most once per
// StatusProgressWindow, and Ready at once.
func TestWritesSlowRollout(t *testing.T) {
	w, deploy := rollingOut(t, "slow")
	if w.statusWrites != 1 || condition(w.app(), appv1.ConditionProgressing) != "True/RollingOut" {
		t.Fatalf("after one window: %d status writes, Progressing %s; want 1, True/RollingOut", w.statusWrites, condition(w.app(), appv1.ConditionProgressing))
	}
	w.expectKStatus("rolling out", kstatus.InProgressStatus)

	// Counts change every 300ms: written at most once per window.
	for i, step := range []struct{ updated, available int32 }{{1, 0}, {1, 1}, {2, 1}, {2, 2}, {3, 2}} {
		w.at(StatusCoalesceWindow + time.Duration(i+1)*300*time.Millisecond)
		w.deploymentReports(deploy, step.updated, step.available)
		w.sync()
		w.expectKStatus(fmt.Sprintf("step %d", i), kstatus.InProgressStatus)
	}
	// At 2.5 s: the counts are held back (since 1.3 s, for StatusProgressWindow).
	if w.statusWrites != 1 {
		t.Errorf("%d status writes during the rollout, want 1 (Progressing; the counts held back)", w.statusWrites)
	}
	w.at(2600 * time.Millisecond)
	w.deploymentReports(deploy, 3, 3)
	w.sync() // Ready: a condition changes, written at once
	w.expectKStatus("Ready", kstatus.CurrentStatus)
	if w.statusWrites != 2 {
		t.Errorf("%d status writes, want 2", w.statusWrites)
	}
	if w.f.c.statusPending.pending(w.key) {
		t.Errorf("a status write is still held back after Ready")
	}
}

// rollingOut returns a world whose new App of 3 replicas, named name, is rolling out:
// created, its Deployment seen, and Progressing written after StatusCoalesceWindow; and
// the Deployment's name.
func rollingOut(t *testing.T, name string) (*world, string) {
	t.Helper()
	w, app := createdWorld(t, name, 3)
	w.at(StatusCoalesceWindow)
	w.sync() // the held-back write: Progressing
	return w, app.Spec.DeploymentTemplate.Name
}

// createdWorld returns a world whose new App of replicas, named name, was created at 0
// and synced twice: its children written, then seen by the informers.
func createdWorld(t *testing.T, name string, replicas int32) (*world, *appv1.App) {
	t.Helper()
	f := newFixture(t)
	app := newAPIApp(name, replicas)
	f.addApps(app)
	w := newWorld(t, f, app)
	w.at(0)
	w.sync()
	w.informersCatchUp()
	w.sync()
	return w, app
}

// TestWritesLongRollout checks that a rollout longer than StatusProgressWindow writes
// its counts once per window, and that app_controller_status_writes_total tells those
// writes (progress) from the others (change).
func TestWritesLongRollout(t *testing.T) {
	change, progress := counterValue(t, statusWrites, statusWriteChange), counterValue(t, statusWrites, statusWriteProgress)
	w, deploy := rollingOut(t, "long")
	// The counts move at 2 s, 20 s and 32 s: held back from 2 s, written at 32 s.
	for _, step := range []struct {
		at                 time.Duration
		updated, available int32
		wantWrites         int
	}{{2 * time.Second, 1, 0, 1}, {20 * time.Second, 2, 1, 1}, {2*time.Second + StatusProgressWindow, 3, 2, 2}} {
		w.at(step.at)
		w.deploymentReports(deploy, step.updated, step.available)
		w.sync()
		if w.statusWrites != step.wantWrites {
			t.Errorf("at %v: %d status writes, want %d", step.at, w.statusWrites, step.wantWrites)
		}
	}
	if got := w.app().Status.DeploymentStatus; got == nil || got.UpdatedReplicas != 3 || got.AvailableReplicas != 2 {
		t.Errorf("status.deploymentStatus %+v after the progress write, want 3 updated, 2 available", got)
	}
	w.at(40 * time.Second)
	w.deploymentReports(deploy, 3, 3)
	w.sync() // Ready
	if w.statusWrites != 3 {
		t.Errorf("%d status writes, want 3 (Progressing, the counts at 32 s, Ready)", w.statusWrites)
	}
	if got := counterValue(t, statusWrites, statusWriteChange) - change; got != 2 {
		t.Errorf("app_controller_status_writes_total{cause=change} +%v, want +2", got)
	}
	if got := counterValue(t, statusWrites, statusWriteProgress) - progress; got != 1 {
		t.Errorf("app_controller_status_writes_total{cause=progress} +%v, want +1", got)
	}
}

// TestHeldBackStatusRequeues checks that a sync holding a status write back asks, in
// its Result, to run again when the window ends, and that one writing it asks nothing.
func TestHeldBackStatusRequeues(t *testing.T) {
	f := newFixture(t)
	app := newAPIApp("held", 1)
	f.addApps(app)
	if err := f.syncOnce(app.Namespace, app.Name); err != nil {
		t.Fatalf("syncApp: %v", err)
	}
	if want := []time.Duration{StatusCoalesceWindow}; !slices.Equal(f.requeues, want) {
		t.Errorf("requeues after the first sync = %v, want %v", f.requeues, want)
	}
	f.requeues = nil
	f.step(StatusCoalesceWindow)
	if err := f.syncOnce(app.Namespace, app.Name); err != nil {
		t.Fatalf("syncApp: %v", err)
	}
	if f.c.statusPending.pending(nameOf(app)) || len(f.requeues) != 0 {
		t.Errorf("after the window: pending %v, requeues %v; want the status written and no requeue",
			f.c.statusPending.pending(nameOf(app)), f.requeues)
	}
}

// TestWritesSteadyState pins the writes of an App that is up to date (resync, restart),
// of an image change and of a repair of its Deployment.
func TestWritesSteadyState(t *testing.T) {
	tests := []struct {
		name string
		// change alters the world of a Ready App; nil: nothing changes.
		change func(t *testing.T, f *fixture, app *appv1.App) *appv1.App
		// rollOut reports the Deployment rolled out again before the window ends.
		rollOut    bool
		wantWrites []string
		wantEvents int
	}{
		{name: "idle resync", wantWrites: nil},
		{
			name: "restart: a new controller with everything up to date",
			change: func(t *testing.T, f *fixture, app *appv1.App) *appv1.App {
				f.step(time.Hour) // restarted much later: no transition time may move
				return app
			},
		},
		{
			name: "image change",
			change: func(t *testing.T, f *fixture, app *appv1.App) *appv1.App {
				app = app.DeepCopy()
				app.Spec.DeploymentTemplate.Image = "nginx:2"
				app.Generation = 2
				app.ResourceVersion = "2"
				f.addApps(app)
				return app
			},
			// The fake API server does not bump the Deployment's generation: it reads
			// rolled out at once, so Ready at generation 2 is written at once.
			wantWrites: []string{"patch deployments", "create controllerrevisions", "patch apps/status"},
			wantEvents: 1,
		},
		{
			name:       "the Deployment's status details change while Ready: one coalesced write",
			rollOut:    true,
			wantWrites: []string{"patch apps/status"},
		},
		{
			name: "Deployment scaled by hand: repaired",
			change: func(t *testing.T, f *fixture, app *appv1.App) *appv1.App {
				d := liveDeployment(t, app)
				d.Spec.Replicas = ptr.To[int32](5)
				d.ResourceVersion = "12"
				if err := f.kubeClient.Tracker().Update(appsv1.SchemeGroupVersion.WithResource("deployments"), d, d.Namespace); err != nil {
					t.Fatal(err)
				}
				if err := f.inf.Deployments.Informer().GetIndexer().Update(d); err != nil {
					t.Fatal(err)
				}
				return app
			},
			wantWrites: []string{"patch deployments"},
			wantEvents: 1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// A Ready App, its status written by an earlier controller.
			app := syncedApp(t, newApp("steady", testNow.Add(-time.Hour)))
			f := newFixture(t)
			f.addApps(app)
			f.addDeployments(liveDeployment(t, app))
			f.addServices(liveService(t, app))
			if tc.change != nil {
				app = tc.change(t, f, app)
			}
			w := newWorld(t, f, app)
			f.c.updateApp(klog.FromContext(f.ctx), app, app) // a resync queues it
			if got := queued(f.c); got.Len() != 1 {
				t.Errorf("resync queued %v, want the App", got.UnsortedList())
			}
			w.sync()
			w.informersCatchUp()
			if tc.rollOut {
				w.deploymentReports(app.Spec.DeploymentTemplate.Name, 2, 2)
				w.sync()
				if w.statusWrites != 0 {
					t.Errorf("a change of status details only was written at once")
				}
			}
			w.f.step(StatusCoalesceWindow)
			w.sync()
			if !sameMultiset(w.writes, tc.wantWrites) {
				t.Errorf("writes %q, want %q", w.writes, tc.wantWrites)
			}
			if len(w.events) != tc.wantEvents {
				t.Errorf("events %q, want %d", w.events, tc.wantEvents)
			}
			w.expectKStatus("after", kstatus.CurrentStatus)
		})
	}
}

// sameMultiset reports whether a and b hold the same strings, in any order.
func sameMultiset(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	count := map[string]int{}
	for _, s := range a {
		count[s]++
	}
	for _, s := range b {
		count[s]--
		if count[s] < 0 {
			return false
		}
	}
	return true
}

// condition returns the "Status/Reason" of app's condition of type t, or "".
func condition(app *appv1.App, t string) string {
	for _, c := range app.Status.Conditions {
		if c.Type == t {
			return string(c.Status) + "/" + c.Reason
		}
	}
	return ""
}

// TestWritesConfigRollout pins what a change of a ConfigMap its pods reference costs a
// Ready App: the Deployment (its pod template's config hash), the Synced Event, and the
// status twice (Progressing when the rollout starts, Ready when it ends), at replicas 1
// and 3. No revision: the App's spec did not change.
func TestWritesConfigRollout(t *testing.T) {
	for _, replicas := range []int32{1, 3} {
		t.Run(fmt.Sprintf("replicas %d", replicas), func(t *testing.T) {
			app := configApp("cfg")
			app.Spec.DeploymentTemplate.Replicas = ptr.To(replicas)
			f := createdWithConfig(t, app)
			w := newWorld(t, f, app)
			deploy := app.Spec.DeploymentTemplate.Name
			w.at(0)
			w.deploymentReports(deploy, replicas, replicas)
			w.sync()
			w.at(StatusCoalesceWindow)
			w.sync()
			w.expectKStatus("Ready before the change", kstatus.CurrentStatus)
			w.writes, w.events, w.statusWrites = nil, nil, 0

			start := time.Minute
			w.at(start)
			f.setConfig(configObject("ConfigMap", "settings", "10"))
			w.sync() // the pods roll
			w.informersCatchUp()
			w.deploymentReports(deploy, 0, replicas) // the new ReplicaSet starts
			w.sync()
			w.expectKStatus("rolling out", kstatus.InProgressStatus)
			for i := int32(1); i <= replicas; i++ {
				w.at(start + time.Duration(i)*200*time.Millisecond)
				w.deploymentReports(deploy, i, replicas)
				w.sync()
			}
			w.expectKStatus("Ready after the rollout", kstatus.CurrentStatus)
			w.at(start + 2*StatusCoalesceWindow)
			w.sync()

			want := []string{"patch deployments", "patch apps/status", "patch apps/status"}
			if !sameMultiset(w.writes, want) {
				t.Errorf("writes %q, want %q", w.writes, want)
			}
			if want := []string{"Normal Synced App synced successfully"}; !equalStrings(w.events, want) {
				t.Errorf("events %q, want %q", w.events, want)
			}
		})
	}
}

package app

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	core "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// action describes an expected write: verb, resource, subresource and name.
type action struct {
	verb, resource, subresource, name string
}

func describe(a core.Action) action {
	out := action{verb: a.GetVerb(), resource: a.GetResource().Resource, subresource: a.GetSubresource()}
	switch t := a.(type) {
	case core.PatchAction:
		out.name = t.GetName()
	case core.DeleteAction:
		out.name = t.GetName()
	case core.CreateAction:
		if m, err := meta.Accessor(t.GetObject()); err == nil {
			out.name = m.GetName()
		}
	}
	if out.resource == "controllerrevisions" {
		// NAME-HASH: the hash of the spec is not what a test checks.
		if i := strings.LastIndexByte(out.name, '-'); i > 0 {
			out.name = out.name[:i] + "-<rev>"
		}
	}
	return out
}

func TestSyncApp(t *testing.T) {
	older := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	newer := older.Add(time.Hour)

	readyStatus := syncedApp

	tests := []struct {
		name string
		// setup seeds the caches and returns the App to sync.
		setup          func(t *testing.T, f *fixture) *appv1.App
		wantWrites     []action
		wantEvents     []string
		wantConditions map[string]string // type -> "Status/Reason"
		check          func(t *testing.T, f *fixture)
	}{
		{
			name: "new App: creates Deployment and Service, reports rollout",
			setup: func(t *testing.T, f *fixture) *appv1.App {
				app := newApp("test-app", older)
				f.addApps(app)
				return app
			},
			// The first revision of the App's spec is the one write beyond the seed's.
			wantWrites: []action{
				{"patch", "deployments", "", "test-app-deploy"},
				{"patch", "services", "", "test-app-service"},
				{"create", "controllerrevisions", "", "test-app-<rev>"},
				{"patch", "apps", "status", "test-app"},
			},
			wantEvents: []string{"Normal Synced App synced successfully"},
			wantConditions: map[string]string{
				appv1.ConditionReady: "False/RollingOut", appv1.ConditionProgressing: "True/RollingOut",
				appv1.ConditionReconciling: "True/RollingOut", appv1.ConditionNamesAccepted: "True/NoConflicts",
			},
			check: func(t *testing.T, f *fixture) {
				// Creation must not take over fields of an object a stale cache hides.
				for _, a := range f.kubeClient.Actions() {
					if p, ok := a.(core.PatchActionImpl); ok && p.PatchOptions.Force != nil && *p.PatchOptions.Force {
						t.Errorf("create path applied %s with force", p.Name)
					}
				}
			},
		},
		{
			name: "children rolled out: Ready, and only the status is written",
			setup: func(t *testing.T, f *fixture) *appv1.App {
				app := newApp("test-app", older)
				f.addApps(app)
				f.addDeployments(liveDeployment(t, app))
				f.addServices(liveService(t, app))
				return app
			},
			wantWrites: []action{{"create", "controllerrevisions", "", "test-app-<rev>"}, {"patch", "apps", "status", "test-app"}},
			wantConditions: map[string]string{
				appv1.ConditionReady: "True/Available", appv1.ConditionProgressing: "False/RolloutComplete", appv1.ConditionNamesAccepted: "True/NoConflicts",
				appv1.ConditionReconciling: "", appv1.ConditionStalled: "",
			},
		},
		{
			name: "nothing changed: no write at all, no event",
			setup: func(t *testing.T, f *fixture) *appv1.App {
				app := readyStatus(t, newApp("test-app", older))
				f.addApps(app)
				f.addDeployments(liveDeployment(t, app))
				f.addServices(liveService(t, app))
				return app
			},
			wantWrites: nil,
			wantConditions: map[string]string{
				appv1.ConditionReady: "True/Available",
			},
		},
		{
			name: "scaled Deployment: put back with force",
			setup: func(t *testing.T, f *fixture) *appv1.App {
				app := readyStatus(t, newApp("test-app", older))
				f.addApps(app)
				f.addScaledChildren(t, app, 5)
				return app
			},
			// The fake API server does not bump the generation, so the status stays.
			wantWrites: []action{{"patch", "deployments", "", "test-app-deploy"}},
			wantEvents: []string{"Normal Synced App synced successfully"},
			check: func(t *testing.T, f *fixture) {
				p := f.kubeClient.Actions()[0].(core.PatchActionImpl)
				if p.PatchOptions.Force == nil || !*p.PatchOptions.Force || p.PatchOptions.FieldManager != "app-controller" {
					t.Errorf("drift correction must apply with force as app-controller, got %+v", p.PatchOptions)
				}
			},
		},
		{
			name: "foreign Deployment holds the name: no write to it, conflict reported once",
			setup: func(t *testing.T, f *fixture) *appv1.App {
				app := newApp("test-app", older)
				f.addApps(app)
				f.addUnmanaged("Deployment", unmanaged("Deployment", "test-app-deploy"))
				return app
			},
			wantWrites: []action{
				{"patch", "services", "", "test-app-service"},
				{"create", "controllerrevisions", "", "test-app-<rev>"},
				{"patch", "apps", "status", "test-app"},
			},
			wantEvents: []string{
				`Warning ErrResourceExists Resource "test-app-deploy" already exists and is not managed by App`,
				"Normal Synced App synced successfully",
			},
			wantConditions: map[string]string{
				appv1.ConditionNamesAccepted: "False/NameConflict", appv1.ConditionReady: "False/NameConflict",
				appv1.ConditionStalled: "True/NameConflict", appv1.ConditionReconciling: "",
			},
		},
		{
			name: "managed Deployment controlled by another App: conflict names the holder",
			setup: func(t *testing.T, f *fixture) *appv1.App {
				app := newApp("test-app", older)
				other := newApp("other", newer)
				f.addApps(app)
				d := liveDeployment(t, app)
				d.OwnerReferences = controlledBy(other)
				f.addDeployments(d)
				f.addServices(liveService(t, app))
				return app
			},
			wantWrites: []action{{"create", "controllerrevisions", "", "test-app-<rev>"}, {"patch", "apps", "status", "test-app"}},
			wantEvents: []string{`Warning ErrResourceExists Resource "test-app-deploy" already exists and is not managed by App`},
			check: func(t *testing.T, f *fixture) {
				app, _, _ := f.c.getApp(nameOf(newApp("test-app", older)))
				c := meta.FindStatusCondition(app.Status.Conditions, appv1.ConditionNamesAccepted)
				if !strings.Contains(c.Message, `controlled by App "other"`) {
					t.Errorf("NamesAccepted message %q does not name the holder", c.Message)
				}
			},
		},
		{
			name: "two Apps claim one name: the younger waits and writes nothing to it",
			setup: func(t *testing.T, f *fixture) *appv1.App {
				old := newApp("old", older)
				young := newApp("young", newer)
				young.Spec.DeploymentTemplate.Name = old.Spec.DeploymentTemplate.Name
				f.addApps(old, young)
				return young
			},
			wantWrites: []action{{"create", "controllerrevisions", "", "young-<rev>"},
				{"patch", "services", "", "young-service"},
				{"patch", "apps", "status", "young"},
			},
			wantEvents: []string{
				`Warning ErrResourceExists Resource "old-deploy" already exists and is not managed by App`,
				"Normal Synced App synced successfully",
			},
			wantConditions: map[string]string{appv1.ConditionNamesAccepted: "False/NameConflict"},
		},
		{
			name: "the younger App holds a name the older claims: it gives the name up",
			setup: func(t *testing.T, f *fixture) *appv1.App {
				old := newApp("old", older)
				young := newApp("young", newer)
				old.Spec.DeploymentTemplate.Name = young.Spec.DeploymentTemplate.Name
				f.addApps(old, young)
				f.addDeployments(liveDeployment(t, young))
				f.addServices(liveService(t, young))
				return young
			},
			wantWrites: []action{{"create", "controllerrevisions", "", "young-<rev>"},
				{"delete", "deployments", "", "young-deploy"},
				{"patch", "apps", "status", "young"},
			},
			wantEvents: []string{
				`Normal Pruned Deleted Deployment "young-deploy": the name is claimed by older App old`,
				`Warning ErrResourceExists Resource "young-deploy" already exists and is not managed by App`,
				"Normal Synced App synced successfully",
			},
			wantConditions: map[string]string{appv1.ConditionNamesAccepted: "False/NameConflict"},
		},
		{
			name: "renamed Deployment: the old one is pruned, the new one created",
			setup: func(t *testing.T, f *fixture) *appv1.App {
				app := newApp("test-app", older)
				f.addDeployments(liveDeployment(t, app))
				f.addServices(liveService(t, app))
				app.Spec.DeploymentTemplate.Name = "renamed"
				app.Generation = 2
				f.addApps(app)
				return app
			},
			wantWrites: []action{{"create", "controllerrevisions", "", "test-app-<rev>"},
				{"delete", "deployments", "", "test-app-deploy"},
				{"patch", "deployments", "", "renamed"},
				{"patch", "apps", "status", "test-app"},
			},
			wantEvents: []string{
				`Normal Pruned Deleted Deployment "test-app-deploy": renamed in the App's spec`,
				"Normal Synced App synced successfully",
			},
		},
		{
			name: "removed serviceTemplate: the Service is pruned",
			setup: func(t *testing.T, f *fixture) *appv1.App {
				app := newApp("test-app", older)
				f.addDeployments(liveDeployment(t, app))
				f.addServices(liveService(t, app))
				app.Spec.ServiceTemplate = nil
				f.addApps(app)
				return app
			},
			wantWrites: []action{{"create", "controllerrevisions", "", "test-app-<rev>"},
				{"delete", "services", "", "test-app-service"},
				{"patch", "apps", "status", "test-app"},
			},
			wantEvents: []string{
				`Normal Pruned Deleted Service "test-app-service": removed from the App's spec`,
				"Normal Synced App synced successfully",
			},
		},
		{
			name: "App controls a child whose managed-by label was removed: label restored",
			setup: func(t *testing.T, f *fixture) *appv1.App {
				app := newApp("test-app", older)
				f.addApps(app)
				f.addUnmanaged("Deployment", unmanaged("Deployment", "test-app-deploy", controlledBy(app)...))
				f.addServices(liveService(t, app))
				return app
			},
			wantWrites: []action{{"create", "controllerrevisions", "", "test-app-<rev>"},
				{"patch", "deployments", "", "test-app-deploy"},
				{"patch", "apps", "status", "test-app"},
			},
			wantEvents: []string{"Normal Synced App synced successfully"},
		},
		{
			name: "App gone: nothing to do",
			setup: func(t *testing.T, f *fixture) *appv1.App {
				return newApp("gone", older)
			},
		},
		{
			name: "App being deleted: children left to the garbage collector",
			setup: func(t *testing.T, f *fixture) *appv1.App {
				app := newApp("test-app", older)
				app.DeletionTimestamp = ptr.To(metav1.NewTime(newer))
				f.addApps(app)
				return app
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			app := tc.setup(t, f)
			f.events() // drop events of the setup
			if err := f.sync(app.Namespace, app.Name); err != nil {
				t.Fatalf("syncApp: %v", err)
			}
			var got []action
			for _, a := range f.writes() {
				got = append(got, describe(a))
			}
			if !equalActions(got, tc.wantWrites) {
				t.Errorf("writes:\n got  %v\n want %v", got, tc.wantWrites)
			}
			if events := f.events(); !equalStrings(events, tc.wantEvents) {
				t.Errorf("events:\n got  %q\n want %q", events, tc.wantEvents)
			}
			if len(tc.wantConditions) > 0 {
				updated, _, _ := f.c.getApp(nameOf(app))
				for typ, want := range tc.wantConditions {
					got := ""
					if c := meta.FindStatusCondition(updated.Status.Conditions, typ); c != nil {
						got = string(c.Status) + "/" + c.Reason
					}
					if got != want {
						t.Errorf("condition %s = %q, want %q", typ, got, want)
					}
				}
			}
			if tc.check != nil {
				tc.check(t, f)
			}
		})
	}
}

// TestConflictEventOnlyOnce checks that a conflict already reported in the App's
// condition does not emit another Warning on the next sync.
func TestConflictEventOnlyOnce(t *testing.T) {
	f := newFixture(t)
	app := newApp("test-app", time.Now())
	f.addApps(app)
	f.addUnmanaged("Deployment", unmanaged("Deployment", "test-app-deploy"))
	f.addServices(liveService(t, app))
	f.mustSync("test-app")
	if got := f.events(); len(got) != 1 || !strings.HasPrefix(got[0], "Warning ErrResourceExists") {
		t.Fatalf("first sync events = %q, want one ErrResourceExists", got)
	}
	f.mustSync("test-app")
	if got := f.events(); len(got) != 0 {
		t.Errorf("second sync emitted %q, want nothing", got)
	}
	if got := f.writes(); len(got) != 0 {
		t.Errorf("second sync wrote %d times, want 0", len(got))
	}
}

// TestRetryBudget checks that an App failing maxRetries times in a row is reported in
// its conditions and a Warning Event, and is not requeued until a resync.
func TestRetryBudget(t *testing.T) {
	f := newFixture(t)
	app := newApp("test-app", time.Now())
	f.addApps(app)
	f.kubeClient.PrependReactor("patch", "deployments", func(core.Action) (bool, runtimeObject, error) {
		return true, nil, errBoom
	})
	key := nameOf(app)
	for i := 1; i <= MaxRetries; i++ {
		err := f.sync("tcs", "test-app")
		if err == nil {
			t.Fatalf("attempt %d: sync succeeded, want the injected error", i)
		}
		f.c.loop.HandleErr(f.ctx, key, err)
		if i < MaxRetries && f.c.loop.GaveUp(key) {
			t.Fatalf("attempt %d: exhausted too early", i)
		}
	}
	if !f.c.loop.GaveUp(key) {
		t.Fatal("App not marked exhausted after MaxRetries failures")
	}
	if n := f.c.loop.Queue().NumRequeues(key); n != 0 {
		t.Errorf("NumRequeues = %d after giving up, want 0 (forgotten)", n)
	}
	updated, _, _ := f.c.getApp(key)
	for _, typ := range []string{appv1.ConditionReady, appv1.ConditionStalled} {
		c := meta.FindStatusCondition(updated.Status.Conditions, typ)
		if c == nil || c.Reason != appv1.ReasonReconcileFailed || !strings.Contains(c.Message, errBoom.Error()) {
			t.Errorf("condition %s = %+v, want reason ReconcileFailed with the last error", typ, c)
		}
	}
	events := f.events()
	if !containsPrefix(events, "Warning SyncFailed") || !containsPrefix(events, "Warning ReconcileFailed") {
		t.Errorf("events %q, want SyncFailed and ReconcileFailed warnings", events)
	}

	// Its own status write does not requeue it; a resync does.
	f.c.updateApp(klog.FromContext(f.ctx), app, withRV(updated, "99"))
	if f.c.loop.Queue().Len() != 0 {
		t.Errorf("status-only update requeued an exhausted App")
	}
	f.c.updateApp(klog.FromContext(f.ctx), updated, updated)
	if f.c.loop.Queue().Len() != 1 {
		t.Errorf("resync did not requeue an exhausted App")
	}
}

// equalActions compares two lists of writes; the writes of different resources may come
// in any order (a sync writes its Deployment and its Service in parallel).
func equalActions(a, b []action) bool {
	if len(a) != len(b) {
		return false
	}
	byResource := func(x, y action) int { return strings.Compare(x.resource, y.resource) }
	a, b = slices.Clone(a), slices.Clone(b)
	slices.SortStableFunc(a, byResource)
	slices.SortStableFunc(b, byResource)
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func containsPrefix(list []string, prefix string) bool {
	for _, s := range list {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}

// TestUnsetReplicasLeftToTheDeployment checks that an App without replicas never writes
// the replica count of its Deployment: an autoscaler of the Deployment owns it.
func TestUnsetReplicasLeftToTheDeployment(t *testing.T) {
	f := newFixture(t)
	app := newApp("test-app", testNow)
	app.Spec.DeploymentTemplate.Replicas = nil
	f.addApps(app)
	d := liveDeployment(t, app)
	d.Spec.Replicas = ptr.To[int32](5) // set by a HorizontalPodAutoscaler of the Deployment
	d.Status.Replicas, d.Status.UpdatedReplicas, d.Status.ReadyReplicas, d.Status.AvailableReplicas = 5, 5, 5, 5
	f.addDeployments(d)
	f.addServices(liveService(t, app))
	f.mustSync("test-app")
	for _, w := range f.writes() {
		if w.GetResource().Resource == "deployments" {
			t.Errorf("the Deployment was written (%s): its replica count is not the App's", w.GetVerb())
		}
	}
	got, _, _ := f.c.getApp(nameOf(app))
	if c := meta.FindStatusCondition(got.Status.Conditions, appv1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Ready = %+v, want True with the autoscaled Deployment available", c)
	}
}

// TestNoCreateForDeletedApp: when an App is deleted, the garbage collector deletes its
// children, and their delete events can reach the controller before the App's: the sync
// they queue finds the App still cached. It reads the App from the API server before it
// creates anything, and creates nothing for an App that is gone; a repair of a live App
// and a resync cost no more than that one read, or none.
func TestNoCreateForDeletedApp(t *testing.T) {
	appGets := func(f *fixture) int {
		n := 0
		for _, a := range f.appClient.Actions() {
			if a.GetVerb() == "get" && a.GetResource().Resource == "apps" {
				n++
			}
		}
		return n
	}
	tests := []struct {
		name       string
		gone       bool
		deployment bool // the Deployment is still cached
		wantWrites []action
		wantGets   int
	}{
		{name: "deleted, children collected", gone: true, wantGets: 1},
		{name: "live, Deployment deleted: repaired", deployment: false,
			wantWrites: []action{{"patch", "deployments", "", "lost-deploy"}}, wantGets: 1},
		{name: "live, nothing missing: a resync reads nothing", deployment: true, wantGets: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			app := syncedApp(t, newApp("lost", testNow.Add(-time.Hour)))
			f := newFixture(t)
			f.addApps(app)
			if !tt.gone {
				f.addServices(liveService(t, app))
			}
			if tt.deployment {
				f.addDeployments(liveDeployment(t, app))
			}
			if tt.gone {
				// The revision went with the children.
				for _, obj := range f.inf.Revisions.Informer().GetIndexer().List() {
					if err := f.inf.Revisions.Informer().GetIndexer().Delete(obj); err != nil {
						t.Fatal(err)
					}
				}
			}
			f.appGone = tt.gone
			if err := f.syncOnce("tcs", "lost"); err != nil {
				t.Fatalf("sync: %v", err)
			}
			var got []action
			for _, a := range f.writes() {
				if d := describe(a); d.resource != "apps" || d.subresource != "status" {
					got = append(got, d)
				}
			}
			if !slices.Equal(got, tt.wantWrites) {
				t.Errorf("writes %v, want %v", got, tt.wantWrites)
			}
			if n := appGets(f); n != tt.wantGets {
				t.Errorf("%d reads of the App from the API server, want %d", n, tt.wantGets)
			}
			if tt.gone {
				if ev := f.events(); len(ev) != 0 {
					t.Errorf("events %q for an App that is gone, want none", ev)
				}
				if w := f.writes(); len(w) != 0 {
					t.Errorf("%d writes for an App that is gone, want 0", len(w))
				}
			}
		})
	}
}

// TestStatusWriteOfDeletedApp: the status write of an App deleted since the cache saw it
// fails with errAppGone, which ends the sync without an error, so the loop records no
// SyncFailed Event about an App that is gone (the soak's smoke saw one after an API
// server restart).
func TestStatusWriteOfDeletedApp(t *testing.T) {
	app := syncedApp(t, newApp("gone", testNow.Add(-time.Hour)))
	f := newFixture(t)
	f.addApps(app)
	f.appGone = true
	status := app.Status.DeepCopy()
	status.ObservedGeneration++
	err := f.c.writeStatus(f.ctx, app, status, statusWriteChange)
	if !errors.Is(err, errAppGone) {
		t.Fatalf("writeStatus: %v, want errAppGone", err)
	}
}

package app

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// revisionsInAPI returns the App's revisions the fake API server holds, by number.
func (f *fixture) revisionsInAPI() map[int64]*appsv1.ControllerRevision {
	f.t.Helper()
	list, err := f.kubeClient.Tracker().List(appsv1.SchemeGroupVersion.WithResource("controllerrevisions"), appsv1.SchemeGroupVersion.WithKind("ControllerRevision"), "tcs")
	if err != nil {
		f.t.Fatal(err)
	}
	items, _ := meta.ExtractList(list)
	out := map[int64]*appsv1.ControllerRevision{}
	for _, item := range items {
		r := item.(*appsv1.ControllerRevision)
		if _, dup := out[r.Revision]; dup {
			f.t.Errorf("two revisions numbered %d", r.Revision)
		}
		out[r.Revision] = r
	}
	return out
}

// changeSpec replaces the App's spec in the cache, as an update by a user does.
func (f *fixture) changeSpec(app *appv1.App, change func(*appv1.App)) *appv1.App {
	f.t.Helper()
	app = f.appNow(app.Name).DeepCopy()
	change(app)
	app.Generation++
	f.statusRV++ // resourceVersions grow, status writes' and others' alike
	app.ResourceVersion = fmt.Sprint(f.statusRV)
	if err := f.inf.Apps.Informer().GetIndexer().Update(app); err != nil {
		f.t.Fatal(err)
	}
	f.c.apps.Observed(app)
	return app
}

// imageOf returns the image recorded in a revision's data.
func imageOf(t *testing.T, r *appsv1.ControllerRevision) string {
	t.Helper()
	var data struct {
		Spec appv1.AppSpec `json:"spec"`
	}
	if err := json.Unmarshal(r.Data.Raw, &data); err != nil {
		t.Fatal(err)
	}
	return data.Spec.DeploymentTemplate.Image
}

func TestRevisions(t *testing.T) {
	f := newFixture(t)
	app := newApp("web", testNow.Add(-time.Hour))
	app.Annotations = map[string]string{appv1.ChangeCauseAnnotation: "first"}
	f.addApps(app)
	f.mustSync("web")
	f.catchUp()
	revs := f.revisionsInAPI()
	if len(revs) != 1 || revs[1] == nil || imageOf(t, revs[1]) != "nginx" || revs[1].Annotations[appv1.ChangeCauseAnnotation] != "first" {
		t.Fatalf("after creation: revisions %v, want revision 1 with the image and the change cause", revs)
	}
	if cur := f.appNow("web").Status.CurrentRevision; cur != revs[1].Name {
		t.Errorf("status.currentRevision = %q, want %q", cur, revs[1].Name)
	}
	if !controllerIs(revs[1], app) {
		t.Errorf("revision 1 is not controlled by the App: %+v", revs[1].OwnerReferences)
	}

	// release changes the image and the change cause, rolls the Deployment out and syncs,
	// which must write wantWrites (what names the change in a failure); it returns the
	// revisions then.
	release := func(what, image, cause string, wantWrites ...string) map[int64]*appsv1.ControllerRevision {
		t.Helper()
		f.changeSpec(app, func(a *appv1.App) {
			a.Spec.DeploymentTemplate.Image = image
			a.Annotations[appv1.ChangeCauseAnnotation] = cause
		})
		f.deploymentRolledOut("web-deploy")
		f.mustSync("web")
		if w := f.writeNames(); !sameMultiset(w, wantWrites) {
			t.Errorf("%s wrote %q", what, w)
		}
		f.catchUp()
		return f.revisionsInAPI()
	}

	// A new image: revision 2; the Deployment, the revision, the status and the Event.
	revs = release("a spec change", "nginx:2", "image nginx:2", "patch deployments", "create controllerrevisions", "patch apps/status")
	if len(revs) != 2 || imageOf(t, revs[2]) != "nginx:2" || revs[2].Annotations[appv1.ChangeCauseAnnotation] != "image nginx:2" {
		t.Fatalf("after the change: %v", revs)
	}
	if cur := f.appNow("web").Status.CurrentRevision; cur != revs[2].Name {
		t.Errorf("status.currentRevision = %q, want revision 2 %q", cur, revs[2].Name)
	}

	// A change of the change cause or of the history limit alone is no revision.
	f.changeSpec(app, func(a *appv1.App) { a.Spec.RevisionHistoryLimit = ptr.To[int32](5) })
	f.mustSync("web")
	if w := f.writeNames(); slices.Contains(w, "create controllerrevisions") {
		t.Errorf("a change of revisionHistoryLimit made a revision: %q", w)
	}
	f.catchUp()

	// Back to the first spec (a rollback): revision 1 becomes revision 3, no new object.
	revs = release("a rollback", "nginx", "rollback to 1", "patch deployments", "patch controllerrevisions", "patch apps/status")
	if len(revs) != 2 || revs[3] == nil || imageOf(t, revs[3]) != "nginx" || revs[3].Annotations[appv1.ChangeCauseAnnotation] != "rollback to 1" || revs[2] == nil {
		t.Fatalf("after the rollback: %v, want revisions 2 and 3 (the first, renumbered)", revs)
	}
	if cur := f.appNow("web").Status.CurrentRevision; cur != revs[3].Name {
		t.Errorf("status.currentRevision = %q, want %q", cur, revs[3].Name)
	}

	// Nothing changed, and a controller restart (a new controller on the same caches):
	// nothing written.
	f.mustSync("web")
	if w := f.writeNames(); len(w) != 0 {
		t.Errorf("idle sync wrote %q", w)
	}
}

func TestRevisionHistoryLimit(t *testing.T) {
	f := newFixture(t)
	app := newApp("web", testNow.Add(-time.Hour))
	app.Spec.RevisionHistoryLimit = ptr.To[int32](2)
	f.addApps(app)
	f.mustSync("web")
	f.catchUp()
	for i, image := range []string{"nginx:2", "nginx:3", "nginx:4"} {
		f.changeSpec(app, func(a *appv1.App) { a.Spec.DeploymentTemplate.Image = image })
		f.deploymentRolledOut("web-deploy")
		f.mustSync("web")
		want := []string{"patch deployments", "create controllerrevisions", "patch apps/status"}
		if i > 0 {
			want = append(want, "delete controllerrevisions") // the oldest beyond the limit of 2
		}
		if w := f.writeNames(); !sameMultiset(w, want) {
			t.Errorf("change %d wrote %q, want %q", i+2, w, want)
		}
		f.catchUp()
	}
	revs := f.revisionsInAPI()
	if len(revs) != 2 || revs[3] == nil || revs[4] == nil {
		t.Fatalf("revisions %v, want 3 and 4", revs)
	}

	// A revision beyond the limit at rest, as one a canary rollout kept (the sync that
	// ends a rollout still reads the rollout that needs it), goes at the next sync,
	// without a change of the spec (the soak found Apps over their limit for good).
	extra := revs[3].DeepCopy()
	extra.Name, extra.Revision, extra.ResourceVersion = "web-kept", 2, ""
	if err := f.kubeClient.Tracker().Add(extra); err != nil {
		t.Fatal(err)
	}
	f.catchUp()
	f.mustSync("web")
	if w := f.writeNames(); !slices.Equal(w, []string{"delete controllerrevisions"}) {
		t.Errorf("with a revision beyond the limit at rest: wrote %q, want it deleted", w)
	}
	f.catchUp()
	if revs := f.revisionsInAPI(); len(revs) != 2 || revs[2] != nil {
		t.Errorf("revisions %v, want 3 and 4", revs)
	}
	f.mustSync("web")
	if w := f.writeNames(); len(w) != 0 {
		t.Errorf("then at rest: wrote %q, want nothing", w)
	}

	// The current revision deleted by hand: recorded again.
	cur := revs[4]
	if err := f.kubeClient.Tracker().Delete(appsv1.SchemeGroupVersion.WithResource("controllerrevisions"), "tcs", cur.Name); err != nil {
		t.Fatal(err)
	}
	f.catchUp()
	queued(f.c)
	f.c.revisionHandler(klog.FromContext(f.ctx)).OnDelete(cur) // as the informer delivers it
	if got := queued(f.c); !got.Has("tcs/web") {
		t.Errorf("deleting the current revision queued %v, want the App", got.UnsortedList())
	}
	f.mustSync("web")
	if w := f.writeNames(); !slices.Equal(w, []string{"create controllerrevisions"}) {
		t.Errorf("after the current revision was deleted: wrote %q", w)
	}
	if revs := f.revisionsInAPI(); revs[5] == nil || revs[5].Name != cur.Name {
		t.Errorf("revisions %v, want %s recorded again as revision 5", revs, cur.Name)
	}
}

// controllerIs reports whether app is r's controller.
func controllerIs(r *appsv1.ControllerRevision, app *appv1.App) bool {
	for _, ref := range r.OwnerReferences {
		if ptr.Deref(ref.Controller, false) && ref.UID == app.UID && ref.Kind == "App" {
			return true
		}
	}
	return false
}

package app

import (
	"testing"

	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// TestRolloutRevisionsKept: the history limit counts the current revision and those
// the rollout needs (its stable and canary versions) first, and the oldest of the others
// go: a new version while a rollout runs keeps the stable's revision, which is older
// than the abandoned canary's, and the abandoned canary's goes once the rollout no longer
// names it. Deleting the oldest first kept three revisions, limit 2, for as long as the
// App stayed aborted (the soak's smoke found one after two aborts in a row).
func TestRolloutRevisionsKept(t *testing.T) {
	w := canaryWorld(t, false)
	w.toPause()
	w.edit(true, func(a *appv1.App) {
		a.Spec.DeploymentTemplate.Image = "nginx:3"
		a.Spec.RevisionHistoryLimit = ptr.To[int32](2)
	})
	w.step("another image at the pause, a history limit of 2: a rollout to it from the same stable; the oldest revision, which the rollout does not name, deleted",
		[]string{"create controllerrevisions web-<rev>", "delete controllerrevisions web-<rev>", "patch apps/status web", "patch deployments web-deploy-canary"}, "Progressing 0")
	revs := w.f.revisionsInAPI()
	if len(revs) != 3 || revs[2] == nil || revs[3] == nil || revs[4] == nil {
		t.Fatalf("revisions %v, want 2 (the stable's), 3 (the canary's when the sync read the rollout) and 4", revs)
	}
	stable := revs[2].Name
	w.deploymentSettles("web-deploy-canary", "dddd")
	w.step("the new canary up, the stable at its share: the pause; the abandoned canary's revision deleted, not the older stable's",
		[]string{"delete controllerrevisions web-<rev>", "patch apps/status web"}, "Paused 1")
	if revs := w.f.revisionsInAPI(); len(revs) != 2 || revs[2] == nil || revs[4] == nil {
		t.Fatalf("revisions %v, want 2 (the stable's) and 4", revs)
	}
	if got := w.app().Status.Rollout.Stable.Revision; got != stable {
		t.Errorf("the rollout's stable revision %s, want %s", got, stable)
	}
	w.request(appv1.RolloutActionAbort, "abort-1")
	w.step("kubectl app abort", []string{"patch apps/status web", "patch deployments web-deploy-canary", "patch deployments web-deploy"}, "Aborted 1")
	w.step("aborted: the revisions at the limit, nothing", nil, "Aborted 1")
	if revs := w.f.revisionsInAPI(); len(revs) != 2 || revs[2] == nil || revs[4] == nil {
		t.Errorf("revisions %v once aborted, want 2 (the stable's, which its pods run) and 4", revs)
	}
}

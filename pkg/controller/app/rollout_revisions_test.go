package app

import (
	"testing"

	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// TestRolloutRevisionsKept: the versions a canary rollout runs, its stable and its
// canary, are never pruned while it needs them, even beyond the history limit: a new
// version while a rollout runs, then an abort, leave the App with its stable's revision,
// older than the spec before the current one, beside the limit's two (the soak's check
// expected the limit alone and failed on such an App); once the rollout no longer names
// it, the next sync prunes to the limit.
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
		t.Fatalf("revisions %v, want 2 (the stable's), 3 and 4", revs)
	}
	stable := revs[2].Name
	w.deploymentSettles("web-deploy-canary", "dddd")
	w.step("the new canary up, the stable at its share: the pause; the stable's revision kept", []string{"patch apps/status web"}, "Paused 1")
	w.request(appv1.RolloutActionAbort, "abort-1")
	w.step("kubectl app abort", []string{"patch apps/status web", "patch deployments web-deploy-canary", "patch deployments web-deploy"}, "Aborted 1")
	w.step("aborted: nothing more", nil, "Aborted 1")
	if revs := w.f.revisionsInAPI(); len(revs) != 3 || revs[2] == nil || revs[2].Name != stable {
		t.Errorf("revisions %v once aborted, want 2 (the stable's, which its pods run), 3 and 4", revs)
	}
	w.edit(true, func(a *appv1.App) { a.Spec.DeploymentTemplate.Image = "nginx" })
	w.step("back to the stable's spec (a fast rollback): its revision current again, the rollout over at once, the canary gone; the oldest other pruned",
		[]string{"patch controllerrevisions web-<rev>", "delete controllerrevisions web-<rev>", "patch apps/status web", "delete deployments web-deploy-canary", "patch apps/status web"}, "")
	if revs := w.f.revisionsInAPI(); len(revs) != 2 || revs[4] == nil || revs[5] == nil || revs[5].Name != stable {
		t.Errorf("revisions %v after the rollback, want 4 and 5 (the stable's, renumbered)", revs)
	}
}

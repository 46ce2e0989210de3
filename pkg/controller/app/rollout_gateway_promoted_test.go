package app

import (
	"slices"
	"testing"
	"time"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// TestRolloutGatewayPromotedCanaryGoes: a canary promoted through an HTTPRoute stays for
// its scale-down delay, the route back on the App's Service, and then goes, and its
// canary Service after it. The soak (docs/soak.md) found it kept at rest forever: the
// plan split the route again to drain it, which needs the stable Service, which a
// rollout at rest (no stable ReplicaSet hash) never writes.
func TestRolloutGatewayPromotedCanaryGoes(t *testing.T) {
	w := canaryWorld(t, true)
	w.step("the strategy added", []string{"create controllerrevisions web-<rev>", "patch apps/status web"}, "Healthy 0")
	w.edit(true, func(a *appv1.App) { a.Spec.DeploymentTemplate.Image = "nginx:2" })
	w.step("a new image: the split Services", []string{"create controllerrevisions web-<rev>", "patch apps/status web",
		"patch services web-service-stable", "patch services web-service-canary"}, "Progressing 0")
	w.at(3 * time.Second)
	w.step("the split Services there: the canary, the route split", []string{"patch deployments web-deploy-canary", "patch httproutes web"}, "Progressing 0")
	w.deploymentSettles("web-deploy-canary", "cccc")
	w.at(6 * time.Second)
	w.step("the canary up: 25%", []string{"patch httproutes web"}, "Progressing 0")
	w.step("the pause", []string{"patch apps/status web"}, "Paused 1")
	w.request(appv1.RolloutActionPromoteFull, "full-1")
	settle := func(d time.Duration) {
		w.deploymentSettles("web-deploy-canary", "cccc")
		w.deploymentSettles("web-deploy", "cccc")
		w.at(d)
	}
	settle(10 * time.Second)
	w.step("promote --full: the canary to the stable's count", []string{"patch deployments web-deploy-canary", "patch apps/status web"}, "Progressing 3")
	settle(13 * time.Second)
	w.step("the canary takes all the traffic", []string{"patch httproutes web"}, "Progressing 3")
	settle(16 * time.Second)
	w.step("the stable rolls to the canary's template", []string{"delete services web-service-stable", "patch deployments web-deploy", "patch apps/status web"}, "Progressing 3")
	settle(19 * time.Second)
	w.step("promoted: the route back on the App's Service", []string{"patch apps/status web", "patch httproutes web"}, "Healthy 0")
	if got := w.route(); !slices.Equal(got, []string{"web-service"}) {
		t.Errorf("route %q, want the App's Service", got)
	}
	w.step("in the scale-down delay: the canary kept", nil, "Healthy 0")
	if w.deploymentReplicas("web-deploy-canary") != 4 {
		t.Errorf("canary at %d, want its 4 kept for the delay", w.deploymentReplicas("web-deploy-canary"))
	}
	w.at(120 * time.Second)
	w.step("the delay over: the canary goes", []string{"delete deployments web-deploy-canary"}, "Healthy 0")
	w.step("then its Service", []string{"delete services web-service-canary"}, "Healthy 0")
	w.step("at rest", nil, "Healthy 0")
	if got := w.route(); !slices.Equal(got, []string{"web-service"}) {
		t.Errorf("route %q, want the App's Service", got)
	}
}

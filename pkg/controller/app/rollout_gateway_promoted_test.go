package app

import (
	"slices"
	"strings"
	"testing"
	"time"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// TestRolloutGatewayPromotedCanaryGoes: a canary promoted through an HTTPRoute stays for
// its scale-down delay, the route back on the App's Service; then it is drained (the
// route at stable 100, through a stable Service that selects the stable pods by the hash
// they run at rest) and goes, the route back on the App's Service, the split Services
// after it. The soak (docs/soak.md) found it kept at rest forever: the drain needs the
// stable Service, which the state's hash, empty at rest, never made. The canary goes
// only once the Gateway has reported the route at stable 100, and the route goes back
// only once the canary's pods are gone too: a whole make test saw 502s from pods the
// garbage collector had not yet stopped when the route went back.
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
	w.step("the delay over: the stable Service for the drain", []string{"patch services web-service-stable"}, "Healthy 0")
	if got := w.selectorOf("web-service-stable"); !strings.Contains(got, "pod-template-hash:cccc") {
		t.Errorf("the drain's stable Service selects %q, want the stable pods by their hash", got)
	}
	w.step("the route to the stable pods alone", []string{"patch httproutes web"}, "Healthy 0")
	if got := w.route(); !slices.Equal(got, []string{"web-service-stable:100", "web-service-canary:0"}) {
		t.Errorf("route %q, want the stable Service at 100", got)
	}
	// The Gateway has not reported the route at canary 0 yet (the App's RouteAccepted
	// waits for it, as for any change of the route): it may still send to the App's
	// Service, the canary's pods among its endpoints.
	w.routeGenerationBumped()
	w.step("the route at canary 0 not reported: the canary kept", []string{"patch apps/status web"}, "Healthy 0")
	if w.deploymentReplicas("web-deploy-canary") != 4 {
		t.Errorf("canary at %d before the Gateway reported the drain's route, want its 4 kept", w.deploymentReplicas("web-deploy-canary"))
	}
	w.routeAccepted()
	pod := canaryPod(t, w, "ready", testNow.Add(-time.Minute))
	w.podReports(pod)
	w.step("the canary drained: it goes", []string{"delete deployments web-deploy-canary", "patch apps/status web"}, "Healthy 0")
	// The garbage collector deletes the pods after their Deployment, and they stop:
	// behind the App's Service they would answer 502 as they do.
	w.step("its pods still there: the route kept at stable 100", nil, "Healthy 0")
	w.podGone(pod)
	w.step("the route back on the App's Service", []string{"patch httproutes web"}, "Healthy 0")
	w.step("the split Services go", []string{"delete services web-service-stable", "delete services web-service-canary"}, "Healthy 0")
	w.step("at rest", nil, "Healthy 0")
	if got := w.route(); !slices.Equal(got, []string{"web-service"}) {
		t.Errorf("route %q, want the App's Service", got)
	}
}

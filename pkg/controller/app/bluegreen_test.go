package app

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// blueGreenWorld returns a world of an App web of 4 replicas, Ready, to which a
// blue-green strategy bg was just added (its status has no rollout yet), with an
// HTTPRoute when gateway is true.
func blueGreenWorld(t *testing.T, gateway bool, bg *appv1.BlueGreenStrategy) *world {
	t.Helper()
	w := canaryWorldOf(t, gateway, nil)
	w.edit(true, func(a *appv1.App) { a.Spec.Rollout = &appv1.Rollout{BlueGreen: bg} })
	return w
}

// The selectors of the App's Service: on the stable pods (their pod-template-hash), on
// the preview's (the track label), on all of them.
const (
	selectsStable  = "map[app.kubernetes.io/instance:web app.kubernetes.io/name:web pod-template-hash:aaaa]"
	selectsPreview = "map[app.kubernetes.io/instance:web app.kubernetes.io/name:web appcontroller.k8s.io/track:canary]"
	selectsAll     = "map[app.kubernetes.io/instance:web app.kubernetes.io/name:web]"
)

// toPreview walks w's App from the blue-green strategy's addition to its preview up and
// waiting for the switch, with a new image.
func (w *world) toPreview() {
	w.t.Helper()
	w.step("the strategy added: Healthy, nothing rolls", []string{"create controllerrevisions web-<rev>", "patch apps/status web"}, "Healthy 0")
	w.edit(true, func(a *appv1.App) { a.Spec.DeploymentTemplate.Image = "nginx:2" })
	w.step("a new image: the preview at the App's 4 replicas, its Service, the App's Service on the stable pods", []string{
		"create controllerrevisions web-<rev>", "patch apps/status web", "patch deployments web-deploy-canary",
		"patch services web-service-preview", "patch services web-service",
	}, "Progressing 0")
	if w.deploymentReplicas("web-deploy-canary") != 4 || w.image("web-deploy-canary") != "nginx:2" || w.image("web-deploy") != "nginx" {
		w.t.Errorf("preview %d (%s), stable %s: want 4 nginx:2, nginx", w.deploymentReplicas("web-deploy-canary"), w.image("web-deploy-canary"), w.image("web-deploy"))
	}
	if a, p := w.selectorOf("web-service"), w.selectorOf("web-service-preview"); a != selectsStable || p != selectsPreview {
		w.t.Errorf("the App's Service selects %s, the preview's %s: want the stable pods, the preview's", a, p)
	}
	w.step("the preview not available yet: nothing", nil, "Progressing 0")
	w.deploymentSettles("web-deploy-canary", "cccc")
	w.step("the preview available: waiting for the switch", []string{"patch apps/status web"}, "Paused 1")
	w.events = nil
}

// TestBlueGreenWrites walks a blue-green rollout from a new image to its end and counts
// each stage's writes: the start the revision, the status, the preview Deployment and
// Service and the App's Service's selector; the preview up the status; a resync
// nothing; kubectl app promote the status and the selector; the switch in effect the
// status; the end of the scale-down delay the status and the stable Deployment's
// template; its rollout done the status, the selector back on all the pods and the
// preview Service; the preview Deployment after its delay.
func TestBlueGreenWrites(t *testing.T) {
	w := blueGreenWorld(t, false, &appv1.BlueGreenStrategy{ScaleDownDelaySeconds: ptr.To[int32](60)})
	w.toPreview()
	w.expectKStatus("waiting for the switch", kstatus.InProgressStatus)
	if c := meta.FindStatusCondition(w.app().Status.Conditions, appv1.ConditionReady); c == nil || c.Reason != appv1.ReasonRolloutPaused ||
		!strings.Contains(c.Message, "the preview is available; kubectl app promote switches the traffic to it") {
		t.Errorf("Ready = %+v, want RolloutPaused saying kubectl app promote switches", c)
	}
	w.at(time.Hour)
	w.step("a resync an hour later", nil, "Paused 1")

	w.request(appv1.RolloutActionPromote, "promote-1")
	w.step("kubectl app promote: the switch", []string{"patch apps/status web", "patch services web-service"}, "Progressing 2")
	if got := w.selectorOf("web-service"); got != selectsPreview {
		t.Errorf("the App's Service selects %s, want the preview's pods", got)
	}
	w.step("the switch in effect: the old pods kept", []string{"patch apps/status web"}, "Progressing 3")
	if w.deploymentReplicas("web-deploy") != 4 || w.image("web-deploy") != "nginx" {
		t.Errorf("stable %d (%s), want its 4 old pods kept", w.deploymentReplicas("web-deploy"), w.image("web-deploy"))
	}
	w.step("the same request again, a resync: nothing", nil, "Progressing 3")
	w.at(time.Hour + 59*time.Second)
	w.step("within the delay", nil, "Progressing 3")
	w.at(time.Hour + 62*time.Second)
	w.step("the delay passed: the stable Deployment gets the new template", []string{"patch apps/status web", "patch deployments web-deploy"}, "Progressing 4")
	if w.image("web-deploy") != "nginx:2" || w.selectorOf("web-service") != selectsPreview {
		t.Errorf("stable %s, Service %s: want nginx:2, the preview's pods while it rolls", w.image("web-deploy"), w.selectorOf("web-service"))
	}
	w.deploymentRolls("web-deploy")
	w.step("the stable rolling: nothing", nil, "Progressing 4")
	w.deploymentSettles("web-deploy", "bbbb")
	w.step("the stable rolled out: promoted, the Service on all the pods, no preview Service",
		[]string{"patch apps/status web", "patch services web-service", "delete services web-service-preview"}, "Healthy 0")
	if got := w.selectorOf("web-service"); got != selectsAll {
		t.Errorf("the App's Service selects %s, want all the App's pods", got)
	}
	w.expectKStatus("promoted", kstatus.CurrentStatus)
	w.step("at rest, the preview kept its delay", nil, "Healthy 0")
	w.at(time.Hour + 3*time.Minute)
	w.step("then deleted", []string{"delete deployments web-deploy-canary"}, "Healthy 0")
	w.f.catchUp()
	w.step("at rest", nil, "Healthy 0")

	wantEvents := []string{
		"Normal RolloutStep Stage \"switch\" of the blue-green rollout to revision web-",
		"Normal Synced App synced successfully",
		"Normal RolloutStep Stage \"switched\" of the blue-green rollout to revision web-",
		"Normal RolloutStep Stage \"scale-down delay\" of the blue-green rollout to revision web-",
		"Normal Synced App synced successfully",
		"Normal Pruned Deleted Service \"web-service-preview\": no blue-green rollout runs",
		"Normal Synced App synced successfully",
		"Normal RolloutPromoted Revision web-",
		"Normal Pruned Deleted Deployment \"web-deploy-canary\": the canary of a rollout that ended",
		"Normal Synced App synced successfully",
	}
	w.expectEvents(wantEvents...)
}

// TestBlueGreenAbortAfterSwitch: kubectl app abort within the scale-down delay switches
// the App's Service back to the old pods, which never stopped (no Deployment write), in
// the status's sync; the preview is scaled to 0 after abortScaleDownDelaySeconds.
func TestBlueGreenAbortAfterSwitch(t *testing.T) {
	w := blueGreenWorld(t, false, &appv1.BlueGreenStrategy{AutoPromotionSeconds: ptr.To[int32](0)})
	w.toPreview()
	w.step("autoPromotionSeconds 0: the switch", []string{"patch apps/status web", "patch services web-service"}, "Progressing 2")
	w.step("the switch in effect", []string{"patch apps/status web"}, "Progressing 3")
	w.request(appv1.RolloutActionAbort, "abort-1")
	w.step("kubectl app abort: the Service back on the old pods", []string{"patch apps/status web", "patch services web-service"}, "Aborted 3")
	if got := w.selectorOf("web-service"); got != selectsStable {
		t.Errorf("the App's Service selects %s, want the old pods", got)
	}
	w.expectKStatus("aborted", kstatus.FailedStatus)
	w.step("a resync", nil, "Aborted 3")
	w.at(31 * time.Second)
	w.step("the preview to 0 after its delay", []string{"patch deployments web-deploy-canary"}, "Aborted 3")
	if w.deploymentReplicas("web-deploy-canary") != 0 || w.deploymentReplicas("web-deploy") != 4 || w.image("web-deploy") != "nginx" {
		t.Errorf("preview %d, stable %d (%s): want 0 and the 4 old pods", w.deploymentReplicas("web-deploy-canary"), w.deploymentReplicas("web-deploy"), w.image("web-deploy"))
	}
}

// TestBlueGreenFailingPreview: a preview pod that keeps exiting aborts before the switch:
// the App's Service never left the stable pods.
func TestBlueGreenFailingPreview(t *testing.T) {
	w := blueGreenWorld(t, false, &appv1.BlueGreenStrategy{})
	w.step("the strategy added", []string{"create controllerrevisions web-<rev>", "patch apps/status web"}, "Healthy 0")
	w.edit(true, func(a *appv1.App) { a.Spec.DeploymentTemplate.Image = "nginx:2" })
	w.step("a new image", []string{"create controllerrevisions web-<rev>", "patch apps/status web", "patch deployments web-deploy-canary",
		"patch services web-service-preview", "patch services web-service"}, "Progressing 0")
	w.podReports(canaryPod(t, w, "crashloopbackoff-1", testNow.Add(-30*time.Second)))
	w.step("a preview pod keeps exiting: aborted", []string{"patch apps/status web"}, "Aborted 0")
	r := w.app().Status.Rollout
	if r.AbortReason != appv1.ReasonCrashLoopBackOff || !strings.Contains(r.Message, "aborted before the switch") || w.selectorOf("web-service") != selectsStable {
		t.Errorf("rollout %s %q, Service %s: want CrashLoopBackOff before the switch, the stable pods", r.AbortReason, r.Message, w.selectorOf("web-service"))
	}
}

// TestBlueGreenHTTPRoute: with an HTTPRoute the route keeps sending to the App's Service
// (no split Services, no weights): its selector is the switch.
func TestBlueGreenHTTPRoute(t *testing.T) {
	w := blueGreenWorld(t, true, &appv1.BlueGreenStrategy{AutoPromotionSeconds: ptr.To[int32](0)})
	w.toPreview()
	w.step("the switch", []string{"patch apps/status web", "patch services web-service"}, "Progressing 2")
	if got := w.route(); len(got) != 1 || got[0] != "web-service" {
		t.Errorf("route %q, want the App's Service alone", got)
	}
}

// deploymentRolls reports the Deployment name rolling to its new template, as the
// deployment controller would: its old pods still there beside the new ones (the fake
// API server bumps no generation).
func (w *world) deploymentRolls(name string) {
	w.t.Helper()
	d := w.trackedDeployment(name)
	r := ptr.Deref(d.Spec.Replicas, 1)
	w.deploymentStatus(d, appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 2 * r, UpdatedReplicas: r, ReadyReplicas: r, AvailableReplicas: r})
	w.f.catchUp()
}

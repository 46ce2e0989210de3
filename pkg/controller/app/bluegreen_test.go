package app

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/app-controller/app-controller/pkg/analysis"
	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller/controllertest"
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

// previewRoute returns the HTTPRoute of the preview's hosts as the fake API server holds
// it, nil when it does not exist.
func (w *world) previewRoute() *gatewayv1.HTTPRoute {
	w.t.Helper()
	obj, err := w.f.gatewayClient.Tracker().Get(httpRouteResource, w.key.Namespace, "web"+appv1.PreviewSuffix)
	if err != nil {
		return nil
	}
	return obj.(*gatewayv1.HTTPRoute)
}

// expectPreviewRoute checks the preview's HTTPRoute: attached to the App's Gateway,
// for preview.example.com, every path to the preview Service's port 8080 (the route's), labelled as the
// App's child of the track preview, controlled by the App.
func (w *world) expectPreviewRoute(what string) {
	w.t.Helper()
	r := w.previewRoute()
	if r == nil {
		w.t.Fatalf("%s: no HTTPRoute web-preview", what)
	}
	got := fmt.Sprintf("parents %s hosts %v", r.Spec.ParentRefs[0].Name, r.Spec.Hostnames)
	for _, rule := range r.Spec.Rules {
		for _, b := range rule.BackendRefs {
			got += fmt.Sprintf(" backend %s:%d weight %v", b.Name, ptr.Deref(b.Port, 0), b.Weight)
		}
		for _, m := range rule.Matches {
			got += fmt.Sprintf(" match %s %s", ptr.Deref(m.Path.Type, ""), ptr.Deref(m.Path.Value, ""))
		}
	}
	got += fmt.Sprintf(" track %s owner %s", r.Labels[appv1.TrackLabel], metav1.GetControllerOf(r).Name)
	want := "parents public hosts [preview.example.com] backend web-service-preview:8080 weight <nil> match PathPrefix / track preview owner web"
	if len(r.Spec.ParentRefs) != 1 || len(r.Spec.Rules) != 1 || got != want {
		w.t.Errorf("%s: HTTPRoute web-preview %s, want %s", what, got, want)
	}
}

// TestBlueGreenPreviewRoute walks a blue-green rollout with previewHosts on an
// HTTPRoute and counts each stage's writes: the preview's HTTPRoute written with the
// preview Service at the start (one write), nothing at the switch, deleted with the
// preview Service at the promotion's end (and the preview, without a delay); the App's
// HTTPRoute never written.
func TestBlueGreenPreviewRoute(t *testing.T) {
	w := blueGreenWorld(t, true, &appv1.BlueGreenStrategy{AutoPromotionSeconds: ptr.To[int32](0), ScaleDownDelaySeconds: ptr.To[int32](0),
		PreviewHosts: []appv1.Hostname{"preview.example.com"}})
	w.step("the strategy added: nothing rolls, no preview's route", []string{"create controllerrevisions web-<rev>", "patch apps/status web"}, "Healthy 0")
	if w.previewRoute() != nil {
		t.Errorf("an HTTPRoute web-preview without a rollout")
	}
	w.edit(true, func(a *appv1.App) { a.Spec.DeploymentTemplate.Image = "nginx:2" })
	w.step("a new image: the preview, its Service and its HTTPRoute", []string{
		"create controllerrevisions web-<rev>", "patch apps/status web", "patch deployments web-deploy-canary",
		"patch services web-service-preview", "patch services web-service", "patch httproutes web-preview",
	}, "Progressing 0")
	w.expectPreviewRoute("the preview starting")
	w.step("the preview not available yet: nothing", nil, "Progressing 0")
	w.deploymentSettles("web-deploy-canary", "cccc")
	w.step("the preview available", []string{"patch apps/status web"}, "Paused 1")
	w.step("autoPromotionSeconds 0: the switch, the preview's route as it was", []string{"patch apps/status web", "patch services web-service"}, "Progressing 2")
	w.step("the switch in effect", []string{"patch apps/status web"}, "Progressing 3")
	w.step("no scale-down delay: the stable Deployment gets the new template", []string{"patch apps/status web", "patch deployments web-deploy"}, "Progressing 4")
	w.expectPreviewRoute("the promotion")
	if got := w.route(); len(got) != 1 || got[0] != "web-service" {
		t.Errorf("route %q, want the App's Service alone", got)
	}
	w.deploymentSettles("web-deploy", "bbbb")
	w.step("the stable rolled out: promoted, no preview Service nor route, nor preview (no delay)", []string{"patch apps/status web",
		"patch services web-service", "delete services web-service-preview", "delete httproutes web-preview", "delete deployments web-deploy-canary"}, "Healthy 0")
	if w.previewRoute() != nil {
		t.Errorf("the HTTPRoute web-preview outlived the rollout")
	}
	w.step("at rest", nil, "Healthy 0")
	if !slices.ContainsFunc(w.events, func(e string) bool {
		return e == `Normal Pruned Deleted HTTPRoute "web-preview": no blue-green rollout runs`
	}) {
		t.Errorf("no Pruned Event for the preview's route among %q", w.events)
	}
}

// TestBlueGreenPreviewRouteAbort: an abort before the switch keeps the preview's route
// while the preview keeps its pods (abortScaleDownDelaySeconds, to look at them), and
// deletes it when the preview goes to 0.
func TestBlueGreenPreviewRouteAbort(t *testing.T) {
	w := blueGreenWorld(t, true, &appv1.BlueGreenStrategy{PreviewHosts: []appv1.Hostname{"preview.example.com"}})
	w.step("the strategy added", []string{"create controllerrevisions web-<rev>", "patch apps/status web"}, "Healthy 0")
	w.edit(true, func(a *appv1.App) { a.Spec.DeploymentTemplate.Image = "nginx:2" })
	w.step("a new image: the preview, its Service and its HTTPRoute", []string{
		"create controllerrevisions web-<rev>", "patch apps/status web", "patch deployments web-deploy-canary",
		"patch services web-service-preview", "patch services web-service", "patch httproutes web-preview",
	}, "Progressing 0")
	w.deploymentSettles("web-deploy-canary", "cccc")
	w.step("the preview available", []string{"patch apps/status web"}, "Paused 1")
	w.request(appv1.RolloutActionAbort, "abort-1")
	w.step("kubectl app abort: the preview's route kept with its pods", []string{"patch apps/status web"}, "Aborted 1")
	w.expectPreviewRoute("aborted, within the delay")
	w.at(31 * time.Second)
	w.step("the preview to 0 after its delay, its route deleted", []string{"patch deployments web-deploy-canary", "delete httproutes web-preview"}, "Aborted 1")
	if w.previewRoute() != nil || w.selectorOf("web-service") != selectsStable {
		t.Errorf("the HTTPRoute web-preview outlived the preview's pods, or the Service left the stable pods (%s)", w.selectorOf("web-service"))
	}
	w.step("a resync", nil, "Aborted 1")
}

// TestBlueGreenPreviewHostHeld: a preview host that an older HTTPRoute of another
// namespace routes gets no preview's route; the App's HTTPRoute stays as it is and
// RouteAccepted says which host, with a Warning Event once.
func TestBlueGreenPreviewHostHeld(t *testing.T) {
	w := blueGreenWorld(t, true, &appv1.BlueGreenStrategy{PreviewHosts: []appv1.Hostname{"preview.example.com"}})
	held := heldHTTPRoute("preview.example.com")
	controllertest.Seed(t, w.f.inf.HTTPRoutes.Informer().GetIndexer(), w.f.gatewayClient.Tracker(), held)
	w.step("the strategy added", []string{"create controllerrevisions web-<rev>", "patch apps/status web"}, "Healthy 0")
	w.edit(true, func(a *appv1.App) { a.Spec.DeploymentTemplate.Image = "nginx:2" })
	// The rollout's state is written before the children, RouteAccepted after them.
	w.step("a new image: the preview and its Service, no preview's route", []string{
		"create controllerrevisions web-<rev>", "patch apps/status web", "patch apps/status web", "patch deployments web-deploy-canary",
		"patch services web-service-preview", "patch services web-service",
	}, "Progressing 0")
	if w.previewRoute() != nil {
		t.Errorf("an HTTPRoute web-preview for a host another namespace holds")
	}
	c := meta.FindStatusCondition(w.app().Status.Conditions, appv1.ConditionRouteAccepted)
	if c == nil || c.Reason != appv1.ReasonHostConflict || !strings.Contains(c.Message, `host "preview.example.com" is held by namespace "other"`) ||
		!strings.Contains(c.Message, `HTTPRoute "web-preview" of the preview is not written`) {
		t.Errorf("RouteAccepted %+v", c)
	}
	if got := w.route(); len(got) != 1 || got[0] != "web-service" {
		t.Errorf("route %q, want the App's Service", got)
	}
	warnings := slices.DeleteFunc(slices.Clone(w.events), func(e string) bool { return !strings.HasPrefix(e, "Warning HostConflict") })
	w.step("a resync: nothing", nil, "Progressing 0")
	if len(warnings) != 1 || slices.ContainsFunc(w.events[len(w.events)-1:], func(e string) bool { return strings.HasPrefix(e, "Warning HostConflict") }) {
		t.Errorf("HostConflict Warnings %q, want one, not repeated", warnings)
	}
}

// prePromotionStrategy is a blue-green strategy switched by hand whose switch waits for
// a success rate of the preview's pods >= 99% over 1m.
func prePromotionStrategy() *appv1.BlueGreenStrategy {
	return &appv1.BlueGreenStrategy{PrePromotionAnalysis: &appv1.AnalysisStep{Checks: []appv1.AnalysisCheck{{Name: "success-rate",
		SuccessRate: &appv1.SuccessRateCheck{Min: ptr.To("99")}, Source: appv1.AnalysisSourcePods,
		Interval: &metav1.Duration{Duration: time.Minute}, Count: ptr.To[int32](1), MinRequests: ptr.To[int32](10)}}}}
}

// prePromotionWorld is a blue-green world of prePromotionStrategy on a fake Prometheus,
// brought to the switch's stage: the step described by what lists its check in one
// status write and asks to be run again.
func prePromotionWorld(t *testing.T, what string) (*world, *fakeProm) {
	t.Helper()
	w := blueGreenWorld(t, false, prePromotionStrategy())
	prom := &fakeProm{}
	w.f.c.analyzer = &analysis.Analyzer{Prometheus: prom}
	w.toPreview()
	w.stepRequeued(what, []string{"patch apps/status web"}, "Paused 1", rolloutRecheck)
	return w, prom
}

// TestBlueGreenPrePromotionAnalysisFails: the checks before the switch start with the
// switch's stage (the status lists them, one write), are measured an interval later
// (one query), and a failed one aborts the rollout in one status write, before the
// switch: the App's Service never left the stable pods, kubectl app promote before the
// measurement was refused, AnalysisFailed names the check, with a Warning Event.
func TestBlueGreenPrePromotionAnalysisFails(t *testing.T) {
	w, prom := prePromotionWorld(t, "the switch's stage: its check listed, not measured")
	r := w.app().Status.Rollout
	if len(r.Analysis) != 1 || r.Analysis[0].Step != 1 || r.Analysis[0].MeasuredAt != nil ||
		!strings.Contains(r.Message, `the switch from revision web-`) || !strings.Contains(r.Message, `waits for its checks: "success-rate" running`) {
		t.Errorf("rollout at the switch's stage: %q, analysis %+v", r.Message, r.Analysis)
	}
	w.request(appv1.RolloutActionPromote, "promote-1")
	w.step("kubectl app promote before the check passed: refused", []string{"patch apps/status web"}, "Paused 1")
	if w.selectorOf("web-service") != selectsStable || !slices.ContainsFunc(w.events, func(e string) bool {
		return strings.HasPrefix(e, "Warning RolloutRequestIgnored") && strings.Contains(e, "the switch waits for the checks of prePromotionAnalysis")
	}) {
		t.Errorf("the Service selects %s, events %q: want the stable pods and the promote refused", w.selectorOf("web-service"), w.events)
	}
	prom.answer(100, 50)
	w.sinceStepStarted(60 * time.Second)
	w.step("the preview's success rate 50%: aborted before the switch", []string{"patch apps/status web"}, "Aborted 1")
	r = w.app().Status.Rollout
	if r.AbortReason != appv1.ReasonAnalysisFailed || !strings.Contains(r.AbortMessage, `check "success-rate" failed: 50%`) ||
		!strings.Contains(r.Message, "aborted before the switch") || prom.count() != 1 {
		t.Errorf("rollout %s %q (%q), %d queries: want AnalysisFailed naming the check, one query", r.AbortReason, r.AbortMessage, r.Message, prom.count())
	}
	if w.selectorOf("web-service") != selectsStable || w.deploymentReplicas("web-deploy") != 4 || w.image("web-deploy") != "nginx" {
		t.Errorf("the active side moved: Service %s, stable %d %s", w.selectorOf("web-service"), w.deploymentReplicas("web-deploy"), w.image("web-deploy"))
	}
	if c := meta.FindStatusCondition(w.app().Status.Conditions, appv1.ConditionReady); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("Ready = %+v, want False", c)
	}
	if !slices.ContainsFunc(w.events, func(e string) bool {
		return strings.HasPrefix(e, "Warning RolloutAborted Blue-green rollout to revision")
	}) {
		t.Errorf("no RolloutAborted Warning among %q", w.events)
	}
	w.sinceStepStarted(70 * time.Second)
	w.step("a resync within the abort's delay: no query, nothing", nil, "Aborted 1")
	if prom.count() != 1 {
		t.Errorf("%d queries after the abort, want 1", prom.count())
	}
}

// TestBlueGreenPrePromotionAnalysisPasses: a passed check lets kubectl app promote
// switch, in the writes of a switch without checks (the status and the Service).
func TestBlueGreenPrePromotionAnalysisPasses(t *testing.T) {
	w, prom := prePromotionWorld(t, "the switch's stage: its check listed")
	prom.answer(100, 0)
	w.sinceStepStarted(60 * time.Second)
	w.step("the preview's success rate 100%: passed, waiting for promote", []string{"patch apps/status web"}, "Paused 1")
	if r := w.app().Status.Rollout; !strings.Contains(r.Message, "kubectl app promote switches the traffic to it") || len(r.Analysis) != 1 || r.Analysis[0].Passed != 1 {
		t.Errorf("rollout %q, analysis %+v: want the check passed, waiting for promote", r.Message, r.Analysis)
	}
	w.request(appv1.RolloutActionPromote, "promote-1")
	w.step("kubectl app promote: the switch", []string{"patch apps/status web", "patch services web-service"}, "Progressing 2")
	if got := w.selectorOf("web-service"); got != selectsPreview {
		t.Errorf("the App's Service selects %s, want the preview's pods", got)
	}
	if r := w.app().Status.Rollout; r.Analysis != nil {
		t.Errorf("the checks before the switch outlived their stage: %+v", r.Analysis)
	}
}

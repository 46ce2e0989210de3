package app

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller/appfixture"
)

// canaryStrategy is setWeight 25, pause until promoted, setWeight 100
// (appfixture.CanaryStrategy, which the engine's tests in pkg/rollout share).
func canaryStrategy() *appv1.CanaryStrategy { return appfixture.CanaryStrategy() }

// canaryWorld returns a world of an App web of 4 replicas, Ready, to which the strategy
// of canaryStrategy was just added (so its status has no rollout yet), with the Gateway
// API (an HTTPRoute to Gateway public) when gateway is true.
func canaryWorld(t *testing.T, gateway bool) *world {
	t.Helper()
	return canaryWorldOf(t, gateway, nil)
}

// canaryWorldOf is canaryWorld with the App changed by mutate before it is created (nil:
// as it is), and mid, if not nil, run on the world before the strategy is added.
func canaryWorldOf(t *testing.T, gateway bool, mutate func(*appv1.App), mid ...func(*world)) *world {
	t.Helper()
	f := newFixture(t)
	app := newApp("web", testNow.Add(-time.Hour))
	app.Spec.DeploymentTemplate.Replicas = ptr.To[int32](4)
	if mutate != nil {
		mutate(app)
	}
	if gateway {
		f = newGatewayFixture(t, nil)
		app.Spec.Route = &appv1.Route{Hosts: []appv1.Hostname{"web.example.com"}, ParentRefs: []appv1.GatewayRef{{Name: "public"}}}
	}
	app.Status.ObservedGeneration = 1
	synced := syncedAppOn(t, f, app)
	w := newWorld(t, f, synced)
	w.deploymentSettles("web-deploy", "aaaa")
	if gateway {
		w.routeAccepted()
	}
	if err := f.sync(app.Namespace, app.Name); err != nil { // RouteAccepted, the counts
		t.Fatal(err)
	}
	f.catchUp()
	if err := f.inf.Apps.Informer().GetIndexer().Update(w.app()); err != nil {
		t.Fatal(err)
	}
	w.step("synced", nil, "")
	for _, m := range mid {
		m(w)
	}
	w.edit(true, func(a *appv1.App) { a.Spec.Rollout = &appv1.Rollout{Canary: canaryStrategy()} })
	return w
}

// syncedAppOn syncs app on f with its children as the API server holds them, and returns
// it as the cache shows it then.
func syncedAppOn(t *testing.T, f *fixture, app *appv1.App) *appv1.App {
	t.Helper()
	f.addApps(app)
	f.addDeployments(liveDeployment(t, app))
	f.addServices(liveService(t, app))
	if err := f.sync(app.Namespace, app.Name); err != nil {
		t.Fatal(err)
	}
	f.catchUp()
	obj, _, _ := f.c.getApp(nameOf(app))
	return obj
}

// routeAccepted reports the App's HTTPRoute accepted by its Gateway, at its generation.
func (w *world) routeAccepted() {
	w.t.Helper()
	gvr := httpRouteResource
	obj, err := w.f.gatewayClient.Tracker().Get(gvr, w.key.Namespace, w.key.Name)
	if err != nil {
		w.t.Fatalf("getting the HTTPRoute: %v", err)
	}
	r := obj.(*gatewayv1.HTTPRoute).DeepCopy()
	r.Status.Parents = []gatewayv1.RouteParentStatus{parentStatus(r.Generation,
		metav1.Condition{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted"},
		metav1.Condition{Type: "ResolvedRefs", Status: metav1.ConditionTrue, Reason: "ResolvedRefs"})}
	r.Status.Parents[0].ParentRef = gatewayv1.ParentReference{Name: "public"}
	if err := w.f.gatewayClient.Tracker().Update(gvr, r, w.key.Namespace); err != nil {
		w.t.Fatal(err)
	}
	w.f.catchUp()
}

// routeGenerationBumped gives the App's HTTPRoute a new generation, as the API server
// does on a change of its spec, with its status as it was: its Gateway has not read it.
func (w *world) routeGenerationBumped() {
	w.t.Helper()
	obj, err := w.f.gatewayClient.Tracker().Get(httpRouteResource, w.key.Namespace, w.key.Name)
	if err != nil {
		w.t.Fatalf("getting the HTTPRoute: %v", err)
	}
	r := obj.(*gatewayv1.HTTPRoute).DeepCopy()
	r.Generation++
	if err := w.f.gatewayClient.Tracker().Update(httpRouteResource, r, w.key.Namespace); err != nil {
		w.t.Fatal(err)
	}
	w.f.catchUp()
}

// deploymentSettles reports the Deployment name rolled out, as the deployment
// controller would: every replica of its spec updated, ready and available, its pods of
// the ReplicaSet name-hash; the caches catch up.
func (w *world) deploymentSettles(name, hash string) {
	w.t.Helper()
	d := w.trackedDeployment(name)
	r := ptr.Deref(d.Spec.Replicas, 1)
	w.deploymentStatus(d, appsv1.DeploymentStatus{
		ObservedGeneration: d.Generation, Replicas: r, UpdatedReplicas: r, ReadyReplicas: r, AvailableReplicas: r,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable",
				Message: fmt.Sprintf("ReplicaSet %q has successfully progressed.", name+"-"+hash)},
		},
	})
	w.f.catchUp()
}

// edit changes the App as a user's write would: its spec (a new generation) or its
// metadata.
func (w *world) edit(spec bool, change func(*appv1.App)) {
	w.t.Helper()
	app := w.app().DeepCopy()
	change(app)
	if spec {
		app.Generation++
	}
	w.f.statusRV++
	app.ResourceVersion = fmt.Sprint(w.f.statusRV)
	if err := w.f.inf.Apps.Informer().GetIndexer().Update(app); err != nil {
		w.t.Fatal(err)
	}
}

// request writes a kubectl app request on the App, naming its current rollout.
func (w *world) request(action appv1.RolloutAction, id string) {
	w.t.Helper()
	r := w.app().Status.Rollout
	req := appv1.RolloutRequest{Action: action, Canary: r.Canary.PodTemplateHash, Step: r.CurrentStepIndex, ID: id}
	w.edit(false, func(a *appv1.App) {
		if a.Annotations == nil {
			a.Annotations = map[string]string{}
		}
		a.Annotations[appv1.RolloutRequestAnnotation] = req.String()
	})
}

// step runs one sync and checks its writes (as "verb resource[/subresource] name",
// in any order) and the rollout's phase and step afterwards.
func (w *world) step(what string, wantWrites []string, wantRollout string) {
	w.t.Helper()
	n := len(w.writes)
	w.f.kubeClient.ClearActions()
	if err := w.f.syncOnce(w.key.Namespace, w.key.Name); err != nil {
		w.t.Fatalf("%s: syncApp: %v", what, err)
	}
	var got []string
	for _, a := range w.f.writes() {
		d := describe(a)
		s := d.verb + " " + d.resource
		if d.subresource != "" {
			s += "/" + d.subresource
		}
		got = append(got, s+" "+d.name)
		w.writes = append(w.writes, s)
	}
	w.events = append(w.events, w.f.events()...)
	_ = n
	// The informers deliver what was written, as they would before the next sync.
	w.f.catchUp()
	if err := w.f.inf.Apps.Informer().GetIndexer().Update(w.app()); err != nil {
		w.t.Fatal(err)
	}
	if !sameMultiset(got, wantWrites) {
		w.t.Errorf("%s: writes %q, want %q", what, got, wantWrites)
	}
	w.routeResolves(what)
	if r := w.app().Status.Rollout; wantRollout != "" {
		if got := fmt.Sprintf("%s %d", r.Phase, r.CurrentStepIndex); r == nil || got != wantRollout {
			w.t.Errorf("%s: rollout %s, want %s (%s)", what, got, wantRollout, r.Message)
		}
	}
}

// deploymentReplicas returns the spec replicas of the Deployment name as the fake API
// server holds it, -1 when it does not exist.
func (w *world) deploymentReplicas(name string) int32 {
	obj, err := w.f.kubeClient.Tracker().Get(appsv1.SchemeGroupVersion.WithResource("deployments"), w.key.Namespace, name)
	if err != nil {
		return -1
	}
	return ptr.Deref(obj.(*appsv1.Deployment).Spec.Replicas, 1)
}

// image returns the image of the App's container in the Deployment name.
func (w *world) image(name string) string {
	obj, err := w.f.kubeClient.Tracker().Get(appsv1.SchemeGroupVersion.WithResource("deployments"), w.key.Namespace, name)
	if err != nil {
		return ""
	}
	return obj.(*appsv1.Deployment).Spec.Template.Spec.Containers[0].Image
}

// TestRolloutWrites walks a rollout by replicas through its steps and counts each
// step's writes: a setWeight step costs the canary Deployment, the stable Deployment and
// the status; a pause the status; a resync in a pause nothing; the promotion the status,
// then the stable Deployment and the status, then one status write (promoted, Ready);
// kstatus reads InProgress all along, Current at the end.
func TestRolloutWrites(t *testing.T) {
	w := canaryWorld(t, false)
	w.step("the strategy added: Healthy, nothing rolls", []string{"create controllerrevisions web-<rev>", "patch apps/status web"}, "Healthy 0")
	w.step("a resync", nil, "Healthy 0")
	w.expectKStatus("Healthy", kstatus.CurrentStatus)

	w.edit(true, func(a *appv1.App) { a.Spec.DeploymentTemplate.Image = "nginx:2" })
	w.step("a new image: a rollout starts, the canary is created at 1 pod",
		[]string{"create controllerrevisions web-<rev>", "patch apps/status web", "patch deployments web-deploy-canary"}, "Progressing 0")
	if w.deploymentReplicas("web-deploy-canary") != 1 || w.deploymentReplicas("web-deploy") != 4 || w.image("web-deploy") != "nginx" || w.image("web-deploy-canary") != "nginx:2" {
		t.Errorf("stable %d (%s), canary %d (%s): want 4 nginx, 1 nginx:2", w.deploymentReplicas("web-deploy"), w.image("web-deploy"),
			w.deploymentReplicas("web-deploy-canary"), w.image("web-deploy-canary"))
	}
	w.expectKStatus("Progressing", kstatus.InProgressStatus)
	w.step("the canary not available yet: nothing", nil, "Progressing 0")

	w.deploymentSettles("web-deploy-canary", "cccc")
	w.step("the canary available: the stable scales to its share", []string{"patch deployments web-deploy"}, "Progressing 0")
	if w.deploymentReplicas("web-deploy") != 3 {
		t.Errorf("stable at %d replicas, want 3", w.deploymentReplicas("web-deploy"))
	}
	w.deploymentSettles("web-deploy", "aaaa")
	// A state written with no child write: the next sync looks a second later.
	w.stepRequeued("the stable at its share: the step is done, the pause starts", []string{"patch apps/status web"}, "Paused 1", rolloutRecheck)
	w.expectKStatus("Paused", kstatus.InProgressStatus)
	w.step("a resync in the pause", nil, "Paused 1")
	w.at(2 * time.Hour)
	w.step("a resync two hours later", nil, "Paused 1")
	if c := meta.FindStatusCondition(w.app().Status.Conditions, appv1.ConditionReady); c == nil || c.Reason != appv1.ReasonRolloutPaused {
		t.Errorf("Ready = %+v, want reason RolloutPaused", c)
	}

	w.request(appv1.RolloutActionPromote, "promote-1")
	w.step("kubectl app promote: setWeight 100, the canary grows to 4", []string{"patch apps/status web", "patch deployments web-deploy-canary"}, "Progressing 2")
	w.step("the same request again: nothing", nil, "Progressing 2")
	w.deploymentSettles("web-deploy-canary", "cccc")
	w.step("the canary at 4: the stable down to one pod", []string{"patch deployments web-deploy"}, "Progressing 2")
	w.deploymentSettles("web-deploy", "aaaa")
	// Without an HTTPRoute the promotion's first stage has nothing to wait for: the
	// promotion starts at its point of no return, the stable gets the new template in the
	// sync that writes the state.
	w.step("the last step done: promotion, the stable gets the new template and its replicas",
		[]string{"patch apps/status web", "patch deployments web-deploy"}, "Progressing 3")
	if w.image("web-deploy") != "nginx:2" || w.deploymentReplicas("web-deploy") != 4 {
		t.Errorf("stable %s at %d, want nginx:2 at 4", w.image("web-deploy"), w.deploymentReplicas("web-deploy"))
	}
	w.step("the stable rolling: nothing", nil, "Progressing 3")
	w.deploymentSettles("web-deploy", "bbbb")
	w.step("the stable rolled out: promoted, Ready, in one status write", []string{"patch apps/status web"}, "Healthy 0")
	w.expectKStatus("promoted", kstatus.CurrentStatus)
	w.at(2*time.Hour + 29*time.Second)
	w.step("the canary kept for scaleDownDelaySeconds", nil, "Healthy 0")
	w.at(2*time.Hour + 31*time.Second)
	w.step("then deleted", []string{"delete deployments web-deploy-canary"}, "Healthy 0")
	w.f.catchUp()
	w.step("at rest", nil, "Healthy 0")

	wantEvents := []string{
		"Normal RolloutStarted Rollout to revision web-",
		"Normal Synced App synced successfully", // the canary created
		"Normal Synced App synced successfully", // the stable scaled
		"Normal RolloutStep Step 1 of 3 (setWeight 25) of the rollout to revision web-",
		"Normal RolloutStep Step 2 of 3 (pause until promoted) of the rollout to revision web-",
		"Normal Synced App synced successfully",
		"Normal Synced App synced successfully",
		"Normal RolloutStep Step 3 of 3 (setWeight 100) of the rollout to revision web-",
		"Normal Synced App synced successfully",
		"Normal RolloutPromoted Revision web-",
		"Normal Pruned Deleted Deployment \"web-deploy-canary\": the canary of a rollout that ended",
		"Normal Synced App synced successfully",
	}
	w.expectEvents(wantEvents...)
}

// expectEvents checks the Events recorded in w, in order, each starting with its want.
func (w *world) expectEvents(want ...string) {
	w.t.Helper()
	if len(w.events) != len(want) {
		w.t.Fatalf("events %q, want %d", w.events, len(want))
	}
	for i, e := range w.events {
		if !strings.HasPrefix(e, want[i]) {
			w.t.Errorf("event %d %q, want %q...", i, e, want[i])
		}
	}
}

// stepRequeued runs step and checks that its sync asked to run again after d, and only
// that: a state written with no child write queues no sync of its own (the App's
// status-only update queues nothing).
func (w *world) stepRequeued(what string, wantWrites []string, wantRollout string, d time.Duration) {
	w.t.Helper()
	w.f.requeues = nil
	w.step(what, wantWrites, wantRollout)
	if len(w.f.requeues) != 1 || w.f.requeues[0] != d {
		w.t.Errorf("%s: requeued after %v, want once after %v", what, w.f.requeues, d)
	}
}

// toCanaryUp walks w's App from the strategy's addition to the first step's canary up
// and the stable scaled down, by replicas (canary 1, stable 3), with a new image.
func (w *world) toCanaryUp() {
	w.t.Helper()
	w.step("the strategy added", []string{"create controllerrevisions web-<rev>", "patch apps/status web"}, "Healthy 0")
	w.edit(true, func(a *appv1.App) { a.Spec.DeploymentTemplate.Image = "nginx:2" })
	w.step("a new image", []string{"create controllerrevisions web-<rev>", "patch apps/status web", "patch deployments web-deploy-canary"}, "Progressing 0")
	w.deploymentSettles("web-deploy-canary", "cccc")
	w.step("the canary up", []string{"patch deployments web-deploy"}, "Progressing 0")
	w.deploymentSettles("web-deploy", "aaaa")
}

// toPause walks w's App from the strategy's addition to the pause of step 2, by
// replicas (canary 1, stable 3), with a new image.
func (w *world) toPause() {
	w.t.Helper()
	w.toCanaryUp()
	w.step("the pause", []string{"patch apps/status web"}, "Paused 1")
	w.events = nil
}

// canaryPod returns a pod of the canary's ReplicaSet web-deploy-canary-cccc in the state
// captured on the real node in pkg/podhealth/testdata/NAME.yaml, created at created.
func canaryPod(t *testing.T, w *world, name string, created time.Time) *corev1.Pod {
	t.Helper()
	pod := capturedPod(t, name, w.app(), created)
	pod.Name = "web-deploy-canary-cccc-x7k2p"
	pod.Labels[appv1.TrackLabel] = appv1.TrackCanary
	pod.Labels["pod-template-hash"] = "cccc"
	return pod
}

// TestRolloutAbort: a canary pod that keeps exiting aborts the rollout: the status (the
// abort) and the canary scaled to 0, the stable back to its replicas, a Warning Event;
// then a resync, a re-apply and a new sync write nothing, and kubectl app promote starts
// the steps again.
func TestRolloutAbort(t *testing.T) {
	w := canaryWorld(t, false)
	w.toPause()
	before := counterValue(t, rolloutsAborted, appv1.ReasonCrashLoopBackOff)
	w.podReports(canaryPod(t, w, "crashloopbackoff-1", testNow.Add(-30*time.Second)))
	w.step("a canary pod keeps exiting: aborted", []string{"patch apps/status web", "patch deployments web-deploy-canary", "patch deployments web-deploy"}, "Aborted 1")
	if w.deploymentReplicas("web-deploy-canary") != 0 || w.deploymentReplicas("web-deploy") != 4 {
		t.Errorf("canary at %d, stable at %d: want 0 and 4", w.deploymentReplicas("web-deploy-canary"), w.deploymentReplicas("web-deploy"))
	}
	ready := meta.FindStatusCondition(w.app().Status.Conditions, appv1.ConditionReady)
	if ready == nil || ready.Reason != appv1.ReasonRolloutAborted || !strings.Contains(ready.Message, `Pod "web-deploy-canary-cccc-x7k2p" container "app-deploy-container" keeps exiting`) {
		t.Errorf("Ready = %+v, want RolloutAborted naming the pod and container", ready)
	}
	w.expectKStatus("aborted", kstatus.FailedStatus)
	if after := counterValue(t, rolloutsAborted, appv1.ReasonCrashLoopBackOff); after-before != 1 {
		t.Errorf("app_controller_rollouts_aborted_total{reason=CrashLoopBackOff} +%v, want +1", after-before)
	}
	if len(w.events) != 2 || !strings.HasPrefix(w.events[0], "Warning RolloutAborted Rollout to revision web-") {
		t.Errorf("events %q, want the Warning RolloutAborted and Synced", w.events)
	}

	w.deploymentSettles("web-deploy-canary", "cccc")
	w.deploymentSettles("web-deploy", "aaaa")
	w.podGone(canaryPod(t, w, "crashloopbackoff-1", testNow))
	w.step("the stable back at 4: its counts held back", nil, "Aborted 1")
	w.at(2 * time.Second)
	w.step("then written", []string{"patch apps/status web"}, "Aborted 1")
	w.step("a resync", nil, "Aborted 1")
	w.edit(false, func(a *appv1.App) { a.Labels = map[string]string{"team": "a"} })
	w.step("the manifest re-applied by a GitOps tool (a label of its own): nothing", nil, "Aborted 1")
	w.at(time.Hour)
	w.step("an hour later", nil, "Aborted 1")

	w.request(appv1.RolloutActionPromote, "retry-1")
	w.step("kubectl app promote retries", []string{"patch apps/status web", "patch deployments web-deploy-canary"}, "Progressing 0")
}

// routeResolves fails the test when an HTTPRoute of the App names a Service (a backend,
// a mirror's) that does not exist after a sync: a Gateway refuses such a route (Traefik
// said Accepted=False on the real node) and answers 500 for its share.
func (w *world) routeResolves(what string) {
	w.t.Helper()
	if w.f.gatewayClient == nil {
		return
	}
	routes, err := w.f.gatewayClient.Tracker().List(httpRouteResource, schema.GroupVersion(gatewayv1.GroupVersion).WithKind("HTTPRoute"), w.key.Namespace)
	if err != nil {
		w.t.Fatalf("listing the HTTPRoutes: %v", err)
	}
	for _, r := range routes.(*gatewayv1.HTTPRouteList).Items {
		for _, rule := range r.Spec.Rules {
			names := []gatewayv1.ObjectName{}
			for _, b := range rule.BackendRefs {
				names = append(names, b.Name)
			}
			for _, f := range rule.Filters {
				if f.RequestMirror != nil {
					names = append(names, f.RequestMirror.BackendRef.Name)
				}
			}
			for _, n := range names {
				if _, err := w.f.kubeClient.Tracker().Get(corev1.SchemeGroupVersion.WithResource("services"), w.key.Namespace, string(n)); err != nil {
					w.t.Errorf("%s: HTTPRoute %s names Service %s, which does not exist", what, r.Name, n)
				}
			}
		}
	}
}

// route returns the backends of the App's HTTPRoute as the fake API server holds it,
// "service:weight" ("service" without a weight).
func (w *world) route() []string {
	w.t.Helper()
	obj, err := w.f.gatewayClient.Tracker().Get(httpRouteResource, w.key.Namespace, w.key.Name)
	if err != nil {
		w.t.Fatalf("getting the HTTPRoute: %v", err)
	}
	var out []string
	for _, b := range obj.(*gatewayv1.HTTPRoute).Spec.Rules[0].BackendRefs {
		s := string(b.Name)
		if b.Weight != nil {
			s += fmt.Sprintf(":%d", *b.Weight)
		}
		out = append(out, s)
	}
	return out
}

// selectorOf returns the selector of the Service name, "" when it does not exist.
func (w *world) selectorOf(name string) string {
	obj, err := w.f.kubeClient.Tracker().Get(corev1.SchemeGroupVersion.WithResource("services"), w.key.Namespace, name)
	if err != nil {
		return ""
	}
	return fmt.Sprint(obj.(*corev1.Service).Spec.Selector)
}

// TestRolloutGateway: with an HTTPRoute, the weights split the traffic between a stable
// Service (the stable pods by their pod-template-hash) and a canary Service; the stable
// keeps its 4 replicas; the route names the split Services only once they exist (the
// canary starts then: the App's Service would send it requests), and they go only once
// it no longer names them; the weight moves once the canary's pods are
// available; an abort moves it back in one write and keeps the canary pods for
// abortScaleDownDelaySeconds.
func TestRolloutGateway(t *testing.T) {
	w := canaryWorld(t, true)
	w.step("the strategy added", []string{"create controllerrevisions web-<rev>", "patch apps/status web"}, "Healthy 0")
	if got := w.route(); !slices.Equal(got, []string{"web-service"}) {
		t.Errorf("route %q, want the App's Service", got)
	}
	w.edit(true, func(a *appv1.App) { a.Spec.DeploymentTemplate.Image = "nginx:2" })
	w.step("a new image: the split Services; the route, and no canary yet, until they exist", []string{
		"create controllerrevisions web-<rev>", "patch apps/status web",
		"patch services web-service-stable", "patch services web-service-canary",
	}, "Progressing 0")
	if got := w.route(); !slices.Equal(got, []string{"web-service"}) {
		t.Errorf("route %q, want the App's Service until the split Services exist", got)
	}
	w.step("the split Services there: the canary, the route split at 100/0", []string{"patch deployments web-deploy-canary", "patch httproutes web"}, "Progressing 0")
	if got := w.route(); !slices.Equal(got, []string{"web-service-stable:100", "web-service-canary:0"}) {
		t.Errorf("route %q, want stable 100, canary 0 until the canary is up", got)
	}
	if s, c := w.selectorOf("web-service-stable"), w.selectorOf("web-service-canary"); s != "map[app.kubernetes.io/instance:web app.kubernetes.io/name:web pod-template-hash:aaaa]" ||
		c != "map[app.kubernetes.io/instance:web app.kubernetes.io/name:web appcontroller.k8s.io/track:canary]" {
		t.Errorf("selectors: stable %s, canary %s", s, c)
	}
	w.deploymentSettles("web-deploy-canary", "cccc")
	w.step("the canary up: 25%", []string{"patch httproutes web"}, "Progressing 0")
	if got := w.route(); !slices.Equal(got, []string{"web-service-stable:75", "web-service-canary:25"}) {
		t.Errorf("route %q, want 75/25", got)
	}
	w.step("the weight in effect: the pause", []string{"patch apps/status web"}, "Paused 1")
	if w.deploymentReplicas("web-deploy") != 4 {
		t.Errorf("stable at %d, want 4: with an HTTPRoute the stable keeps its replicas", w.deploymentReplicas("web-deploy"))
	}
	w.step("a resync in the pause", nil, "Paused 1")

	w.request(appv1.RolloutActionAbort, "abort-1")
	w.step("kubectl app abort: all the traffic back at once", []string{"patch apps/status web", "patch httproutes web"}, "Aborted 1")
	if got := w.route(); !slices.Equal(got, []string{"web-service-stable:100", "web-service-canary:0"}) {
		t.Errorf("route %q, want 100/0", got)
	}
	if w.deploymentReplicas("web-deploy-canary") != 1 {
		t.Errorf("canary at %d, want its pod kept for abortScaleDownDelaySeconds", w.deploymentReplicas("web-deploy-canary"))
	}
	w.at(31 * time.Second)
	w.step("the abort's scale-down delay passed: the canary to 0", []string{"patch deployments web-deploy-canary"}, "Aborted 1")

	w.edit(true, func(a *appv1.App) { a.Spec.DeploymentTemplate.Image = "nginx" })
	w.step("back to the stable image: the rollout ends, the canary goes", []string{
		"patch controllerrevisions web-<rev>", "patch apps/status web", "patch apps/status web", "delete deployments web-deploy-canary",
	}, "Healthy 0")
	w.step("the canary gone: the route back on the App's Service", []string{"patch httproutes web"}, "Healthy 0")
	if got := w.route(); !slices.Equal(got, []string{"web-service"}) {
		t.Errorf("route %q, want the App's Service", got)
	}
	w.step("the route no longer names the split Services: they go", []string{
		"delete services web-service-stable", "delete services web-service-canary",
	}, "Healthy 0")
	w.step("at rest", nil, "Healthy 0")
}

// TestRolloutFastRollback: a change back to the stable template during a rollout ends
// it at once, without steps; after a promotion, a change back to the previous stable
// template (rollbackWindow) goes to the stable Deployment at once, no canary.
func TestRolloutFastRollback(t *testing.T) {
	w := canaryWorld(t, false)
	w.toPause()
	w.edit(true, func(a *appv1.App) { a.Spec.DeploymentTemplate.Image = "nginx" })
	w.step("kubectl app rollback at the pause: the rollout ends at once", []string{
		"patch controllerrevisions web-<rev>", "patch apps/status web", "patch apps/status web",
		"delete deployments web-deploy-canary", "patch deployments web-deploy",
	}, "Healthy 0")
	if w.deploymentReplicas("web-deploy") != 4 || w.image("web-deploy") != "nginx" || w.deploymentReplicas("web-deploy-canary") != -1 {
		t.Errorf("stable %s at %d, canary %d: want nginx at 4, no canary", w.image("web-deploy"), w.deploymentReplicas("web-deploy"), w.deploymentReplicas("web-deploy-canary"))
	}
	if !slices.ContainsFunc(w.events, func(e string) bool {
		return strings.HasPrefix(e, "Normal RolloutRolledBack The App went back to its stable pod template")
	}) {
		t.Errorf("events %q, want RolloutRolledBack", w.events)
	}

	// A rollout to nginx:2 promoted (--full), then a rollback to nginx: at once.
	w.deploymentSettles("web-deploy", "aaaa")
	w.edit(true, func(a *appv1.App) { a.Spec.DeploymentTemplate.Image = "nginx:2" })
	w.step("nginx:2 again", []string{"patch controllerrevisions web-<rev>", "patch apps/status web", "patch deployments web-deploy-canary"}, "Progressing 0")
	w.request(appv1.RolloutActionPromoteFull, "full-1")
	w.step("kubectl app promote --full: the stable gets nginx:2", []string{"patch apps/status web", "patch deployments web-deploy"}, "Progressing 3")
	w.deploymentSettles("web-deploy", "bbbb")
	w.step("promoted", []string{"patch apps/status web"}, "Healthy 0")
	if r := w.app().Status.Rollout; len(r.RecentStable) != 1 {
		t.Errorf("recentStable %q, want the template of nginx", r.RecentStable)
	}
	w.edit(true, func(a *appv1.App) { a.Spec.DeploymentTemplate.Image = "nginx" })
	w.step("kubectl app rollback after the promotion: to the stable at once", []string{
		"patch controllerrevisions web-<rev>", "patch apps/status web", "patch deployments web-deploy",
	}, "Healthy 0")
	if w.image("web-deploy") != "nginx" || w.app().Status.Rollout.Canary != nil {
		t.Errorf("stable %s, canary %+v: want nginx, no canary", w.image("web-deploy"), w.app().Status.Rollout.Canary)
	}
}

// TestRolloutRequestIgnored: a promote of a step the rollout left is recorded as handled
// with a Warning Event, and does nothing else.
func TestRolloutRequestIgnored(t *testing.T) {
	w := canaryWorld(t, false)
	w.toPause()
	r := w.app().Status.Rollout
	stale := appv1.RolloutRequest{Action: appv1.RolloutActionPromote, Canary: r.Canary.PodTemplateHash, Step: 0, ID: "stale-1"}
	w.edit(false, func(a *appv1.App) { a.Annotations = map[string]string{appv1.RolloutRequestAnnotation: stale.String()} })
	w.step("a promote of step 1 at step 2", []string{"patch apps/status web"}, "Paused 1")
	if w.app().Status.Rollout.LastRequest != "stale-1" || len(w.events) != 1 ||
		w.events[0] != "Warning RolloutRequestIgnored kubectl app promote (request stale-1) ignored: it ends step 1, the rollout is at step 2" {
		t.Errorf("lastRequest %q, events %q", w.app().Status.Rollout.LastRequest, w.events)
	}
	w.step("again", nil, "Paused 1")
}

// TestRolloutControllerRestart: a controller that starts in the middle of a rollout (a
// restart, a new leader) resumes at the same step with the same weights: it writes
// nothing, and goes on from there.
func TestRolloutControllerRestart(t *testing.T) {
	w := canaryWorld(t, false)
	w.toPause()
	app := w.app()

	f := newFixture(t)
	f.addApps(app.DeepCopy())
	for _, name := range []string{"web-deploy", "web-deploy-canary"} {
		obj, err := w.f.kubeClient.Tracker().Get(appsv1.SchemeGroupVersion.WithResource("deployments"), "tcs", name)
		if err != nil {
			t.Fatal(err)
		}
		d := obj.(*appsv1.Deployment).DeepCopy()
		d.ManagedFields = nil
		f.addDeployments(d)
	}
	obj, _ := w.f.kubeClient.Tracker().Get(corev1.SchemeGroupVersion.WithResource("services"), "tcs", "web-service")
	s := obj.(*corev1.Service).DeepCopy()
	s.ManagedFields = nil
	f.addServices(s)
	list, _ := w.f.kubeClient.AppsV1().ControllerRevisions("tcs").List(f.ctx, metav1.ListOptions{})
	for i := range list.Items {
		f.addRevisions(&list.Items[i])
	}
	restarted := newWorld(t, f, app)
	restarted.step("the first sync of the new controller", nil, "Paused 1")
	restarted.step("a resync", nil, "Paused 1")
	if got := f.kubeClient.Actions(); len(got) != 1 || got[0].GetVerb() != "get" || got[0].GetResource().Resource != "controllerrevisions" {
		t.Logf("reads: %v", got)
	}
	restarted.request(appv1.RolloutActionPromote, "after-restart")
	restarted.step("kubectl app promote after the restart", []string{"patch apps/status web", "patch deployments web-deploy-canary"}, "Progressing 2")
	if restarted.deploymentReplicas("web-deploy-canary") != 4 {
		t.Errorf("canary at %d, want 4", restarted.deploymentReplicas("web-deploy-canary"))
	}
}

// TestRolloutChangeWhileStableScales: a newer image while the deployment controller has
// not yet observed the stable Deployment's scale to the canary's share (its
// observedGeneration behind) restarts the steps with the canary; the stable Deployment
// keeps its template (a CI run saw such a change go to the stable pods at once).
func TestRolloutChangeWhileStableScales(t *testing.T) {
	w := canaryWorld(t, false)
	w.step("the strategy added", []string{"create controllerrevisions web-<rev>", "patch apps/status web"}, "Healthy 0")
	w.edit(true, func(a *appv1.App) { a.Spec.DeploymentTemplate.Image = "nginx:2" })
	w.step("a new image", []string{"create controllerrevisions web-<rev>", "patch apps/status web", "patch deployments web-deploy-canary"}, "Progressing 0")
	w.deploymentSettles("web-deploy-canary", "cccc")
	w.step("the canary up, the stable scaled", []string{"patch deployments web-deploy"}, "Progressing 0")
	// The API server's new generation for the scale (the fake client keeps it), which
	// the deployment controller has not observed.
	d := w.trackedDeployment("web-deploy")
	d.Generation++
	w.deploymentStatus(d, d.Status)
	w.f.catchUp()
	w.edit(true, func(a *appv1.App) { a.Spec.DeploymentTemplate.Image = "nginx:3" })
	w.step("a newer image before the stable's scale is observed", []string{"create controllerrevisions web-<rev>", "patch apps/status web", "patch deployments web-deploy-canary"}, "Progressing 0")
	if got, want := w.image("web-deploy"), "nginx"; got != want {
		t.Errorf("the stable Deployment's image %q, want %q kept", got, want)
	}
	if got, want := w.image("web-deploy-canary"), "nginx:3"; got != want {
		t.Errorf("the canary Deployment's image %q, want %q", got, want)
	}
	if r := w.app().Status.Rollout; r.Stable.ReplicaSetHash != "aaaa" {
		t.Errorf("the stable pods' hash %q, want aaaa recorded at the rollout's start", r.Stable.ReplicaSetHash)
	}
}

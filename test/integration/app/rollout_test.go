package app

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/app-controller/app-controller/internal/plugin"
	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller/controllertest"
	"github.com/app-controller/app-controller/test/gitops"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// Canary rollouts (spec.rollout) on the real API server, pods run by kwok: the steps and
// their pause, kubectl app promote, an abort on a crash-looping canary pod, GitOps
// re-applies with kubectl apply, a fast rollback, a controller restarted mid-rollout, the
// weights of an HTTPRoute, and an App without a strategy unchanged.

// quiet checks that the controller writes nothing to ns for d, resyncs included. A
// PATCH of an Event is left out: the recorder's broadcaster sends from its own goroutine
// and folds a repeat into the first Event's count, so on a loaded machine it may post
// one recorded before d began (make test at 2d567d2: the abort's folded Event patched
// inside the window). Created Events are counted: a new one means a new sync's finding.
func quiet(t *testing.T, m *manager, ns, what string, d time.Duration) {
	t.Helper()
	before := len(m.WritesIn(ns))
	time.Sleep(d)
	w := slices.DeleteFunc(slices.Clone(m.WritesIn(ns)[before:]), func(w string) bool {
		return strings.HasPrefix(w, "PATCH ") && strings.Contains(w, "/events/")
	})
	if len(w) != 0 {
		t.Errorf("%s: %d writes, want 0: %q", what, len(w), w)
	}
}

// TestRolloutSteps walks an App of 4 replicas through 25% / pause 2s / 50% / pause until
// promoted: the canary and the stable scaled to each step's share, nothing written
// during the pause (resyncs every second), then kubectl app promote, the stable rolled to
// the new image and the canary gone. kstatus reads InProgress until the end.
func TestRolloutSteps(t *testing.T) {
	c := newClients(t)
	m := startManager(t, time.Second)
	ns := framework.Namespace(t)
	c.Create(t, rolloutApp(ns, "web", 4, setWeight(25), pause(2*time.Second), setWeight(50), pause(0)))
	c.WaitReady(t, ns, "web")
	c.WaitRollout(t, ns, "web", appv1.RolloutHealthy, 0)

	start := time.Now()
	c.Update(t, ns, "web", func(a *appv1.App) { a.Spec.DeploymentTemplate.Image = "nginx:2" })
	app := c.WaitRollout(t, ns, "web", appv1.RolloutPaused, 3)
	t.Logf("at the pause until promoted %.1fs after the change", time.Since(start).Seconds())
	stable, stableImage := framework.DeploymentReplicas(t, c.Kube, ns, "web-deploy")
	canary, canaryImage := framework.DeploymentReplicas(t, c.Kube, ns, "web-deploy-canary")
	if stable != 2 || canary != 2 || stableImage != "nginx:1" || canaryImage != "nginx:2" {
		t.Errorf("at 50%%: stable %d %s, canary %d %s; want 2 nginx:1, 2 nginx:2", stable, stableImage, canary, canaryImage)
	}
	if ks := controllertest.KStatus(t, app); ks != kstatus.InProgressStatus {
		t.Errorf("paused: kstatus %s, want InProgress", ks)
	}
	captureRollout(t, c, ns, "web", "rollout-paused", kstatus.InProgressStatus)
	quiet(t, m, ns, "three resyncs in the pause", 3*time.Second)

	framework.RequestRollout(t, c.App, c.Kube, ns, "web", appv1.RolloutActionPromote)
	framework.Eventually(t, converge, func() (bool, error) {
		app := c.GetApp(t, ns, "web")
		replicas, image := framework.DeploymentReplicas(t, c.Kube, ns, "web-deploy")
		gone, _ := framework.DeploymentReplicas(t, c.Kube, ns, "web-deploy-canary")
		return app.Status.Rollout.Phase == appv1.RolloutHealthy && replicas == 4 && image == "nginx:2" && gone == -1, nil
	})
	app = c.WaitReady(t, ns, "web")
	if ks := controllertest.KStatus(t, app); ks != kstatus.CurrentStatus {
		t.Errorf("promoted: kstatus %s, want Current", ks)
	}
	t.Logf("promoted and Ready %.1fs after the change", time.Since(start).Seconds())
	// The promotion's Event is posted once the status that ends the rollout is written
	// (the broadcaster posts it from its own goroutine): wait for it.
	framework.WaitEvent(t, c.Kube, ns, "App", "web", "Normal RolloutPromoted", 10*time.Second)
	events := strings.Join(c.Events(t, ns, "App", "web"), "\n")
	for _, want := range []string{"RolloutStarted", "RolloutStep", "RolloutPromoted"} {
		if !strings.Contains(events, want) {
			t.Errorf("no %s Event among\n%s", want, events)
		}
	}
	quiet(t, m, ns, "at rest after the rollout", 2*time.Second)
}

// webManifest returns a function that writes the manifest of App web in ns (its
// Deployment web-deploy of replicas running the image, its Service web-svc and rollout,
// the YAML of spec.rollout's fields indented by four spaces) to a file of the image's
// own, as a GitOps tool would hold it, and returns the file's path.
func webManifest(t *testing.T, ns string, replicas int, rollout string) func(image string) string {
	t.Helper()
	dir := t.TempDir()
	return func(image string) string {
		path := filepath.Join(dir, image+".yaml")
		doc := `apiVersion: appcontroller.k8s.io/v1
kind: App
metadata: {name: web, namespace: ` + ns + `}
spec:
  deploymentTemplate: {name: web-deploy, image: "` + image + `", replicas: ` + strconv.Itoa(replicas) + `}
  serviceTemplate: {name: web-svc}
  rollout:
` + rollout
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
}

// crashCanary makes the App's canary pod report what a real node reports of a container
// that keeps exiting (its status written through the API, as the kubelet does).
func crashCanary(t *testing.T, c clients, ns, app string) string {
	t.Helper()
	ctx := context.Background()
	var pod *corev1.Pod
	framework.Eventually(t, converge, func() (bool, error) {
		pods, err := c.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: appv1.InstanceLabel + "=" + app + "," + appv1.TrackLabel + "=" + appv1.TrackCanary})
		if err != nil || len(pods.Items) == 0 || len(pods.Items[0].Status.ContainerStatuses) == 0 {
			return false, nil
		}
		pod = &pods.Items[0]
		return true, nil
	})
	now := metav1.Now()
	cs := &pod.Status.ContainerStatuses[0]
	cs.Ready, cs.RestartCount = false, 1
	cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 10s restarting failed container"}}
	cs.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", StartedAt: now, FinishedAt: now}}
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.PodReady || pod.Status.Conditions[i].Type == corev1.ContainersReady {
			pod.Status.Conditions[i].Status = corev1.ConditionFalse
		}
	}
	if _, err := c.Kube.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return pod.Name
}

// TestRolloutAbortAndGitOps: a canary pod that keeps exiting aborts the rollout within
// seconds (canary to 0, the stable back to its replicas, Ready=False RolloutAborted naming
// the pod, Stalled, a Warning Event); re-applying the manifest with kubectl apply changes
// nothing; kubectl app promote starts the steps again, and a promote then re-apply keeps
// the promoted step.
func TestRolloutAbortAndGitOps(t *testing.T) {
	c := newClients(t)
	m := startManager(t, time.Second)
	ns := framework.Namespace(t)
	manifest := webManifest(t, ns, 2, `    canary:
      steps: [{setWeight: 50}, {pause: {}}, {setWeight: 75}, {pause: {}}]
      abortScaleDownDelaySeconds: 0
`)
	framework.Kubectl(t, "apply", "-f", manifest("nginx:1"))
	c.WaitReady(t, ns, "web")

	framework.Kubectl(t, "apply", "-f", manifest("nginx:2"))
	c.WaitRollout(t, ns, "web", appv1.RolloutPaused, 1)
	start := time.Now()
	pod := crashCanary(t, c, ns, "web")
	app := c.WaitAborted(t, ns, "web", 1, appv1.ReasonCrashLoopBackOff, pod)
	t.Logf("aborted %.1fs after the canary pod reported its crash loop: %s", time.Since(start).Seconds(), app.Status.Rollout.AbortMessage)
	if ks := controllertest.KStatus(t, app); ks != kstatus.FailedStatus {
		t.Errorf("aborted: kstatus %s, want Failed", ks)
	}
	framework.Eventually(t, converge, func() (bool, error) {
		canary, _ := framework.DeploymentReplicas(t, c.Kube, ns, "web-deploy-canary")
		stable, image := framework.DeploymentReplicas(t, c.Kube, ns, "web-deploy")
		return canary == 0 && stable == 2 && image == "nginx:1", nil
	})
	framework.WaitEvent(t, c.Kube, ns, "App", "web", "Warning RolloutAborted Rollout to revision", converge)
	captureRollout(t, c, ns, "web", "rollout-aborted", kstatus.FailedStatus)

	time.Sleep(2 * time.Second) // the counts of the stable's status settle
	framework.Kubectl(t, "apply", "-f", manifest("nginx:2"))
	framework.Kubectl(t, "apply", "--server-side", "--force-conflicts", "--field-manager", "flux", "-f", manifest("nginx:2"))
	quiet(t, m, ns, "the manifest re-applied twice (client-side, server-side) while aborted", 3*time.Second)
	if app := c.GetApp(t, ns, "web"); app.Status.Rollout.Phase != appv1.RolloutAborted {
		t.Errorf("re-applied: rollout %s, want Aborted still", app.Status.Rollout.Phase)
	}

	// kubectl app promote retries: the steps again (the canary pod is a new one, healthy).
	framework.RequestRollout(t, c.App, c.Kube, ns, "web", appv1.RolloutActionPromote)
	c.WaitRollout(t, ns, "web", appv1.RolloutPaused, 1)
	framework.RequestRollout(t, c.App, c.Kube, ns, "web", appv1.RolloutActionPromote)
	c.WaitRollout(t, ns, "web", appv1.RolloutPaused, 3)
	framework.Kubectl(t, "apply", "-f", manifest("nginx:2"))
	framework.Kubectl(t, "apply", "--server-side", "--force-conflicts", "--field-manager", "flux", "-f", manifest("nginx:2"))
	quiet(t, m, ns, "the manifest re-applied after a promote", 3*time.Second)
	app = c.WaitRollout(t, ns, "web", appv1.RolloutPaused, 3)
	if _, found := app.Annotations[appv1.RolloutRequestAnnotation]; !found {
		t.Errorf("the re-apply removed the request annotation (%v): a GitOps tool would fight it", app.Annotations)
	}
}

// TestRolloutFastRollbackAndRestart: at a pause, a controller restarted writes nothing
// and keeps the step; kubectl app rollback ends the rollout at once: the canary goes,
// the stable never rolled (no new ReplicaSet of it).
func TestRolloutFastRollbackAndRestart(t *testing.T) {
	c := newClients(t)
	m := startManager(t, time.Second)
	ns := framework.Namespace(t)
	c.Create(t, rolloutApp(ns, "web", 3, setWeight(40), pause(0)))
	c.WaitReady(t, ns, "web")
	c.WaitRollout(t, ns, "web", appv1.RolloutHealthy, 0)
	c.Update(t, ns, "web", func(a *appv1.App) { a.Spec.DeploymentTemplate.Image = "nginx:2" })
	c.WaitRollout(t, ns, "web", appv1.RolloutPaused, 1)
	stableRS := func() []string {
		var out []string
		for _, rs := range c.replicaSetsOf(t, ns, "web") {
			if !strings.HasPrefix(rs, "web-deploy-canary-") {
				out = append(out, rs)
			}
		}
		return out
	}
	before := stableRS()

	if err := m.Run.Stop(t); err != nil {
		t.Fatal(err)
	}
	m = startManager(t, time.Second)
	quiet(t, m, ns, "a new controller's first syncs and resyncs at the pause", 3*time.Second)
	c.WaitRollout(t, ns, "web", appv1.RolloutPaused, 1)
	if canary, _ := framework.DeploymentReplicas(t, c.Kube, ns, "web-deploy-canary"); canary != 2 {
		t.Errorf("canary at %d after the restart, want 2", canary)
	}

	start := time.Now()
	if _, err := plugin.Rollback(context.Background(), plugin.Clients{Apps: c.App, Kube: c.Kube}, ns, "web", 0); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, converge, func() (bool, error) {
		app := c.GetApp(t, ns, "web")
		gone, _ := framework.DeploymentReplicas(t, c.Kube, ns, "web-deploy-canary")
		stable, image := framework.DeploymentReplicas(t, c.Kube, ns, "web-deploy")
		return app.Status.Rollout.Phase == appv1.RolloutHealthy && gone == -1 && stable == 3 && image == "nginx:1", nil
	})
	t.Logf("rolled back %.1fs after kubectl app rollback", time.Since(start).Seconds())
	c.WaitReady(t, ns, "web")
	if after := stableRS(); strings.Join(after, ",") != strings.Join(before, ",") {
		t.Errorf("the stable's ReplicaSets %v, were %v: the rollback rolled it", after, before)
	}
}

// TestRolloutHTTPRoute: with an HTTPRoute the weights split the traffic between the
// stable and canary Services; the stable keeps its replicas; the route goes back to the
// App's Service after the promotion.
func TestRolloutHTTPRoute(t *testing.T) {
	c := newClients(t)
	startManager(t, 0)
	ns := framework.Namespace(t)
	app := rolloutApp(ns, "web", 4, setWeight(25), pause(0))
	app.Spec.Route = &appv1.Route{Hosts: []appv1.Hostname{"web.example.com"}, ParentRefs: []appv1.GatewayRef{{Name: "public"}}}
	c.Create(t, app)
	c.WaitRollout(t, ns, "web", appv1.RolloutHealthy, 0)
	// No Gateway answers here, so the App is not Ready: wait for its Deployment (a change
	// while it still rolls would go to it directly).
	c.WaitDeployment(t, ns, "web-deploy", func(d *appsv1.Deployment) bool {
		return d.Status.ObservedGeneration == d.Generation && d.Status.UpdatedReplicas == 4 && d.Status.Replicas == 4 && d.Status.AvailableReplicas == 4
	})
	c.Update(t, ns, "web", func(a *appv1.App) { a.Spec.DeploymentTemplate.Image = "nginx:2" })
	c.WaitRollout(t, ns, "web", appv1.RolloutPaused, 1)
	gw := framework.GatewayClient(t)
	var backends []string
	framework.Eventually(t, converge, func() (bool, error) {
		r, err := gw.GatewayV1().HTTPRoutes(ns).Get(context.Background(), "web", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		backends = nil
		for _, b := range r.Spec.Rules[0].BackendRefs {
			backends = append(backends, fmt.Sprintf("%s:%d", b.Name, ptr.Deref(b.Weight, 1)))
		}
		return strings.Join(backends, " ") == "web-svc-stable:75 web-svc-canary:25", nil
	})
	if stable, _ := framework.DeploymentReplicas(t, c.Kube, ns, "web-deploy"); stable != 4 {
		t.Errorf("stable at %d, want 4", stable)
	}
	for _, name := range []string{"web-svc-stable", "web-svc-canary"} {
		s, err := c.Kube.CoreV1().Services(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("Service %s selects %v", name, s.Spec.Selector)
	}
	framework.RequestRollout(t, c.App, c.Kube, ns, "web", appv1.RolloutActionPromote)
	framework.Eventually(t, converge, func() (bool, error) {
		r, err := gw.GatewayV1().HTTPRoutes(ns).Get(context.Background(), "web", metav1.GetOptions{})
		_, sErr := c.Kube.CoreV1().Services(ns).Get(context.Background(), "web-svc-canary", metav1.GetOptions{})
		return err == nil && len(r.Spec.Rules[0].BackendRefs) == 1 && string(r.Spec.Rules[0].BackendRefs[0].Name) == "web-svc" && apierrors.IsNotFound(sErr), nil
	})
	if stable, image := framework.DeploymentReplicas(t, c.Kube, ns, "web-deploy"); stable != 4 || image != "nginx:2" {
		t.Errorf("promoted: stable %d %s, want 4 nginx:2", stable, image)
	}
}

// TestNoStrategyUnchanged: an App without spec.rollout rolls its pods at once, as before:
// no canary Deployment, no status.rollout.
func TestNoStrategyUnchanged(t *testing.T) {
	c := newClients(t)
	startManager(t, 0)
	ns := framework.Namespace(t)
	c.Create(t, newApp(ns, "plain", "nginx:1", 2))
	c.WaitReady(t, ns, "plain")
	c.Update(t, ns, "plain", func(a *appv1.App) { a.Spec.DeploymentTemplate.Image = "nginx:2" })
	c.WaitDeployment(t, ns, "plain-deploy", func(d *appsv1.Deployment) bool {
		return d.Spec.Template.Spec.Containers[0].Image == "nginx:2"
	})
	app := c.WaitReady(t, ns, "plain")
	if canary, _ := framework.DeploymentReplicas(t, c.Kube, ns, "plain-deploy-canary"); canary != -1 || app.Status.Rollout != nil {
		t.Errorf("canary %d, status.rollout %+v: want none", canary, app.Status.Rollout)
	}
}

// captureRollout checks the kstatus of the App and that the Argo CD health check agrees,
// and writes the App to test/gitops/testdata/STATE.json when APP_CONTROLLER_UPDATE_GOLDEN
// is set (the inputs of test/gitops).
func captureRollout(t *testing.T, c clients, ns, name, state string, want kstatus.Status) {
	t.Helper()
	u, err := framework.DynamicClient(t).Resource(schema.GroupVersion(appv1.GroupVersion).WithResource("apps")).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u.SetManagedFields(nil)
	got, argo, err := gitops.Health("../../../config/argocd/health.lua", u.Object)
	if err != nil {
		t.Fatal(err)
	}
	if got != want || !gitops.Agree(got, argo.Status) {
		t.Errorf("%s: kstatus %s (want %s), Argo CD %s: %s", state, got, want, argo.Status, argo.Message)
	}
	t.Logf("%s: kstatus %s, Argo CD %s: %s", state, got, argo.Status, argo.Message)
	if os.Getenv("APP_CONTROLLER_UPDATE_GOLDEN") == "" {
		return
	}
	data, err := json.MarshalIndent(u.Object, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("..", "..", "gitops", "testdata", state+".json"), append(data, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

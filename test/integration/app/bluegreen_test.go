package app

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// Blue-green rollouts (spec.rollout.blueGreen) on the real API server, pods run by kwok:
// the preview beside the active pods, the switch by kubectl app promote and by
// autoPromotionSeconds, an abort within the scale-down delay that switches back without
// a Deployment write, the end of the delay, a controller restarted before and after the
// switch, the manifest re-applied (kubectl apply, client- and server-side), the preview's
// HTTPRoute of previewHosts; each phase's writes to the children pinned.

// blueGreenApp returns an App of replicas with a Service web-svc and a blue-green
// strategy bg.
func blueGreenApp(ns, name string, replicas int32, bg *appv1.BlueGreenStrategy) *appv1.App {
	app := newApp(ns, name, "nginx:1", replicas)
	app.Spec.Rollout = &appv1.Rollout{BlueGreen: bg}
	return app
}

// childWrites returns the controller's writes to the children in ns since mark
// ("METHOD kind/name"), and the new mark: the App's status and the Events aside.
func (m *manager) childWrites(ns string, mark int) ([]string, int) {
	all := m.WritesIn(ns)
	var out []string
	for _, w := range all[mark:] {
		method, path, _ := strings.Cut(w, " ")
		parts := strings.Split(path, "/")
		if len(parts) < 2 {
			continue
		}
		kind, name := parts[len(parts)-2], parts[len(parts)-1]
		switch {
		case kind == "deployments", kind == "services", kind == "httproutes":
			out = append(out, method+" "+kind+"/"+name)
		case name == "controllerrevisions": // a create: POST .../namespaces/NS/controllerrevisions
			out = append(out, method+" controllerrevisions")
		}
	}
	slices.Sort(out)
	return out, len(all)
}

// expectChildWrites checks the child writes since *mark and moves it on.
func (m *manager) expectChildWrites(t *testing.T, ns, what string, mark *int, want ...string) {
	t.Helper()
	got, next := m.childWrites(ns, *mark)
	*mark = next
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("%s: writes to the children %q, want %q", what, got, want)
	}
}

// serviceSelector returns the selector of Service name in ns.
func (c clients) serviceSelector(t *testing.T, ns, name string) map[string]string {
	t.Helper()
	s, err := c.Kube.CoreV1().Services(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting Service %s: %v", name, err)
	}
	return s.Spec.Selector
}

// TestBlueGreen walks an App of 3 replicas through a blue-green rollout: the preview at
// 3 pods beside the stable 3 while the App's Service selects only the stable pods;
// nothing written at the switch's gate, nor by a re-apply of the manifest (client- and
// server-side) or a controller restarted there; kubectl app
// promote switches the Service's selector (one write); a restart after the switch
// switches nothing again; kubectl app abort within the scale-down delay switches back
// (one write, the stable Deployment never written: its pods never stopped), and a
// re-apply then changes nothing; promote
// retries; after the delay the stable Deployment takes the new template, then the
// Service selects all the pods again and the preview goes.
func TestBlueGreen(t *testing.T) {
	c := newClients(t)
	m := startManager(t, time.Second)
	ns := framework.Namespace(t)
	manifest := webManifest(t, ns, 3, `    blueGreen: {scaleDownDelaySeconds: 8, abortScaleDownDelaySeconds: 0}
`)
	framework.Kubectl(t, "apply", "-f", manifest("nginx:1"))
	c.WaitReady(t, ns, "web")
	c.WaitRollout(t, ns, "web", appv1.RolloutHealthy, 0)
	mark := m.waitQuiet(t, ns)
	stableRS := c.replicaSetsOf(t, ns, "web")

	start := time.Now()
	framework.Kubectl(t, "apply", "-f", manifest("nginx:2"))
	app := c.WaitRollout(t, ns, "web", appv1.RolloutPaused, 1)
	t.Logf("the preview up, waiting for the switch %.1fs after the change: %s", time.Since(start).Seconds(), app.Status.Rollout.Message)
	m.waitQuiet(t, ns)
	m.expectChildWrites(t, ns, "a new image: the preview", &mark, "POST controllerrevisions", "PATCH deployments/web-deploy-canary",
		"PATCH services/web-svc-preview", "PATCH services/web-svc")
	if n, image := framework.DeploymentReplicas(t, c.Kube, ns, "web-deploy-canary"); n != 3 || image != "nginx:2" {
		t.Errorf("preview %d %s, want 3 nginx:2", n, image)
	}
	if n, image := framework.DeploymentReplicas(t, c.Kube, ns, "web-deploy"); n != 3 || image != "nginx:1" {
		t.Errorf("stable %d %s, want 3 nginx:1", n, image)
	}
	stableHash := app.Status.Rollout.Stable.ReplicaSetHash
	if sel := c.serviceSelector(t, ns, "web-svc"); sel["pod-template-hash"] != stableHash || sel[appv1.TrackLabel] != "" {
		t.Errorf("the App's Service selects %v, want the stable pods (pod-template-hash %s)", sel, stableHash)
	}
	if sel := c.serviceSelector(t, ns, "web-svc-preview"); sel[appv1.TrackLabel] != appv1.TrackCanary {
		t.Errorf("the preview Service selects %v, want the preview's pods", sel)
	}
	quiet(t, m, ns, "three resyncs at the switch's gate", 3*time.Second)
	framework.Kubectl(t, "apply", "-f", manifest("nginx:2"))
	framework.Kubectl(t, "apply", "--server-side", "--force-conflicts", "--field-manager", "flux", "-f", manifest("nginx:2"))
	quiet(t, m, ns, "the manifest re-applied twice (client-side, server-side) at the switch's gate", 3*time.Second)

	if err := m.Run.Stop(t); err != nil {
		t.Fatal(err)
	}
	m = startManager(t, time.Second)
	quiet(t, m, ns, "a restarted controller at the switch's gate", 3*time.Second)
	mark = len(m.WritesIn(ns))

	framework.RequestRollout(t, c.App, c.Kube, ns, "web", appv1.RolloutActionPromote)
	c.WaitRollout(t, ns, "web", appv1.RolloutProgressing, 3)
	m.expectChildWrites(t, ns, "kubectl app promote: the switch", &mark, "PATCH services/web-svc")
	if sel := c.serviceSelector(t, ns, "web-svc"); sel[appv1.TrackLabel] != appv1.TrackCanary || sel["pod-template-hash"] != "" {
		t.Errorf("after the switch the App's Service selects %v, want the preview's pods", sel)
	}
	if err := m.Run.Stop(t); err != nil {
		t.Fatal(err)
	}
	m = startManager(t, time.Second)
	mark = len(m.WritesIn(ns))
	framework.RequestRollout(t, c.App, c.Kube, ns, "web", appv1.RolloutActionAbort)
	app = c.WaitRollout(t, ns, "web", appv1.RolloutAborted, 3)
	t.Logf("aborted after the switch: %s", app.Status.Rollout.AbortMessage)
	framework.Eventually(t, converge, func() (bool, error) {
		n, _ := framework.DeploymentReplicas(t, c.Kube, ns, "web-deploy-canary")
		return n == 0, nil
	})
	m.waitQuiet(t, ns)
	m.expectChildWrites(t, ns, "a restarted controller, then kubectl app abort: switched back, the preview to 0", &mark,
		"PATCH services/web-svc", "PATCH deployments/web-deploy-canary")
	if sel := c.serviceSelector(t, ns, "web-svc"); sel["pod-template-hash"] != stableHash {
		t.Errorf("after the abort the App's Service selects %v, want the stable pods", sel)
	}
	if got := c.replicaSetsOf(t, ns, "web"); !slices.Equal(withoutPreview(got), stableRS) {
		t.Errorf("the stable's ReplicaSets %v, were %v: the way back started pods", got, stableRS)
	}
	framework.WaitEvent(t, c.Kube, ns, "App", "web", "Warning RolloutAborted Blue-green rollout to revision", converge)
	framework.Kubectl(t, "apply", "--server-side", "--force-conflicts", "--field-manager", "flux", "-f", manifest("nginx:2"))
	quiet(t, m, ns, "the manifest re-applied while aborted", 3*time.Second)
	c.WaitRollout(t, ns, "web", appv1.RolloutAborted, 3)

	framework.RequestRollout(t, c.App, c.Kube, ns, "web", appv1.RolloutActionPromote)
	c.WaitRollout(t, ns, "web", appv1.RolloutPaused, 1)
	mark = m.waitQuiet(t, ns)
	framework.RequestRollout(t, c.App, c.Kube, ns, "web", appv1.RolloutActionPromote)
	framework.Eventually(t, converge, func() (bool, error) {
		app := c.GetApp(t, ns, "web")
		gone, _ := framework.DeploymentReplicas(t, c.Kube, ns, "web-deploy-canary")
		n, image := framework.DeploymentReplicas(t, c.Kube, ns, "web-deploy")
		return app.Status.Rollout.Phase == appv1.RolloutHealthy && gone == -1 && n == 3 && image == "nginx:2", nil
	})
	c.WaitReady(t, ns, "web")
	m.waitQuiet(t, ns)
	m.expectChildWrites(t, ns, "promoted: the switch, the stable's template after the delay, the Service on all the pods, the preview gone", &mark,
		"PATCH services/web-svc", "PATCH deployments/web-deploy", "PATCH services/web-svc", "DELETE services/web-svc-preview",
		"DELETE deployments/web-deploy-canary")
	if sel := c.serviceSelector(t, ns, "web-svc"); sel["pod-template-hash"] != "" || sel[appv1.TrackLabel] != "" {
		t.Errorf("at rest the App's Service selects %v, want all the App's pods", sel)
	}
	events := strings.Join(c.Events(t, ns, "App", "web"), "\n")
	for _, want := range []string{"RolloutStarted", `Stage "switch" of the blue-green rollout`, "RolloutPromoted"} {
		if !strings.Contains(events, want) {
			t.Errorf("no %s Event among\n%s", want, events)
		}
	}
}

// withoutPreview drops the preview's ReplicaSets from names.
func withoutPreview(names []string) []string {
	return slices.DeleteFunc(slices.Clone(names), func(n string) bool { return strings.HasPrefix(n, "web-deploy-canary-") })
}

// TestBlueGreenAutoPromotion: with autoPromotionSeconds the switch comes on its own once
// the preview is up, and without a scale-down delay the rollout ends.
func TestBlueGreenAutoPromotion(t *testing.T) {
	c := newClients(t)
	startManager(t, time.Second)
	ns := framework.Namespace(t)
	c.Create(t, blueGreenApp(ns, "web", 2, &appv1.BlueGreenStrategy{AutoPromotionSeconds: ptr.To[int32](1), ScaleDownDelaySeconds: ptr.To[int32](0)}))
	c.WaitReady(t, ns, "web")
	c.WaitRollout(t, ns, "web", appv1.RolloutHealthy, 0)
	start := time.Now()
	c.Update(t, ns, "web", func(a *appv1.App) { a.Spec.DeploymentTemplate.Image = "nginx:2" })
	framework.Eventually(t, converge, func() (bool, error) {
		app := c.GetApp(t, ns, "web")
		gone, _ := framework.DeploymentReplicas(t, c.Kube, ns, "web-deploy-canary")
		_, image := framework.DeploymentReplicas(t, c.Kube, ns, "web-deploy")
		return app.Status.Rollout.Phase == appv1.RolloutHealthy && gone == -1 && image == "nginx:2", nil
	})
	t.Logf("promoted on its own %.1fs after the change", time.Since(start).Seconds())
	c.WaitReady(t, ns, "web")
	events := strings.Join(c.Events(t, ns, "App", "web"), "\n")
	if !strings.Contains(events, `Stage "switch" of the blue-green rollout`) || !strings.Contains(events, "after its duration") {
		t.Errorf("no switch after its duration among\n%s", events)
	}
}

// TestBlueGreenPreviewRoute: an App with an HTTPRoute and previewHosts. CEL refuses a
// preview host that the route has. A new image writes the preview's HTTPRoute
// (web-preview: the App's Gateway, the preview host, the preview Service) with the
// preview, once, and never the App's HTTPRoute; an abort before the switch (no abort
// delay) scales the preview to 0 and deletes its route; promote starts the preview and
// its route again; promote switches, and at the promotion's end the preview's route
// goes with the preview Service, the App's HTTPRoute untouched throughout.
func TestBlueGreenPreviewRoute(t *testing.T) {
	c := newClients(t)
	gw := framework.GatewayClient(t)
	m := startManager(t, time.Second)
	ns := framework.Namespace(t)
	ctx := context.Background()
	app := blueGreenApp(ns, "web", 2, &appv1.BlueGreenStrategy{ScaleDownDelaySeconds: ptr.To[int32](0), AbortScaleDownDelaySeconds: ptr.To[int32](0)})
	app.Spec.Route = &appv1.Route{Hosts: []appv1.Hostname{"web.example.com"}, ParentRefs: []appv1.GatewayRef{{Name: "public"}}}
	c.Create(t, app)
	c.WaitRollout(t, ns, "web", appv1.RolloutHealthy, 0)

	// From a fresh read on a conflict: the controller may still write the App's status
	// (its Deployment available after the rollout's Healthy).
	_, err := edit(t, c.App.AppcontrollerV1().Apps(ns), "App", "web", func(a *appv1.App) {
		a.Spec.Rollout.BlueGreen.PreviewHosts = []appv1.Hostname{"web.example.com"}
	})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.rollout.blueGreen.previewHosts: Invalid value") ||
		!strings.Contains(err.Error(), "must not repeat a host of route.hosts") {
		t.Errorf("a preview host of the route's hosts: %v, want Invalid naming spec.rollout.blueGreen.previewHosts", err)
	}
	mark := m.waitQuiet(t, ns)
	c.Update(t, ns, "web", func(a *appv1.App) { a.Spec.Rollout.BlueGreen.PreviewHosts = []appv1.Hostname{"preview.example.com"} })
	m.waitQuiet(t, ns)
	m.expectChildWrites(t, ns, "previewHosts added at rest", &mark, "POST controllerrevisions")
	if _, err := gw.GatewayV1().HTTPRoutes(ns).Get(ctx, "web-preview", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("HTTPRoute web-preview at rest: %v, want NotFound", err)
	}
	appRoute, err := gw.GatewayV1().HTTPRoutes(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := c.Kube.CoreV1().Services(ns).Get(ctx, "web-svc", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkPreviewRoute := func(what string) {
		t.Helper()
		r, err := gw.GatewayV1().HTTPRoutes(ns).Get(ctx, "web-preview", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: HTTPRoute web-preview: %v", what, err)
		}
		got := fmt.Sprintf("parent %s hosts %v rules %d backends %d %s:%d path %s owner %s track %s", r.Spec.ParentRefs[0].Name, r.Spec.Hostnames, len(r.Spec.Rules),
			len(r.Spec.Rules[0].BackendRefs), r.Spec.Rules[0].BackendRefs[0].Name, ptr.Deref(r.Spec.Rules[0].BackendRefs[0].Port, 0),
			ptr.Deref(r.Spec.Rules[0].Matches[0].Path.Value, ""), metav1.GetControllerOf(r).Name, r.Labels[appv1.TrackLabel])
		want := fmt.Sprintf("parent public hosts [preview.example.com] rules 1 backends 1 web-svc-preview:%d path / owner web track preview", svc.Spec.Ports[0].Port)
		if got != want {
			t.Errorf("%s: HTTPRoute web-preview %s, want %s", what, got, want)
		}
	}
	previewRouteGone := func() {
		t.Helper()
		framework.Eventually(t, converge, func() (bool, error) {
			_, err := gw.GatewayV1().HTTPRoutes(ns).Get(ctx, "web-preview", metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
	}

	c.Update(t, ns, "web", func(a *appv1.App) { a.Spec.DeploymentTemplate.Image = "nginx:2" })
	c.WaitRollout(t, ns, "web", appv1.RolloutPaused, 1)
	m.waitQuiet(t, ns)
	m.expectChildWrites(t, ns, "a new image: the preview and its route", &mark, "POST controllerrevisions", "PATCH deployments/web-deploy-canary",
		"PATCH services/web-svc-preview", "PATCH services/web-svc", "PATCH httproutes/web-preview")
	checkPreviewRoute("the preview up")

	framework.RequestRollout(t, c.App, c.Kube, ns, "web", appv1.RolloutActionAbort)
	c.WaitRollout(t, ns, "web", appv1.RolloutAborted, 1)
	previewRouteGone()
	m.waitQuiet(t, ns)
	m.expectChildWrites(t, ns, "aborted before the switch: the preview to 0, its route deleted", &mark,
		"PATCH deployments/web-deploy-canary", "DELETE httproutes/web-preview")
	framework.WaitEvent(t, c.Kube, ns, "App", "web", `Normal Pruned Deleted HTTPRoute "web-preview": no blue-green rollout runs`, converge)

	framework.RequestRollout(t, c.App, c.Kube, ns, "web", appv1.RolloutActionPromote)
	c.WaitRollout(t, ns, "web", appv1.RolloutPaused, 1)
	m.waitQuiet(t, ns)
	m.expectChildWrites(t, ns, "promote after the abort: the preview and its route again", &mark,
		"PATCH deployments/web-deploy-canary", "PATCH httproutes/web-preview")
	checkPreviewRoute("the preview up again")

	framework.RequestRollout(t, c.App, c.Kube, ns, "web", appv1.RolloutActionPromote)
	framework.Eventually(t, converge, func() (bool, error) {
		app := c.GetApp(t, ns, "web")
		gone, _ := framework.DeploymentReplicas(t, c.Kube, ns, "web-deploy-canary")
		_, image := framework.DeploymentReplicas(t, c.Kube, ns, "web-deploy")
		return app.Status.Rollout.Phase == appv1.RolloutHealthy && gone == -1 && image == "nginx:2", nil
	})
	previewRouteGone()
	m.waitQuiet(t, ns)
	m.expectChildWrites(t, ns, "promoted: the switch, the stable's template, the Service on all the pods, the preview, its Service and route gone", &mark,
		"PATCH services/web-svc", "PATCH deployments/web-deploy", "PATCH services/web-svc", "DELETE services/web-svc-preview",
		"DELETE httproutes/web-preview", "DELETE deployments/web-deploy-canary")
	after, err := gw.GatewayV1().HTTPRoutes(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil || after.Generation != appRoute.Generation {
		t.Errorf("the App's HTTPRoute: generation %d, was %d (%v): written during the rollout", after.Generation, appRoute.Generation, err)
	}
}

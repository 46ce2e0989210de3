package app

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// A canary's header route and mirror (setHeaderRoute, setMirrorRoute) on the real API
// server, pods run by kwok: the HTTPRoute the controller writes for each step is one the
// API server's validation of the Gateway API takes, written once per step, and an abort
// takes both away in one write; a Gateway whose GatewayClass does not list the mirror
// never gets one.

// routedApp returns an App of 4 replicas with an HTTPRoute to Gateway gateway, whose
// rollout has steps.
func routedApp(ns, name, gateway string, steps ...appv1.CanaryStep) *appv1.App {
	app := rolloutApp(ns, name, 4, steps...)
	app.Spec.Route = &appv1.Route{Hosts: []appv1.Hostname{appv1.Hostname(name + ".example.com")}, ParentRefs: []appv1.GatewayRef{{Name: gateway}}}
	return app
}

// describeRoute describes the rules of an HTTPRoute: each rule's backends with their
// weights, its mirror, and its header matches.
func describeRoute(r *gatewayv1.HTTPRoute) string {
	var rules []string
	for _, rule := range r.Spec.Rules {
		var parts []string
		for _, b := range rule.BackendRefs {
			parts = append(parts, fmt.Sprintf("%s:%d", b.Name, ptr.Deref(b.Weight, 1)))
		}
		for _, f := range rule.Filters {
			if f.RequestMirror != nil {
				parts = append(parts, fmt.Sprintf("mirror %s %d%%", f.RequestMirror.BackendRef.Name, ptr.Deref(f.RequestMirror.Percent, 100)))
			}
		}
		for _, h := range rule.Matches[0].Headers {
			parts = append(parts, fmt.Sprintf("%s %s=%s", ptr.Deref(h.Type, gatewayv1.HeaderMatchExact), h.Name, h.Value))
		}
		rules = append(rules, strings.Join(parts, " "))
	}
	return strings.Join(rules, " | ")
}

// routeWrites counts the controller's writes of HTTPRoutes among writes.
func routeWrites(writes []string) int {
	n := 0
	for _, w := range writes {
		if strings.Contains(w, "/httproutes/") {
			n++
		}
	}
	return n
}

// TestRolloutHeaderRouteAndMirror: a header route, 25%, a mirror of 50%, a pause; the
// HTTPRoute at the pause has the weighted rule with its RequestMirror filter and the
// header route's rule, in one write of it a step (the split, the header route, the
// weight, the mirror; the first two in one when the canary's pod is up by then); an
// abort is one more write, back to the weights alone.
func TestRolloutHeaderRouteAndMirror(t *testing.T) {
	c := newClients(t)
	m := startManager(t, 0)
	ns := framework.Namespace(t)
	c.Create(t, routedApp(ns, "web", "public",
		appv1.CanaryStep{SetHeaderRoute: &appv1.HeaderRoute{Match: []appv1.RouteMatch{{Header: "X-Canary", Exact: "always"}, {Cookie: "canary", Regex: "y.*"}}}},
		setWeight(25),
		appv1.CanaryStep{SetMirrorRoute: &appv1.MirrorRoute{Percent: ptr.To[int32](50)}},
		pause(0)))
	c.WaitRollout(t, ns, "web", appv1.RolloutHealthy, 0)
	c.WaitDeployment(t, ns, "web-deploy", func(d *appsv1.Deployment) bool {
		return d.Status.ObservedGeneration == d.Generation && d.Status.UpdatedReplicas == 4 && d.Status.Replicas == 4 && d.Status.AvailableReplicas == 4
	})
	var (
		mu     sync.Mutex
		routes []string
	)
	m.SetBeforeWrite(func(req *http.Request) {
		if !strings.HasSuffix(req.URL.Path, "/namespaces/"+ns+"/httproutes/web") || req.GetBody == nil {
			return
		}
		body, err := req.GetBody()
		if err != nil {
			return
		}
		defer body.Close()
		var r gatewayv1.HTTPRoute
		if err := json.NewDecoder(body).Decode(&r); err != nil {
			return
		}
		mu.Lock()
		routes = append(routes, describeRoute(&r))
		mu.Unlock()
	})
	before := len(m.WritesIn(ns))
	c.Update(t, ns, "web", func(a *appv1.App) { a.Spec.DeploymentTemplate.Image = "nginx:2" })
	c.WaitRollout(t, ns, "web", appv1.RolloutPaused, 3)
	gw := framework.GatewayClient(t)
	route := func() string {
		r, err := gw.GatewayV1().HTTPRoutes(ns).Get(context.Background(), "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return describeRoute(r)
	}
	header := `web-svc-canary:1 Exact X-Canary=always RegularExpression Cookie=(^|;\s*)canary=(?:y.*)(;|$)`
	steps := []string{
		"web-svc-stable:100 web-svc-canary:0",
		"web-svc-stable:100 web-svc-canary:0 | " + header,
		"web-svc-stable:75 web-svc-canary:25 | " + header,
		"web-svc-stable:75 web-svc-canary:25 mirror web-svc-canary 50% | " + header,
	}
	if got := route(); got != steps[3] {
		t.Errorf("HTTPRoute at the pause:\n%s\nwant\n%s", got, steps[3])
	}
	// One write a step, each a new state of the route in the order of the steps: the
	// split is written with the header route when the canary's pod is available by the
	// time the split Services are (kwok's pods are ready at once), else before it.
	mu.Lock()
	written := slices.Clone(routes)
	mu.Unlock()
	for i, r := range written {
		t.Logf("HTTPRoute write %d: %s", i+1, r)
	}
	next := 0
	for _, r := range written {
		i := slices.Index(steps[next:], r)
		if i < 0 {
			t.Errorf("HTTPRoute written as %s: not a step's route after the previous write's (%d writes)", r, len(written))
			break
		}
		next += i + 1
	}
	if n := routeWrites(m.WritesIn(ns)[before:]); n != len(written) || n < 3 || n > 4 || written[n-1] != steps[3] {
		t.Errorf("%d writes of the HTTPRoute to the pause (%d seen), want 4, or 3 with the split and the header route in one", n, len(written))
	}
	if canary, _ := framework.DeploymentReplicas(t, c.Kube, ns, "web-deploy-canary"); canary != 2 {
		t.Errorf("canary at %d, want 2 for the mirror's 50%% of 4", canary)
	}
	if msg := c.GetApp(t, ns, "web").Status.Rollout.Message; !strings.Contains(msg, "header route X-Canary: always, cookie canary ~ y.*, mirror 50%") {
		t.Errorf("status.rollout.message %q does not name the header route and the mirror", msg)
	}

	mark := len(m.WritesIn(ns))
	framework.RequestRollout(t, c.App, c.Kube, ns, "web", appv1.RolloutActionAbort)
	c.WaitRollout(t, ns, "web", appv1.RolloutAborted, 3)
	framework.Eventually(t, converge, func() (bool, error) { return route() == steps[0], nil })
	quiet(t, m, ns, "aborted, within the abort's scale-down delay", 2*time.Second)
	if n := routeWrites(m.WritesIn(ns)[mark:]); n != 1 {
		t.Errorf("%d writes of the HTTPRoute at the abort, want 1 (the weights alone, no header route, no mirror): %q", n, m.WritesIn(ns)[mark:])
	}
}

// TestRolloutMirrorUnsupported: the App's Gateway is of a GatewayClass whose
// supportedFeatures lack HTTPRouteRequestMirror (as Traefik 3.6's do): the mirror step
// aborts the rollout (MirrorUnsupported, naming the class), and the HTTPRoute never has
// a RequestMirror filter.
func TestRolloutMirrorUnsupported(t *testing.T) {
	c := newClients(t)
	m := startManager(t, 0)
	ns := framework.Namespace(t)
	gw := framework.GatewayClient(t)
	ctx := context.Background()
	className := gatewayv1.ObjectName("no-mirror-" + ns)
	class, err := gw.GatewayV1().GatewayClasses().Create(ctx, &gatewayv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: string(className)},
		Spec: gatewayv1.GatewayClassSpec{ControllerName: "example.com/no-mirror"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gw.GatewayV1().GatewayClasses().Delete(ctx, class.Name, metav1.DeleteOptions{}) })
	class.Status.SupportedFeatures = []gatewayv1.SupportedFeature{{Name: "Gateway"}, {Name: "HTTPRoute"}, {Name: "HTTPRouteQueryParamMatching"}}
	if _, err := gw.GatewayV1().GatewayClasses().UpdateStatus(ctx, class, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := gw.GatewayV1().Gateways(ns).Create(ctx, &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Name: "edge"},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: className, Listeners: []gatewayv1.Listener{{Name: "http", Port: 80, Protocol: gatewayv1.HTTPProtocolType}}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.Create(t, routedApp(ns, "web", "edge", setWeight(25), appv1.CanaryStep{SetMirrorRoute: &appv1.MirrorRoute{Percent: ptr.To[int32](10)}}, pause(0)))
	c.WaitRollout(t, ns, "web", appv1.RolloutHealthy, 0)
	c.WaitDeployment(t, ns, "web-deploy", func(d *appsv1.Deployment) bool {
		return d.Status.ObservedGeneration == d.Generation && d.Status.UpdatedReplicas == 4 && d.Status.Replicas == 4 && d.Status.AvailableReplicas == 4
	})
	c.Update(t, ns, "web", func(a *appv1.App) { a.Spec.DeploymentTemplate.Image = "nginx:2" })
	c.WaitAborted(t, ns, "web", 1, appv1.ReasonMirrorUnsupported, fmt.Sprintf("Gateway %s/edge (GatewayClass %s, controller example.com/no-mirror) does not support mirroring 10%% of the requests: its class's supportedFeatures lack HTTPRouteRequestMirror and HTTPRouteRequestPercentageMirror", ns, className))
	// The Event is written after the status (the recorder's own goroutine).
	framework.Eventually(t, converge, func() (bool, error) {
		return strings.Contains(strings.Join(c.Events(t, ns, "App", "web"), "\n"), "does not support mirroring"), nil
	})
	framework.Eventually(t, converge, func() (bool, error) {
		route, err := gw.GatewayV1().HTTPRoutes(ns).Get(ctx, "web", metav1.GetOptions{})
		return err == nil && describeRoute(route) == "web-svc-stable:100 web-svc-canary:0", nil
	})
	for _, w := range m.WritesIn(ns) {
		t.Log(w)
	}
}

package app

import (
	"errors"

	"fmt"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	core "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// routingSteps: a header route first, then 25%, a mirror of 50%, a pause.
func routingSteps() []appv1.CanaryStep {
	return []appv1.CanaryStep{
		{SetHeaderRoute: &appv1.HeaderRoute{Match: []appv1.RouteMatch{{Header: "X-Canary", Exact: "always"}, {Cookie: "canary", Exact: "yes"}}}},
		{SetWeight: ptr.To[int32](25)},
		{SetMirrorRoute: &appv1.MirrorRoute{Percent: ptr.To[int32](50)}},
		{Pause: &appv1.CanaryPause{}},
	}
}

// routingWorld is canaryWorld with the Gateway API and routingSteps, a new image
// started and the canary Deployment settled at its first size.
func routingWorld(t *testing.T, gatewayObjects ...func(*world)) *world {
	t.Helper()
	w := canaryWorldOf(t, true, nil, gatewayObjects...)
	w.edit(true, func(a *appv1.App) { a.Spec.Rollout.Canary.Steps = routingSteps() })
	w.step("the strategy added", []string{"create controllerrevisions web-<rev>", "patch apps/status web"}, "Healthy 0")
	w.edit(true, func(a *appv1.App) { a.Spec.DeploymentTemplate.Image = "nginx:2" })
	w.step("a new image: the split Services first (the route names them once they exist)", []string{
		"create controllerrevisions web-<rev>", "patch apps/status web",
		"patch services web-service-stable", "patch services web-service-canary",
	}, "Progressing 0")
	w.step("the split Services there: one canary pod for the header route, the split at 100/0, no header route yet", []string{
		"patch deployments web-deploy-canary", "patch httproutes web",
	}, "Progressing 0")
	if got := w.routeRules(); got != "stable:100 canary:0" {
		t.Errorf("route %s, want no header route before the canary's pod is up", got)
	}
	if n := w.deploymentReplicas("web-deploy-canary"); n != 1 {
		t.Errorf("canary at %d replicas at weight 0 with a header route, want 1", n)
	}
	w.deploymentSettles("web-deploy-canary", "cccc")
	return w
}

// TestRolloutHeaderRouteAndMirror walks a rollout through a header route and a mirror
// and counts each step's writes: each is one write of the HTTPRoute once the canary's
// pods for it are available, the step ends when the route has it, both stay through
// the later steps, and the promotion takes both away with the split.
func TestRolloutHeaderRouteAndMirror(t *testing.T) {
	w := routingWorld(t)
	w.step("the canary up: the header route", []string{"patch httproutes web"}, "Progressing 0")
	header := `canary[Exact X-Canary=always, RegularExpression Cookie=(^|;\s*)canary=yes(;|$)]`
	if got := w.routeRules(); got != "stable:100 canary:0 | "+header {
		t.Errorf("route %s", got)
	}
	w.step("the header route in effect: setWeight 25, in effect at once", []string{"patch apps/status web", "patch httproutes web"}, "Progressing 1")
	if got := w.routeRules(); got != "stable:75 canary:25 | "+header {
		t.Errorf("route %s, want 75/25 and the header route kept", got)
	}
	w.step("the weight in effect: the mirror's two canary pods first", []string{"patch apps/status web", "patch deployments web-deploy-canary"}, "Progressing 2")
	if got := w.routeRules(); got != "stable:75 canary:25 | "+header {
		t.Errorf("route %s, want no mirror before its pods", got)
	}
	w.step("a resync while the canary's pods start", nil, "Progressing 2")
	w.deploymentSettles("web-deploy-canary", "cccc")
	w.step("the pods up: the mirror", []string{"patch httproutes web"}, "Progressing 2")
	if got := w.routeRules(); got != "stable:75 canary:25 mirror canary 50% | "+header {
		t.Errorf("route %s", got)
	}
	w.step("the mirror in effect: the pause", []string{"patch apps/status web"}, "Paused 3")
	if msg := w.app().Status.Rollout.Message; !strings.Contains(msg, "canary at 25% and header route X-Canary: always, cookie canary=yes, mirror 50%") {
		t.Errorf("message %q", msg)
	}
	w.step("a resync in the pause", nil, "Paused 3")

	w.request(appv1.RolloutActionPromoteFull, "full-1")
	w.step("kubectl app promote --full: the canary grows first, no header route, no mirror", []string{
		"patch apps/status web", "patch deployments web-deploy-canary", "patch httproutes web",
	}, "Progressing 4")
	if got := w.routeRules(); got != "stable:75 canary:25" {
		t.Errorf("route %s, want the weights alone at the promotion", got)
	}
}

// TestRolloutHeaderRouteAbort: an abort takes the header route away with the weights, in
// one write of the HTTPRoute.
func TestRolloutHeaderRouteAbort(t *testing.T) {
	w := routingWorld(t)
	w.step("the canary up: the header route", []string{"patch httproutes web"}, "Progressing 0")
	w.request(appv1.RolloutActionAbort, "abort-1")
	w.step("kubectl app abort: no header route, all the traffic on the stable", []string{"patch apps/status web", "patch httproutes web"}, "Aborted 0")
	if got := w.routeRules(); got != "stable:100 canary:0" {
		t.Errorf("route %s, want 100/0 alone", got)
	}
	w.step("at rest, aborted", nil, "Aborted 0")
}

// TestRolloutMirrorUnsupported: a Gateway whose GatewayClass lists its features without
// the mirror's never gets the filter: the rollout aborts (MirrorUnsupported) naming the
// class and what it lacks, the route keeps its weights and header route until the abort
// takes them away.
func TestRolloutMirrorUnsupported(t *testing.T) {
	w := routingWorld(t, func(w *world) {
		gw := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Name: "public", Namespace: w.key.Namespace}, Spec: gatewayv1.GatewaySpec{GatewayClassName: "traefik"}}
		class := &gatewayv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "traefik"}, Spec: gatewayv1.GatewayClassSpec{ControllerName: "traefik.io/gateway-controller"},
			Status: gatewayv1.GatewayClassStatus{SupportedFeatures: []gatewayv1.SupportedFeature{{Name: "HTTPRoute"}, {Name: "HTTPRouteHostRewrite"}}}}
		// The fake clientset's field-managed tracker serves no Gateways: answer the GETs.
		w.f.gatewayClient.PrependReactor("get", "*", func(a core.Action) (bool, runtime.Object, error) {
			switch name := a.(core.GetAction).GetName(); {
			case a.GetResource().Resource == "gateways" && name == gw.Name && a.GetNamespace() == gw.Namespace:
				return true, gw.DeepCopy(), nil
			case a.GetResource().Resource == "gatewayclasses" && name == class.Name:
				return true, class.DeepCopy(), nil
			}
			return false, nil, nil
		})
	})
	w.step("the canary up: the header route", []string{"patch httproutes web"}, "Progressing 0")
	w.step("setWeight 25", []string{"patch apps/status web", "patch httproutes web"}, "Progressing 1")
	w.step("the mirror's step: neither its pods nor the filter", []string{"patch apps/status web"}, "Progressing 2")
	w.step("the Gateway cannot mirror: aborted", []string{"patch apps/status web", "patch httproutes web"}, "Aborted 2")
	r := w.app().Status.Rollout
	if r.AbortReason != appv1.ReasonMirrorUnsupported || !strings.Contains(r.AbortMessage,
		"Gateway tcs/public (GatewayClass traefik, controller traefik.io/gateway-controller) does not support mirroring 50% of the requests: its class's supportedFeatures lack HTTPRouteRequestMirror and HTTPRouteRequestPercentageMirror") {
		t.Errorf("abort %s: %s", r.AbortReason, r.AbortMessage)
	}
	if got := w.routeRules(); got != "stable:100 canary:0" {
		t.Errorf("route %s, want 100/0 alone", got)
	}
	if !slices.ContainsFunc(w.events, func(e string) bool {
		return strings.Contains(e, "MirrorUnsupported") || strings.Contains(e, "lack HTTPRouteRequestMirror")
	}) {
		t.Errorf("no Event names the mirror: %q", w.events)
	}
}

// routeRules describes the rules of the App's HTTPRoute as the fake API server holds
// it: the weighted rule's backends ("stable:75 canary:25", the Services' suffixes) and
// its mirror, then " | " and each other rule's backend and header matches.
func (w *world) routeRules() string {
	w.t.Helper()
	obj, err := w.f.gatewayClient.Tracker().Get(httpRouteResource, w.key.Namespace, w.key.Name)
	if err != nil {
		w.t.Fatalf("getting the HTTPRoute: %v", err)
	}
	short := func(name gatewayv1.ObjectName) string { return strings.TrimPrefix(string(name), "web-service-") }
	var rules []string
	for i, rule := range obj.(*gatewayv1.HTTPRoute).Spec.Rules {
		var parts []string
		for _, b := range rule.BackendRefs {
			s := short(b.Name)
			if b.Weight != nil {
				s += fmt.Sprintf(":%d", *b.Weight)
			}
			parts = append(parts, s)
		}
		for _, f := range rule.Filters {
			if f.RequestMirror != nil {
				parts = append(parts, fmt.Sprintf("mirror %s %d%%", short(f.RequestMirror.BackendRef.Name), ptr.Deref(f.RequestMirror.Percent, 100)))
			}
		}
		if i > 0 {
			var hs []string
			for _, h := range rule.Matches[0].Headers {
				hs = append(hs, fmt.Sprintf("%s %s=%s", ptr.Deref(h.Type, gatewayv1.HeaderMatchExact), h.Name, h.Value))
			}
			parts[len(parts)-1] += "[" + strings.Join(hs, ", ") + "]"
		}
		rules = append(rules, strings.Join(parts, " "))
	}
	return strings.Join(rules, " | ")
}

// TestRolloutMirrorGatewayUnreadable: a Gateway the controller may not read (a
// controller that watches some namespaces only) cannot be told to support the mirror:
// the rollout aborts, saying so, rather than write a filter the Gateway may answer with
// errors.
func TestRolloutMirrorGatewayUnreadable(t *testing.T) {
	w := routingWorld(t, func(w *world) {
		w.f.gatewayClient.PrependReactor("get", "gateways", func(a core.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(gatewayv1.Resource("gateways"), a.(core.GetAction).GetName(), errors.New("not allowed"))
		})
	})
	w.step("the canary up: the header route", []string{"patch httproutes web"}, "Progressing 0")
	w.step("setWeight 25", []string{"patch apps/status web", "patch httproutes web"}, "Progressing 1")
	w.step("the mirror's step", []string{"patch apps/status web"}, "Progressing 2")
	w.step("cannot tell: aborted", []string{"patch apps/status web", "patch httproutes web"}, "Aborted 2")
	r := w.app().Status.Rollout
	if want := `cannot tell whether Gateway tcs/public supports mirroring: reading it: gateways.gateway.networking.k8s.io "public" is forbidden: not allowed`; r.AbortReason != appv1.ReasonMirrorUnsupported || r.AbortMessage != want {
		t.Errorf("abort %s: %s\nwant %s", r.AbortReason, r.AbortMessage, want)
	}
	if got := w.routeRules(); got != "stable:100 canary:0" {
		t.Errorf("route %s, want 100/0 alone", got)
	}
}

package soak

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/test/harness"
)

// TestCheckRouteWeights pins the HTTPRoute weights invariant: within a split, the
// canary's weight goes up or back to 0 (an abort, the steps again); a split that ends
// (the route back on the App's Service) starts the next one from anything.
func TestCheckRouteWeights(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 16, 0, 0, 0, time.UTC)
	w := func(s int, backends map[string]int32) routeWrite {
		return routeWrite{at: t0.Add(time.Duration(s) * time.Second), namespace: "soak-0", name: "a00009", backends: backends}
	}
	split := func(s int, canary int32) routeWrite {
		return w(s, map[string]int32{"a00009-svc-stable": 100 - canary, "a00009-svc-canary": canary})
	}
	whole := func(s int) routeWrite { return w(s, map[string]int32{"a00009-svc": 1}) }
	// canaryAlone is the route at canary 100, which no longer names the stable Service.
	canaryAlone := func(s int) routeWrite { return w(s, map[string]int32{"a00009-svc-canary": 100}) }
	for _, tc := range []struct {
		name      string
		writes    []routeWrite
		decreases int
		splits    int
	}{
		{name: "steps and promotion", writes: []routeWrite{whole(0), split(1, 0), split(2, 25), split(3, 75), split(4, 100), whole(5)}, splits: 1},
		{name: "an abort to 0, then the steps again", writes: []routeWrite{split(1, 0), split(2, 25), split(3, 0), split(4, 25), split(5, 75)}, splits: 1},
		{name: "a step back", writes: []routeWrite{split(1, 25), split(2, 75), split(3, 25)}, splits: 1, decreases: 1},
		{name: "two rollouts", writes: []routeWrite{split(1, 75), split(2, 100), whole(3), split(4, 25)}, splits: 2},
		{name: "the canary alone at 100, then the App's Service", writes: []routeWrite{whole(0), split(1, 0), split(2, 25), canaryAlone(3), whole(4)}, splits: 1},
		{name: "the canary alone at 100, then a step back", writes: []routeWrite{split(1, 25), canaryAlone(2), split(3, 25)}, splits: 1, decreases: 1},
		{name: "out of order in the log", writes: []routeWrite{split(3, 75), split(1, 0), split(2, 25)}, splits: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &RolloutChecks{}
			c.checkRouteWeights(tc.writes)
			if len(c.WeightDecreases) != tc.decreases || c.RouteSplits != tc.splits || c.RouteWrites != len(tc.writes) {
				t.Errorf("decreases %q, splits %d, writes %d; want %d decreases, %d splits, %d writes",
					c.WeightDecreases, c.RouteSplits, c.RouteWrites, tc.decreases, tc.splits, len(tc.writes))
			}
		})
	}
}

// TestAddRoute reads the weights of an HTTPRoute's apply body as the audit log keeps it.
func TestAddRoute(t *testing.T) {
	ev := harness.AuditEvent{Verb: "patch", RequestObject: json.RawMessage(`{"apiVersion":"gateway.networking.k8s.io/v1","kind":"HTTPRoute",
		"metadata":{"name":"a00009","namespace":"soak-0"},"spec":{"parentRefs":[{"name":"public","namespace":"soak-gateway"}],
		"rules":[{"backendRefs":[{"name":"a00009-svc-stable","port":80,"weight":75},{"name":"a00009-svc-canary","port":80,"weight":25}]}]}}`)}
	ev.ObjectRef = &struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
		Subresource string `json:"subresource"`
	}{Resource: "httproutes", Namespace: "soak-0", Name: "a00009", APIGroup: groupGateway}
	b := &bodies{}
	if err := b.addRoute(ev, "soak"); err != nil {
		t.Fatal(err)
	}
	if len(b.routes) != 1 {
		t.Fatalf("routes %+v, want one", b.routes)
	}
	if canary, ok := b.routes[0].split(); !ok || canary != 25 {
		t.Errorf("split() = %d, %v; want 25, true (%+v)", canary, ok, b.routes[0])
	}
	ev.RequestObject = json.RawMessage(`{"metadata":{"name":"a00009"}}`)
	if err := b.addRoute(ev, "soak"); err != nil || len(b.routes) != 1 {
		t.Errorf("a body without rules: %v, routes %d, want skipped", err, len(b.routes))
	}
}

// TestRouteAtRest pins what an HTTPRoute of a canary at rest may route to: the App's
// Service alone; an aborted rollout also its split at stable 100, canary 0.
func TestRouteAtRest(t *testing.T) {
	route := func(backends ...gatewayv1.HTTPBackendRef) *gatewayv1.HTTPRoute {
		return &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: gatewayv1.HTTPRouteSpec{Rules: []gatewayv1.HTTPRouteRule{{BackendRefs: backends}}}}
	}
	ref := func(name string, weight *int32) gatewayv1.HTTPBackendRef {
		return gatewayv1.HTTPBackendRef{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{Name: gatewayv1.ObjectName(name)}, Weight: weight}}
	}
	for _, tc := range []struct {
		name    string
		route   *gatewayv1.HTTPRoute
		aborted bool
		wrong   string
	}{
		{name: "the App's Service", route: route(ref("svc", nil))},
		{name: "split left", route: route(ref("svc-stable", ptr.To[int32](100)), ref("svc-canary", ptr.To[int32](0))), wrong: "want svc alone"},
		{name: "aborted at 100/0", route: route(ref("svc-stable", ptr.To[int32](100)), ref("svc-canary", ptr.To[int32](0))), aborted: true},
		{name: "aborted with weight on the canary", route: route(ref("svc-stable", ptr.To[int32](75)), ref("svc-canary", ptr.To[int32](25))), aborted: true, wrong: "want svc alone"},
		{name: "another Service", route: route(ref("other", nil)), wrong: "want svc alone"},
		{name: "no rule", route: &gatewayv1.HTTPRoute{}, wrong: "no rule"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := routeAtRest(tc.route, "svc", tc.aborted)
			if tc.wrong == "" && got != "" || tc.wrong != "" && !strings.Contains(got, tc.wrong) {
				t.Errorf("routeAtRest = %q, want %q", got, tc.wrong)
			}
		})
	}
}

// TestRouteSplit: only a canary whose route has parentRefs splits by an HTTPRoute.
func TestRouteSplit(t *testing.T) {
	canary := &appv1.Rollout{Canary: &appv1.CanaryStrategy{Steps: gateSteps()}}
	for _, tc := range []struct {
		name string
		spec appv1.AppSpec
		want bool
	}{
		{name: "canary with a Gateway route", spec: appv1.AppSpec{Rollout: canary, Route: &appv1.Route{Hosts: []appv1.Hostname{"a.test"}, ParentRefs: gatewayParent()}}, want: true},
		{name: "canary with an Ingress", spec: appv1.AppSpec{Rollout: canary, Route: &appv1.Route{Hosts: []appv1.Hostname{"a.test"}}}},
		{name: "canary without a route", spec: appv1.AppSpec{Rollout: canary}},
		{name: "no strategy, Gateway route", spec: appv1.AppSpec{Route: &appv1.Route{Hosts: []appv1.Hostname{"a.test"}, ParentRefs: gatewayParent()}}},
	} {
		if got := routeSplit(&tc.spec); got != tc.want {
			t.Errorf("%s: routeSplit = %v, want %v", tc.name, got, tc.want)
		}
	}
}

package app

import (
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1ac "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
	"github.com/app-controller/app-controller/pkg/controller/controllertest"
)

// gatewayApp returns an App whose route attaches to Gateway infra/public, listener
// https, routing /api (exact) and /static to the Service's metrics port by name.
func gatewayApp() *appv1.App {
	app := newApp("web", testNow.Add(-time.Hour))
	app.Spec.ServiceTemplate.Ports = []appv1.ServicePort{{Name: "metrics", Port: 9090}}
	app.Spec.Route = &appv1.Route{
		Hosts:      []appv1.Hostname{"shop.example.com"},
		Paths:      []appv1.RoutePath{{Path: "/api", Type: "Exact"}, {Path: "/static", Type: "Prefix"}},
		Port:       ptr.To(intstr.FromString("metrics")),
		ParentRefs: []appv1.GatewayRef{{Name: "public", Namespace: "infra", SectionName: "https"}},
	}
	return app
}

func TestDesiredHTTPRoute(t *testing.T) {
	app := gatewayApp()
	desired := func(app *appv1.App) (*gatewayv1ac.HTTPRouteApplyConfiguration, error) {
		return DesiredHTTPRoute(app, app.Spec.Route.ParentRefs)
	}
	route := desiredObject[gatewayv1.HTTPRoute](t, desired, app)
	p := route.Spec.ParentRefs
	if route.Name != "web" || len(p) != 1 || p[0].Name != "public" || *p[0].Namespace != "infra" || *p[0].SectionName != "https" || *p[0].Kind != "Gateway" {
		t.Fatalf("HTTPRoute %+v", route)
	}
	if len(route.Spec.Hostnames) != 1 || route.Spec.Hostnames[0] != "shop.example.com" || len(route.Spec.Rules) != 1 {
		t.Fatalf("hostnames %v, rules %+v", route.Spec.Hostnames, route.Spec.Rules)
	}
	rule := route.Spec.Rules[0]
	if len(rule.Matches) != 2 || *rule.Matches[0].Path.Type != gatewayv1.PathMatchExact || *rule.Matches[0].Path.Value != "/api" ||
		*rule.Matches[1].Path.Type != gatewayv1.PathMatchPathPrefix {
		t.Errorf("matches %+v", rule.Matches)
	}
	if b := rule.BackendRefs; len(b) != 1 || b[0].Name != "web-service" || *b[0].Port != 9090 {
		t.Errorf("backends %+v", b)
	}
	if !controller.IsControlledBy(route, app) || route.Labels[appv1.ManagedByLabel] != appv1.ManagedByValue {
		t.Errorf("owner %+v, labels %v", route.OwnerReferences, route.Labels)
	}

	app.Spec.Route.Port, app.Spec.Route.Paths = nil, nil
	route = desiredObject[gatewayv1.HTTPRoute](t, desired, app)
	if r := route.Spec.Rules[0]; *r.BackendRefs[0].Port != 8080 || *r.Matches[0].Path.Value != "/" || *r.Matches[0].Path.Type != gatewayv1.PathMatchPathPrefix {
		t.Errorf("default port and path: %+v", r)
	}
	app.Spec.Route.Port = ptr.To(intstr.FromString("admin"))
	if _, err := DesiredHTTPRoute(app, app.Spec.Route.ParentRefs); err == nil || !strings.Contains(err.Error(), `spec.route.port: the App's Service has no port named "admin"`) {
		t.Errorf("unknown port name: %v", err)
	}
}

// parentStatus is an HTTPRoute's status entry for Gateway infra/public/https.
func parentStatus(generation int64, conds ...metav1.Condition) gatewayv1.RouteParentStatus {
	for i := range conds {
		conds[i].ObservedGeneration = generation
	}
	return gatewayv1.RouteParentStatus{
		ParentRef:      gatewayv1.ParentReference{Name: "public", Namespace: ptr.To(gatewayv1.Namespace("infra")), SectionName: ptr.To(gatewayv1.SectionName("https"))},
		ControllerName: "example.com/gateway", Conditions: conds,
	}
}

func TestRouteParentsStatus(t *testing.T) {
	parents := gatewayApp().Spec.Route.ParentRefs
	accepted := metav1.Condition{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted"}
	resolved := metav1.Condition{Type: "ResolvedRefs", Status: metav1.ConditionTrue, Reason: "ResolvedRefs"}
	for _, tc := range []struct {
		name             string
		parents          []gatewayv1.RouteParentStatus
		accepted         bool
		refused, pending string
	}{
		{name: "no answer", pending: `waiting for Gateway infra/public/https to accept HTTPRoute "web": no controller of that Gateway has answered`},
		{name: "accepted", parents: []gatewayv1.RouteParentStatus{parentStatus(2, accepted, resolved)}, accepted: true},
		{name: "answered an older generation", parents: []gatewayv1.RouteParentStatus{parentStatus(1, accepted, resolved)},
			pending: `its controller example.com/gateway has not reported Accepted for the current spec`},
		{name: "another listener's answer", parents: []gatewayv1.RouteParentStatus{func() gatewayv1.RouteParentStatus {
			s := parentStatus(2, accepted, resolved)
			s.ParentRef.SectionName = ptr.To(gatewayv1.SectionName("http"))
			return s
		}()}, pending: "no controller of that Gateway has answered"},
		{name: "not allowed", parents: []gatewayv1.RouteParentStatus{parentStatus(2,
			metav1.Condition{Type: "Accepted", Status: metav1.ConditionFalse, Reason: "NotAllowedByListeners", Message: "namespace tcs is not allowed"}, resolved)},
			refused: `Gateway infra/public/https refused HTTPRoute "web": Accepted=False (NotAllowedByListeners): namespace tcs is not allowed`},
		{name: "backend not found", parents: []gatewayv1.RouteParentStatus{parentStatus(2, accepted,
			metav1.Condition{Type: "ResolvedRefs", Status: metav1.ConditionFalse, Reason: "BackendNotFound", Message: "no Service web-service"})},
			refused: `ResolvedRefs=False (BackendNotFound): no Service web-service`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			route := &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "tcs", Name: "web", Generation: 2}}
			route.Status.Parents = tc.parents
			accepted, refused, pending := routeParentsStatus(route, "tcs", parents)
			if accepted != tc.accepted || !strings.Contains(refused, tc.refused) || (tc.refused == "") != (refused == "") ||
				!strings.Contains(pending, tc.pending) || (tc.pending == "") != (pending == "") {
				t.Errorf("got accepted %v, refused %q, pending %q; want %v, %q, %q", accepted, refused, pending, tc.accepted, tc.refused, tc.pending)
			}
		})
	}
}

func TestHTTPRoute(t *testing.T) {
	// routeCondition returns the App's RouteAccepted and Ready conditions.
	conditions := func(f *fixture) (*metav1.Condition, *metav1.Condition) {
		app := f.appNow("web")
		return meta.FindStatusCondition(app.Status.Conditions, appv1.ConditionRouteAccepted), meta.FindStatusCondition(app.Status.Conditions, appv1.ConditionReady)
	}
	// ready makes the App's Deployment available, so that only the route can keep the
	// App from Ready.
	ready := func(f *fixture) {
		f.addDeployments(liveDeployment(t, gatewayApp()))
		f.addServices(liveService(t, gatewayApp()))
	}
	// answer writes the Gateway's answer into the HTTPRoute's status.
	answer := func(f *fixture, conds ...metav1.Condition) {
		obj, err := f.gatewayClient.Tracker().Get(httpRouteResource, "tcs", "web")
		if err != nil {
			t.Fatal(err)
		}
		route := obj.(*gatewayv1.HTTPRoute).DeepCopy()
		route.Status.Parents = []gatewayv1.RouteParentStatus{parentStatus(route.Generation, conds...)}
		if err := f.gatewayClient.Tracker().Update(httpRouteResource, route, "tcs"); err != nil {
			t.Fatal(err)
		}
		f.catchUp()
	}

	t.Run("attached, pending, accepted, refused, removed", func(t *testing.T) {
		f := newGatewayFixture(t, nil)
		f.addApps(gatewayApp())
		ready(f)
		f.mustSync("web")
		if w := f.writeNames(); !slices.Contains(w, "patch httproutes") || slices.Contains(w, "patch ingresses") {
			t.Errorf("writes %q, want the route's HTTPRoute and no Ingress", w)
		}
		f.catchUp()
		f.mustSync("web")
		if w := f.writeNames(); slices.Contains(w, "patch httproutes") {
			t.Errorf("writes %q: the HTTPRoute was up to date", w)
		}
		c, r := conditions(f)
		if c == nil || c.Status != metav1.ConditionUnknown || c.Reason != appv1.ReasonRoutePending || r.Status != metav1.ConditionFalse || r.Reason != appv1.ReasonRoutePending {
			t.Errorf("no answer yet: RouteAccepted %+v, Ready %+v", c, r)
		}
		// Still no answer a minute later: nothing to write (Ready's transition time,
		// though the sync finds the Deployment ready first, stays).
		f.step(time.Minute)
		f.mustSync("web")
		if w := f.writeNames(); len(w) != 0 {
			t.Errorf("a pending route, synced again: writes %q, want none", w)
		}

		answer(f, metav1.Condition{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted"}, metav1.Condition{Type: "ResolvedRefs", Status: metav1.ConditionTrue, Reason: "ResolvedRefs"})
		f.mustSync("web")
		if w := f.writeNames(); !slices.Equal(w, []string{"patch apps/status"}) {
			t.Errorf("writes %q, want the status only", w)
		}
		c, r = conditions(f)
		if c.Status != metav1.ConditionTrue || c.Reason != appv1.ReasonRouted || r.Status != metav1.ConditionTrue || f.appNow("web").Status.Route != "web" {
			t.Errorf("accepted: RouteAccepted %+v, Ready %+v", c, r)
		}

		answer(f, metav1.Condition{Type: "Accepted", Status: metav1.ConditionFalse, Reason: "NotAllowedByListeners", Message: "routes from tcs are not allowed"})
		f.mustSync("web")
		c, r = conditions(f)
		if c.Status != metav1.ConditionFalse || c.Reason != appv1.ReasonGatewayRefused || !strings.Contains(c.Message, "Gateway infra/public/https refused") ||
			r.Status != metav1.ConditionFalse || r.Reason != appv1.ReasonGatewayRefused {
			t.Errorf("refused: RouteAccepted %+v, Ready %+v", c, r)
		}
		if ev := f.events(); !slices.ContainsFunc(ev, func(e string) bool { return strings.HasPrefix(e, "Warning GatewayRefused") }) {
			t.Errorf("events %q", ev)
		}
		if !meta.IsStatusConditionTrue(f.appNow("web").Status.Conditions, appv1.ConditionStalled) {
			t.Errorf("a refused route leaves the App not Stalled: %+v", f.appNow("web").Status.Conditions)
		}

		// An Ingress instead: the HTTPRoute goes.
		f.changeSpec(gatewayApp(), func(a *appv1.App) { a.Spec.Route.ParentRefs = nil })
		f.mustSync("web")
		if w := f.writeNames(); !slices.Contains(w, "delete httproutes") || !slices.Contains(w, "patch ingresses") {
			t.Errorf("writes %q, want the HTTPRoute deleted and an Ingress", w)
		}
	})

	t.Run("the default Gateway takes a route without parentRefs, tls and class", func(t *testing.T) {
		f := newGatewayFixture(t, &appv1.GatewayRef{Namespace: "infra", Name: "public"})
		app := gatewayApp()
		app.Spec.Route.ParentRefs = nil
		f.addApps(app)
		f.mustSync("web")
		if w := f.writeNames(); !slices.Contains(w, "patch httproutes") {
			t.Errorf("writes %q, want an HTTPRoute to the default Gateway", w)
		}
		withTLS := routedApp()
		if parents := childOf[*routeChild](t, f.c).parents(withTLS); parents != nil {
			t.Errorf("a route with TLS attaches to %v, want an Ingress", parents)
		}
	})

	t.Run("no Gateway API: refused, the Ingress goes", func(t *testing.T) {
		f := newFixture(t)
		f.addApps(gatewayApp())
		f.mustSync("web")
		if w := f.writeNames(); slices.Contains(w, "patch ingresses") {
			t.Errorf("writes %q: an Ingress for a route to Gateways", w)
		}
		c, _ := conditions(f)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != appv1.ReasonGatewayAPIUnavailable || !strings.Contains(c.Message, "Gateway infra/public/https") {
			t.Errorf("RouteAccepted %+v", c)
		}
	})

	t.Run("an HTTPRoute of another namespace holds the host", func(t *testing.T) {
		f := newGatewayFixture(t, nil)
		held := heldHTTPRoute("*.example.com")
		controllertest.Seed(t, f.inf.HTTPRoutes.Informer().GetIndexer(), f.gatewayClient.Tracker(), held)
		f.addApps(routedApp()) // an Ingress route
		f.mustSync("web")
		c, _ := conditions(f)
		if c == nil || c.Reason != appv1.ReasonHostConflict || !strings.Contains(c.Message, `held by namespace "other" (App shop, routing "*.example.com"`) {
			t.Errorf("RouteAccepted %+v", c)
		}
	})
}

// heldHTTPRoute returns the HTTPRoute other/shop of an App two days old, routing host:
// the holder of a host that a newer App's route asks for.
func heldHTTPRoute(host gatewayv1.Hostname) *gatewayv1.HTTPRoute {
	return &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{
		Namespace: "other", Name: "shop", UID: "other-shop", ResourceVersion: "3",
		CreationTimestamp: metav1.NewTime(testNow.Add(-48 * time.Hour)),
		Labels:            map[string]string{appv1.ManagedByLabel: appv1.ManagedByValue},
		OwnerReferences:   controlledBy(newApp("shop", testNow.Add(-48*time.Hour))),
	}, Spec: gatewayv1.HTTPRouteSpec{Hostnames: []gatewayv1.Hostname{host}}}
}

// TestRouteReported: a drained canary waits until the Gateways of the App that answered
// in its HTTPRoute's status have read the route's current generation; none answered,
// or only a Gateway the route no longer attaches to: nothing to wait for.
func TestRouteReported(t *testing.T) {
	accepted := metav1.Condition{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted"}
	other := parentStatus(1, accepted)
	other.ParentRef.Name = "old"
	for _, tc := range []struct {
		name    string
		parents []gatewayv1.RouteParentStatus
		want    bool
	}{
		{"no Gateway answered", nil, true},
		{"its Gateway read an older generation", []gatewayv1.RouteParentStatus{parentStatus(1, accepted)}, false},
		{"its Gateway read the current one", []gatewayv1.RouteParentStatus{parentStatus(2, accepted)}, true},
		{"its Gateway has not said Accepted", []gatewayv1.RouteParentStatus{parentStatus(2)}, false},
		{"a Gateway it no longer attaches to, at an older one", []gatewayv1.RouteParentStatus{other, parentStatus(2, accepted)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newGatewayFixture(t, nil)
			app := gatewayApp()
			route := &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: app.Namespace, Name: app.Name, Generation: 2,
				OwnerReferences: controlledBy(app)}}
			route.Status.Parents = tc.parents
			if err := f.inf.HTTPRoutes.Informer().GetIndexer().Add(route); err != nil {
				t.Fatal(err)
			}
			if got := routeReported(f.c.route.liveRoute(app), f.c.route.parents(app)); got != tc.want {
				t.Errorf("reported %v, want %v", got, tc.want)
			}
		})
	}
}

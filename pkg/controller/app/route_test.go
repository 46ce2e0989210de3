package app

import (
	"slices"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
	"github.com/app-controller/app-controller/pkg/controller/controllertest"
)

// routedApp returns an App whose route publishes its Service under two hosts with TLS
// issued by a cert-manager ClusterIssuer.
func routedApp() *appv1.App {
	app := newApp("web", testNow.Add(-time.Hour))
	app.Spec.Route = &appv1.Route{
		Hosts: []appv1.Hostname{"shop.example.com", "www.shop.example.com"},
		Paths: []appv1.RoutePath{{Path: "/api", Type: "Exact"}},
		TLS:   &appv1.RouteTLS{SecretName: "shop-tls", ClusterIssuer: "letsencrypt"},
	}
	return app
}

func TestDesiredRoute(t *testing.T) {
	app := routedApp()
	ing := desiredObject[networkingv1.Ingress](t, DesiredRoute, app)
	if ing.Name != "web" || len(ing.Spec.Rules) != 2 || ing.Spec.Rules[1].Host != "www.shop.example.com" {
		t.Fatalf("Ingress %+v", ing)
	}
	p := ing.Spec.Rules[0].HTTP.Paths[0]
	if p.Path != "/api" || *p.PathType != networkingv1.PathTypeExact || p.Backend.Service.Name != "web-service" || p.Backend.Service.Port.Name != appv1.PortName {
		t.Errorf("path %+v", p)
	}
	if len(ing.Spec.TLS) != 1 || ing.Spec.TLS[0].SecretName != "shop-tls" || len(ing.Spec.TLS[0].Hosts) != 2 ||
		ing.Annotations["cert-manager.io/cluster-issuer"] != "letsencrypt" {
		t.Errorf("TLS %+v, annotations %v", ing.Spec.TLS, ing.Annotations)
	}
	if !controller.IsControlledBy(ing, app) || ing.Labels[appv1.ManagedByLabel] != appv1.ManagedByValue {
		t.Errorf("owner %+v, labels %v", ing.OwnerReferences, ing.Labels)
	}
	app.Spec.Route.Port = ptr.To(intstr.FromInt32(9090))
	app.Spec.Route.Paths = nil
	if _, err := DesiredRoute(app); err == nil || !strings.Contains(err.Error(), "spec.route.port: the App's Service has no port 9090") {
		t.Errorf("a route to a port the Service does not have: %v", err)
	}
	app.Spec.ServiceTemplate.Ports = []appv1.ServicePort{{Name: "metrics", Port: 9090}}
	ing = desiredObject[networkingv1.Ingress](t, DesiredRoute, app)
	if p := ing.Spec.Rules[0].HTTP.Paths[0]; p.Path != "/" || *p.PathType != networkingv1.PathTypePrefix || p.Backend.Service.Port.Number != 9090 {
		t.Errorf("default path, port by number: %+v", p)
	}
	if r, _ := DesiredRoute(newApp("plain", testNow)); r != nil {
		t.Errorf("an App without a route got %+v", r)
	}
}

func TestRoute(t *testing.T) {
	t.Run("routed: one more write, the status names it", func(t *testing.T) {
		f := newFixture(t)
		f.addApps(routedApp())
		f.mustSync("web")
		if w := f.writeNames(); !slices.Contains(w, "patch ingresses") {
			t.Errorf("writes %q, want the route's Ingress", w)
		}
		app := f.appNow("web")
		c := meta.FindStatusCondition(app.Status.Conditions, appv1.ConditionRouteAccepted)
		if app.Status.Route != "web" || c == nil || c.Status != metav1.ConditionTrue || c.Reason != appv1.ReasonRouted {
			t.Errorf("status.route %q, RouteAccepted %+v", app.Status.Route, c)
		}
	})

	t.Run("a host held by another namespace: refused, no Ingress", func(t *testing.T) {
		f := newFixture(t)
		held := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{
			Namespace: "other", Name: "shop", UID: "other-shop", ResourceVersion: "3",
			CreationTimestamp: metav1.NewTime(testNow.Add(-48 * time.Hour)),
			Labels:            map[string]string{appv1.ManagedByLabel: appv1.ManagedByValue},
			OwnerReferences:   []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: "shop", UID: types.UID("svc"), Controller: ptr.To(true)}},
		}, Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: "*.example.com"}}}}
		controllertest.Seed(t, f.inf.Ingresses.Informer().GetIndexer(), f.kubeClient.Tracker(), held)
		f.addApps(routedApp())
		f.mustSync("web")
		if w := f.writeNames(); slices.Contains(w, "patch ingresses") {
			t.Errorf("writes %q: the route got an Ingress", w)
		}
		app := f.appNow("web")
		c := meta.FindStatusCondition(app.Status.Conditions, appv1.ConditionRouteAccepted)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != appv1.ReasonHostConflict || !strings.Contains(c.Message, `held by namespace "other"`) {
			t.Errorf("RouteAccepted %+v", c)
		}
		if ev := f.events(); !slices.ContainsFunc(ev, func(e string) bool { return strings.HasPrefix(e, "Warning HostConflict") }) {
			t.Errorf("events %q", ev)
		}
		// The same namespace may share it.
		if msg, _ := childOf[*routeChild](t, f.c).refusal(func() *appv1.App { a := routedApp(); a.Namespace = "other"; return a }()); msg != "" {
			t.Errorf("same namespace refused: %s", msg)
		}
	})

	t.Run("removed: the Ingress is pruned, the condition goes", func(t *testing.T) {
		f := newFixture(t)
		f.addApps(routedApp())
		f.mustSync("web")
		f.catchUp()
		f.changeSpec(routedApp(), func(a *appv1.App) { a.Spec.Route = nil })
		f.mustSync("web")
		if w := f.writeNames(); !slices.Contains(w, "delete ingresses") {
			t.Errorf("writes %q, want the Ingress deleted", w)
		}
		app := f.appNow("web")
		if app.Status.Route != "" || meta.FindStatusCondition(app.Status.Conditions, appv1.ConditionRouteAccepted) != nil {
			t.Errorf("status.route %q, conditions %+v", app.Status.Route, app.Status.Conditions)
		}
	})
}

// TestRoutePortCheck: a spec.route.port the App's Service does not have, by name or by
// number, is refused the same way whatever the route's shape (Ingress, or HTTPRoute
// attached to a Gateway): the route's object goes, RouteAccepted=False names the port
// and the ports there are, and the App is not Ready (Stalled: it waits for a change of
// the App). Naming the port again routes it.
func TestRoutePortCheck(t *testing.T) {
	shapes := []struct {
		name     string
		gateway  bool
		resource string
		app      func() *appv1.App
	}{
		{"Ingress", false, "ingresses", func() *appv1.App {
			a := routedApp()
			a.Spec.ServiceTemplate.Ports = []appv1.ServicePort{{Name: "metrics", Port: 9090}}
			a.Spec.Route.Port = ptr.To(intstr.FromString("metrics"))
			return a
		}},
		{"HTTPRoute", true, "httproutes", gatewayApp}, // port: metrics
	}
	ports := []struct {
		name string
		port intstr.IntOrString
		want string
	}{
		{"by name", intstr.FromString("admin"), `spec.route.port: the App's Service has no port named "admin" (its ports: http 8080, metrics 9090): name one of them, or add it to serviceTemplate.ports`},
		{"by number", intstr.FromInt32(9999), `spec.route.port: the App's Service has no port 9999 (its ports: http 8080, metrics 9090): name one of them, or add it to serviceTemplate.ports`},
	}
	for _, shape := range shapes {
		for _, tc := range ports {
			t.Run(shape.name+" "+tc.name, func(t *testing.T) {
				f := newFixture(t)
				if shape.gateway {
					f = newGatewayFixture(t, nil)
				}
				f.addApps(shape.app())
				f.addDeployments(liveDeployment(t, shape.app()))
				f.addServices(liveService(t, shape.app()))
				f.mustSync("web")
				if w := f.writeNames(); !slices.Contains(w, "patch "+shape.resource) {
					t.Fatalf("writes %q, want the route's %s", w, shape.name)
				}
				f.catchUp()

				f.changeSpec(shape.app(), func(a *appv1.App) { a.Spec.Route.Port = &tc.port })
				f.mustSync("web")
				if w := f.writeNames(); !slices.Contains(w, "delete "+shape.resource) || slices.ContainsFunc(w, func(w string) bool { return strings.HasPrefix(w, "patch ") && w != "patch apps/status" }) {
					t.Errorf("writes %q, want the %s deleted and nothing applied", w, shape.name)
				}
				app := f.appNow("web")
				route := meta.FindStatusCondition(app.Status.Conditions, appv1.ConditionRouteAccepted)
				ready := meta.FindStatusCondition(app.Status.Conditions, appv1.ConditionReady)
				if route == nil || route.Status != metav1.ConditionFalse || route.Reason != appv1.ReasonRouteRefused || route.Message != tc.want {
					t.Errorf("RouteAccepted %+v, want False/%s: %s", route, appv1.ReasonRouteRefused, tc.want)
				}
				if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != appv1.ReasonRouteRefused ||
					!meta.IsStatusConditionTrue(app.Status.Conditions, appv1.ConditionStalled) || app.Status.Route != "" {
					t.Errorf("Ready %+v, status.route %q, conditions %+v", ready, app.Status.Route, app.Status.Conditions)
				}

				f.catchUp()
				f.changeSpec(shape.app(), func(a *appv1.App) { a.Spec.Route.Port = shape.app().Spec.Route.Port })
				f.mustSync("web")
				if w := f.writeNames(); !slices.Contains(w, "patch "+shape.resource) {
					t.Errorf("writes %q, want the route's %s again", w, shape.name)
				}
				if c := meta.FindStatusCondition(f.appNow("web").Status.Conditions, appv1.ConditionRouteAccepted); c == nil || c.Status == metav1.ConditionFalse {
					t.Errorf("the port named again: RouteAccepted %+v", c)
				}
			})
		}
	}
}

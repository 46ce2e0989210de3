package app

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	ingressctrl "github.com/app-controller/app-controller/pkg/controller/ingress"
	"github.com/app-controller/app-controller/pkg/controllermanager"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// TestRoutes runs the App and Service->Ingress controllers: an App's route becomes an
// Ingress it owns, with TLS; a Service annotated for the same host in another namespace
// gets none (HostConflict), and so does another namespace's App route (RouteAccepted
// False); when the first App drops its route, its Ingress is pruned and the waiting App
// gets the host.
func TestRoutes(t *testing.T) {
	c := newClients(t)
	startManager(t, 0) // the App controller
	ingOpts := controllermanager.NewOptions()
	ingOpts.Controllers = []string{ingressctrl.ControllerName}
	ingOpts.ShutdownTimeout = 5 * time.Second
	framework.StartManager(t, framework.Config(t), ingOpts)
	ctx := context.Background()
	a, b, cNS := framework.Namespace(t), framework.Namespace(t), framework.Namespace(t)

	app := newApp(a, "shop", "nginx", 1)
	app.Spec.Route = &appv1.Route{Hosts: []appv1.Hostname{"shop.example.com"}, TLS: &appv1.RouteTLS{SecretName: "shop-tls", ClusterIssuer: "letsencrypt"}}
	c.Create(t, app)
	ing := framework.WaitFor(t, converge, c.Kube.NetworkingV1().Ingresses(a).Get, "shop", func(*networkingv1.Ingress) bool { return true })
	if ing.Spec.Rules[0].Host != "shop.example.com" || ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name != "shop-svc" ||
		len(ing.Spec.TLS) != 1 || ing.Annotations["cert-manager.io/cluster-issuer"] != "letsencrypt" || metav1.GetControllerOf(ing).Kind != "App" {
		t.Errorf("route Ingress %+v", ing)
	}
	c.WaitCondition(t, a, "shop", appv1.ConditionRouteAccepted, "True/"+appv1.ReasonRouted)

	// A Service of namespace b asks for the host: refused.
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: b, Name: "x", Annotations: map[string]string{
		ingressctrl.AnnotationHTTP: "true", ingressctrl.AnnotationHost: "shop.example.com"}},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	if _, err := c.Kube.CoreV1().Services(b).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, converge, func() (bool, error) {
		for _, e := range c.Events(t, b, "Service", "x") {
			if strings.Contains(e, ingressctrl.ReasonHostConflict) {
				return true, nil
			}
		}
		return false, nil
	})
	if err := c.Kube.CoreV1().Services(b).Delete(ctx, "x", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	// An App of namespace c routes a wildcard covering it: refused.
	other := newApp(cNS, "shop", "nginx", 1)
	other.Spec.Route = &appv1.Route{Hosts: []appv1.Hostname{"*.example.com"}}
	c.Create(t, other)
	refused := c.WaitCondition(t, cNS, "shop", appv1.ConditionRouteAccepted, "False/"+appv1.ReasonHostConflict)
	t.Logf("namespace c: %s", condMessage(refused, appv1.ConditionRouteAccepted))
	if _, err := c.Kube.NetworkingV1().Ingresses(cNS).Get(ctx, "shop", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace c has an Ingress: %v", err)
	}

	// a drops its route: pruned; c gets the host.
	c.Update(t, a, "shop", func(x *appv1.App) { x.Spec.Route = nil })
	framework.Eventually(t, converge, func() (bool, error) {
		_, err := c.Kube.NetworkingV1().Ingresses(a).Get(ctx, "shop", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	c.WaitCondition(t, cNS, "shop", appv1.ConditionRouteAccepted, "True/"+appv1.ReasonRouted)
}

// TestRoutePortMissing: a spec.route.port the App's Service does not have is refused the
// same way whatever the route's shape, an Ingress or an HTTPRoute attached to a Gateway:
// no Ingress or HTTPRoute, RouteAccepted=False naming the port, and the App, whose
// Deployment is available, not Ready. Adding the port to the App's Service routes it.
func TestRoutePortMissing(t *testing.T) {
	c := newClients(t)
	gw := framework.GatewayClient(t)
	startManager(t, 0)
	ctx := context.Background()
	for _, shape := range []struct {
		name    string
		parents []appv1.GatewayRef
		// get reads the route's object in namespace ns.
		get func(ns string) error
		// routed is RouteAccepted once the route is written: no Gateway answers here.
		routed string
	}{
		{"Ingress", nil, func(ns string) error {
			_, err := c.Kube.NetworkingV1().Ingresses(ns).Get(ctx, "shop", metav1.GetOptions{})
			return err
		}, "True/" + appv1.ReasonRouted},
		{"HTTPRoute", []appv1.GatewayRef{{Name: "public", Namespace: "infra"}}, func(ns string) error {
			_, err := gw.GatewayV1().HTTPRoutes(ns).Get(ctx, "shop", metav1.GetOptions{})
			return err
		}, "Unknown/" + appv1.ReasonRoutePending},
	} {
		t.Run(shape.name, func(t *testing.T) {
			ns := framework.Namespace(t)
			app := newApp(ns, "shop", "nginx", 1)
			app.Spec.Route = &appv1.Route{Hosts: []appv1.Hostname{appv1.Hostname(strings.ToLower(shape.name) + "-port.example.org")},
				Port: ptr.To(intstr.FromString("admin")), ParentRefs: shape.parents}
			c.Create(t, app)
			refused := c.WaitCondition(t, ns, "shop", appv1.ConditionReady, "False/"+appv1.ReasonRouteRefused)
			msg := condMessage(refused, appv1.ConditionRouteAccepted)
			t.Logf("refused: %s", msg)
			if framework.AppCondition(refused, appv1.ConditionRouteAccepted) != "False/"+appv1.ReasonRouteRefused ||
				!strings.Contains(msg, `spec.route.port: the App's Service has no port named "admin" (its ports: http 8080)`) {
				t.Errorf("RouteAccepted %s: %s", framework.AppCondition(refused, appv1.ConditionRouteAccepted), msg)
			}
			if err := shape.get(ns); !apierrors.IsNotFound(err) {
				t.Errorf("a route to a port the Service does not have has its %s: %v", shape.name, err)
			}

			c.Update(t, ns, "shop", func(a *appv1.App) {
				a.Spec.ServiceTemplate.Ports = []appv1.ServicePort{{Name: "admin", Port: 9000}}
			})
			c.WaitCondition(t, ns, "shop", appv1.ConditionRouteAccepted, shape.routed)
			if err := shape.get(ns); err != nil {
				t.Errorf("the port added, no %s: %v", shape.name, err)
			}
		})
	}
}

// condMessage returns the message of the App's condition of type t.
func condMessage(app *appv1.App, t string) string {
	for _, cond := range app.Status.Conditions {
		if cond.Type == t {
			return cond.Message
		}
	}
	return ""
}

package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// TestHTTPRoutes runs the App controller on a control plane that serves the Gateway
// API's real CRDs. An App applied with kubectl whose route names a Gateway gets an
// HTTPRoute it owns (no Ingress); the App is not Ready until the Gateway's controller
// (played here by the test, writing the HTTPRoute's status as one would) accepts it;
// a refusal is read back with the Gateway's reason; a hand edit of the HTTPRoute is
// repaired; another namespace's route to the same host is refused; dropping parentRefs
// turns the HTTPRoute into an Ingress, and dropping the route prunes it.
func TestHTTPRoutes(t *testing.T) {
	c := newClients(t)
	gw := framework.GatewayClient(t)
	m := startManager(t, 0)
	ctx := context.Background()
	ns, other := framework.Namespace(t), framework.Namespace(t)

	manifest := filepath.Join(t.TempDir(), "shop.yaml")
	if err := os.WriteFile(manifest, []byte(fmt.Sprintf(`apiVersion: appcontroller.k8s.io/v1
kind: App
metadata:
  name: shop
  namespace: %s
spec:
  deploymentTemplate:
    name: shop
    image: nginx
    replicas: 1
  serviceTemplate:
    name: shop-svc
    ports:
    - name: admin
      port: 9000
  route:
    hosts: [shop.example.com]
    paths:
    - path: /api
    port: admin
    parentRefs:
    - name: public
      namespace: infra
      sectionName: https
`, ns)), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Log(strings.TrimSpace(framework.Kubectl(t, "apply", "--server-side", "-f", manifest)))

	var route *gatewayv1.HTTPRoute
	framework.Eventually(t, converge, func() (bool, error) {
		var err error
		route, err = gw.GatewayV1().HTTPRoutes(ns).Get(ctx, "shop", metav1.GetOptions{})
		return err == nil, nil
	})
	p, rule := route.Spec.ParentRefs, route.Spec.Rules
	if len(p) != 1 || p[0].Name != "public" || *p[0].Namespace != "infra" || *p[0].SectionName != "https" ||
		len(route.Spec.Hostnames) != 1 || route.Spec.Hostnames[0] != "shop.example.com" ||
		len(rule) != 1 || *rule[0].Matches[0].Path.Value != "/api" || rule[0].BackendRefs[0].Name != "shop-svc" || *rule[0].BackendRefs[0].Port != 9000 ||
		metav1.GetControllerOf(route).Kind != "App" {
		t.Errorf("HTTPRoute spec %+v, owner %+v", route.Spec, route.OwnerReferences)
	}
	if _, err := c.Kube.NetworkingV1().Ingresses(ns).Get(ctx, "shop", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a route to a Gateway has an Ingress: %v", err)
	}
	// Ready says RollingOut until the Deployment is available (kwok's pod may take a
	// while on a busy machine), then RoutePending: the route is all that is left.
	pending := c.WaitCondition(t, ns, "shop", appv1.ConditionReady, "False/"+appv1.ReasonRoutePending)
	if got := framework.AppCondition(pending, appv1.ConditionRouteAccepted); got != "Unknown/"+appv1.ReasonRoutePending {
		t.Errorf("RouteAccepted %s while no Gateway answered", got)
	}
	t.Logf("no answer yet: %s", condMessage(pending, appv1.ConditionRouteAccepted))

	// answer writes the Gateway controller's answer, as one would, through the status
	// subresource, for the HTTPRoute's current generation.
	answer := func(accepted metav1.Condition) {
		t.Helper()
		r, err := gw.GatewayV1().HTTPRoutes(ns).Get(ctx, "shop", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		now := metav1.Now()
		accepted.ObservedGeneration, accepted.LastTransitionTime = r.Generation, now
		r.Status.Parents = []gatewayv1.RouteParentStatus{{
			ParentRef:      gatewayv1.ParentReference{Name: "public", Namespace: ptr.To(gatewayv1.Namespace("infra")), SectionName: ptr.To(gatewayv1.SectionName("https"))},
			ControllerName: "example.com/gateway-controller",
			Conditions: []metav1.Condition{accepted, {Type: "ResolvedRefs", Status: metav1.ConditionTrue, Reason: "ResolvedRefs",
				ObservedGeneration: r.Generation, LastTransitionTime: now}},
		}}
		if _, err := gw.GatewayV1().HTTPRoutes(ns).UpdateStatus(ctx, r, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("writing the HTTPRoute's status: %v", err)
		}
	}
	answer(metav1.Condition{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted"})
	ready := c.WaitCondition(t, ns, "shop", appv1.ConditionReady, "True/"+appv1.ReasonAvailable)
	t.Logf("accepted: RouteAccepted %s: %s", framework.AppCondition(ready, appv1.ConditionRouteAccepted), condMessage(ready, appv1.ConditionRouteAccepted))
	if ready.Status.Route != "shop" || framework.AppCondition(ready, appv1.ConditionRouteAccepted) != "True/"+appv1.ReasonRouted {
		t.Errorf("status.route %q, RouteAccepted %s", ready.Status.Route, framework.AppCondition(ready, appv1.ConditionRouteAccepted))
	}
	// Up to date against the real schema and its defaults: a sync (queued by a label
	// on the App) writes nothing to the HTTPRoute.
	before := len(m.WritesIn(ns))
	framework.Kubectl(t, "-n", ns, "label", "app", "shop", "touched=yes")
	time.Sleep(2 * time.Second)
	if after := m.WritesIn(ns)[before:]; slices.ContainsFunc(after, func(w string) bool { return strings.Contains(w, "httproutes") }) {
		t.Errorf("a sync of an accepted route wrote %q", after)
	}

	answer(metav1.Condition{Type: "Accepted", Status: metav1.ConditionFalse, Reason: "NotAllowedByListeners", Message: "listener https allows routes from namespace infra only"})
	refused := c.WaitCondition(t, ns, "shop", appv1.ConditionRouteAccepted, "False/"+appv1.ReasonGatewayRefused)
	msg := condMessage(refused, appv1.ConditionRouteAccepted)
	t.Logf("refused: %s", msg)
	if !strings.Contains(msg, `Gateway infra/public/https refused HTTPRoute "shop": Accepted=False (NotAllowedByListeners): listener https allows routes from namespace infra only`) ||
		framework.AppCondition(refused, appv1.ConditionReady) != "False/"+appv1.ReasonGatewayRefused {
		t.Errorf("RouteAccepted %q, Ready %s", msg, framework.AppCondition(refused, appv1.ConditionReady))
	}
	framework.WaitEvent(t, c.Kube, ns, "App", "shop", "Warning "+appv1.ReasonGatewayRefused, converge)
	answer(metav1.Condition{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted"})
	c.WaitCondition(t, ns, "shop", appv1.ConditionReady, "True/"+appv1.ReasonAvailable)

	// A hand edit of the HTTPRoute is repaired.
	framework.Kubectl(t, "-n", ns, "patch", "httproute", "shop", "--type=merge", "-p", `{"spec":{"hostnames":["evil.example.com"]}}`)
	framework.Eventually(t, converge, func() (bool, error) {
		r, err := gw.GatewayV1().HTTPRoutes(ns).Get(ctx, "shop", metav1.GetOptions{})
		return err == nil && slices.Equal(r.Spec.Hostnames, []gatewayv1.Hostname{"shop.example.com"}), nil
	})

	// Another namespace's route to the host: refused, naming the App that holds it.
	rival := newApp(other, "rival", "nginx", 1)
	rival.Spec.Route = &appv1.Route{Hosts: []appv1.Hostname{"shop.example.com"}}
	c.Create(t, rival)
	conflict := c.WaitCondition(t, other, "rival", appv1.ConditionRouteAccepted, "False/"+appv1.ReasonHostConflict)
	if msg := condMessage(conflict, appv1.ConditionRouteAccepted); !strings.Contains(msg, fmt.Sprintf(`held by namespace %q (App shop`, ns)) {
		t.Errorf("rival: %s", msg)
	}
	if _, err := c.Kube.NetworkingV1().Ingresses(other).Get(ctx, "rival", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the rival has an Ingress: %v", err)
	}

	// Without parentRefs the route is an Ingress: the HTTPRoute goes.
	framework.Kubectl(t, "-n", ns, "patch", "app", "shop", "--type=json", "-p", `[{"op":"remove","path":"/spec/route/parentRefs"}]`)
	framework.Eventually(t, converge, func() (bool, error) {
		_, err := gw.GatewayV1().HTTPRoutes(ns).Get(ctx, "shop", metav1.GetOptions{})
		_, ingErr := c.Kube.NetworkingV1().Ingresses(ns).Get(ctx, "shop", metav1.GetOptions{})
		return apierrors.IsNotFound(err) && ingErr == nil, nil
	})
	c.WaitCondition(t, ns, "shop", appv1.ConditionRouteAccepted, "True/"+appv1.ReasonRouted)
	// The route goes: the Ingress is pruned, and the rival gets the host.
	framework.Kubectl(t, "-n", ns, "patch", "app", "shop", "--type=json", "-p", `[{"op":"remove","path":"/spec/route"}]`)
	waitGone(t, "the route's Ingress", func() error {
		_, err := c.Kube.NetworkingV1().Ingresses(ns).Get(ctx, "shop", metav1.GetOptions{})
		return err
	})
	gone := time.Now()
	handed := c.WaitCondition(t, other, "rival", appv1.ConditionRouteAccepted, "True/"+appv1.ReasonRouted)
	t.Logf("the rival's route was accepted %s after the holder's Ingress was gone (its condition: %s)",
		time.Since(gone).Round(time.Millisecond), condMessage(handed, appv1.ConditionRouteAccepted))
}

package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// TestServicePortsWholeList applies with kubectl an App whose serviceTemplate.ports is
// the whole list, as a Service lists its ports (the entry named http restates the first
// port): the App converges, its Service has exactly those ports, its route goes to the
// first, and a sync finds nothing to write. Written the other way (port, targetPort and
// the ports beyond the first), the same App asks for the same Service: the change
// writes nothing to it.
func TestServicePortsWholeList(t *testing.T) {
	c := newClients(t)
	m := startManager(t, 0)
	ns := framework.Namespace(t)
	ctx := context.Background()
	apply := func(serviceTemplate string) {
		t.Helper()
		manifest := filepath.Join(t.TempDir(), "web.yaml")
		if err := os.WriteFile(manifest, []byte(fmt.Sprintf(`apiVersion: appcontroller.k8s.io/v1
kind: App
metadata:
  name: web
  namespace: %s
spec:
  deploymentTemplate:
    name: web
    image: nginx
    replicas: 1
    containerPort: 8080
    ports:
    - {name: metrics, containerPort: 9090}
  serviceTemplate:
%s
  route:
    hosts: [ports.example.org]
`, ns, serviceTemplate)), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Log(strings.TrimSpace(framework.Kubectl(t, "apply", "--server-side", "-f", manifest)))
	}
	apply(`    name: web
    ports:
    - {name: http, port: 80, targetPort: 8080}
    - {name: metrics, port: 9090}`)
	ready := c.waitReady(t, ns, "web")
	if condition(ready, appv1.ConditionRouteAccepted) != "True/"+appv1.ReasonRouted {
		t.Errorf("RouteAccepted %s: %s", condition(ready, appv1.ConditionRouteAccepted), condMessage(ready, appv1.ConditionRouteAccepted))
	}
	svc, err := c.kube.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ports []string
	for _, p := range svc.Spec.Ports {
		ports = append(ports, fmt.Sprintf("%s %d/%s -> %s", p.Name, p.Port, p.Protocol, p.TargetPort.String()))
	}
	if want := []string{"http 80/TCP -> 8080", "metrics 9090/TCP -> 9090"}; !slices.Equal(ports, want) {
		t.Errorf("Service ports %q, want %q", ports, want)
	}
	ing, err := c.kube.NetworkingV1().Ingresses(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if port := ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Port; port.Name != "http" {
		t.Errorf("the route's Ingress goes to port %+v, want the first, http", port)
	}

	// Converged: a sync (queued by a label on the App) writes nothing.
	before := len(m.writesIn(ns))
	framework.Kubectl(t, "-n", ns, "label", "app", "web", "touched=yes")
	// The same Service written the other way: the App changes, the Service does not.
	apply(`    name: web
    port: 80
    targetPort: 8080
    ports:
    - {name: metrics, port: 9090}`)
	framework.Eventually(t, converge, func() (bool, error) {
		app := c.getApp(t, ns, "web")
		return app.Status.ObservedGeneration == app.Generation && condition(app, appv1.ConditionReady) == "True/"+appv1.ReasonAvailable, nil
	})
	for _, w := range m.writesIn(ns)[before:] {
		if strings.Contains(w, "/services/") || strings.Contains(w, "/deployments/") || strings.Contains(w, "/ingresses/") {
			t.Errorf("a sync of the converged App, or the same Service written the other way, wrote %q", w)
		}
	}
}

package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// TestRealServiceShape runs an App with an init container, two sidecars, a second port on
// its container and on a sidecar, exposed by the Service, and a disruption budget: every
// field reaches the children, hand edits come back, and removed fields leave (the budget
// is deleted).
func TestRealServiceShape(t *testing.T) {
	c := newClients(t)
	startManager(t, 0)
	ns := framework.Namespace(t)
	ctx := context.Background()

	app := newApp(ns, "web", "nginx", 2)
	d := app.Spec.DeploymentTemplate
	d.ContainerPort = ptr.To[int32](8080)
	d.Ports = []appv1.ContainerPort{{Name: "metrics", ContainerPort: 9090}}
	d.Volumes = []appv1.Volume{{Name: "logs", EmptyDir: &corev1.EmptyDirVolumeSource{}}}
	d.InitContainers = []appv1.Container{{Name: "migrate", Image: "migrate:1", Args: []string{"up"}}}
	d.Sidecars = []appv1.Container{
		{Name: "shipper", Image: "fluent-bit:3", VolumeMounts: []appv1.VolumeMount{{Name: "logs", MountPath: "/logs"}}},
		{Name: "proxy", Image: "envoy:1", Ports: []appv1.ContainerPort{{Name: "admin", ContainerPort: 9901}}},
	}
	app.Spec.ServiceTemplate.Ports = []appv1.ServicePort{
		{Name: "metrics", Port: 9090, TargetPort: ptr.To(intstr.FromString("metrics"))},
		{Name: "admin", Port: 9901, TargetPort: ptr.To(intstr.FromString("admin"))},
	}
	app.Spec.DisruptionBudget = &appv1.DisruptionBudget{MinAvailable: ptr.To(intstr.FromInt32(1))}
	c.Create(t, app)
	ready := c.WaitReady(t, ns, "web")
	if ready.Status.DisruptionBudget != "web-deploy" {
		t.Errorf("status.disruptionBudget = %q, want web-deploy", ready.Status.DisruptionBudget)
	}

	dep := c.WaitDeployment(t, ns, "web-deploy", func(*appsv1.Deployment) bool { return true })
	var inits []string
	for _, ic := range dep.Spec.Template.Spec.InitContainers {
		inits = append(inits, ic.Name)
		sidecar := ic.Name != "migrate"
		if (ic.RestartPolicy != nil && *ic.RestartPolicy == corev1.ContainerRestartPolicyAlways) != sidecar {
			t.Errorf("init container %s: restartPolicy %v", ic.Name, ic.RestartPolicy)
		}
	}
	if !slices.Equal(inits, []string{"shipper", "proxy", "migrate"}) {
		t.Errorf("init containers %q, want shipper, proxy (sidecars), migrate", inits)
	}
	if p := dep.Spec.Template.Spec.Containers[0].Ports; len(p) != 2 || p[1].Name != "metrics" || p[1].ContainerPort != 9090 {
		t.Errorf("app container ports %+v", p)
	}
	svc, err := c.Kube.CoreV1().Services(ns).Get(ctx, "web-svc", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ports []string
	for _, p := range svc.Spec.Ports {
		ports = append(ports, p.Name+":"+p.TargetPort.String())
	}
	if !slices.Equal(ports, []string{"http:8080", "metrics:metrics", "admin:admin"}) {
		t.Errorf("Service ports %q", ports)
	}
	budget := func() *policyv1.PodDisruptionBudget {
		t.Helper()
		b, err := c.Kube.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "web-deploy", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the PodDisruptionBudget: %v", err)
		}
		return b
	}
	if b := budget(); b.Spec.MinAvailable == nil || b.Spec.MinAvailable.IntValue() != 1 || b.Spec.Selector.MatchLabels[appv1.InstanceLabel] != "web" ||
		metav1.GetControllerOf(b) == nil || metav1.GetControllerOf(b).UID != ready.UID {
		t.Errorf("PodDisruptionBudget %+v", b)
	}
	// The disruption controller counts the App's pods.
	framework.Eventually(t, converge, func() (bool, error) { return budget().Status.ExpectedPods == 2, nil })

	// Hand edits come back: a sidecar removed from the Deployment, the budget loosened.
	patch := `[{"op":"remove","path":"/spec/template/spec/initContainers/0"}]`
	if _, err := c.Kube.AppsV1().Deployments(ns).Patch(ctx, "web-deploy", types.JSONPatchType, []byte(patch), metav1.PatchOptions{FieldManager: "someone"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Kube.PolicyV1().PodDisruptionBudgets(ns).Patch(ctx, "web-deploy", types.MergePatchType, []byte(`{"spec":{"minAvailable":0}}`), metav1.PatchOptions{FieldManager: "someone"}); err != nil {
		t.Fatal(err)
	}
	c.WaitDeployment(t, ns, "web-deploy", func(d *appsv1.Deployment) bool { return len(d.Spec.Template.Spec.InitContainers) == 3 })
	framework.Eventually(t, converge, func() (bool, error) { return budget().Spec.MinAvailable.IntValue() == 1, nil })

	// Removed from the App: gone from the children, the budget deleted.
	c.Update(t, ns, "web", func(a *appv1.App) {
		a.Spec.DeploymentTemplate.Sidecars = nil
		a.Spec.DeploymentTemplate.InitContainers = nil
		a.Spec.DeploymentTemplate.Ports = nil
		a.Spec.ServiceTemplate.Ports = nil
		a.Spec.DisruptionBudget = nil
	})
	c.WaitDeployment(t, ns, "web-deploy", func(d *appsv1.Deployment) bool {
		return len(d.Spec.Template.Spec.InitContainers) == 0 && len(d.Spec.Template.Spec.Containers[0].Ports) == 1
	})
	framework.Eventually(t, converge, func() (bool, error) {
		s, err := c.Kube.CoreV1().Services(ns).Get(ctx, "web-svc", metav1.GetOptions{})
		return err == nil && len(s.Spec.Ports) == 1, nil
	})
	framework.Eventually(t, converge, func() (bool, error) {
		_, err := c.Kube.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "web-deploy", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if got := c.WaitReady(t, ns, "web").Status.DisruptionBudget; got != "" {
		t.Errorf("status.disruptionBudget = %q after the budget was removed", got)
	}
}

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
	ready := c.WaitReady(t, ns, "web")
	if framework.AppCondition(ready, appv1.ConditionRouteAccepted) != "True/"+appv1.ReasonRouted {
		t.Errorf("RouteAccepted %s: %s", framework.AppCondition(ready, appv1.ConditionRouteAccepted), condMessage(ready, appv1.ConditionRouteAccepted))
	}
	svc, err := c.Kube.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
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
	ing, err := c.Kube.NetworkingV1().Ingresses(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if port := ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Port; port.Name != "http" {
		t.Errorf("the route's Ingress goes to port %+v, want the first, http", port)
	}

	// Converged: a sync (queued by a label on the App) writes nothing.
	before := len(m.WritesIn(ns))
	framework.Kubectl(t, "-n", ns, "label", "app", "web", "touched=yes")
	// The same Service written the other way: the App changes, the Service does not.
	apply(`    name: web
    port: 80
    targetPort: 8080
    ports:
    - {name: metrics, port: 9090}`)
	framework.Eventually(t, converge, func() (bool, error) {
		app := c.GetApp(t, ns, "web")
		return app.Status.ObservedGeneration == app.Generation && framework.AppCondition(app, appv1.ConditionReady) == "True/"+appv1.ReasonAvailable, nil
	})
	for _, w := range m.WritesIn(ns)[before:] {
		if strings.Contains(w, "/services/") || strings.Contains(w, "/deployments/") || strings.Contains(w, "/ingresses/") {
			t.Errorf("a sync of the converged App, or the same Service written the other way, wrote %q", w)
		}
	}
}

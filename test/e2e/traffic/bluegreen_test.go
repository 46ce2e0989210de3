package traffic_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/app-controller/app-controller/internal/localcluster"
	"github.com/app-controller/app-controller/internal/plugin"
	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/test/e2e/realnode"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// blueGreenManifest is the App web in namespace %[1]s: demoapp (image %[2]s) version 1,
// two replicas, published as web.example.com through the Gateway of namespace %[3]s
// (%[4]s), rolled out blue-green, switched by kubectl app promote, its preview published
// as preview.web.example.com through the same Gateway.
const blueGreenManifest = `apiVersion: appcontroller.k8s.io/v1
kind: App
metadata: {name: web, namespace: %[1]s}
spec:
  deploymentTemplate:
    name: web
    image: %[2]s
    containerPort: 8080
    replicas: 2
    env:
    - {name: VERSION, value: "1"}
    readinessProbe:
      httpGet: {path: /healthz, port: 8080}
      periodSeconds: 1
  serviceTemplate: {name: web, port: 80}
  route:
    hosts: [web.example.com]
    parentRefs: [{name: %[4]s, namespace: %[3]s}]
  rollout:
    blueGreen: {scaleDownDelaySeconds: 600, previewHosts: [preview.web.example.com]}
`

// The load across the switch: rps requests a second for seconds, from a pod, through
// the Gateway; the switch comes in its middle.
const (
	switchRPS     = 20
	switchSeconds = 12
	switchTotal   = switchRPS * switchSeconds
)

// TestBlueGreenSwitchThroughTraefik rolls the App web out blue-green through Traefik: its
// preview (version 2) answers on the preview Service and through the Gateway under its
// preview host while the Gateway still sends every request of the App's host to version
// 1; a steady load from a pod through the Gateway runs across kubectl
// app promote and none of its requests fails; after the switch the Gateway's requests
// are answered by version 2.
func TestBlueGreenSwitchThroughTraefik(t *testing.T) {
	ctx := context.Background()
	client := framework.Client(t)
	tns, ns, traefik := startTraefikAndController(t)

	demoapp := realnode.Registry(t) + "/" + localcluster.DemoappImage
	realnode.Apply(t, fmt.Appendf(nil, blueGreenManifest, ns, demoapp, tns, realnode.TraefikGateway))
	realnode.WaitRouted(t, ns, "web")
	framework.Eventually(t, time.Minute, func() (bool, error) {
		body, err := realnode.GetHost(traefik, "web.example.com", "/", nil)
		return err == nil && strings.Contains(body, "version=1"), nil
	})

	realnode.PatchApp(t, ns, "web", `{"spec":{"deploymentTemplate":{"env":[{"name":"VERSION","value":"2"}]}}}`)
	realnode.WaitApp(t, ns, "web", "the preview up, waiting for kubectl app promote", func(app *appv1.App) bool {
		r := app.Status.Rollout
		return r != nil && r.Phase == appv1.RolloutPaused && r.CurrentStepIndex == 1
	})
	out, _ := realnode.KubectlApp(t, "status", "web", "-n", ns)
	t.Logf("kubectl app status web before the switch:\n%s", out)
	preview := realnode.PortForward(t, ns, "svc/web"+appv1.PreviewSuffix, 80)
	if body, err := realnode.GetHost(preview, "web.example.com", "/", nil); err != nil || !strings.Contains(body, "version=2") {
		t.Errorf("the preview Service answers %q, %v; want version 2", body, err)
	}
	// Traefik reads the preview's HTTPRoute within a few seconds; then every request of
	// the preview host is version 2's, and every other still version 1's.
	framework.Eventually(t, time.Minute, func() (bool, error) {
		body, err := realnode.GetHost(traefik, "preview.web.example.com", "/", nil)
		return err == nil && strings.Contains(body, "version=2"), nil
	})
	for i := range 50 {
		body, err := realnode.GetHost(traefik, "preview.web.example.com", "/", nil)
		if err != nil || !strings.Contains(body, "version=2") {
			t.Errorf("before the switch, request %d through the Gateway to the preview host: %q, %v; want version 2", i, body, err)
		}
		if i == 0 {
			t.Logf("before the switch, Traefik answers preview.web.example.com with %q", body)
		}
	}
	for i := range 50 {
		if body, err := realnode.GetHost(traefik, "web.example.com", "/", nil); err != nil || !strings.Contains(body, "version=1") {
			t.Fatalf("before the switch, request %d through the Gateway: %q, %v; want version 1", i, body, err)
		}
	}

	// The load, from a pod, to the Service of Traefik; the switch in its middle.
	svc, err := client.CoreV1().Services(tns).Get(ctx, "traefik", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	realnode.StartLoad(t, ns, "load", demoapp, fmt.Sprintf("http://%s:%d/", svc.Spec.ClusterIP, realnode.TraefikWebPort), "web.example.com", switchRPS, switchSeconds)
	var started time.Time
	framework.Eventually(t, 2*time.Minute, func() (bool, error) {
		p, err := client.CoreV1().Pods(ns).Get(ctx, "load", metav1.GetOptions{})
		if err != nil || p.Status.Phase != corev1.PodRunning || len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Running == nil {
			return false, nil
		}
		started = p.Status.ContainerStatuses[0].State.Running.StartedAt.Time
		return true, nil
	})
	time.Sleep(time.Until(started.Add(switchSeconds * time.Second / 3)))
	out, code := realnode.KubectlApp(t, "promote", "web", "-n", ns)
	t.Logf("kubectl app promote web, %.1fs into the load: %s", time.Since(started).Seconds(), strings.TrimSpace(out))
	if code != plugin.ExitOK {
		t.Fatalf("kubectl app promote: exit code %d", code)
	}
	realnode.WaitApp(t, ns, "web", "switched: the old pods kept", func(app *appv1.App) bool {
		r := app.Status.Rollout
		return r != nil && r.Phase == appv1.RolloutProgressing && r.CurrentStepIndex == 3
	})
	summary, line := realnode.LoadResult(t, ns, "load", 2*time.Minute)
	t.Logf("the load across the switch: %s", line)
	if summary.Requests != switchTotal || summary.Errors != 0 || summary.Codes["200"] != switchTotal {
		t.Errorf("the load across the switch: %+v; want %d requests, every one answered 200", summary, switchTotal)
	}

	// Traefik reads the Service's new endpoints within a few seconds; then every request
	// is version 2's.
	framework.Eventually(t, time.Minute, func() (bool, error) {
		body, err := realnode.GetHost(traefik, "web.example.com", "/", nil)
		return err == nil && strings.Contains(body, "version=2"), nil
	})
	for i := range 50 {
		if body, err := realnode.GetHost(traefik, "web.example.com", "/", nil); err != nil || !strings.Contains(body, "version=2") {
			t.Errorf("after the switch, request %d through the Gateway: %q, %v; want version 2", i, body, err)
		}
	}
	out, _ = realnode.KubectlApp(t, "status", "web", "-n", ns)
	t.Logf("kubectl app status web after the switch:\n%s", out)
	if !strings.Contains(out, "Active:") || !strings.Contains(out, "web-canary") {
		t.Errorf("kubectl app status after the switch does not show the preview's Deployment active:\n%s", out)
	}
}

// Package traffic_test sends requests by Host header through a real ingress and Gateway
// API controller, Traefik v3 (built from hack/tools/traefik), to the pods of Apps whose
// routes are an Ingress and an HTTPRoute, on a real node, and through the weights of a
// canary rollout's HTTPRoute, its header and cookie routes and a mirror Traefik cannot
// do (routing_test.go), and across a blue-green rollout's switch under a steady load
// (bluegreen_test.go). make e2e (so make test) and make e2e-traffic build Traefik's
// image and name it in TRAEFIK_IMAGE_LAYOUT; without it (go test alone) the package says
// in one line that it skipped.
package traffic_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/app-controller/app-controller/internal/plugin"
	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/test/e2e/realnode"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// TestMain starts a cluster with a real node, the App CRD and the Gateway API CRDs,
// when Traefik's image is there.
func TestMain(m *testing.M) { realnode.MainWithTraefik(m, "traffic") }

// appManifest is an App %[2]s in namespace %[1]s running agnhost netexec (image %[3]s),
// whose route publishes host %[2]s.example.com by %[4]s.
const appManifest = `apiVersion: appcontroller.k8s.io/v1
kind: App
metadata: {name: %[2]s, namespace: %[1]s}
spec:
  deploymentTemplate:
    name: %[2]s
    image: %[3]s
    args: [netexec, --http-port=8080]
    containerPort: 8080
    replicas: 1
  serviceTemplate: {name: %[2]s, port: 80}
  route:
    hosts: [%[2]s.example.com]
    %[4]s
`

func TestTrafficThroughTraefik(t *testing.T) {
	ctx := context.Background()
	client := framework.Client(t)
	apps := framework.AppClient(t)
	tns, ns, traefik := startTraefikAndController(t)

	agnhost := realnode.Agnhost(t)
	for _, tc := range []struct{ name, route, kind string }{
		{"shop", fmt.Sprintf("parentRefs: [{name: %s, namespace: %s}]", realnode.TraefikGateway, tns), "HTTPRoute"},
		{"blog", "ingressClassName: traefik", "Ingress"},
	} {
		realnode.Apply(t, fmt.Appendf(nil, appManifest, ns, tc.name, agnhost, tc.route))
		app := realnode.WaitRouted(t, ns, tc.name)
		t.Logf("App %s Ready; RouteAccepted: %s", tc.name, meta.FindStatusCondition(app.Status.Conditions, appv1.ConditionRouteAccepted).Message)
		pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: appv1.InstanceLabel + "=" + tc.name})
		if err != nil || len(pods.Items) != 1 {
			t.Fatalf("pods of App %s: %v, %v", tc.name, pods, err)
		}
		// Traefik applies a new route within a few seconds of reading it.
		var body string
		framework.Eventually(t, time.Minute, func() (bool, error) {
			body, err = realnode.GetHost(traefik, tc.name+".example.com", "/hostname", nil)
			return err == nil && body == pods.Items[0].Name, nil
		})
		t.Logf("GET %s.example.com/hostname through Traefik, by the route's %s -> %q (pod %s)", tc.name, tc.kind, body, pods.Items[0].Name)
	}
	if body, err := realnode.GetHost(traefik, "nobody.example.com", "/hostname", nil); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("GET nobody.example.com: %q, %v; want 404", body, err)
	}

	canaryThroughTraefik(t, ns, "shop", traefik)
	routingThroughTraefik(t, apps, ns, "shop", traefik)
}

// canaryThroughTraefik rolls the App name (its route an HTTPRoute) to a new version with
// the steps 20% / pause: at the pause, 1000 requests by Host through the Gateway reach
// the canary 20% +- 5 of the time; kubectl app abort moves them all back to the stable.
func canaryThroughTraefik(t *testing.T, ns, name, traefik string) {
	realnode.PatchApp(t, ns, name, `{"spec":{"rollout":{"canary":{"steps":[{"setWeight":20},{"pause":{}}],"abortScaleDownDelaySeconds":0}}}}`)
	waitRollout(t, ns, name, "the strategy added", func(r *appv1.RolloutStatus) bool { return r.Phase == appv1.RolloutHealthy })
	realnode.PatchApp(t, ns, name, `{"spec":{"deploymentTemplate":{"env":[{"name":"VERSION","value":"2"}]}}}`)
	waitRollout(t, ns, name, "paused at 20%", func(r *appv1.RolloutStatus) bool { return r.Phase == appv1.RolloutPaused && r.CurrentStepIndex == 1 })

	count := func(n int) (canaries, failed int) { return countCanary(traefik, name, n, nil) }
	// Traefik applies the weights within a few seconds of reading them.
	framework.Eventually(t, time.Minute, func() (bool, error) {
		c, _ := count(1)
		return c == 1, nil
	})
	start := time.Now()
	canaries, failed := count(1000)
	share := float64(canaries) / 10
	t.Logf("at 20%%: %d of 1000 requests through Traefik reached the canary (%.1f%%), %d failed, in %.1fs", canaries, share, failed, time.Since(start).Seconds())
	if failed != 0 || share < 15 || share > 25 {
		t.Errorf("at 20%%: %.1f%% of the requests reached the canary, %d failed; want 20%% +- 5, none failed", share, failed)
	}

	kubectlApp(t, "abort", ns, name)
	aborted := time.Now()
	waitRollout(t, ns, name, "aborted", func(r *appv1.RolloutStatus) bool { return r.Phase == appv1.RolloutAborted })
	framework.Eventually(t, time.Minute, func() (bool, error) {
		c, f := count(20)
		return c == 0 && f == 0, nil
	})
	t.Logf("all the traffic back on the stable pod %.1fs after kubectl app abort", time.Since(aborted).Seconds())
	if canaries, failed := count(200); canaries != 0 || failed != 0 {
		t.Errorf("after the abort: %d of 200 requests reached the canary, %d failed; want none", canaries, failed)
	}
}

// startTraefikAndController installs Traefik in a namespace of its own, forwards a local
// port to its web entry point and runs the App controller in the test process, all until
// the test ends. It returns Traefik's namespace, a namespace for the test's Apps and the
// forward's local end (http://127.0.0.1:PORT).
func startTraefikAndController(t *testing.T) (tns, ns, traefik string) {
	t.Helper()
	tns, ns = framework.Namespace(t), framework.Namespace(t)
	realnode.InstallTraefik(t, tns)
	traefik = realnode.PortForward(t, tns, "pod/traefik", realnode.TraefikWebPort)
	framework.StartAppController(t, framework.Config(t), nil)
	return tns, ns, traefik
}

// waitRollout waits until the App name of namespace ns has a rollout status, of its
// current generation, that done accepts (realnode.WaitApp), and logs what.
func waitRollout(t *testing.T, ns, name, what string, done func(r *appv1.RolloutStatus) bool) {
	t.Helper()
	realnode.WaitApp(t, ns, name, what, func(app *appv1.App) bool { return app.Status.Rollout != nil && done(app.Status.Rollout) })
}

// kubectlApp runs `kubectl app ACTION NAME -n NS` (promote, abort) and logs its output;
// an exit code other than ExitOK fails the test.
func kubectlApp(t *testing.T, action, ns, name string) {
	t.Helper()
	out, code := realnode.KubectlApp(t, action, name, "-n", ns)
	t.Logf("kubectl app %s %s: %s", action, name, out)
	if code != plugin.ExitOK {
		t.Fatalf("kubectl app %s: exit code %d", action, code)
	}
}

// countCanary sends n requests with headers to the host of the App name through
// Traefik (traefik, its port-forward's local end), each asking which pod answers
// (/hostname), and counts those the App's canary answered and those that failed.
func countCanary(traefik, name string, n int, headers map[string]string) (canaries, failed int) {
	canary := name + appv1.CanarySuffix + "-"
	for range n {
		body, err := realnode.GetHost(traefik, name+".example.com", "/hostname", headers)
		switch {
		case err != nil:
			failed++
		case strings.HasPrefix(body, canary):
			canaries++
		}
	}
	return canaries, failed
}

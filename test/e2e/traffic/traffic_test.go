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
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/app-controller/app-controller/internal/plugin"
	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controllermanager"
	appclient "github.com/app-controller/app-controller/pkg/generated/clientset/versioned"
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
	tns, ns := framework.Namespace(t), framework.Namespace(t)
	realnode.InstallTraefik(t, tns)
	traefik := realnode.PortForward(t, tns, "pod/traefik", realnode.TraefikWebPort)

	opts := controllermanager.NewOptions()
	opts.Controllers = []string{"app"}
	opts.ShutdownTimeout = 5 * time.Second
	framework.StartManager(t, framework.Config(t), opts)

	agnhost := realnode.Agnhost(t)
	for _, tc := range []struct{ name, route, kind string }{
		{"shop", fmt.Sprintf("parentRefs: [{name: %s, namespace: %s}]", realnode.TraefikGateway, tns), "HTTPRoute"},
		{"blog", "ingressClassName: traefik", "Ingress"},
	} {
		realnode.RunStdin(t, []byte(fmt.Sprintf(appManifest, ns, tc.name, agnhost, tc.route)), filepath.Join(realnode.BinDir(t), "kubectl"),
			"--kubeconfig", framework.Cluster().Kubeconfig, "apply", "--server-side", "-f", "-")
		var app *appv1.App
		framework.Eventually(t, 3*time.Minute, func() (bool, error) {
			var err error
			app, err = apps.AppcontrollerV1().Apps(ns).Get(ctx, tc.name, metav1.GetOptions{})
			return err == nil && meta.IsStatusConditionTrue(app.Status.Conditions, appv1.ConditionReady) &&
				meta.IsStatusConditionTrue(app.Status.Conditions, appv1.ConditionRouteAccepted), nil
		})
		t.Logf("App %s Ready; RouteAccepted: %s", tc.name, meta.FindStatusCondition(app.Status.Conditions, appv1.ConditionRouteAccepted).Message)
		pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: appv1.InstanceLabel + "=" + tc.name})
		if err != nil || len(pods.Items) != 1 {
			t.Fatalf("pods of App %s: %v, %v", tc.name, pods, err)
		}
		// Traefik applies a new route within a few seconds of reading it.
		var body string
		framework.Eventually(t, time.Minute, func() (bool, error) {
			body, err = getHost(traefik, tc.name+".example.com", "/hostname")
			return err == nil && body == pods.Items[0].Name, nil
		})
		t.Logf("GET %s.example.com/hostname through Traefik, by the route's %s -> %q (pod %s)", tc.name, tc.kind, body, pods.Items[0].Name)
	}
	if body, err := getHost(traefik, "nobody.example.com", "/hostname"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("GET nobody.example.com: %q, %v; want 404", body, err)
	}

	canaryThroughTraefik(t, apps, ns, "shop", traefik)
	routingThroughTraefik(t, apps, ns, "shop", traefik)
}

// canaryThroughTraefik rolls the App name (its route an HTTPRoute) to a new version with
// the steps 20% / pause: at the pause, 1000 requests by Host through the Gateway reach
// the canary 20% +- 5 of the time; kubectl app abort moves them all back to the stable.
func canaryThroughTraefik(t *testing.T, apps appclient.Interface, ns, name, traefik string) {
	ctx := context.Background()
	patch := func(p string) {
		t.Helper()
		if _, err := apps.AppcontrollerV1().Apps(ns).Patch(ctx, name, types.MergePatchType, []byte(p), metav1.PatchOptions{}); err != nil {
			t.Fatalf("patching App %s with %s: %v", name, p, err)
		}
	}
	wait := func(what string, done func(r *appv1.RolloutStatus) bool) {
		t.Helper()
		framework.Eventually(t, 3*time.Minute, func() (bool, error) {
			app, err := apps.AppcontrollerV1().Apps(ns).Get(ctx, name, metav1.GetOptions{})
			return err == nil && app.Status.ObservedGeneration == app.Generation && app.Status.Rollout != nil && done(app.Status.Rollout), nil
		})
		t.Logf("App %s: %s", name, what)
	}
	patch(`{"spec":{"rollout":{"canary":{"steps":[{"setWeight":20},{"pause":{}}],"abortScaleDownDelaySeconds":0}}}}`)
	wait("the strategy added", func(r *appv1.RolloutStatus) bool { return r.Phase == appv1.RolloutHealthy })
	patch(`{"spec":{"deploymentTemplate":{"env":[{"name":"VERSION","value":"2"}]}}}`)
	wait("paused at 20%", func(r *appv1.RolloutStatus) bool { return r.Phase == appv1.RolloutPaused && r.CurrentStepIndex == 1 })

	canary := name + appv1.CanarySuffix + "-"
	// Traefik applies the weights within a few seconds of reading them.
	framework.Eventually(t, time.Minute, func() (bool, error) {
		body, err := getHost(traefik, name+".example.com", "/hostname")
		return err == nil && strings.HasPrefix(body, canary), nil
	})
	count := func(n int) (canaries, failed int) {
		for range n {
			body, err := getHost(traefik, name+".example.com", "/hostname")
			switch {
			case err != nil:
				failed++
			case strings.HasPrefix(body, canary):
				canaries++
			}
		}
		return canaries, failed
	}
	start := time.Now()
	canaries, failed := count(1000)
	share := float64(canaries) / 10
	t.Logf("at 20%%: %d of 1000 requests through Traefik reached the canary (%.1f%%), %d failed, in %.1fs", canaries, share, failed, time.Since(start).Seconds())
	if failed != 0 || share < 15 || share > 25 {
		t.Errorf("at 20%%: %.1f%% of the requests reached the canary, %d failed; want 20%% +- 5, none failed", share, failed)
	}

	out, code := realnode.KubectlApp(t, "abort", name, "-n", ns)
	t.Logf("kubectl app abort %s: %s", name, out)
	if code != plugin.ExitOK {
		t.Fatalf("kubectl app abort: exit code %d", code)
	}
	aborted := time.Now()
	wait("aborted", func(r *appv1.RolloutStatus) bool { return r.Phase == appv1.RolloutAborted })
	framework.Eventually(t, time.Minute, func() (bool, error) {
		c, f := count(20)
		return c == 0 && f == 0, nil
	})
	t.Logf("all the traffic back on the stable pod %.1fs after kubectl app abort", time.Since(aborted).Seconds())
	if canaries, failed := count(200); canaries != 0 || failed != 0 {
		t.Errorf("after the abort: %d of 200 requests reached the canary, %d failed; want none", canaries, failed)
	}
}

// getHost sends GET base+path with Host host and returns the body of a 200 answer.
func getHost(base, host, path string) (string, error) {
	req, err := http.NewRequest(http.MethodGet, base+path, nil)
	if err != nil {
		return "", err
	}
	req.Host = host
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s%s (Host %s): %s: %s", base, path, host, resp.Status, body)
	}
	return strings.TrimSpace(string(body)), nil
}

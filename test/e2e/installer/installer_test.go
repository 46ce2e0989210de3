// Package installer_test installs the controller with the one-file installer on a fresh
// cluster whose node runs pods for real: `make build-installer IMG=...`, then
// `kubectl apply --server-side -f install.yaml`, as the README says.
package installer_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/app-controller/app-controller/internal/localcluster"
	"github.com/app-controller/app-controller/test/e2e/realnode"
	"github.com/app-controller/app-controller/test/integration/framework"
)

func TestMain(m *testing.M) { realnode.Main(m) }

const systemNS = "app-controller-system"

func TestInstallerOnRealNode(t *testing.T) {
	ctx := context.Background()
	client := framework.Client(t)
	img := realnode.Registry(t) + "/app-controller:installer"
	realnode.Make(t, "image-push", "IMG="+img)
	installer := filepath.Join(t.TempDir(), "install.yaml")
	realnode.Make(t, "build-installer", "IMG="+img, "INSTALLER="+installer)

	begin := time.Now()
	realnode.Kubectl(t, "apply", "--server-side", "-f", installer)
	realnode.Kubectl(t, "-n", systemNS, "rollout", "status", "deployment/app-controller", "--timeout=3m")
	t.Logf("kubectl apply --server-side -f install.yaml: the controller's Deployment rolled out %.1fs later", time.Since(begin).Seconds())

	pods, err := client.CoreV1().Pods(systemNS).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=app-controller"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) == 0 {
		t.Fatal("no controller pod")
	}
	names := map[string]bool{}
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning || p.Spec.NodeName != localcluster.RealNodeName || p.Spec.Containers[0].Image != img {
			t.Fatalf("pod %s: phase %s on %q, image %s; want Running on %s with %s", p.Name, p.Status.Phase, p.Spec.NodeName, p.Spec.Containers[0].Image, localcluster.RealNodeName, img)
		}
		names[p.Name] = true
		t.Logf("controller pod %s Running on %s, image %s", p.Name, p.Spec.NodeName, img)
	}
	var holder string
	framework.Eventually(t, time.Minute, func() (bool, error) {
		lease, err := client.CoordinationV1().Leases(systemNS).Get(ctx, "app-controller", metav1.GetOptions{})
		if err != nil || lease.Spec.HolderIdentity == nil {
			return false, nil
		}
		holder, _, _ = strings.Cut(*lease.Spec.HolderIdentity, "_")
		return names[holder], nil
	})
	t.Logf("Lease %s/app-controller held by pod %s", systemNS, holder)

	// An App of agnhost netexec converges on the real node.
	ns := framework.Namespace(t)
	app := []byte(`apiVersion: appcontroller.k8s.io/v1
kind: App
metadata:
  name: hello
  namespace: ` + ns + `
spec:
  deploymentTemplate:
    name: hello
    image: ` + realnode.Agnhost(t) + `
    args: [netexec]
  serviceTemplate:
    name: hello
`)
	path := filepath.Join(t.TempDir(), "app.yaml")
	if err := os.WriteFile(path, app, 0o644); err != nil {
		t.Fatal(err)
	}
	begin = time.Now()
	realnode.Kubectl(t, "apply", "-f", path)
	realnode.Kubectl(t, "wait", "-n", ns, "--for=condition=Ready", "app/hello", "--timeout=2m")
	t.Logf("App %s/hello Ready %.1fs after kubectl apply", ns, time.Since(begin).Seconds())
	prober := realnode.NewProber(t, ns)
	svc, err := client.CoreV1().Services(ns).Get(ctx, "hello", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var body string
	framework.Eventually(t, time.Minute, func() (bool, error) {
		body, err = prober.Get(svc.Spec.ClusterIP, 8080, "/hostname")
		return err == nil && strings.HasPrefix(body, "hello-"), nil
	})
	t.Logf("GET http://%s:8080/hostname from a pod: %q", svc.Spec.ClusterIP, body)
}

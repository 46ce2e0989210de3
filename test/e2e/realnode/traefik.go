package realnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/app-controller/app-controller/internal/localcluster"
	"github.com/app-controller/app-controller/test/harness"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// TraefikLayoutEnv names the OCI layout of Traefik's image (make e2e builds it when
// E2E_PKGS has a package that needs it: the Makefile's E2E_TRAEFIK).
const TraefikLayoutEnv = "TRAEFIK_IMAGE_LAYOUT"

// TraefikImage is the name and tag under which InstallTraefik pushes Traefik's image to
// the cluster's registry.
const TraefikImage = harness.TraefikTag

// TraefikGateway is the Gateway InstallTraefik makes in its namespace, listener web on
// TraefikWebPort, open to routes of every namespace.
const TraefikGateway = "public"

// Traefik's ports: the entry point of the Gateway and Ingresses (web), and its own
// (ping, /metrics).
const (
	TraefikWebPort     = 8000
	TraefikMetricsPort = 8080
)

// MainWithTraefik is Main for a package whose tests run Traefik (InstallTraefik): a
// real node with the App CRD and the Gateway API CRDs, when $TRAEFIK_IMAGE_LAYOUT names
// Traefik's image; without it the package prints one line saying it skipped (pkg names
// the package) and passes.
func MainWithTraefik(m *testing.M, pkg string) {
	if dir := os.Getenv(TraefikLayoutEnv); dir == "" {
		fmt.Printf("%s: skipped: $%s is not set (make e2e and make e2e-traffic build Traefik and set it)\n", pkg, TraefikLayoutEnv)
		os.Exit(0)
	} else if _, err := os.Stat(filepath.Join(dir, "index.json")); err != nil {
		fmt.Printf("%s: skipped: no image layout in $%s: %v\n", pkg, TraefikLayoutEnv, err)
		os.Exit(0)
	}
	framework.MainWithOptions(m, func(o *localcluster.Options) {
		o.Node = localcluster.NodeReal
		o.GatewayAPI = true
	})
}

// InstallTraefik pushes Traefik's image ($TRAEFIK_IMAGE_LAYOUT) to the cluster's registry
// and runs Traefik in namespace (harness.TraefikManifest: IngressClass and GatewayClass
// traefik, Gateway TraefikGateway, the pod and Service traefik, its Prometheus metrics
// on TraefikMetricsPort), and waits until its pod is Ready.
// The cluster-wide objects are deleted when the test ends. Requests reach it from this
// machine through PortForward(t, namespace, "pod/traefik", TraefikWebPort), from a pod at
// the Service traefik's address.
func InstallTraefik(t testing.TB, namespace string) {
	t.Helper()
	image := Registry(t) + "/" + TraefikImage
	Run(t, filepath.Join(BinDir(t), "imagebuild"), "push", "--layout", os.Getenv(TraefikLayoutEnv), image)
	kubectl := filepath.Join(BinDir(t), "kubectl")
	manifest := harness.TraefikManifest(harness.TraefikOptions{Namespace: namespace, Image: image, Ingress: true, Metrics: true})
	RunStdin(t, []byte(manifest), kubectl, "--kubeconfig", framework.Cluster().Kubeconfig, "apply", "-f", "-")
	t.Cleanup(func() {
		_, _ = TryRun(kubectl, "--kubeconfig", framework.Cluster().Kubeconfig, "delete", "--ignore-not-found",
			"clusterrole/traefik-"+namespace, "clusterrolebinding/traefik-"+namespace, "ingressclass/traefik", "gatewayclass/traefik")
	})
	client := framework.Client(t)
	framework.Eventually(t, 3*time.Minute, func() (bool, error) {
		p, err := client.CoreV1().Pods(namespace).Get(context.Background(), "traefik", metav1.GetOptions{})
		return err == nil && PodReady(p), nil
	})
}

package realnode

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/app-controller/app-controller/internal/localcluster"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// PrometheusPodsJob is the job of every target of InstallPrometheus's Prometheus: each
// pod annotated prometheus.io/scrape: "true" (Traefik's of InstallTraefik included).
const PrometheusPodsJob = "kubernetes-pods"

// PrometheusPort is the port of InstallPrometheus's pod and Service prometheus.
const PrometheusPort = 9090

// PrometheusScrapeInterval is how often InstallPrometheus's Prometheus scrapes the pods
// and evaluates.
const PrometheusScrapeInterval = 2 * time.Second

// InstallPrometheus runs Prometheus 2.42 (localcluster.PrometheusImage: Debian's) as the
// pod prometheus in namespace, behind the Service prometheus (port PrometheusPort), with
// the right to watch the cluster's pods and its configuration (localcluster.PrometheusManifest): job PrometheusPodsJob
// scrapes every PrometheusScrapeInterval each pod annotated prometheus.io/scrape: "true"
// (port prometheus.io/port), its series labelled with its namespace, pod and labels. It
// waits until Prometheus is ready and returns the URL of its API for this machine, the
// local end of a `kubectl port-forward` (http://127.0.0.1:PORT), open until the test
// ends; a controller in the cluster reaches it at PrometheusServiceURL. The cluster-wide
// RBAC objects are deleted when the test ends.
func InstallPrometheus(t testing.TB, namespace string) (queryURL string) {
	t.Helper()
	kubectl := filepath.Join(BinDir(t), "kubectl")
	RunStdin(t, localcluster.PrometheusManifest(namespace, Registry(t), localcluster.PrometheusOptions{}), kubectl, "--kubeconfig", framework.Cluster().Kubeconfig, "apply", "-f", "-")
	t.Cleanup(func() {
		_, _ = TryRun(kubectl, "--kubeconfig", framework.Cluster().Kubeconfig, "delete", "--ignore-not-found",
			"clusterrole/prometheus-"+namespace, "clusterrolebinding/prometheus-"+namespace)
	})
	client := framework.Client(t)
	framework.Eventually(t, 3*time.Minute, func() (bool, error) {
		p, err := client.CoreV1().Pods(namespace).Get(context.Background(), "prometheus", metav1.GetOptions{})
		return err == nil && PodReady(p), nil
	})
	return PortForward(t, namespace, "pod/prometheus", PrometheusPort)
}

// PrometheusServiceURL returns the URL at which a pod reaches InstallPrometheus's
// Prometheus in namespace: http://CLUSTER-IP:9090, since the local cluster has no DNS
// (on a cluster with DNS, http://prometheus.NAMESPACE:9090).
func PrometheusServiceURL(t testing.TB, namespace string) string {
	t.Helper()
	svc, err := framework.Client(t).CoreV1().Services(namespace).Get(context.Background(), "prometheus", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting the Service prometheus: %v", err)
	}
	return fmt.Sprintf("http://%s:%d", svc.Spec.ClusterIP, PrometheusPort)
}

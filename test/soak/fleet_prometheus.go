package soak

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/app-controller/app-controller/internal/localcluster"
)

// The real-node fleet's Prometheus, which the controller's canary analysis queries
// (analysis.go): localcluster.PrometheusManifest (the end-to-end tests' Prometheus, every
// pod annotated prometheus.io/scrape scraped every 2 s) in prometheusNamespace, installed
// before the controller, whose releases get its Service's address as
// analysis.prometheus.url (the local cluster has no DNS: its ClusterIP).

// prometheusNamespace is the namespace of the fleet's Prometheus.
const prometheusNamespace = "soak-prometheus"

// prometheusOptions: the Ready pods alone scraped (a canary pod still starting on a
// busy node has no up = 0 to fail the pods-up check with: on the 60-minute run of
// session 23 three healthy versions were aborted by it), and a critical pod, which the
// kubelet never evicts (that run's node-pressure fault evicted the bare pod, which
// nothing made again: every analysed canary after it aborted).
var prometheusOptions = localcluster.PrometheusOptions{ReadyOnly: true, PriorityClassName: criticalPriority}

// installPrometheus applies the Prometheus manifest, waits until its pod is Ready and
// returns the URL a pod of the cluster reaches it at.
func (f *chartFleet) installPrometheus(ctx context.Context) (string, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: prometheusNamespace}}
	if _, err := f.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("creating namespace %s: %w", prometheusNamespace, err)
	}
	cmd := exec.CommandContext(ctx, filepath.Join(f.cfg.BinDir, "kubectl"), "apply", "-f", "-")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+f.cluster.Kubeconfig)
	cmd.Stdin = bytes.NewReader(localcluster.PrometheusManifest(prometheusNamespace, f.cluster.Registry, prometheusOptions))
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("applying Prometheus's manifest: %w\n%s", err, out)
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		p, err := f.kube.CoreV1().Pods(prometheusNamespace).Get(ctx, "prometheus", metav1.GetOptions{})
		if err == nil && podServing(p) {
			break
		}
		if time.Now().After(deadline) {
			if err != nil {
				return "", fmt.Errorf("Prometheus's pod not Ready within 3 minutes: %w", err)
			}
			return "", errors.New("Prometheus's pod not Ready within 3 minutes")
		}
		time.Sleep(time.Second)
	}
	svc, err := f.kube.CoreV1().Services(prometheusNamespace).Get(ctx, "prometheus", metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("reading Prometheus's Service: %w", err)
	}
	return fmt.Sprintf("http://%s:9090", svc.Spec.ClusterIP), nil
}

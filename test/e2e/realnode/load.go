package realnode

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/app-controller/app-controller/test/integration/framework"
)

// loadTimeout is each request's timeout in StartLoad's load.
const loadTimeout = 30 * time.Second

// StartLoad creates the pod name in namespace that runs test/images/demoapp's load
// generator (image): rps requests a second for seconds to url, with Host host, from
// inside the cluster. LoadResult waits for its summary. Each request may take
// loadTimeout: the tests count a request lost when it is not answered, and a 2-core
// machine busy with a whole make test has stalled the path for more than the
// generator's default 5 s (8 of 3200 requests timed out, every other answered).
func StartLoad(t testing.TB, namespace, name, image, url, host string, rps, seconds int) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "load", Image: image,
				Args: []string{"load", "--url", url, "--rps", strconv.Itoa(rps), "--duration", fmt.Sprintf("%ds", seconds),
					"--timeout", loadTimeout.String(), "--header", "Host:" + host},
			}},
			TerminationGracePeriodSeconds: new(int64),
		},
	}
	if _, err := framework.Client(t).CoreV1().Pods(namespace).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the load pod %s/%s: %v", namespace, name, err)
	}
}

// LoadSummary is what demoapp load prints when it ends.
type LoadSummary struct {
	Requests  int            `json:"requests"`
	Codes     map[string]int `json:"codes"`
	Errors    int            `json:"errors"`
	LastError string         `json:"lastError"`
	P50Ms     float64        `json:"p50Ms"`
	P99Ms     float64        `json:"p99Ms"`
}

// LoadResult waits, up to within, until StartLoad's pod name has ended (failing at once
// if it failed) and returns its summary and the line it printed.
func LoadResult(t testing.TB, namespace, name string, within time.Duration) (LoadSummary, string) {
	t.Helper()
	ctx := context.Background()
	client := framework.Client(t)
	framework.Eventually(t, within, func() (bool, error) {
		p, err := client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		if p.Status.Phase == corev1.PodFailed {
			return false, fmt.Errorf("the load pod failed: %+v", p.Status)
		}
		return p.Status.Phase == corev1.PodSucceeded, nil
	})
	logs, err := client.CoreV1().Pods(namespace).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("reading the load pod's summary: %v", err)
	}
	line := strings.TrimSpace(string(logs))
	var s LoadSummary
	if err := json.Unmarshal([]byte(line), &s); err != nil {
		t.Fatalf("the load's summary %q: %v", logs, err)
	}
	if s.Errors > 0 {
		logProbeFailures(t)
	}
	return s, line
}

// logProbeFailures logs the cluster's Events of failed probes (reason Unhealthy): a
// request the load lost in transit is most often its target taken out of its Service.
func logProbeFailures(t testing.TB) {
	t.Helper()
	events, err := framework.Client(t).CoreV1().Events(metav1.NamespaceAll).List(context.Background(),
		metav1.ListOptions{FieldSelector: "reason=Unhealthy"})
	if err != nil {
		t.Logf("listing the probes' failures: %v", err)
		return
	}
	t.Logf("the load lost requests in transit; %d Events of failed probes in the cluster", len(events.Items))
	for _, ev := range events.Items {
		t.Logf("  %s %s/%s x%d (last %s): %s", ev.Reason, ev.InvolvedObject.Namespace, ev.InvolvedObject.Name,
			ev.Count, ev.LastTimestamp.Format("15:04:05"), ev.Message)
	}
}

// Package prometheus_test proves, on a real node, the Prometheus the canary analysis's
// end-to-end tests read (realnode.InstallPrometheus: Debian's 2.42 as a pod, the pods
// found by demoapp pods-sd) and the test image demoapp: a pod annotated
// prometheus.io/scrape answers 500 to exactly one request in ten, and Prometheus shows
// its http_requests_total with the labels the analysis queries by.
package prometheus_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/app-controller/app-controller/internal/localcluster"
	"github.com/app-controller/app-controller/test/e2e/realnode"
	"github.com/app-controller/app-controller/test/integration/framework"
)

func TestMain(m *testing.M) { realnode.Main(m) }

// TestPrometheusScrapesAnnotatedPods runs demoapp (ERROR_RATE=0.1) in an annotated pod,
// sends it 50 requests through a port-forward, and reads from Prometheus, through
// another, its requests by code: 45 answered 200 and 5 answered 500, labelled with the
// pod's namespace, name and labels and the job realnode.PrometheusPodsJob.
func TestPrometheusScrapesAnnotatedPods(t *testing.T) {
	ctx := context.Background()
	client := framework.Client(t)
	pns, ns := framework.Namespace(t), framework.Namespace(t)
	url := realnode.InstallPrometheus(t, pns)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: ns,
			Labels:      map[string]string{"app.kubernetes.io/instance": "demo", "appcontroller.k8s.io/track": "canary"},
			Annotations: map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": "8080"}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "demo", Image: realnode.Registry(t) + "/" + localcluster.DemoappImage,
				Env:   []corev1.EnvVar{{Name: "ERROR_RATE", Value: "0.1"}},
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
					HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)},
				}, PeriodSeconds: 1},
			}},
			TerminationGracePeriodSeconds: new(int64),
		},
	}
	if _, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 2*time.Minute, func() (bool, error) {
		p, err := client.CoreV1().Pods(ns).Get(ctx, "demo", metav1.GetOptions{})
		return err == nil && realnode.PodReady(p), nil
	})
	demo := realnode.PortForward(t, ns, "pod/demo", 8080)
	codes := map[int]int{}
	for range 50 {
		resp, err := http.Get(demo + "/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		codes[resp.StatusCode]++
	}
	if codes[200] != 45 || codes[500] != 5 {
		t.Errorf("50 requests to demoapp at ERROR_RATE=0.1: %v, want 45 answered 200 and 5 answered 500", codes)
	}

	c, err := api.NewClient(api.Config{Address: url})
	if err != nil {
		t.Fatal(err)
	}
	prom := promv1.NewAPI(c)
	q := `sum by (code, job, namespace, pod, app_kubernetes_io_instance, appcontroller_k8s_io_track) (http_requests_total{namespace="` + ns + `"})`
	var got model.Vector
	framework.Eventually(t, time.Minute, func() (bool, error) {
		v, _, err := prom.Query(ctx, q, time.Now())
		if err != nil {
			return false, nil
		}
		got, _ = v.(model.Vector)
		total := 0.0
		for _, s := range got {
			total += float64(s.Value)
		}
		return total == 50, nil
	})
	t.Logf("%s:\n%v", q, got)
	for _, s := range got {
		want := map[string]float64{"200": 45, "500": 5}[string(s.Metric["code"])]
		if float64(s.Value) != want || s.Metric["job"] != realnode.PrometheusPodsJob || s.Metric["pod"] != "demo" ||
			s.Metric["app_kubernetes_io_instance"] != "demo" || s.Metric["appcontroller_k8s_io_track"] != "canary" {
			t.Errorf("series %v = %v: want 45 of code 200 and 5 of code 500, job %s, pod demo, the pod's labels", s.Metric, s.Value, realnode.PrometheusPodsJob)
		}
	}
}

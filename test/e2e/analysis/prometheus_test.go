package analysis_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/app-controller/app-controller/internal/localcluster"
	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/test/e2e/realnode"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// pausedManifest is the App web in namespace %[1]s: demoapp (image %[2]s) answering 500 to
// one request in ten, its pods annotated for Prometheus, published as web.example.com
// through the Gateway of namespace %[3]s, rolled out in a canary step of 50%% and a pause.
const pausedManifest = `apiVersion: appcontroller.k8s.io/v1
kind: App
metadata: {name: web, namespace: %[1]s}
spec:
  deploymentTemplate:
    name: web
    image: %[2]s
    containerPort: 8080
    replicas: 1
    env:
    - {name: ERROR_RATE, value: "0.1"}
    - {name: VERSION, value: "1"}
    podAnnotations: {prometheus.io/scrape: "true", prometheus.io/port: "8080"}
    readinessProbe:
      httpGet: {path: /healthz, port: 8080}
      periodSeconds: 1
  serviceTemplate: {name: web, port: 80}
  route:
    hosts: [web.example.com]
    parentRefs: [{name: %[4]s, namespace: %[3]s}]
  rollout:
    canary:
      steps: [{setWeight: 50}, {pause: {}}]
`

// The load: rps requests a second for seconds, from a pod, through the Gateway.
const (
	loadRPS     = 20
	loadSeconds = 20
	loadTotal   = loadRPS * loadSeconds
)

// prometheusSeesTheCanary pauses the App web's canary rollout at 50%, both versions
// answering 500 to one request in ten, sends a bounded load through Traefik from a pod,
// and reads through the port-forward to Prometheus what the analysis reads: Traefik's
// traefik_service_requests_total for the stable and the canary Services (the exact
// service labels are logged) and the pods' own http_requests_total, each about 10% 5xx,
// the two counting the same requests. (It was the package's first test,
// TestPrometheusSeesTheCanary, with a Traefik and a Prometheus of its own; it now shares
// TestAnalysis's.)
func prometheusSeesTheCanary(t *testing.T, e *env) {
	ctx := context.Background()
	client := framework.Client(t)
	ns := framework.Namespace(t)
	tns, promURL, traefik := e.tns, e.promURL, e.traefikFwd

	demoapp := realnode.Registry(t) + "/" + localcluster.DemoappImage
	realnode.Apply(t, fmt.Appendf(nil, pausedManifest, ns, demoapp, tns, realnode.TraefikGateway))
	realnode.WaitRouted(t, ns, "web")
	realnode.PatchApp(t, ns, "web", `{"spec":{"deploymentTemplate":{"env":[{"name":"ERROR_RATE","value":"0.1"},{"name":"VERSION","value":"2"}]}}}`)
	realnode.WaitApp(t, ns, "web", "paused at 50%", func(app *appv1.App) bool {
		r := app.Status.Rollout
		return r != nil && r.Phase == appv1.RolloutPaused && r.CurrentStepIndex == 1
	})
	// Traefik applies the weights within a few seconds of reading them: wait until the
	// canary answers through it.
	warmup := 0
	framework.Eventually(t, time.Minute, func() (bool, error) {
		warmup++
		body, err := realnode.GetHost(traefik, "web.example.com", "/", nil)
		return err == nil && strings.Contains(body, "version=2"), nil
	})
	t.Logf("the canary answers through Traefik after %d requests", warmup)

	// The load, from a pod, to the Service of Traefik.
	svc, err := client.CoreV1().Services(tns).Get(ctx, "traefik", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	realnode.StartLoad(t, ns, "load", demoapp, fmt.Sprintf("http://%s:%d/", svc.Spec.ClusterIP, realnode.TraefikWebPort), "web.example.com", loadRPS, loadSeconds)
	summary, line := realnode.LoadResult(t, ns, "load", 2*time.Minute)
	t.Logf("the load: %s", line)
	// Each pod answers 500 to exactly floor(n/10) of its n requests: the load's 500s are
	// a tenth of its requests, give or take one a pod (the two pods' counts started
	// with the warm-up's requests).
	if summary.Requests != loadTotal || summary.Errors != 0 || summary.Codes["200"]+summary.Codes["500"] != loadTotal ||
		summary.Codes["500"] < loadTotal/10-2 || summary.Codes["500"] > loadTotal/10+2 {
		t.Errorf("the load: %+v; want %d requests, none failed, %d +- 2 answered 500", summary, loadTotal, loadTotal/10)
	}

	// What Prometheus saw, once its last scrape of Traefik and the pods counts them all.
	promClient, err := api.NewClient(api.Config{Address: promURL})
	if err != nil {
		t.Fatal(err)
	}
	prom := promv1.NewAPI(promClient)
	query := func(q string) model.Vector {
		t.Helper()
		v, _, err := prom.Query(ctx, q, time.Now())
		if err != nil {
			t.Fatalf("query %s: %v", q, err)
		}
		vector, ok := v.(model.Vector)
		if !ok {
			t.Fatalf("query %s: %s, want a vector", q, v.Type())
		}
		return vector
	}
	scalar := func(q string) float64 {
		t.Helper()
		v := query(q)
		if len(v) != 1 {
			return -1
		}
		return float64(v[0].Value)
	}
	// Once Prometheus's scrapes of Traefik count the load, the services Traefik names
	// (every one: the log tells the analysis how Traefik names an App's Services).
	framework.Eventually(t, time.Minute, func() (bool, error) {
		return scalar(`sum(traefik_service_requests_total)`) >= loadTotal, nil
	})
	for _, s := range query(`sum by (service, code) (traefik_service_requests_total)`) {
		t.Logf("traefik_service_requests_total{service=%q, code=%q} = %v", s.Metric["service"], s.Metric["code"], s.Value)
	}
	// The App's Services, as Traefik names them: <namespace>-<Service>-<port>@kubernetesgateway.
	services := fmt.Sprintf(`service=~"%s-web-.*"`, ns)
	pods := fmt.Sprintf(`namespace=%q, app_kubernetes_io_instance="web"`, ns)
	// Each series's count as it last was (max_over_time of a counter): Traefik drops the
	// series of a service its configuration no longer has (the App's Service, once the
	// route splits), and the requests it counted stay counted.
	total := func(metric, sel string) string {
		return fmt.Sprintf(`sum(max_over_time(%s{%s}[5m]))`, metric, sel)
	}
	var traefikTotal, podsTotal float64
	defer func() {
		if t.Failed() {
			t.Logf("last seen: Traefik counted %v requests to services %s, the pods %v", traefikTotal, services, podsTotal)
		}
	}()
	framework.Eventually(t, time.Minute, func() (bool, error) {
		traefikTotal = scalar(total("traefik_service_requests_total", services))
		podsTotal = scalar(total("http_requests_total", pods))
		return traefikTotal >= loadTotal && traefikTotal == podsTotal, nil
	})
	for _, s := range query(`sum by (pod, appcontroller_k8s_io_track, code) (http_requests_total{` + pods + `})`) {
		t.Logf("http_requests_total{pod=%q, appcontroller_k8s_io_track=%q, code=%q} = %v", s.Metric["pod"], s.Metric["appcontroller_k8s_io_track"], s.Metric["code"], s.Value)
	}
	traefik5xx := scalar(total("traefik_service_requests_total", services+`, code=~"5.."`))
	pods5xx := scalar(total("http_requests_total", pods+`, code=~"5.."`))
	canaryShare := scalar(total("http_requests_total", pods+`, appcontroller_k8s_io_track="canary"`)) / podsTotal
	t.Logf("Traefik counted %v requests to the App's Services, %v answered 5xx (%.1f%%); the pods %v, %v 5xx; the canary's pods had %.1f%% of them",
		traefikTotal, traefik5xx, 100*traefik5xx/traefikTotal, podsTotal, pods5xx, 100*canaryShare)
	// Each of the two pods answers 500 to floor(n/10) of its n requests.
	if traefik5xx != pods5xx || traefik5xx < traefikTotal/10-2 || traefik5xx > traefikTotal/10 {
		t.Errorf("5xx: Traefik counted %v of %v, the pods %v; want the same count, a tenth of the requests (at most 2 fewer)", traefik5xx, traefikTotal, pods5xx)
	}
	if canaryShare < 0.4 || canaryShare > 0.6 {
		t.Errorf("the canary's pods had %.1f%% of the requests at a weight of 50%%; want 50%% +- 10", 100*canaryShare)
	}
	// The latency histograms answer a quantile. The pods' (demoapp answers in well under
	// 100 ms) at most 1 s; Traefik's, which holds the time a starved machine keeps it
	// waiting (a whole make test on 2 cores read 1.75 s, the load's own p99 2.3 s), at
	// most the bound of its bucket that holds the p99 the load measured through it.
	traefikBound := traefikBucketAbove(summary.P99Ms / 1000)
	for _, c := range []struct {
		q   string
		max float64
	}{
		{`histogram_quantile(0.99, sum by (le) (rate(traefik_service_request_duration_seconds_bucket{` + services + `}[1m])))`, traefikBound},
		{`histogram_quantile(0.99, sum by (le) (rate(http_request_duration_seconds_bucket{` + pods + `}[1m])))`, 1},
	} {
		if v := scalar(c.q); v <= 0 || v > c.max {
			t.Errorf("%s = %v, want a latency above 0 and at most %v s", c.q, v, c.max)
		} else {
			t.Logf("%s = %.3f s (at most %v s)", c.q, v, c.max)
		}
	}
}

// traefikBucketAbove returns the smallest bound of Traefik's request duration buckets
// (0.1, 0.3, 1.2, 5 s) at or above seconds: a quantile interpolated within a bucket
// reads at most its bound.
func traefikBucketAbove(seconds float64) float64 {
	for _, b := range []float64{0.1, 0.3, 1.2, 5} {
		if seconds <= b {
			return b
		}
	}
	return math.Inf(1)
}

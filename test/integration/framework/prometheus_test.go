package framework

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/model"
)

// TestStartPrometheus serves, on loopback, the series Traefik exports for the services
// it routes to (traefik_service_requests_total and the histogram
// traefik_service_request_duration_seconds), has StartPrometheus scrape them, and reads
// them back through client_golang's API client: the counts exactly, a success rate, a
// rate over time and a latency quantile.
func TestStartPrometheus(t *testing.T) {
	reg := prometheus.NewRegistry()
	labels := []string{"code", "method", "protocol", "service"}
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "traefik_service_requests_total", Help: "requests"}, labels)
	duration := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "traefik_service_request_duration_seconds", Help: "durations",
		Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5},
	}, labels)
	reg.MustRegister(requests, duration)
	const canary, stable = "ns-web-canary-80@kubernetesgateway", "ns-web-stable-80@kubernetesgateway"
	serve := func(service, code string, n int, seconds float64) {
		for range n {
			requests.WithLabelValues(code, "GET", "http", service).Inc()
			duration.WithLabelValues(code, "GET", "http", service).Observe(seconds)
		}
	}
	serve(canary, "200", 90, 0.04)
	serve(canary, "500", 10, 0.04)
	serve(stable, "200", 100, 0.02)
	exporter := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer exporter.Close()

	url := StartPrometheus(t, strings.TrimPrefix(exporter.URL, "http://"))
	client, err := api.NewClient(api.Config{Address: url})
	if err != nil {
		t.Fatal(err)
	}
	prom := promv1.NewAPI(client)
	ctx := context.Background()
	query := func(q string) model.Vector {
		t.Helper()
		v, warnings, err := prom.Query(ctx, q, time.Now())
		if err != nil {
			t.Fatalf("query %s: %v", q, err)
		}
		if len(warnings) > 0 {
			t.Logf("query %s: warnings %v", q, warnings)
		}
		vector, ok := v.(model.Vector)
		if !ok {
			t.Fatalf("query %s: %s, want a vector", q, v.Type())
		}
		return vector
	}

	// The first scrape: every service's count, exactly.
	counts := map[string]float64{}
	Eventually(t, 30*time.Second, func() (bool, error) {
		for _, s := range query(`sum by (service) (traefik_service_requests_total{job="` + PrometheusJob + `"})`) {
			counts[string(s.Metric["service"])] = float64(s.Value)
		}
		return len(counts) == 2, nil
	})
	if counts[canary] != 100 || counts[stable] != 100 {
		t.Errorf("requests by service: %v, want 100 each", counts)
	}
	successRate := query(fmt.Sprintf(`sum(traefik_service_requests_total{service=%q, code!~"5.."}) / sum(traefik_service_requests_total{service=%q})`, canary, canary))
	if len(successRate) != 1 || float64(successRate[0].Value) != 0.9 {
		t.Errorf("the canary's success rate: %v, want 0.9", successRate)
	}

	// More requests, slower ones on the canary: a rate over a window and a quantile of the
	// histogram's increase see them.
	serve(canary, "200", 50, 0.8)
	serve(stable, "200", 50, 0.02)
	var p99 model.Vector
	Eventually(t, 30*time.Second, func() (bool, error) {
		increase := query(fmt.Sprintf(`sum(increase(traefik_service_requests_total{service=%q}[1m]))`, canary))
		if len(increase) != 1 || increase[0].Value <= 0 {
			return false, nil
		}
		p99 = query(fmt.Sprintf(`histogram_quantile(0.99, sum by (le) (increase(traefik_service_request_duration_seconds_bucket{service=%q}[1m])))`, canary))
		return len(p99) == 1 && p99[0].Value > 0.5, nil
	})
	if v := float64(p99[0].Value); v <= 0.5 || v > 1 {
		t.Errorf("the canary's p99 latency after 50 answers of 0.8 s: %v s, want within the bucket (0.5, 1]", v)
	}
	t.Logf("Prometheus at %s: requests by service %v; the canary's p99 %.3f s", url, counts, float64(p99[0].Value))

	targets, err := prom.Targets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(targets.Active) != 1 || targets.Active[0].Health != promv1.HealthGood || targets.Active[0].Labels["job"] != PrometheusJob {
		t.Errorf("active targets %+v, want the exporter, up, job %s", targets.Active, PrometheusJob)
	}
}

package analysis

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

var target = Target{
	Namespace: "shop", App: "web",
	CanaryService: "web-canary", StableService: "web-stable",
	CanaryDeployment: "web-canary", StableDeployment: "web",
	Gateway: true, Revision: "web-abc", Step: 1,
}

// fakeAPI is a fake of client_golang's promv1.API: Query answers from answer and
// records the queries; the other methods are the nil interface's (never called).
type fakeAPI struct {
	promv1.API
	mu      sync.Mutex
	queries []string
	answer  model.Value
	err     error
}

func (f *fakeAPI) Query(_ context.Context, q string, _ time.Time, _ ...promv1.Option) (model.Value, promv1.Warnings, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queries = append(f.queries, q)
	return f.answer, nil, f.err
}

// vec builds a built-in query's answer: track/m -> value.
func vec(kv map[string]float64) model.Vector {
	var v model.Vector
	for k, f := range kv {
		track, m, _ := strings.Cut(k, "/")
		v = append(v, &model.Sample{Metric: model.Metric{"track": model.LabelValue(track), "m": model.LabelValue(m)}, Value: model.SampleValue(f)})
	}
	return v
}

func TestQueries(t *testing.T) {
	pods := target
	pods.Gateway = false
	tests := []struct {
		name, got, want string
	}{
		{"success rate, gateway", SuccessRateQuery(appv1.AnalysisSourceGateway, target, time.Minute, false),
			`label_replace(label_replace(sum(increase(traefik_service_requests_total{service=~"shop-web-canary(-[a-z0-9]([-a-z0-9]*[a-z0-9])?)?-[0-9]+(@.+)?"}[60s]) and traefik_service_requests_total{service=~"shop-web-canary(-[a-z0-9]([-a-z0-9]*[a-z0-9])?)?-[0-9]+(@.+)?"} offset 60s or (traefik_service_requests_total{service=~"shop-web-canary(-[a-z0-9]([-a-z0-9]*[a-z0-9])?)?-[0-9]+(@.+)?"} unless traefik_service_requests_total{service=~"shop-web-canary(-[a-z0-9]([-a-z0-9]*[a-z0-9])?)?-[0-9]+(@.+)?"} offset 60s)), "m", "requests", "", ""), "track", "canary", "", "")` +
				` or label_replace(label_replace(sum(increase(traefik_service_requests_total{service=~"shop-web-canary(-[a-z0-9]([-a-z0-9]*[a-z0-9])?)?-[0-9]+(@.+)?",code=~"5.."}[60s]) and traefik_service_requests_total{service=~"shop-web-canary(-[a-z0-9]([-a-z0-9]*[a-z0-9])?)?-[0-9]+(@.+)?",code=~"5.."} offset 60s or (traefik_service_requests_total{service=~"shop-web-canary(-[a-z0-9]([-a-z0-9]*[a-z0-9])?)?-[0-9]+(@.+)?",code=~"5.."} unless traefik_service_requests_total{service=~"shop-web-canary(-[a-z0-9]([-a-z0-9]*[a-z0-9])?)?-[0-9]+(@.+)?",code=~"5.."} offset 60s)), "m", "errors", "", ""), "track", "canary", "", "")`},
		{"success rate, pods, relative", SuccessRateQuery(appv1.AnalysisSourcePods, pods, 30*time.Second, true),
			`label_replace(label_replace(sum(increase(http_requests_total{namespace="shop",pod=~"web-canary-[a-z0-9]+-[a-z0-9]{5}"}[30s]) and http_requests_total{namespace="shop",pod=~"web-canary-[a-z0-9]+-[a-z0-9]{5}"} offset 30s or (http_requests_total{namespace="shop",pod=~"web-canary-[a-z0-9]+-[a-z0-9]{5}"} unless http_requests_total{namespace="shop",pod=~"web-canary-[a-z0-9]+-[a-z0-9]{5}"} offset 30s)), "m", "requests", "", ""), "track", "canary", "", "")` +
				` or label_replace(label_replace(sum(increase(http_requests_total{namespace="shop",pod=~"web-canary-[a-z0-9]+-[a-z0-9]{5}",code=~"5.."}[30s]) and http_requests_total{namespace="shop",pod=~"web-canary-[a-z0-9]+-[a-z0-9]{5}",code=~"5.."} offset 30s or (http_requests_total{namespace="shop",pod=~"web-canary-[a-z0-9]+-[a-z0-9]{5}",code=~"5.."} unless http_requests_total{namespace="shop",pod=~"web-canary-[a-z0-9]+-[a-z0-9]{5}",code=~"5.."} offset 30s)), "m", "errors", "", ""), "track", "canary", "", "")` +
				` or label_replace(label_replace(sum(increase(http_requests_total{namespace="shop",pod=~"web-[a-z0-9]+-[a-z0-9]{5}"}[30s]) and http_requests_total{namespace="shop",pod=~"web-[a-z0-9]+-[a-z0-9]{5}"} offset 30s or (http_requests_total{namespace="shop",pod=~"web-[a-z0-9]+-[a-z0-9]{5}"} unless http_requests_total{namespace="shop",pod=~"web-[a-z0-9]+-[a-z0-9]{5}"} offset 30s)), "m", "requests", "", ""), "track", "stable", "", "")` +
				` or label_replace(label_replace(sum(increase(http_requests_total{namespace="shop",pod=~"web-[a-z0-9]+-[a-z0-9]{5}",code=~"5.."}[30s]) and http_requests_total{namespace="shop",pod=~"web-[a-z0-9]+-[a-z0-9]{5}",code=~"5.."} offset 30s or (http_requests_total{namespace="shop",pod=~"web-[a-z0-9]+-[a-z0-9]{5}",code=~"5.."} unless http_requests_total{namespace="shop",pod=~"web-[a-z0-9]+-[a-z0-9]{5}",code=~"5.."} offset 30s)), "m", "errors", "", ""), "track", "stable", "", "")`},
		{"latency p99, gateway", LatencyQuery(appv1.AnalysisSourceGateway, target, time.Minute, 99, false),
			`label_replace(label_replace(histogram_quantile(0.99, sum by (le) (increase(traefik_service_request_duration_seconds_bucket{service=~"shop-web-canary(-[a-z0-9]([-a-z0-9]*[a-z0-9])?)?-[0-9]+(@.+)?"}[60s]) and traefik_service_request_duration_seconds_bucket{service=~"shop-web-canary(-[a-z0-9]([-a-z0-9]*[a-z0-9])?)?-[0-9]+(@.+)?"} offset 60s or (traefik_service_request_duration_seconds_bucket{service=~"shop-web-canary(-[a-z0-9]([-a-z0-9]*[a-z0-9])?)?-[0-9]+(@.+)?"} unless traefik_service_request_duration_seconds_bucket{service=~"shop-web-canary(-[a-z0-9]([-a-z0-9]*[a-z0-9])?)?-[0-9]+(@.+)?"} offset 60s))), "m", "latency", "", ""), "track", "canary", "", "")` +
				` or label_replace(label_replace(sum(increase(traefik_service_request_duration_seconds_count{service=~"shop-web-canary(-[a-z0-9]([-a-z0-9]*[a-z0-9])?)?-[0-9]+(@.+)?"}[60s]) and traefik_service_request_duration_seconds_count{service=~"shop-web-canary(-[a-z0-9]([-a-z0-9]*[a-z0-9])?)?-[0-9]+(@.+)?"} offset 60s or (traefik_service_request_duration_seconds_count{service=~"shop-web-canary(-[a-z0-9]([-a-z0-9]*[a-z0-9])?)?-[0-9]+(@.+)?"} unless traefik_service_request_duration_seconds_count{service=~"shop-web-canary(-[a-z0-9]([-a-z0-9]*[a-z0-9])?)?-[0-9]+(@.+)?"} offset 60s)), "m", "requests", "", ""), "track", "canary", "", "")`},
		{"latency p50, pods, relative", LatencyQuery(appv1.AnalysisSourcePods, pods, 2*time.Minute, 50, true),
			`label_replace(label_replace(histogram_quantile(0.5, sum by (le) (increase(http_request_duration_seconds_bucket{namespace="shop",pod=~"web-canary-[a-z0-9]+-[a-z0-9]{5}"}[120s]) and http_request_duration_seconds_bucket{namespace="shop",pod=~"web-canary-[a-z0-9]+-[a-z0-9]{5}"} offset 120s or (http_request_duration_seconds_bucket{namespace="shop",pod=~"web-canary-[a-z0-9]+-[a-z0-9]{5}"} unless http_request_duration_seconds_bucket{namespace="shop",pod=~"web-canary-[a-z0-9]+-[a-z0-9]{5}"} offset 120s))), "m", "latency", "", ""), "track", "canary", "", "")` +
				` or label_replace(label_replace(sum(increase(http_request_duration_seconds_count{namespace="shop",pod=~"web-canary-[a-z0-9]+-[a-z0-9]{5}"}[120s]) and http_request_duration_seconds_count{namespace="shop",pod=~"web-canary-[a-z0-9]+-[a-z0-9]{5}"} offset 120s or (http_request_duration_seconds_count{namespace="shop",pod=~"web-canary-[a-z0-9]+-[a-z0-9]{5}"} unless http_request_duration_seconds_count{namespace="shop",pod=~"web-canary-[a-z0-9]+-[a-z0-9]{5}"} offset 120s)), "m", "requests", "", ""), "track", "canary", "", "")` +
				` or label_replace(label_replace(histogram_quantile(0.5, sum by (le) (increase(http_request_duration_seconds_bucket{namespace="shop",pod=~"web-[a-z0-9]+-[a-z0-9]{5}"}[120s]) and http_request_duration_seconds_bucket{namespace="shop",pod=~"web-[a-z0-9]+-[a-z0-9]{5}"} offset 120s or (http_request_duration_seconds_bucket{namespace="shop",pod=~"web-[a-z0-9]+-[a-z0-9]{5}"} unless http_request_duration_seconds_bucket{namespace="shop",pod=~"web-[a-z0-9]+-[a-z0-9]{5}"} offset 120s))), "m", "latency", "", ""), "track", "stable", "", "")` +
				` or label_replace(label_replace(sum(increase(http_request_duration_seconds_count{namespace="shop",pod=~"web-[a-z0-9]+-[a-z0-9]{5}"}[120s]) and http_request_duration_seconds_count{namespace="shop",pod=~"web-[a-z0-9]+-[a-z0-9]{5}"} offset 120s or (http_request_duration_seconds_count{namespace="shop",pod=~"web-[a-z0-9]+-[a-z0-9]{5}"} unless http_request_duration_seconds_count{namespace="shop",pod=~"web-[a-z0-9]+-[a-z0-9]{5}"} offset 120s)), "m", "requests", "", ""), "track", "stable", "", "")`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("query\n got %s\nwant %s", tt.got, tt.want)
			}
		})
	}
	q, err := CustomQuery(&appv1.QueryCheck{PromQL: `sum(rate(x{namespace="{{.Namespace}}",service="{{.CanaryService}}",app="{{.App}}",d="{{.CanaryDeployment}}",s="{{.StableService}}",sd="{{.StableDeployment}}"}[{{.Interval}}]))`}, nil, target, time.Minute)
	want := `sum(rate(x{namespace="shop",service="web-canary",app="web",d="web-canary",s="web-stable",sd="web"}[60s]))`
	if err != nil || q != want {
		t.Errorf("CustomQuery = %q, %v; want %q", q, err, want)
	}
	if _, err := CustomQuery(&appv1.QueryCheck{PromQL: `x{a="{{.Nope}}"}`}, nil, target, time.Minute); err == nil {
		t.Error("CustomQuery of an unknown variable: no error")
	}
}

func TestMeasure(t *testing.T) {
	successRate := func(lowest, margin *string) *appv1.AnalysisCheck {
		return &appv1.AnalysisCheck{Name: "sr", SuccessRate: &appv1.SuccessRateCheck{Min: lowest, StableMargin: margin}, MinRequests: ptr.To[int32](10)}
	}
	latency := func(maxMs *int32, factor *string) *appv1.AnalysisCheck {
		return &appv1.AnalysisCheck{Name: "lat", Latency: &appv1.LatencyCheck{Percentile: ptr.To[int32](99), MaxMs: maxMs, StableFactor: factor}, MinRequests: ptr.To[int32](10)}
	}
	query := func(success, failure *appv1.ValueRange) *appv1.AnalysisCheck {
		return &appv1.AnalysisCheck{Name: "q", Query: &appv1.QueryCheck{PromQL: "sum(x)", SuccessCondition: success, FailureCondition: failure}}
	}
	one := func(f float64) model.Vector { return model.Vector{&model.Sample{Value: model.SampleValue(f)}} }
	tests := []struct {
		name     string
		check    *appv1.AnalysisCheck
		answer   model.Value
		err      error
		phase    appv1.AnalysisPhase
		value    string
		message  string
		noPromQL bool
	}{
		{"success rate fails", successRate(ptr.To("99"), nil), vec(map[string]float64{"canary/requests": 1000, "canary/errors": 104}),
			nil, appv1.AnalysisFailed, "89.6%", "success rate 89.6% < 99% over 1m (canary web-canary)", false},
		{"success rate passes", successRate(ptr.To("99"), nil), vec(map[string]float64{"canary/requests": 1000, "canary/errors": 5}),
			nil, appv1.AnalysisPassed, "99.5%", "success rate 99.5% >= 99% over 1m (canary web-canary)", false},
		{"no errors series passes", successRate(ptr.To("99"), nil), vec(map[string]float64{"canary/requests": 40}),
			nil, appv1.AnalysisPassed, "100%", "success rate 100% >= 99% over 1m (canary web-canary)", false},
		{"no data is inconclusive", successRate(ptr.To("99"), nil), model.Vector{},
			nil, appv1.AnalysisInconclusive, "0 requests", "success rate: 0 requests over 1m (canary web-canary), fewer than minRequests 10: too little traffic to judge", false},
		{"too few requests is inconclusive", successRate(ptr.To("99"), nil), vec(map[string]float64{"canary/requests": 9, "canary/errors": 9}),
			nil, appv1.AnalysisInconclusive, "9 requests", "success rate: 9 requests over 1m (canary web-canary), fewer than minRequests 10: too little traffic to judge", false},
		{"relative passes during a stable-side incident", successRate(nil, ptr.To("1")), vec(map[string]float64{"canary/requests": 100, "canary/errors": 10, "stable/requests": 900, "stable/errors": 95}),
			nil, appv1.AnalysisPassed, "90%", "success rate 90% >= stable's 89.44% - 1 points over 1m (canary web-canary)", false},
		{"absolute fails the same canary", successRate(ptr.To("99"), ptr.To("1")), vec(map[string]float64{"canary/requests": 100, "canary/errors": 10, "stable/requests": 900, "stable/errors": 95}),
			nil, appv1.AnalysisFailed, "90%", "success rate 90% < 99% over 1m (canary web-canary)", false},
		{"relative fails a canary worse than the stable", successRate(nil, ptr.To("1")), vec(map[string]float64{"canary/requests": 100, "canary/errors": 5, "stable/requests": 900}),
			nil, appv1.AnalysisFailed, "95%", "success rate 95% < stable's 100% - 1 points over 1m (canary web-canary)", false},
		{"relative without stable traffic is inconclusive", successRate(nil, ptr.To("1")), vec(map[string]float64{"canary/requests": 100}),
			nil, appv1.AnalysisInconclusive, "0 requests", "success rate: 0 requests over 1m (stable web-stable), fewer than minRequests 10: too little traffic to judge", false},
		{"latency fails", latency(ptr.To[int32](500), nil), vec(map[string]float64{"canary/requests": 100, "canary/latency": 0.812}),
			nil, appv1.AnalysisFailed, "812ms", "p99 latency 812ms > 500ms over 1m (canary web-canary)", false},
		{"latency passes", latency(ptr.To[int32](500), nil), vec(map[string]float64{"canary/requests": 100, "canary/latency": 0.04}),
			nil, appv1.AnalysisPassed, "40ms", "p99 latency 40ms <= 500ms over 1m (canary web-canary)", false},
		{"latency relative fails", latency(nil, ptr.To("1.5")), vec(map[string]float64{"canary/requests": 100, "canary/latency": 0.2, "stable/requests": 100, "stable/latency": 0.1}),
			nil, appv1.AnalysisFailed, "200ms", "p99 latency 200ms > stable's 100ms x 1.5 over 1m (canary web-canary)", false},
		{"latency relative passes", latency(nil, ptr.To("1.5")), vec(map[string]float64{"canary/requests": 100, "canary/latency": 0.12, "stable/requests": 100, "stable/latency": 0.1}),
			nil, appv1.AnalysisPassed, "120ms", "p99 latency 120ms <= stable's 100ms x 1.5 over 1m (canary web-canary)", false},
		{"query in its success range", query(&appv1.ValueRange{Min: ptr.To("0.99")}, nil), one(0.995),
			nil, appv1.AnalysisPassed, "0.995", "check q: value 0.995 is in its success range [0.99, +inf]", false},
		{"query out of its success range", query(&appv1.ValueRange{Min: ptr.To("0.99")}, nil), one(0.5),
			nil, appv1.AnalysisFailed, "0.5", "check q: value 0.5 is out of its success range [0.99, +inf]", false},
		{"query in its failure range", query(&appv1.ValueRange{Min: ptr.To("0.99")}, &appv1.ValueRange{Max: ptr.To("0.9")}), &model.Scalar{Value: 0.5},
			nil, appv1.AnalysisFailed, "0.5", "check q: value 0.5 is in its failure range [-inf, 0.9]", false},
		{"query between its ranges", query(&appv1.ValueRange{Min: ptr.To("0.99")}, &appv1.ValueRange{Max: ptr.To("0.9")}), one(0.95),
			nil, appv1.AnalysisInconclusive, "0.95", "check q: value 0.95 is in neither its success range [0.99, +inf] nor its failure range [-inf, 0.9]", false},
		{"query of two series", query(&appv1.ValueRange{Min: ptr.To("1")}, nil), model.Vector{{Value: 1}, {Value: 2}},
			nil, appv1.AnalysisInconclusive, "", "check q: the query returned 2 series; a check needs one value (aggregate it: sum(...))", false},
		{"prometheus error", successRate(ptr.To("99"), nil), nil, errors.New("connection refused"),
			appv1.AnalysisError, "", "check sr: querying Prometheus: connection refused", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := &fakeAPI{answer: tt.answer, err: tt.err}
			a := &Analyzer{Prometheus: api}
			m := a.Measure(context.Background(), tt.check, target, time.Unix(1000, 0))
			if m.Phase != tt.phase || m.Value != tt.value || m.Message != tt.message {
				t.Errorf("Measure = %s %q %q; want %s %q %q", m.Phase, m.Value, m.Message, tt.phase, tt.value, tt.message)
			}
			if len(api.queries) != 1 {
				t.Errorf("%d queries, want one per measurement", len(api.queries))
			}
		})
	}
}

func TestMeasureWithoutPrometheus(t *testing.T) {
	var a *Analyzer
	m := a.Measure(context.Background(), &appv1.AnalysisCheck{Name: "sr", SuccessRate: &appv1.SuccessRateCheck{Min: ptr.To("99")}}, target, time.Now())
	if m.Phase != appv1.AnalysisError || !strings.Contains(m.Message, "--prometheus-url") {
		t.Errorf("Measure without Prometheus = %s %q", m.Phase, m.Message)
	}
}

func TestWebhook(t *testing.T) {
	var calls atomic.Int32
	var codes []int
	var mu sync.Mutex
	var body WebhookRequest
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int(calls.Add(1)) - 1
		data, _ := io.ReadAll(r.Body)
		mu.Lock()
		_ = json.Unmarshal(data, &body)
		code := codes[min(n, len(codes)-1)]
		mu.Unlock()
		w.WriteHeader(code)
	}))
	defer srv.Close()
	tests := []struct {
		name    string
		codes   []int
		retries int32
		phase   appv1.AnalysisPhase
		calls   int32
		value   string
	}{
		{"2xx passes", []int{204}, 2, appv1.AnalysisPassed, 1, "HTTP 204"},
		{"a retry passes", []int{500, 200}, 2, appv1.AnalysisPassed, 2, "HTTP 200"},
		{"500 fails after its retries", []int{500}, 2, appv1.AnalysisFailed, 3, "HTTP 500"},
		{"no retries", []int{503}, 0, appv1.AnalysisFailed, 1, "HTTP 503"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls.Store(0)
			mu.Lock()
			codes = tt.codes
			mu.Unlock()
			c := &appv1.AnalysisCheck{Name: "gate", Webhook: &appv1.WebhookCheck{URL: srv.URL, TimeoutSeconds: ptr.To[int32](5), Retries: ptr.To(tt.retries)}}
			m := (&Analyzer{}).Measure(context.Background(), c, target, time.Now())
			if m.Phase != tt.phase || calls.Load() != tt.calls || m.Value != tt.value {
				t.Errorf("Measure = %s %q after %d calls; want %s %q after %d", m.Phase, m.Value, calls.Load(), tt.phase, tt.value, tt.calls)
			}
			mu.Lock()
			defer mu.Unlock()
			if body != (WebhookRequest{Namespace: "shop", App: "web", Check: "gate", Revision: "web-abc", Step: 1}) {
				t.Errorf("body %+v", body)
			}
		})
	}
	// A webhook that does not answer within its timeout fails.
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(release)
	c := &appv1.AnalysisCheck{Name: "gate", Webhook: &appv1.WebhookCheck{URL: slow.URL, TimeoutSeconds: ptr.To[int32](1), Retries: ptr.To[int32](0)}}
	if m := (&Analyzer{}).Measure(context.Background(), c, target, time.Now()); m.Phase != appv1.AnalysisFailed || !strings.Contains(m.Message, "deadline exceeded") {
		t.Errorf("slow webhook: %s %q", m.Phase, m.Message)
	}
}

func TestJudge(t *testing.T) {
	strategy := &appv1.CanaryStrategy{
		Steps: []appv1.CanaryStep{
			{SetWeight: ptr.To[int32](10)},
			{Analysis: &appv1.AnalysisStep{Checks: []appv1.AnalysisCheck{
				{Name: "sr", SuccessRate: &appv1.SuccessRateCheck{Min: ptr.To("99")}, Count: ptr.To[int32](2), FailureLimit: 1},
				{Name: "gate", Webhook: &appv1.WebhookCheck{URL: "http://x"}},
			}}},
		},
		Analysis: &appv1.BackgroundAnalysis{StartingStep: 1, Checks: []appv1.AnalysisCheck{{Name: "bg", Latency: &appv1.LatencyCheck{MaxMs: ptr.To[int32](100)}}}},
	}
	if got := ActiveChecks(strategy, 0); len(got) != 0 {
		t.Errorf("ActiveChecks(0) = %d checks, want none before startingStep", len(got))
	}
	active := ActiveChecks(strategy, 1)
	if len(active) != 3 || active[2].Step != BackgroundStep || active[0].Step != 1 {
		t.Fatalf("ActiveChecks(1) = %+v", active)
	}
	if got := NeedsPrometheus(strategy); strings.Join(got, ",") != "sr,bg" {
		t.Errorf("NeedsPrometheus = %v, want sr,bg", got)
	}
	now := time.Unix(10000, 0)
	at := &metav1.Time{Time: now}
	tests := []struct {
		name            string
		sts             []appv1.CheckStatus
		passed          bool
		failed, waiting string
	}{
		{"nothing measured waits", Statuses(active, nil), false, "", "sr"},
		{"all counts reached passes", []appv1.CheckStatus{{Name: "sr", Step: 1, Passed: 2, MeasuredAt: at}, {Name: "gate", Step: 1, Passed: 1, MeasuredAt: at}, {Name: "bg", Step: -1}}, true, "", ""},
		{"one failure within the limit", []appv1.CheckStatus{{Name: "sr", Step: 1, Passed: 1, Failed: 1, Phase: appv1.AnalysisFailed, MeasuredAt: at}, {Name: "gate", Step: 1, Passed: 1, MeasuredAt: at}, {Name: "bg", Step: -1}}, false, "", ""},
		{"failures beyond the limit", []appv1.CheckStatus{{Name: "sr", Step: 1, Failed: 2, MeasuredAt: at}, {Name: "gate", Step: 1, Passed: 1, MeasuredAt: at}, {Name: "bg", Step: -1}}, false, "sr", ""},
		{"a background failure aborts", []appv1.CheckStatus{{Name: "sr", Step: 1, Passed: 2, MeasuredAt: at}, {Name: "gate", Step: 1, Passed: 1, MeasuredAt: at}, {Name: "bg", Step: -1, Failed: 1}}, false, "bg", ""},
		{"inconclusive waits", []appv1.CheckStatus{{Name: "sr", Step: 1, Inconclusive: 3, Phase: appv1.AnalysisInconclusive, MeasuredAt: at}, {Name: "gate", Step: 1, Passed: 1, MeasuredAt: at}, {Name: "bg", Step: -1}}, false, "", "sr"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Judge(active, tt.sts)
			name := func(st *appv1.CheckStatus) string {
				if st == nil {
					return ""
				}
				return st.Name
			}
			if v.Passed != tt.passed || name(v.Failed) != tt.failed || name(v.Waiting) != tt.waiting {
				t.Errorf("Judge = passed %v failed %q waiting %q; want %v %q %q", v.Passed, name(v.Failed), name(v.Waiting), tt.passed, tt.failed, tt.waiting)
			}
		})
	}
}

func TestCounts(t *testing.T) {
	c := &appv1.AnalysisCheck{Name: "sr", Interval: &metav1.Duration{Duration: 30 * time.Second}}
	now := time.Unix(10000, 0)
	st := appv1.CheckStatus{Name: "sr"}
	// A metric check's first measurement is an interval after its step started (its
	// window then holds the step's requests only); a webhook's at once.
	started := now.Add(-30 * time.Second)
	if Due(c, &st, now.Add(-time.Second), now.Add(-time.Second)) || Due(c, &st, started, now.Add(-time.Second)) || !Due(c, &st, started, now) {
		t.Error("a metric check never measured is due before an interval of its step, or not after it")
	}
	gate := &appv1.AnalysisCheck{Name: "gate", Interval: c.Interval, Webhook: &appv1.WebhookCheck{URL: "http://x"}}
	if !Due(gate, &st, now, now) {
		t.Error("a webhook never called is not due at its step's start")
	}
	if got := NextDue([]Active{{Check: c}, {Check: gate}}, []appv1.CheckStatus{{}, {}}, now); !got.Equal(now) {
		t.Errorf("NextDue of a metric check and a webhook at a step's start = %v, want the webhook's, at once", got)
	}
	if got := NextDue([]Active{{Check: c}}, []appv1.CheckStatus{{}}, now); !got.Equal(now.Add(30 * time.Second)) {
		t.Errorf("NextDue of a metric check at a step's start = %v, want an interval later", got)
	}
	st = Record(st, Measurement{Phase: appv1.AnalysisPassed, Value: "99.5%"}, now)
	st = Record(st, Measurement{Phase: appv1.AnalysisFailed}, now)
	st = Record(st, Measurement{Phase: appv1.AnalysisError}, now)
	st = Record(st, Measurement{Phase: appv1.AnalysisInconclusive}, now)
	if st.Passed != 1 || st.Failed != 1 || st.Inconclusive != 2 {
		t.Errorf("counts %d/%d/%d, want 1/1/2", st.Passed, st.Failed, st.Inconclusive)
	}
	if Due(c, &st, started, now.Add(29*time.Second)) || !Due(c, &st, started, now.Add(30*time.Second)) {
		t.Error("due before its interval, or not after it")
	}
	active := []Active{{Check: c, Step: 0}}
	if got := NextDue(active, []appv1.CheckStatus{st}, started); !got.Equal(now.Add(30 * time.Second)) {
		t.Errorf("NextDue = %v", got)
	}
	// Statuses carries the counts of a check that stays active, and starts the others.
	kept := Statuses(active, []appv1.CheckStatus{st, {Name: "old", Step: 0, Failed: 3}})
	if len(kept) != 1 || kept[0].Passed != 1 {
		t.Errorf("Statuses = %+v", kept)
	}
	if got := Statuses([]Active{{Check: c, Step: 2}}, []appv1.CheckStatus{st}); got[0].Passed != 0 {
		t.Errorf("a check of another step kept the counts: %+v", got)
	}
	msg := FailedMessage(&appv1.CheckStatus{Name: "sr", Failed: 2, Message: "success rate 89.6% < 99% over 1m (canary web-canary)"}, &appv1.AnalysisCheck{FailureLimit: 1})
	if want := "analysis check sr failed: success rate 89.6% < 99% over 1m (canary web-canary) (2 failures, failureLimit 1)"; msg != want {
		t.Errorf("FailedMessage = %q, want %q", msg, want)
	}
}

func TestNotifier(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, string(data))
		mu.Unlock()
	}))
	defer srv.Close()
	for _, format := range []NotificationFormat{FormatJSON, FormatSlack} {
		t.Run(string(format), func(t *testing.T) {
			mu.Lock()
			got = nil
			mu.Unlock()
			n, err := NewNotifier(srv.URL, format, nil)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go n.Run(ctx)
			at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
			n.Notify(Notification{Event: EventOf(appv1.ReasonRolloutAborted), Namespace: "shop", App: "web", Reason: appv1.ReasonRolloutAborted, Message: "aborted: success rate 89.6% < 99%", Time: at})
			for n.Sent.Load()+n.Failed.Load() < 1 {
				time.Sleep(10 * time.Millisecond)
			}
			mu.Lock()
			defer mu.Unlock()
			want := `{"event":"aborted","namespace":"shop","app":"web","reason":"RolloutAborted","message":"aborted: success rate 89.6% \u003c 99%","time":"2026-01-02T03:04:05Z"}`
			if format == FormatSlack {
				want = `{"text":"shop/web: rollout aborted: aborted: success rate 89.6% \u003c 99%"}`
			}
			if len(got) != 1 || got[0] != want {
				t.Errorf("bodies %q, want [%s]", got, want)
			}
		})
	}
	// What is queued when Run's context ends is sent before Run returns: the notes of the
	// syncs in flight at a stop are not lost.
	mu.Lock()
	got = nil
	mu.Unlock()
	n, _ := NewNotifier(srv.URL, FormatJSON, nil)
	for _, event := range []string{"step", "promoted"} {
		n.Notify(Notification{Event: event, Namespace: "shop", App: "web"})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	n.Run(ctx)
	mu.Lock()
	if n.Sent.Load() != 2 || len(got) != 2 || !strings.Contains(got[1], `"event":"promoted"`) {
		t.Errorf("after a stop: sent %d, bodies %q; want both queued notifications sent in order", n.Sent.Load(), got)
	}
	mu.Unlock()

	// A receiver that is down never blocks Notify: the queue drops beyond its bound.
	n, _ = NewNotifier("http://127.0.0.1:1", FormatJSON, nil)
	for range notifyQueue + 5 {
		n.Notify(Notification{Event: "step"})
	}
	if n.Dropped.Load() != 5 {
		t.Errorf("dropped %d, want 5", n.Dropped.Load())
	}
	if _, err := NewNotifier("http://x", "teams", nil); err == nil {
		t.Error("NewNotifier of an unknown format: no error")
	}
}

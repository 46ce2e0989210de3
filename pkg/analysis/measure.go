package analysis

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// Querier is the one method of client_golang's promv1.API the analysis calls.
type Querier interface {
	Query(ctx context.Context, query string, ts time.Time, opts ...promv1.Option) (model.Value, promv1.Warnings, error)
}

var _ Querier = promv1.API(nil)

// DefaultQueryTimeout bounds one query.
const DefaultQueryTimeout = 10 * time.Second

// ErrNoPrometheus is the error of a metric check when the controller has no Prometheus.
var ErrNoPrometheus = errors.New("the controller has no --prometheus-url")

// Analyzer makes the measurements of checks.
type Analyzer struct {
	// Prometheus answers the metric checks; nil: there is none (ErrNoPrometheus).
	Prometheus Querier
	// QueryTimeout bounds one query (DefaultQueryTimeout when 0).
	QueryTimeout time.Duration
	// HTTP makes the webhook calls (http.DefaultClient's transport when nil); each call
	// is bounded by the check's timeoutSeconds.
	HTTP *http.Client
}

// Measurement is the result of one measurement of a check.
type Measurement struct {
	Phase appv1.AnalysisPhase
	// Value and Threshold as users read them; Message in one line.
	Value, Threshold, Message string
	// Query is what was asked of Prometheus (the webhook's URL for a webhook).
	Query string
}

// Measure makes one measurement of check c of t at now; a check with templateRef must
// have been resolved first (Resolve).
func (a *Analyzer) Measure(ctx context.Context, c *appv1.AnalysisCheck, t Target, now time.Time) Measurement {
	if c.Webhook != nil {
		return a.callWebhook(ctx, c, t)
	}
	if a == nil || a.Prometheus == nil {
		return Measurement{Phase: appv1.AnalysisError, Message: fmt.Sprintf("check %s: %v", c.Name, ErrNoPrometheus)}
	}
	interval := Interval(c)
	source := t.Source(c)
	var q string
	switch {
	case c.SuccessRate != nil:
		q = SuccessRateQuery(source, t, interval, c.SuccessRate.StableMargin != nil)
	case c.Latency != nil:
		q = LatencyQuery(source, t, interval, ptr.Deref(c.Latency.Percentile, 99), c.Latency.StableFactor != nil)
	case c.Query != nil:
		var err error
		if q, err = CustomQuery(c.Query, argsOf(c), t, interval); err != nil {
			return Measurement{Phase: appv1.AnalysisError, Message: fmt.Sprintf("check %s: %v", c.Name, err)}
		}
	case c.TemplateRef != nil:
		return Measurement{Phase: appv1.AnalysisError, Message: fmt.Sprintf("check %s: its template %s was not resolved", c.Name, c.TemplateRef)}
	default:
		return Measurement{Phase: appv1.AnalysisError, Message: fmt.Sprintf("check %s sets no successRate, latency, query, templateRef or webhook", c.Name)}
	}
	timeout := a.QueryTimeout
	if timeout == 0 {
		timeout = DefaultQueryTimeout
	}
	qctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	v, _, err := a.Prometheus.Query(qctx, q, now, promv1.WithTimeout(timeout))
	if err != nil {
		return Measurement{Phase: appv1.AnalysisError, Query: q, Message: fmt.Sprintf("check %s: querying Prometheus: %v", c.Name, err)}
	}
	var m Measurement
	switch {
	case c.SuccessRate != nil:
		m = judgeSuccessRate(c, t, interval, samplesOf(v))
	case c.Latency != nil:
		m = judgeLatency(c, t, interval, samplesOf(v))
	default:
		m = judgeQuery(c, v)
	}
	m.Query = q
	return m
}

// samples are the values of a built-in query by track and m; a missing one is absent.
type samples map[[2]string]float64

func samplesOf(v model.Value) samples {
	s := samples{}
	vec, ok := v.(model.Vector)
	if !ok {
		return s
	}
	for _, smp := range vec {
		f := float64(smp.Value)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		s[[2]string{string(smp.Metric["track"]), string(smp.Metric["m"])}] = f
	}
	return s
}

func (s samples) get(track, m string) (float64, bool) {
	f, ok := s[[2]string{track, m}]
	return f, ok
}

// minRequests is the count under which a built-in check is inconclusive.
func minRequests(c *appv1.AnalysisCheck) float64 { return float64(ptr.Deref(c.MinRequests, 10)) }

// tooFew returns the inconclusive measurement of track with n requests, or false.
func tooFew(c *appv1.AnalysisCheck, what, track, name string, n float64, interval time.Duration) (Measurement, bool) {
	if n >= minRequests(c) {
		return Measurement{}, false
	}
	return Measurement{Phase: appv1.AnalysisInconclusive, Value: fmt.Sprintf("%.0f requests", n), Threshold: fmt.Sprintf(">= %d requests", int64(minRequests(c))),
		Message: fmt.Sprintf("%s: %.0f requests over %s (%s %s), fewer than minRequests %d: too little traffic to judge", what, n, humanDuration(interval), track, name, int64(minRequests(c)))}, true
}

// judgeSuccessRate judges a successRate check from its query's samples.
func judgeSuccessRate(c *appv1.AnalysisCheck, t Target, interval time.Duration, s samples) Measurement {
	sr := c.SuccessRate
	canaryName, stableName := names(t, t.Source(c))
	n, _ := s.get(trackCanary, mRequests)
	if m, few := tooFew(c, "success rate", trackCanary, canaryName, n, interval); few {
		return m
	}
	errs, _ := s.get(trackCanary, mErrors)
	rate := 100 * (1 - errs/n)
	value := pct(rate)
	over := fmt.Sprintf("over %s (canary %s)", humanDuration(interval), canaryName)
	if sr.Min != nil {
		lowest, _ := strconv.ParseFloat(*sr.Min, 64)
		if rate < lowest {
			return Measurement{Phase: appv1.AnalysisFailed, Value: value, Threshold: ">= " + pct(lowest),
				Message: fmt.Sprintf("success rate %s < %s %s", value, pct(lowest), over)}
		}
	}
	if sr.StableMargin == nil {
		lowest, _ := strconv.ParseFloat(*sr.Min, 64)
		return Measurement{Phase: appv1.AnalysisPassed, Value: value, Threshold: ">= " + pct(lowest),
			Message: fmt.Sprintf("success rate %s >= %s %s", value, pct(lowest), over)}
	}
	sn, _ := s.get(trackStable, mRequests)
	if m, few := tooFew(c, "success rate", trackStable, stableName, sn, interval); few {
		return m
	}
	serrs, _ := s.get(trackStable, mErrors)
	stable := 100 * (1 - serrs/sn)
	margin, _ := strconv.ParseFloat(*sr.StableMargin, 64)
	threshold := fmt.Sprintf(">= stable %s - %s points", pct(stable), trimFloat(margin))
	if sr.Min != nil {
		threshold = ">= " + pct(mustFloat(*sr.Min)) + ", " + threshold
	}
	if rate < stable-margin {
		return Measurement{Phase: appv1.AnalysisFailed, Value: value, Threshold: threshold,
			Message: fmt.Sprintf("success rate %s < stable's %s - %s points %s", value, pct(stable), trimFloat(margin), over)}
	}
	return Measurement{Phase: appv1.AnalysisPassed, Value: value, Threshold: threshold,
		Message: fmt.Sprintf("success rate %s >= stable's %s - %s points %s", value, pct(stable), trimFloat(margin), over)}
}

// judgeLatency judges a latency check from its query's samples.
func judgeLatency(c *appv1.AnalysisCheck, t Target, interval time.Duration, s samples) Measurement {
	l := c.Latency
	p := ptr.Deref(l.Percentile, 99)
	canaryName, stableName := names(t, t.Source(c))
	what := fmt.Sprintf("p%d latency", p)
	ms, m, ok := latencyOf(c, what, trackCanary, canaryName, interval, s)
	if !ok {
		return m
	}
	value := msString(ms)
	over := fmt.Sprintf("over %s (canary %s)", humanDuration(interval), canaryName)
	if l.MaxMs != nil && ms > float64(*l.MaxMs) {
		return Measurement{Phase: appv1.AnalysisFailed, Value: value, Threshold: fmt.Sprintf("<= %dms", *l.MaxMs),
			Message: fmt.Sprintf("%s %s > %dms %s", what, value, *l.MaxMs, over)}
	}
	if l.StableFactor == nil {
		return Measurement{Phase: appv1.AnalysisPassed, Value: value, Threshold: fmt.Sprintf("<= %dms", *l.MaxMs),
			Message: fmt.Sprintf("%s %s <= %dms %s", what, value, *l.MaxMs, over)}
	}
	stable, m, ok := latencyOf(c, what, trackStable, stableName, interval, s)
	if !ok {
		return m
	}
	factor := mustFloat(*l.StableFactor)
	threshold := fmt.Sprintf("<= stable %s x %s", msString(stable), trimFloat(factor))
	if l.MaxMs != nil {
		threshold = fmt.Sprintf("<= %dms, ", *l.MaxMs) + threshold
	}
	if ms > stable*factor {
		return Measurement{Phase: appv1.AnalysisFailed, Value: value, Threshold: threshold,
			Message: fmt.Sprintf("%s %s > stable's %s x %s %s", what, value, msString(stable), trimFloat(factor), over)}
	}
	return Measurement{Phase: appv1.AnalysisPassed, Value: value, Threshold: threshold,
		Message: fmt.Sprintf("%s %s <= stable's %s x %s %s", what, value, msString(stable), trimFloat(factor), over)}
}

// latencyOf returns the latency of track (named name) in milliseconds, or false and the
// inconclusive measurement of a track with too few requests or no duration histogram.
func latencyOf(c *appv1.AnalysisCheck, what, track, name string, interval time.Duration, s samples) (float64, Measurement, bool) {
	n, _ := s.get(track, mRequests)
	if m, few := tooFew(c, what, track, name, n, interval); few {
		return 0, m, false
	}
	sec, ok := s.get(track, mLatency)
	if !ok {
		return 0, Measurement{Phase: appv1.AnalysisInconclusive, Message: fmt.Sprintf("%s: no duration histogram over %s (%s %s)", what, humanDuration(interval), track, name)}, false
	}
	return sec * 1000, Measurement{}, true
}

// judgeQuery judges a query check's value by its ranges: in successCondition passes; in
// failureCondition fails; out of successCondition fails when there is no
// failureCondition, else it is inconclusive (as is no value).
func judgeQuery(c *appv1.AnalysisCheck, v model.Value) Measurement {
	q := c.Query
	f, err := single(v)
	if err != nil {
		return Measurement{Phase: appv1.AnalysisInconclusive, Message: fmt.Sprintf("check %s: %v", c.Name, err)}
	}
	value := trimFloat(f)
	switch {
	case q.FailureCondition != nil && inRange(f, q.FailureCondition):
		return Measurement{Phase: appv1.AnalysisFailed, Value: value, Threshold: "not " + rangeString(q.FailureCondition),
			Message: fmt.Sprintf("check %s: value %s is in its failure range %s", c.Name, value, rangeString(q.FailureCondition))}
	case q.SuccessCondition != nil && inRange(f, q.SuccessCondition):
		return Measurement{Phase: appv1.AnalysisPassed, Value: value, Threshold: rangeString(q.SuccessCondition),
			Message: fmt.Sprintf("check %s: value %s is in its success range %s", c.Name, value, rangeString(q.SuccessCondition))}
	case q.SuccessCondition == nil:
		return Measurement{Phase: appv1.AnalysisPassed, Value: value, Threshold: "not " + rangeString(q.FailureCondition),
			Message: fmt.Sprintf("check %s: value %s is out of its failure range %s", c.Name, value, rangeString(q.FailureCondition))}
	case q.FailureCondition == nil:
		return Measurement{Phase: appv1.AnalysisFailed, Value: value, Threshold: rangeString(q.SuccessCondition),
			Message: fmt.Sprintf("check %s: value %s is out of its success range %s", c.Name, value, rangeString(q.SuccessCondition))}
	}
	return Measurement{Phase: appv1.AnalysisInconclusive, Value: value, Threshold: rangeString(q.SuccessCondition),
		Message: fmt.Sprintf("check %s: value %s is in neither its success range %s nor its failure range %s", c.Name, value, rangeString(q.SuccessCondition), rangeString(q.FailureCondition))}
}

// single returns the one value of a query's answer: a scalar, or a vector of one
// sample.
func single(v model.Value) (float64, error) {
	var f float64
	switch x := v.(type) {
	case *model.Scalar:
		f = float64(x.Value)
	case model.Vector:
		if len(x) != 1 {
			return 0, fmt.Errorf("the query returned %d series; a check needs one value (aggregate it: sum(...))", len(x))
		}
		f = float64(x[0].Value)
	default:
		return 0, fmt.Errorf("the query returned a %s; a check needs a scalar or a vector of one sample", v.Type())
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("the query returned %v (no data over the window)", f)
	}
	return f, nil
}

func inRange(f float64, r *appv1.ValueRange) bool {
	if r.Min != nil && f < mustFloat(*r.Min) {
		return false
	}
	return r.Max == nil || f <= mustFloat(*r.Max)
}

func rangeString(r *appv1.ValueRange) string {
	lo, hi := "-inf", "+inf"
	if r.Min != nil {
		lo = *r.Min
	}
	if r.Max != nil {
		hi = *r.Max
	}
	return "[" + lo + ", " + hi + "]"
}

// names returns the canary's and the stable's names in source: the Services' for the
// Gateway, the Deployments' for the pods.
func names(t Target, source appv1.AnalysisSource) (canary, stable string) {
	if source == appv1.AnalysisSourceGateway {
		return t.CanaryService, t.StableService
	}
	return t.CanaryDeployment, t.StableDeployment
}

// mustFloat parses a decimal the API's pattern already checked (0 if it did not).
func mustFloat(s string) float64 {
	f, _ := strconv.ParseFloat(s, 64)
	return f
}

// pct writes a percent with at most two decimals ("89.6%", "99%").
func pct(f float64) string { return trimFloat(math.Floor(f*100+1e-6)/100) + "%" }

// msString writes milliseconds without decimals ("812ms"), or with one under 10 ms.
func msString(ms float64) string {
	if ms < 10 {
		return trimFloat(math.Round(ms*10)/10) + "ms"
	}
	return fmt.Sprintf("%.0fms", ms)
}

func trimFloat(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

package app

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/app-controller/app-controller/pkg/analysis"
	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// fakeProm is a fake of client_golang's promv1.API: Query answers the built-in success
// rate's samples of the canary (requests, errors) and counts the queries.
type fakeProm struct {
	promv1.API
	mu               sync.Mutex
	queries          int
	requests, errors float64
}

func (p *fakeProm) answer(requests, errors float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.requests, p.errors = requests, errors
}

func (p *fakeProm) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.queries
}

func (p *fakeProm) Query(_ context.Context, _ string, _ time.Time, _ ...promv1.Option) (model.Value, promv1.Warnings, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.queries++
	var v model.Vector
	if p.requests > 0 {
		v = append(v, &model.Sample{Metric: model.Metric{"track": "canary", "m": "requests"}, Value: model.SampleValue(p.requests)})
	}
	if p.errors > 0 {
		v = append(v, &model.Sample{Metric: model.Metric{"track": "canary", "m": "errors"}, Value: model.SampleValue(p.errors)})
	}
	return v, nil, nil
}

// analysisStrategy is setWeight 25, an analysis step (success rate >= 99% over 1m, by
// the pods' metrics), setWeight 100.
func analysisStrategy() *appv1.CanaryStrategy {
	return &appv1.CanaryStrategy{
		ScaleDownDelaySeconds: ptr.To[int32](30), AbortScaleDownDelaySeconds: ptr.To[int32](30), ProgressDeadlineSeconds: ptr.To[int32](600),
		RollbackWindow: ptr.To[int32](3),
		Steps: []appv1.CanaryStep{
			{SetWeight: ptr.To[int32](25)},
			{Analysis: &appv1.AnalysisStep{Checks: []appv1.AnalysisCheck{{Name: "success-rate", SuccessRate: &appv1.SuccessRateCheck{Min: ptr.To("99")},
				Interval: &metav1.Duration{Duration: time.Minute}, Count: ptr.To[int32](1), MinRequests: ptr.To[int32](10)}}}},
			{SetWeight: ptr.To[int32](100)},
		},
	}
}

// toAnalysis walks w's App, with analysisStrategy, from its addition to the analysis
// step, by replicas (canary 1, stable 3), with a new image.
func (w *world) toAnalysis(s *appv1.CanaryStrategy) {
	w.t.Helper()
	w.edit(true, func(a *appv1.App) { a.Spec.Rollout = &appv1.Rollout{Canary: s} })
	w.toCanaryUp()
	w.step("the analysis step starts", []string{"patch apps/status web"}, "Progressing 1")
	w.events = nil
}

// sinceStepStarted moves the fake clock to d after the rollout's current step started.
func (w *world) sinceStepStarted(d time.Duration) {
	w.t.Helper()
	r := w.app().Status.Rollout
	if r == nil || r.StepStartedAt == nil {
		w.t.Fatalf("no step started in %+v", r)
	}
	w.f.clock.SetTime(r.StepStartedAt.Add(d))
}

// sinceMeasured moves the fake clock to d after the last measurement of the App's first
// check.
func (w *world) sinceMeasured(d time.Duration) {
	w.t.Helper()
	st := w.app().Status.Rollout.Analysis
	if len(st) == 0 || st[0].MeasuredAt == nil {
		w.t.Fatalf("no measurement in %+v", st)
	}
	w.f.clock.SetTime(st[0].MeasuredAt.Add(d))
}

// TestAnalysisWrites pins the writes of an analysis step: no query until an interval
// after the step started (the window then holds the step's requests only), then one
// query and one status write per measurement, none between two; too little traffic waits; a failed success
// rate aborts the rollout (AnalysisFailed, the message naming the check, the value and
// the threshold; a Warning Event; the abort metric) in the status write and the
// children's; the syncs after the abort, and a restarted controller's, neither query nor
// abort again.
func TestAnalysisWrites(t *testing.T) {
	w := canaryWorld(t, false)
	prom := &fakeProm{}
	w.f.c.analyzer = &analysis.Analyzer{Prometheus: prom}
	w.toAnalysis(analysisStrategy())
	if prom.count() != 0 {
		t.Fatalf("%d queries before the analysis step, want none", prom.count())
	}

	w.stepRequeued("the step's start: the check listed, not measured", []string{"patch apps/status web"}, "Progressing 1", rolloutRecheck)
	if st := w.app().Status.Rollout.Analysis; len(st) != 1 || st[0].MeasuredAt != nil || st[0].Name != "success-rate" {
		t.Errorf("status.rollout.analysis at the step's start: %+v, want the check, not measured", st)
	}
	w.stepRequeued("no query, no write until an interval of the step's requests", nil, "Progressing 1", 61*time.Second)
	if prom.count() != 0 {
		t.Errorf("%d queries at the analysis step's start, want none", prom.count())
	}
	w.sinceStepStarted(59 * time.Second)
	w.stepRequeued("within the step's first interval: no query, no write", nil, "Progressing 1", 2*time.Second)
	w.sinceStepStarted(60 * time.Second)
	w.stepRequeued("no data: inconclusive, recorded", []string{"patch apps/status web"}, "Progressing 1", rolloutRecheck)
	st := w.app().Status.Rollout.Analysis
	if len(st) != 1 || st[0].Phase != appv1.AnalysisInconclusive || st[0].Inconclusive != 1 || prom.count() != 1 {
		t.Fatalf("after one measurement: %+v, %d queries; want one inconclusive, one query", st, prom.count())
	}
	w.sinceMeasured(59 * time.Second)
	w.stepRequeued("a sync before the interval: no query, no write", nil, "Progressing 1", 2*time.Second)
	if prom.count() != 1 {
		t.Errorf("%d queries within the interval, want 1", prom.count())
	}
	if r := w.app().Status.Rollout; !strings.Contains(r.Message, `waiting for its checks: "success-rate" inconclusive`) {
		t.Errorf("message %q, want it to say the check holds the step", r.Message)
	}

	before := counterValue(t, rolloutsAborted, appv1.ReasonAnalysisFailed)
	prom.answer(1000, 104)
	w.sinceMeasured(60 * time.Second)
	w.step("89.6% < 99%: aborted, the canary to 0, the stable back to 4",
		[]string{"patch apps/status web", "patch deployments web-deploy-canary", "patch deployments web-deploy"}, "Aborted 1")
	r := w.app().Status.Rollout
	want := "success rate 89.6% < 99% over 1m (canary web-deploy-canary)"
	if r.AbortReason != appv1.ReasonAnalysisFailed || !strings.Contains(r.AbortMessage, want) || !strings.Contains(r.AbortMessage, `check "success-rate" failed: 89.6%, threshold >= 99%`) {
		t.Errorf("abort %s %q, want AnalysisFailed naming the check, value and threshold: %q", r.AbortReason, r.AbortMessage, want)
	}
	if len(r.Analysis) != 1 || r.Analysis[0].Failed != 1 || r.Analysis[0].Inconclusive != 1 || r.Analysis[0].Value != "89.6%" || r.Analysis[0].Threshold != ">= 99%" {
		t.Errorf("status.rollout.analysis %+v, want the failed measurement kept", r.Analysis)
	}
	if c := meta.FindStatusCondition(w.app().Status.Conditions, appv1.ConditionReady); c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, want) {
		t.Errorf("Ready = %+v, want False saying %q", c, want)
	}
	if after := counterValue(t, rolloutsAborted, appv1.ReasonAnalysisFailed); after-before != 1 {
		t.Errorf("aborts counted %v, want 1", after-before)
	}
	if len(w.events) == 0 || !strings.HasPrefix(w.events[0], "Warning RolloutAborted Rollout to revision") || !strings.Contains(w.events[0], want) {
		t.Errorf("events %q, want a Warning RolloutAborted saying %q", w.events, want)
	}
	w.sinceMeasured(10 * time.Minute)
	w.step("after the abort: no query, no abort again", nil, "Aborted 1")
	if prom.count() != 2 {
		t.Errorf("%d queries, want 2", prom.count())
	}
	// A restarted controller starts from the status alone: a new analyzer, the same App.
	w.f.c.analyzer = &analysis.Analyzer{Prometheus: prom}
	w.step("a restarted controller: nothing", nil, "Aborted 1")
	if prom.count() != 2 {
		t.Errorf("%d queries after the restart, want 2", prom.count())
	}
}

// TestAnalysisPasses: a passing measurement ends the analysis step in the sync that
// makes it, in one status write; a restarted controller mid-step goes on from the
// counts and the time of the last measurement in the status.
func TestAnalysisPasses(t *testing.T) {
	w := canaryWorld(t, false)
	prom := &fakeProm{}
	w.f.c.analyzer = &analysis.Analyzer{Prometheus: prom}
	s := analysisStrategy()
	s.Steps[1].Analysis.Checks[0].Count = ptr.To[int32](2)
	w.toAnalysis(s)
	prom.answer(500, 1)
	w.sinceStepStarted(60 * time.Second)
	w.step("a first pass of two", []string{"patch apps/status web"}, "Progressing 1")
	w.f.c.analyzer = &analysis.Analyzer{Prometheus: prom}
	w.sinceMeasured(30 * time.Second)
	w.step("a restarted controller within the interval: nothing", nil, "Progressing 1")
	w.sinceMeasured(60 * time.Second)
	w.step("the second pass ends the step", []string{"patch apps/status web", "patch deployments web-deploy-canary"}, "Progressing 2")
	if prom.count() != 2 {
		t.Errorf("%d queries, want 2", prom.count())
	}
}

// TestAnalysisWithoutPrometheus: a rollout that asks for a metric check of a controller
// without Prometheus is aborted as it starts, saying so.
func TestAnalysisWithoutPrometheus(t *testing.T) {
	w := canaryWorld(t, false)
	w.edit(true, func(a *appv1.App) { a.Spec.Rollout = &appv1.Rollout{Canary: analysisStrategy()} })
	w.step("the strategy added", []string{"create controllerrevisions web-<rev>", "patch apps/status web"}, "Healthy 0")
	w.edit(true, func(a *appv1.App) { a.Spec.DeploymentTemplate.Image = "nginx:2" })
	w.step("a new image", []string{"create controllerrevisions web-<rev>", "patch apps/status web", "patch deployments web-deploy-canary"}, "Progressing 0")
	w.step("refused", []string{"patch apps/status web", "patch deployments web-deploy-canary"}, "Aborted 0")
	r := w.app().Status.Rollout
	if r.AbortReason != appv1.ReasonPrometheusNotConfigured || !strings.Contains(r.AbortMessage, "the rollout asks for metric checks (success-rate) and the controller has no Prometheus (--prometheus-url") {
		t.Errorf("abort %s %q", r.AbortReason, r.AbortMessage)
	}
}

package controller

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/component-base/metrics/legacyregistry"
	_ "k8s.io/component-base/metrics/prometheus/workqueue" // the queues' metrics, as the manager serves them
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2/ktesting"

	dto "github.com/prometheus/client_model/go"
)

// TestLoopMetrics runs a Loop whose syncs succeed, fail and give up, and checks the
// controller-runtime reconcile metrics and the retry budget counter it records in the
// legacy registry, for its controller name only.
func TestLoopMetrics(t *testing.T) {
	tests := []struct {
		name        string
		maxAttempts int
		// outcomes of the syncs of one key, in order (nil: success).
		outcomes    []error
		wantSuccess int
		wantErrors  int
		wantGaveUp  int
	}{
		{name: "one success", maxAttempts: 3, outcomes: []error{nil}, wantSuccess: 1},
		{name: "two failures then success", maxAttempts: 3, outcomes: []error{errSync, errSync, nil}, wantSuccess: 1, wantErrors: 2},
		{name: "budget spent", maxAttempts: 2, outcomes: []error{errSync, errSync}, wantErrors: 2, wantGaveUp: 1},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			name := fmt.Sprintf("metrics-test-%d", i)
			calls := 0
			done := make(chan struct{})
			inSync := make(chan struct{}, len(tt.outcomes))
			release := make(chan struct{})
			l := NewLoop(LoopConfig{
				Name:        name,
				LogKey:      "object",
				Policy:      RetryPolicy{MaxAttempts: tt.maxAttempts},
				RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[cache.ObjectName](0, 0),
				Sync: func(context.Context, cache.ObjectName) (Result, error) {
					inSync <- struct{}{}
					<-release
					err := tt.outcomes[calls]
					calls++
					if calls == len(tt.outcomes) {
						close(done)
					}
					return Result{}, err
				},
			})
			// Before any work: every series exists at 0.
			assertCounters(t, name, 0, 0, 0)
			l.Enqueue(cache.ObjectName{Namespace: "ns", Name: "obj"})
			stopped := make(chan struct{})
			go func() {
				l.RunWorkers(ctx, 3)
				close(stopped)
			}()

			<-inSync
			assertGauge(t, "controller_runtime_active_workers", name, 1)
			assertGauge(t, "controller_runtime_max_concurrent_reconciles", name, 3)
			close(release)
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatalf("%d of %d syncs happened", calls, len(tt.outcomes))
			}
			cancel()
			<-stopped

			assertCounters(t, name, tt.wantSuccess, tt.wantErrors, tt.wantGaveUp)
			assertGauge(t, "controller_runtime_active_workers", name, 0)
			hist, err := testutil.GetHistogramVecFromGatherer(legacyregistry.DefaultGatherer,
				"controller_runtime_reconcile_time_seconds", map[string]string{"controller": name})
			if err != nil {
				t.Fatal(err)
			}
			if got := hist.GetAggregatedSampleCount(); got != uint64(len(tt.outcomes)) {
				t.Errorf("reconcile_time_seconds count = %d, want %d", got, len(tt.outcomes))
			}
		})
	}
}

// assertCounters compares the counters of controller name with the legacy registry's.
func assertCounters(t *testing.T, name string, success, errs, gaveUp int) {
	t.Helper()
	var want strings.Builder
	fmt.Fprintf(&want, `# HELP app_controller_retries_exhausted_total [ALPHA] %s
# TYPE app_controller_retries_exhausted_total counter
app_controller_retries_exhausted_total{controller=%q} %d
# HELP controller_runtime_reconcile_errors_total [ALPHA] Total number of reconciliation errors per controller
# TYPE controller_runtime_reconcile_errors_total counter
controller_runtime_reconcile_errors_total{controller=%q} %d
# HELP controller_runtime_reconcile_total [ALPHA] Total number of reconciliations per controller
# TYPE controller_runtime_reconcile_total counter
controller_runtime_reconcile_total{controller=%q,result="error"} %d
controller_runtime_reconcile_total{controller=%q,result="requeue"} 0
controller_runtime_reconcile_total{controller=%q,result="requeue_after"} 0
controller_runtime_reconcile_total{controller=%q,result="success"} %d
`, retriesExhaustedHelp, name, gaveUp, name, errs, name, errs, name, name, name, success)
	if err := testutil.GatherAndCompare(onlyController(name), strings.NewReader(want.String()),
		"app_controller_retries_exhausted_total", "controller_runtime_reconcile_errors_total",
		"controller_runtime_reconcile_total"); err != nil {
		t.Error(err)
	}
}

// assertGauge checks the gauge metric of controller name.
func assertGauge(t *testing.T, metric, name string, want float64) {
	t.Helper()
	got, found := gauge(t, metric, map[string]string{"controller": name})
	switch {
	case !found:
		t.Errorf("%s{controller=%q} not found", metric, name)
	case got != want:
		t.Errorf("%s{controller=%q} = %v, want %v", metric, name, got, want)
	}
}

// gauge returns the value of the gauge metric's series with labels in the legacy
// registry, and whether there is one.
func gauge(t *testing.T, metric string, labels map[string]string) (float64, bool) {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != metric {
			continue
		}
		for _, m := range f.GetMetric() {
			if testutil.LabelsMatch(m, labels) {
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

// TestLoopsOfOneController runs two loops of one controller, as with several
// --watch-namespace, each with its own QueueName: the reconcile gauges of the controller
// add up both, and each queue keeps its own workqueue_* series, so that the gauges each
// queue sets (unfinished work) are not overwritten by the other's.
func TestLoopsOfOneController(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	const name = "pair-test"
	inSync := make(chan struct{}, 1)
	release := make(chan struct{})
	busy := NewLoop(LoopConfig{Name: name, QueueName: name + "/a", LogKey: "object",
		Sync: func(context.Context, cache.ObjectName) (Result, error) {
			inSync <- struct{}{}
			<-release
			return Result{}, nil
		}})
	idle := NewLoop(LoopConfig{Name: name, QueueName: name + "/b", LogKey: "object",
		Sync: func(context.Context, cache.ObjectName) (Result, error) { return Result{}, nil }})
	var stopped sync.WaitGroup
	stopped.Go(func() { busy.RunWorkers(ctx, 2) })
	stopped.Go(func() { idle.RunWorkers(ctx, 3) })
	busy.Enqueue(cache.ObjectName{Namespace: "ns", Name: "obj"})
	<-inSync

	assertGauge(t, "controller_runtime_active_workers", name, 1)
	// The queue updates its unfinished work every 500 ms (client-go's queue).
	deadline := time.Now().Add(10 * time.Second)
	for {
		a, foundA := gauge(t, "workqueue_unfinished_work_seconds", map[string]string{"name": name + "/a"})
		b, foundB := gauge(t, "workqueue_unfinished_work_seconds", map[string]string{"name": name + "/b"})
		if foundA && foundB && a > 0 && b == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("workqueue_unfinished_work_seconds: %s/a %v (found %v), %s/b %v (found %v); want the busy queue's above 0 and the idle one's 0",
				name, a, foundA, name, b, foundB)
		}
		time.Sleep(100 * time.Millisecond)
	}
	assertGauge(t, "controller_runtime_max_concurrent_reconciles", name, 5)

	close(release)
	cancel()
	stopped.Wait()
	assertGauge(t, "controller_runtime_max_concurrent_reconciles", name, 0)
	assertGauge(t, "controller_runtime_active_workers", name, 0)
}

// onlyController gathers the legacy registry's metric families keeping only the series
// of controller name.
type onlyController string

// Gather implements metrics.Gatherer.
func (name onlyController) Gather() ([]*dto.MetricFamily, error) {
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		return nil, err
	}
	for _, f := range families {
		var kept []*dto.Metric
		for _, m := range f.GetMetric() {
			if testutil.LabelsMatch(m, map[string]string{"controller": string(name)}) {
				kept = append(kept, m)
			}
		}
		f.Metric = kept
	}
	return families, nil
}

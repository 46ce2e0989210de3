package bench

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/app-controller/app-controller/pkg/controller/appfixture"
	"github.com/app-controller/app-controller/test/harness"
)

// The autoscaled scenario (-scenarios ...,autoscaled; not a default one): N Apps like the
// product's, each with spec.autoscaling (minReplicas the product's replicas, two more at
// most, 50% of a 10m CPU request: the kwok nodes have 32 CPUs each), on a cluster whose
// kube-controller-manager runs no HorizontalPodAutoscaler controller (there is no
// metrics API here; the autoscalers stay as created, their verdict pending, which leaves
// the Apps Ready). It measures the App controller's writes per App at creation (the
// product's and the autoscaler's), for a new image of a tenth of them, and at rest.
// docs/autoscaling.md states what they must be: one more than the product's at creation,
// the product's for a change, none at rest.

// scenarioAutoscaled is the autoscaled scenario's name.
const scenarioAutoscaled = "autoscaled"

// AutoscaledFigures are the autoscaled scenario's figures.
type AutoscaledFigures struct {
	ConvergeSeconds float64 `json:"converge_seconds"`
	// WritesPerApp: the controller's writes per App from the first create until 5 s after
	// the last App was Ready, Events apart and by kind.
	WritesPerApp WriteBreakdown `json:"writes_per_app"`
	// ChurnWritesPerApp: per changed App (a new image for a tenth of them), until 5 s
	// after the last was Ready again.
	ChurnWritesPerApp WriteBreakdown `json:"churn_writes_per_app"`
	// IdleWrites: all the controller's writes during idlePeriod after that.
	IdleWrites       int         `json:"idle_writes"`
	IdleWritesByKind writeCounts `json:"idle_writes_by_kind"`
}

// autoscaled runs the autoscaled scenario with a controller of its own, on an emptied
// cluster, and records its figures in r.
func (e *env) autoscaled(ctx context.Context, r *RoundResult) error {
	ns := fmt.Sprintf("bench-autoscaled-%d", r.Round)
	if err := createNamespace(ctx, e.admin.kube, ns); err != nil {
		return err
	}
	proc, watch, stop, err := e.scenarioController(ctx, r.Round, "autoscaled", ns)
	if err != nil {
		return err
	}
	defer stop()

	n, replicas := e.cfg.Apps, e.cfg.Replicas
	e.printf("round %d: autoscaled, %d Apps with spec.autoscaling (%d to %d replicas) created by %d clients\n", r.Round, n, replicas, replicas+2, e.cfg.CreateClients)
	want := make(map[string]int64, n)
	generations := make([]int64, n)
	start := time.Now()
	err = harness.Parallel(ctx, n, e.cfg.CreateClients, func(ctx context.Context, i int) error {
		app := appfixture.WithAutoscaling(newApp(ns, appName(i), replicas), replicas, replicas+2, 50, "10m")
		return e.createApp(ctx, app, &generations[i])
	})
	if err != nil {
		return err
	}
	// ready waits for every App at its generation and returns the controller's writes per
	// App of changed Apps from start until 5 s after.
	ready := func(what string, start time.Time, changed int) (time.Time, WriteBreakdown, error) {
		for i, g := range generations {
			want[appName(i)] = g
		}
		last, stuck, err := watch.waitReady(ctx, want, e.convergeTimeout())
		if err != nil {
			e.diagnose(ctx, ns, stuck, []*controllerProc{proc})
			return last, WriteBreakdown{}, fmt.Errorf("autoscaled, %s: %w", what, err)
		}
		settled := last.Add(e.cfg.Settle)
		time.Sleep(time.Until(settled))
		writes, err := e.audit.count(controllerUser, start, settled)
		return last, perApp(writes, changed), err
	}
	last, writes, err := ready("converge", start, n)
	if err != nil {
		return err
	}
	f := &AutoscaledFigures{ConvergeSeconds: round2(last.Sub(start).Seconds()), WritesPerApp: writes}
	e.printf("round %d: autoscaled: converged in %.2fs, %.2f writes per App (%.2f without Events): %v\n",
		r.Round, f.ConvergeSeconds, writes.Total, writes.ExcludingEvents, writes.ByVerbResource)

	churned := max(1, n/10)
	start = time.Now()
	if err := e.churnImages(ctx, ns, n, churned, r.Round, generations); err != nil {
		return err
	}
	if _, f.ChurnWritesPerApp, err = ready("churn", start, churned); err != nil {
		return err
	}
	e.printf("round %d: autoscaled: churn, %.2f writes per changed App (%.2f without Events): %v\n",
		r.Round, f.ChurnWritesPerApp.Total, f.ChurnWritesPerApp.ExcludingEvents, f.ChurnWritesPerApp.ByVerbResource)

	from := time.Now()
	time.Sleep(idlePeriod)
	idle, err := e.audit.count(controllerUser, from, time.Now())
	if err != nil {
		return err
	}
	f.IdleWrites, f.IdleWritesByKind = idle.total(), idle
	e.printf("round %d: autoscaled: idle for %s: %d writes %v\n", r.Round, idlePeriod, f.IdleWrites, idle)
	r.Autoscaled = f
	return proc.kill(syscall.SIGTERM)
}

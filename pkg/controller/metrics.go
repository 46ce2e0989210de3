package controller

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Reconcile metrics of every Loop, with controller-runtime's names, labels and buckets,
// so that dashboards and alerts written for controller-runtime operators work unchanged.
// They are registered in component-base's legacy registry, which the manager serves on
// /metrics.
const (
	// ResultSuccess is the result label of a sync that returned no error.
	ResultSuccess = "success"
	// ResultError is the result label of a sync that returned an error.
	ResultError = "error"
	// ResultRequeue and ResultRequeueAfter are controller-runtime's results of a
	// successful reconcile that asked to be queued again. A SyncFunc cannot ask that, so
	// these series stay at 0; they exist so that queries summing every result agree.
	ResultRequeue      = "requeue"
	ResultRequeueAfter = "requeue_after"
)

// reconcileBuckets are controller-runtime's buckets of
// controller_runtime_reconcile_time_seconds.
var reconcileBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5,
	0.6, 0.7, 0.8, 0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30,
	40, 50, 60}

// retriesExhaustedHelp is the help text of app_controller_retries_exhausted_total.
const retriesExhaustedHelp = "Number of times a controller gave up on an object because its retry budget " +
	"(failed syncs in a row) ran out"

// controllerLabel is the label that names the controller, as controller-runtime's.
const controllerLabel = "controller"

var (
	reconcileTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "controller_runtime_reconcile_total",
		Help:           "Total number of reconciliations per controller",
		StabilityLevel: metrics.ALPHA,
	}, []string{controllerLabel, "result"})
	reconcileErrors = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "controller_runtime_reconcile_errors_total",
		Help:           "Total number of reconciliation errors per controller",
		StabilityLevel: metrics.ALPHA,
	}, []string{controllerLabel})
	reconcileTime = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Name:           "controller_runtime_reconcile_time_seconds",
		Help:           "Length of time per reconciliation per controller",
		Buckets:        reconcileBuckets,
		StabilityLevel: metrics.ALPHA,
	}, []string{controllerLabel})
	activeWorkers = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Name:           "controller_runtime_active_workers",
		Help:           "Number of currently used workers per controller",
		StabilityLevel: metrics.ALPHA,
	}, []string{controllerLabel})
	maxConcurrentReconciles = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Name:           "controller_runtime_max_concurrent_reconciles",
		Help:           "Maximum number of concurrent reconciles per controller",
		StabilityLevel: metrics.ALPHA,
	}, []string{controllerLabel})
	reconcilePanics = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "controller_runtime_reconcile_panics_total",
		Help:           "Total number of reconciliation panics per controller",
		StabilityLevel: metrics.ALPHA,
	}, []string{controllerLabel})
	retriesExhausted = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "app_controller_retries_exhausted_total",
		Help:           retriesExhaustedHelp,
		StabilityLevel: metrics.ALPHA,
	}, []string{controllerLabel})

	registerOnce sync.Once
)

// Metrics returns the metrics of every Loop, as registered on /metrics; the reference
// page docs/reference/metrics.md is generated from them (hack/refdocs).
func Metrics() []metrics.Registerable {
	return []metrics.Registerable{reconcileTotal, reconcileErrors, reconcileTime, activeWorkers,
		maxConcurrentReconciles, retriesExhausted, reconcilePanics}
}

// registerMetrics registers the Loop metrics in the legacy registry, once per process.
func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(Metrics()...)
	})
}

// initMetrics makes every series of the controller name exist at 0, as controller-runtime
// does, so that rate() and absence alerts see the controller before its first sync.
func initMetrics(name string) {
	for _, result := range []string{ResultSuccess, ResultError, ResultRequeue, ResultRequeueAfter} {
		reconcileTotal.WithLabelValues(name, result).Add(0)
	}
	reconcileErrors.WithLabelValues(name).Add(0)
	retriesExhausted.WithLabelValues(name).Add(0)
	reconcilePanics.WithLabelValues(name).Add(0)
	// Added to, not set: another loop of the same controller may be running.
	activeWorkers.WithLabelValues(name).Add(0)
	maxConcurrentReconciles.WithLabelValues(name).Add(0)
}

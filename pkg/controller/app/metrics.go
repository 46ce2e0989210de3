package app

import (
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	applisters "github.com/app-controller/app-controller/pkg/generated/listers/appcontroller/v1"
)

// ReasonNotObserved is the reason label of app_controller_apps for an App with no Ready
// condition: the controller has not synced it yet.
const ReasonNotObserved = "NotObserved"

var (
	// childRepairs counts drift corrected: writes to an existing child that was not up to
	// date while the App's spec had not changed since its last sync.
	childRepairs = metrics.NewCounterVec(&metrics.CounterOpts{
		Name: "app_controller_child_repairs_total",
		Help: "Number of writes to an existing child of an App that had drifted from the desired state " +
			"while the App's spec was unchanged (status.observedGeneration == metadata.generation)",
		StabilityLevel: metrics.ALPHA,
	}, []string{"kind"})

	// statusWrites counts the writes of Apps' status by cause: statusWriteChange, or
	// statusWriteProgress (a rollout's counts only, at most once a StatusProgressWindow).
	statusWrites = metrics.NewCounterVec(&metrics.CounterOpts{
		Name: "app_controller_status_writes_total",
		Help: "Number of writes of an App's status, by cause: change (a condition, the observed generation, the rollout's state or " +
			"what the children are changed) or progress (only a rollout's replica counts and messages changed, written at most " +
			"once every 30 s while it runs)",
		StabilityLevel: metrics.ALPHA,
	}, []string{"cause"})

	// rolloutsStarted, rolloutsPromoted and rolloutsAborted count the canary rollouts
	// (spec.rollout) started (a restart toward a newer change too), promoted and
	// aborted, by the reason of the abort; rolloutStepDuration the time each step took.
	rolloutsStarted = metrics.NewCounter(&metrics.CounterOpts{
		Name:           "app_controller_rollouts_started_total",
		Help:           "Number of canary rollouts started (a restart of the steps toward a newer change counts too)",
		StabilityLevel: metrics.ALPHA,
	})
	rolloutsPromoted = metrics.NewCounter(&metrics.CounterOpts{
		Name:           "app_controller_rollouts_promoted_total",
		Help:           "Number of canary rollouts promoted: the new pod template became the stable one",
		StabilityLevel: metrics.ALPHA,
	})
	rolloutsAborted = metrics.NewCounterVec(&metrics.CounterOpts{
		Name: "app_controller_rollouts_aborted_total",
		Help: "Number of canary rollouts aborted, by reason: the problem of a canary pod (ImagePullFailed, CrashLoopBackOff, ...), " +
			"ProgressDeadlineExceeded, AbortRequested, AnalysisFailed, AnalysisInconclusive or PrometheusNotConfigured",
		StabilityLevel: metrics.ALPHA,
	}, []string{"reason"})
	// analysisMeasurements counts the measurements of the canary's checks, by result
	// (Passed, Failed, Inconclusive, Error): at most one per check per interval per App.
	analysisMeasurements = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "app_controller_analysis_measurements_total",
		Help:           "Number of measurements of canary analysis checks (Prometheus queries and webhook calls), by result: Passed, Failed, Inconclusive or Error",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})
	rolloutStepDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Name:           "app_controller_rollout_step_duration_seconds",
		Help:           "Time a step of a canary rollout took, by kind of step: setWeight, pause or promotion",
		Buckets:        []float64{1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600},
		StabilityLevel: metrics.ALPHA,
	}, []string{"step"})

	appsDesc = metrics.NewDesc("app_controller_apps",
		"Number of Apps by the status and reason of their Ready condition (reason NotObserved: no Ready condition yet)",
		[]string{"ready", "reason"}, nil, metrics.ALPHA, "")
	nameConflictsDesc = metrics.NewDesc("app_controller_name_conflicts",
		"Number of Apps with a child name held by something else (NamesAccepted=False)",
		nil, nil, metrics.ALPHA, "")
	rolloutsDesc = metrics.NewDesc("app_controller_rollouts",
		"Number of Apps with a canary rollout strategy by the phase of their rollout (Healthy, Progressing, Paused, Aborted)",
		[]string{"phase"}, nil, metrics.ALPHA, "")

	// appGauges computes app_controller_apps and app_controller_name_conflicts.
	appGauges = &appsCollector{}

	registerOnce sync.Once
)

// Metrics returns the App controller's metrics, as registered on /metrics: the counters
// and gauges it updates, and the collectors that compute theirs at scrape time (every
// series of which is a gauge). The reference page docs/reference/metrics.md is generated
// from them (hack/refdocs).
func Metrics() ([]metrics.Registerable, []metrics.StableCollector) {
	return []metrics.Registerable{childRepairs, statusWrites, rolloutsStarted, rolloutsPromoted, rolloutsAborted, rolloutStepDuration, analysisMeasurements},
		[]metrics.StableCollector{appGauges}
}

// registerMetrics registers the App controller's metrics in the legacy registry, once
// per process.
func registerMetrics() {
	registerOnce.Do(func() {
		registerables, collectors := Metrics()
		legacyregistry.MustRegister(registerables...)
		legacyregistry.CustomMustRegister(collectors...)
		// The series exist before the first rollout, so that queries and alerts on them
		// see 0, not nothing.
		for _, reason := range rolloutAbortReasons {
			rolloutsAborted.WithLabelValues(reason).Add(0)
		}
		for _, step := range []string{"setWeight", "pause", "promotion"} {
			rolloutStepDuration.WithLabelValues(step)
		}
	})
}

// rolloutAbortReasons are the reasons a canary rollout aborts for (pods.go,
// pkg/rollout).
var rolloutAbortReasons = []string{
	appv1.ReasonImagePullFailed, appv1.ReasonContainerConfigError, appv1.ReasonCrashLoopBackOff, appv1.ReasonOOMKilled,
	appv1.ReasonContainerNotReady, appv1.ReasonUnschedulable, appv1.ReasonProgressDeadlineExceeded, appv1.ReasonAbortRequested,
	appv1.ReasonAnalysisFailed,
}

// appsCollector computes app_controller_apps and app_controller_name_conflicts from the
// App informer caches at scrape time: no per-App series, nothing to keep up to date on
// sync. It adds up the synced caches of the App controllers that run: one, or one per
// namespace with several --watch-namespace (their Apps are disjoint).
type appsCollector struct {
	metrics.BaseStableCollector

	lock    sync.Mutex
	sources []*appSource
}

// appSource is the App cache of one running controller.
type appSource struct {
	lister applisters.AppLister
	synced cache.InformerSynced
}

// track makes the collector read lister once synced reports true, until the returned
// function is called.
func (c *appsCollector) track(lister applisters.AppLister, synced cache.InformerSynced) (untrack func()) {
	src := &appSource{lister: lister, synced: synced}
	c.lock.Lock()
	defer c.lock.Unlock()
	c.sources = append(c.sources, src)
	return func() {
		c.lock.Lock()
		defer c.lock.Unlock()
		c.sources = slices.DeleteFunc(c.sources, func(s *appSource) bool { return s == src })
	}
}

// DescribeWithStability implements metrics.StableCollector.
func (c *appsCollector) DescribeWithStability(ch chan<- *metrics.Desc) {
	ch <- appsDesc
	ch <- nameConflictsDesc
	ch <- rolloutsDesc
}

// CollectWithStability implements metrics.StableCollector.
func (c *appsCollector) CollectWithStability(ch chan<- metrics.Metric) {
	c.lock.Lock()
	sources := slices.Clone(c.sources)
	c.lock.Unlock()
	var list []*appv1.App
	synced := false
	for _, src := range sources {
		if !src.synced() {
			continue
		}
		apps, err := src.lister.List(labels.Everything())
		if err != nil {
			continue
		}
		synced = true
		list = append(list, apps...)
	}
	if !synced {
		return
	}
	type readyKey struct{ ready, reason string }
	counts := map[readyKey]int{}
	conflicts := 0
	phases := map[appv1.RolloutPhase]int{appv1.RolloutHealthy: 0, appv1.RolloutProgressing: 0, appv1.RolloutPaused: 0, appv1.RolloutAborted: 0}
	for _, app := range list {
		if r := app.Status.Rollout; r != nil && app.Spec.Rollout != nil {
			if _, known := phases[r.Phase]; known {
				phases[r.Phase]++
			}
		}
		key := readyKey{ready: "Unknown", reason: ReasonNotObserved}
		if cond := meta.FindStatusCondition(app.Status.Conditions, appv1.ConditionReady); cond != nil {
			key = readyKey{ready: string(cond.Status), reason: cond.Reason}
		}
		counts[key]++
		if meta.IsStatusConditionFalse(app.Status.Conditions, appv1.ConditionNamesAccepted) {
			conflicts++
		}
	}
	for key, n := range counts {
		ch <- metrics.NewLazyConstMetric(appsDesc, metrics.GaugeValue, float64(n), key.ready, key.reason)
	}
	ch <- metrics.NewLazyConstMetric(nameConflictsDesc, metrics.GaugeValue, float64(conflicts))
	for phase, n := range phases {
		ch <- metrics.NewLazyConstMetric(rolloutsDesc, metrics.GaugeValue, float64(n), string(phase))
	}
}

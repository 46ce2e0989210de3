package controller

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

const (
	// ReasonSyncFailed is the reason of the Warning Event every controller emits on the
	// object it reconciles at the first failure of a streak of failed syncs.
	ReasonSyncFailed = "SyncFailed"
	// ReasonReconcileFailed is the reason of the Warning Event a controller emits on the
	// object it gave up on (its RetryPolicy's attempts ran out), with the last error.
	ReasonReconcileFailed = appv1.ReasonReconcileFailed
)

// SyncFunc reconciles the object named key. It is level-triggered: whatever queued key,
// it compares the desired state with the cached state of the world. An error retries it
// by the RetryPolicy; the Result says when the object wants to be synced again anyway
// (the zero Result: at the next event).
type SyncFunc func(ctx context.Context, key cache.ObjectName) (Result, error)

// Result is what a sync asks of the loop besides retrying an error, as
// controller-runtime's reconcile.Result: the one way a sync comes back later.
type Result struct {
	// RequeueAfter, if positive, syncs the object again after this delay (a status write
	// held back to be coalesced, a repair waiting its backoff). It holds even when the
	// sync fails: the retry and the requeue are both queued, and the sooner one runs.
	RequeueAfter time.Duration
}

// RequeueAfter returns the Result that syncs again after the shortest positive delay
// among delays; without one, the zero Result.
func RequeueAfter(delays ...time.Duration) Result {
	var r Result
	for _, d := range delays {
		if d > 0 && (r.RequeueAfter == 0 || d < r.RequeueAfter) {
			r.RequeueAfter = d
		}
	}
	return r
}

// RetryPolicy says what a controller's loop does when a sync fails. Every failure is
// retried with the queue's rate limiter backoff, and the first failure of a streak is
// reported in a Warning Event (reason SyncFailed) on the object. When MaxAttempts run
// out, the loop says so in a Warning Event (reason ReconcileFailed, GaveUpMessage).
type RetryPolicy struct {
	// MaxAttempts is how many failed syncs in a row an object gets before the loop gives
	// up on it; 0 means it is retried for as long as it fails.
	MaxAttempts int
	// RetryOnResync makes a periodic resync of an object the loop gave up on retry it
	// (see Loop.Resync). Without it, only a change of the object (or of what it watches)
	// queues it again.
	RetryOnResync bool
	// GiveUp, if set, is called once when MaxAttempts is reached, with the number of
	// attempts and the last error, after the ReconcileFailed Event: it reports the
	// failure where else users look (a condition). An error it returns is logged.
	GiveUp func(ctx context.Context, key cache.ObjectName, attempts int, lastErr error) error
}

// LoopConfig configures a Loop.
type LoopConfig struct {
	// Name names the controller: its reconcile metrics (label controller), the logs and,
	// unless QueueName is set, the work queue (label name of the workqueue_* metrics).
	Name string
	// QueueName names the work queue when several loops of one controller run in one
	// process (one per --watch-namespace): client-go's queues share the series of a name,
	// and its gauges set by each queue (workqueue_unfinished_work_seconds,
	// workqueue_longest_running_processor_seconds) would overwrite one another. "": Name.
	QueueName string
	// LogKey is the key under which the object being synced is logged ("app", "node").
	LogKey string
	// Sync reconciles one object.
	Sync SyncFunc
	// Synced are the informers that must have synced before the first sync.
	Synced []cache.InformerSynced
	// Policy is the retry policy.
	Policy RetryPolicy
	// Order is the order in which the queue hands out keys (UrgentFirst); nil: first in,
	// first out.
	Order workqueue.Queue[cache.ObjectName]
	// RateLimiter is the queue's per-object backoff; nil: client-go's default controller
	// rate limiter (exponential per object from 5ms to 1000s, plus an overall bucket).
	RateLimiter workqueue.TypedRateLimiter[cache.ObjectName]
	// ShutdownTimeout bounds how long in-flight syncs may run after Run's context ends;
	// 0: DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// Recorder records the SyncFailed Warning Events.
	Recorder record.EventRecorder
	// Object returns the object named key for the SyncFailed Event (nil: no Event).
	Object func(key cache.ObjectName) runtime.Object
	// FailureMessage is the SyncFailed Event's message; "%v" is the error. Default:
	// "Sync failed, will retry: %v".
	FailureMessage string
}

// Loop is the worker loop every controller runs: event handlers queue keys with
// Enqueue, workers take them and call the controller's sync function, and failures are
// retried by the controller's RetryPolicy. The loop, the queue handling and the graceful
// stop live here once; a controller supplies only its sync function and its policy.
type Loop struct {
	cfg   LoopConfig
	queue workqueue.TypedRateLimitingInterface[cache.ObjectName]

	lock sync.Mutex
	// gaveUp holds the keys whose retries ran out, until they sync again or are
	// forgotten.
	gaveUp sets.Set[cache.ObjectName]
}

// NewLoop returns a Loop with its own named, rate-limited queue.
func NewLoop(cfg LoopConfig) *Loop {
	if cfg.RateLimiter == nil {
		cfg.RateLimiter = workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName]()
	}
	if cfg.FailureMessage == "" {
		cfg.FailureMessage = "Sync failed, will retry: %v"
	}
	registerMetrics()
	initMetrics(cfg.Name)
	if cfg.QueueName == "" {
		cfg.QueueName = cfg.Name
	}
	queueConfig := workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{Name: cfg.QueueName}
	if cfg.Order != nil {
		queueConfig.DelayingQueue = workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[cache.ObjectName]{
			Name:  cfg.QueueName,
			Queue: workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[cache.ObjectName]{Name: cfg.QueueName, Queue: cfg.Order}),
		})
	}
	return &Loop{
		cfg:    cfg,
		queue:  workqueue.NewTypedRateLimitingQueueWithConfig(cfg.RateLimiter, queueConfig),
		gaveUp: sets.New[cache.ObjectName](),
	}
}

// Queue returns the loop's work queue (for tests and for controllers that inspect it).
func (l *Loop) Queue() workqueue.TypedRateLimitingInterface[cache.ObjectName] {
	return l.queue
}

// Enqueue queues key for a sync.
func (l *Loop) Enqueue(key cache.ObjectName) {
	l.queue.Add(key)
}

// Resync handles a periodic resync of key (an informer update with an unchanged
// resourceVersion): it queues key if the loop gave up on it and the policy retries on
// resync, and reports whether it did. Other resyncs carry no change and are dropped.
func (l *Loop) Resync(key cache.ObjectName) bool {
	if !l.cfg.Policy.RetryOnResync || !l.GaveUp(key) {
		return false
	}
	l.queue.Add(key)
	return true
}

// GaveUp reports whether the loop gave up on key: its retries ran out and it has not
// synced successfully since.
func (l *Loop) GaveUp(key cache.ObjectName) bool {
	l.lock.Lock()
	defer l.lock.Unlock()
	return l.gaveUp.Has(key)
}

// Forget clears what the loop remembers of key (its object was deleted).
func (l *Loop) Forget(key cache.ObjectName) {
	l.setGaveUp(key, false)
}

func (l *Loop) setGaveUp(key cache.ObjectName, gaveUp bool) {
	l.lock.Lock()
	defer l.lock.Unlock()
	if gaveUp {
		l.gaveUp.Insert(key)
	} else {
		l.gaveUp.Delete(key)
	}
}

// Run waits for the informers to sync, then runs workers until ctx ends, and then stops
// as RunWorkers does. keysAndValues are logged with the start message.
func (l *Loop) Run(ctx context.Context, workers int, keysAndValues ...any) {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx)
	logger.Info("Starting controller", append([]any{"workers", workers}, keysAndValues...)...)
	defer logger.Info("Stopped controller")

	if !cache.WaitForNamedCacheSyncWithContext(ctx, l.cfg.Synced...) {
		l.queue.ShutDown()
		return
	}
	l.RunWorkers(ctx, workers)
}

// RunWorkers runs workers until ctx ends, without waiting for the informers (Run does
// that first; tests whose caches are seeded by hand call RunWorkers directly).
func (l *Loop) RunWorkers(ctx context.Context, workers int) {
	// Added, not set: the loops of one controller (one per --watch-namespace) add up.
	maxConcurrentReconciles.WithLabelValues(l.cfg.Name).Add(float64(workers))
	defer maxConcurrentReconciles.WithLabelValues(l.cfg.Name).Add(-float64(workers))
	RunWorkers(ctx, l.queue, workers, l.cfg.ShutdownTimeout, l.process)
}

// process syncs key, with the key in the logger, records the reconcile metrics and
// handles the outcome: the error by the retry policy, the Result's RequeueAfter by
// queuing key again after that delay.
func (l *Loop) process(ctx context.Context, key cache.ObjectName) {
	ref := klog.KRef(key.Namespace, key.Name)
	ctx = klog.NewContext(ctx, klog.LoggerWithValues(klog.FromContext(ctx), l.cfg.LogKey, ref))
	active := activeWorkers.WithLabelValues(l.cfg.Name)
	active.Inc()
	start := time.Now()
	res, err := l.sync(ctx, key)
	reconcileTime.WithLabelValues(l.cfg.Name).Observe(time.Since(start).Seconds())
	active.Dec()
	if err != nil {
		reconcileTotal.WithLabelValues(l.cfg.Name, ResultError).Inc()
		reconcileErrors.WithLabelValues(l.cfg.Name).Inc()
	} else {
		reconcileTotal.WithLabelValues(l.cfg.Name, ResultSuccess).Inc()
	}
	l.HandleErr(ctx, key, err)
	if res.RequeueAfter > 0 {
		klog.FromContext(ctx).V(4).Info("Syncing again later", "after", res.RequeueAfter)
		l.queue.AddAfter(key, res.RequeueAfter)
	}
}

// sync runs the Sync of key and turns a panic into an error, which the retry policy then
// handles like any failure: one object that trips a bug must not stop the process, and
// every other object's reconciliation with it. The panic and its stack are logged, and
// counted in controller_runtime_reconcile_panics_total.
func (l *Loop) sync(ctx context.Context, key cache.ObjectName) (res Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			reconcilePanics.WithLabelValues(l.cfg.Name).Inc()
			err = fmt.Errorf("the sync panicked (a bug; please report it with the log): %v", r)
			klog.FromContext(ctx).Error(err, "Recovered from a panic in a sync", "stack", string(debug.Stack()))
			res = Result{}
		}
	}()
	return l.cfg.Sync(ctx, key)
}

// HandleErr applies the retry policy to the outcome of a sync of key: success forgets
// the key's failures; a failure is retried with backoff, reported in a Warning Event at
// the first failure of a streak, and after Policy.MaxAttempts failures in a row the loop
// gives up on the key and calls Policy.GiveUp.
func (l *Loop) HandleErr(ctx context.Context, key cache.ObjectName, err error) {
	if err == nil {
		l.queue.Forget(key)
		l.setGaveUp(key, false)
		return
	}
	logger := klog.FromContext(ctx)
	if namespaceGoing(err) {
		// The namespace is being deleted, and the object with it: a retry cannot succeed
		// and an Event cannot be recorded there. Its deletion ends the matter.
		logger.V(2).Info("Sync failed: the namespace is being deleted; not retrying", "err", err)
		l.queue.Forget(key)
		l.setGaveUp(key, false)
		return
	}
	attempts := l.queue.NumRequeues(key) + 1
	if attempts == 1 && l.cfg.Recorder != nil && l.cfg.Object != nil {
		if obj := l.cfg.Object(key); obj != nil {
			l.cfg.Recorder.Eventf(obj, corev1.EventTypeWarning, ReasonSyncFailed, l.cfg.FailureMessage, err)
		}
	}
	if limit := l.cfg.Policy.MaxAttempts; limit <= 0 || attempts < limit {
		logger.V(2).Info("Sync failed, retrying", "attempt", attempts, "err", err)
		l.queue.AddRateLimited(key)
		return
	}

	l.queue.Forget(key)
	l.setGaveUp(key, true)
	retriesExhausted.WithLabelValues(l.cfg.Name).Inc()
	msg := GaveUpMessage(attempts, l.cfg.Policy.RetryOnResync, err)
	utilruntime.HandleErrorWithContext(ctx, err, "Giving up", "attempts", attempts, "retryOnResync", l.cfg.Policy.RetryOnResync)
	if l.cfg.Recorder != nil && l.cfg.Object != nil {
		if obj := l.cfg.Object(key); obj != nil {
			l.cfg.Recorder.Event(obj, corev1.EventTypeWarning, ReasonReconcileFailed, msg)
		}
	}
	if l.cfg.Policy.GiveUp != nil {
		if reportErr := l.cfg.Policy.GiveUp(ctx, key, attempts, err); reportErr != nil {
			utilruntime.HandleErrorWithContext(ctx, fmt.Errorf("reporting that retries ran out: %w", reportErr), "Reporting failed")
		}
	}
}

// namespaceGoing reports whether err refuses a write because the namespace is being
// deleted (cause NamespaceTerminating) or is already gone (namespace NotFound), as the
// NamespaceLifecycle admission answers.
func namespaceGoing(err error) bool {
	if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
		return true
	}
	var status apierrors.APIStatus
	if !apierrors.IsNotFound(err) || !errors.As(err, &status) {
		return false
	}
	d := status.Status().Details
	return d != nil && d.Kind == "namespaces" && d.Group == ""
}

// maxMessage is the API's limit on a condition message; Event messages are cut to it too.
const maxMessage = 32768

// GaveUpMessage says that a loop gave up on an object after attempts failed syncs, when
// it will retry, and the last error; at most maxMessage bytes.
func GaveUpMessage(attempts int, retryOnResync bool, lastErr error) string {
	retry := "when it changes"
	if retryOnResync {
		retry = "on the next resync or change"
	}
	return TruncateMessage(fmt.Sprintf("Gave up after %d failed attempts in a row; will retry %s. Last error: %v", attempts, retry, lastErr))
}

// TruncateMessage shortens msg to what a condition message may hold (maxMessage bytes).
func TruncateMessage(msg string) string {
	if len(msg) <= maxMessage {
		return msg
	}
	return msg[:maxMessage-3] + "..."
}

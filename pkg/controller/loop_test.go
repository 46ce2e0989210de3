package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2/ktesting"

	"github.com/app-controller/app-controller/pkg/controller/controllertest"
)

var errSync = errors.New("injected sync failure")

// newTestLoop returns a Loop whose rate limiter never delays, syncing with syncFn, and
// the recorder of its Events.
func newTestLoop(policy RetryPolicy, syncFn SyncFunc) (*Loop, *record.FakeRecorder) {
	recorder := record.NewFakeRecorder(100)
	return NewLoop(LoopConfig{
		Name:        "test",
		LogKey:      "object",
		Sync:        syncFn,
		Policy:      policy,
		RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[cache.ObjectName](0, 0),
		Recorder:    recorder,
		Object: func(key cache.ObjectName) runtime.Object {
			return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
		},
	}), recorder
}

// TestHandleErr checks each retry policy: how many attempts, what giving up does,
// whether a resync retries, and that success clears the failures.
func TestHandleErr(t *testing.T) {
	key := cache.ObjectName{Namespace: "ns", Name: "obj"}
	tests := []struct {
		name          string
		policy        RetryPolicy
		failures      int
		wantRequeues  int
		wantGaveUp    bool
		wantResync    bool
		wantGiveUpArg string
	}{
		{name: "under the budget: retried", policy: RetryPolicy{MaxAttempts: 3}, failures: 2, wantRequeues: 2},
		{name: "budget spent, no resync retry: forgotten until a change", policy: RetryPolicy{MaxAttempts: 3},
			failures: 3, wantGaveUp: true},
		{name: "budget spent, resync retries and GiveUp reports", failures: 3, wantGaveUp: true, wantResync: true,
			wantGiveUpArg: "3 attempts: injected sync failure",
			policy:        RetryPolicy{MaxAttempts: 3, RetryOnResync: true}},
		{name: "no limit: retried for ever", policy: RetryPolicy{}, failures: 25, wantRequeues: 25},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			var gaveUpWith []string
			if tt.wantGiveUpArg != "" {
				tt.policy.GiveUp = func(_ context.Context, k cache.ObjectName, attempts int, err error) error {
					if k != key {
						t.Errorf("GiveUp called for %v", k)
					}
					gaveUpWith = append(gaveUpWith, fmt.Sprintf("%d attempts: %v", attempts, err))
					return nil
				}
			}
			l, recorder := newTestLoop(tt.policy, nil)
			defer l.Queue().ShutDown()
			for range tt.failures {
				l.HandleErr(ctx, key, errSync)
			}
			if got := l.Queue().NumRequeues(key); got != tt.wantRequeues {
				t.Errorf("NumRequeues = %d, want %d", got, tt.wantRequeues)
			}
			if got := l.GaveUp(key); got != tt.wantGaveUp {
				t.Errorf("GaveUp = %v, want %v", got, tt.wantGaveUp)
			}
			if tt.wantGiveUpArg != "" && (len(gaveUpWith) != 1 || gaveUpWith[0] != tt.wantGiveUpArg) {
				t.Errorf("GiveUp calls = %q, want one with %q", gaveUpWith, tt.wantGiveUpArg)
			}
			events := controllertest.DrainEvents(recorder)
			wantEvents := 1
			if tt.wantGaveUp {
				wantEvents = 2
			}
			if len(events) != wantEvents || !strings.HasPrefix(events[0], "Warning SyncFailed Sync failed, will retry: injected") {
				t.Errorf("events = %q, want one SyncFailed Warning for the streak (and one ReconcileFailed if it gave up)", events)
			} else if tt.wantGaveUp {
				retry := "when it changes"
				if tt.policy.RetryOnResync {
					retry = "on the next resync or change"
				}
				want := "Warning ReconcileFailed Gave up after 3 failed attempts in a row; will retry " + retry + ". Last error: injected sync failure"
				if events[1] != want {
					t.Errorf("give-up event = %q, want %q", events[1], want)
				}
			}
			if got := l.Resync(key); got != tt.wantResync {
				t.Errorf("Resync queued = %v, want %v", got, tt.wantResync)
			}

			// A success ends the streak: failures forgotten, not given up, and the next
			// failure is reported again.
			l.HandleErr(ctx, key, nil)
			if l.Queue().NumRequeues(key) != 0 || l.GaveUp(key) {
				t.Errorf("after a success: NumRequeues = %d, GaveUp = %v, want 0 and false", l.Queue().NumRequeues(key), l.GaveUp(key))
			}
			l.HandleErr(ctx, key, errSync)
			if events := controllertest.DrainEvents(recorder); len(events) != 1 {
				t.Errorf("events after a new failure = %q, want one", events)
			}
		})
	}
}

// TestResyncOfHealthyKeyIsDropped checks that a resync queues nothing for a key the loop
// did not give up on, even with RetryOnResync.
// TestHandleErrNamespaceTerminating: a sync refused because its namespace is being
// deleted or is gone (the error wrapped, as syncs return it) is neither retried nor
// reported by an Event: the namespace's deletion removes the object too.
func TestHandleErrNamespaceTerminating(t *testing.T) {
	key := cache.ObjectName{Namespace: "ns", Name: "obj"}
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "obj-deploy",
		errors.New("unable to create new content in namespace ns because it is being terminated"))
	forbidden.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause, Field: "ns"}}
	tests := []struct {
		name         string
		err          error
		wantRequeues int
		wantEvents   int
	}{
		{name: "namespace terminating: dropped", err: fmt.Errorf("applying Deployment obj-deploy: %w", forbidden)},
		{name: "namespace gone: dropped", err: fmt.Errorf("applying Deployment obj-deploy: %w",
			apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "ns"))},
		{name: "the object not found: retried", err: apierrors.NewNotFound(schema.GroupResource{Group: "apps", Resource: "deployments"}, "obj-deploy"),
			wantRequeues: 1, wantEvents: 1},
		{name: "another Forbidden: retried", err: apierrors.NewForbidden(schema.GroupResource{Resource: "services"}, "obj-svc", errors.New("no")),
			wantRequeues: 1, wantEvents: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			l, recorder := newTestLoop(RetryPolicy{MaxAttempts: 3, RetryOnResync: true}, nil)
			defer l.Queue().ShutDown()
			l.HandleErr(ctx, key, tt.err)
			if got := l.Queue().NumRequeues(key); got != tt.wantRequeues {
				t.Errorf("NumRequeues = %d, want %d", got, tt.wantRequeues)
			}
			if l.GaveUp(key) {
				t.Error("GaveUp = true, want false")
			}
			if events := controllertest.DrainEvents(recorder); len(events) != tt.wantEvents {
				t.Errorf("events = %q, want %d", events, tt.wantEvents)
			}
		})
	}
}

// TestRequeueAfter checks that the Result keeps the shortest positive delay.
func TestRequeueAfter(t *testing.T) {
	for _, tc := range []struct {
		delays []time.Duration
		want   time.Duration
	}{
		{nil, 0},
		{[]time.Duration{0, 0}, 0},
		{[]time.Duration{4 * time.Second}, 4 * time.Second},
		{[]time.Duration{0, 3 * time.Second, time.Second}, time.Second},
		{[]time.Duration{-time.Second, 2 * time.Second}, 2 * time.Second},
	} {
		if got := RequeueAfter(tc.delays...).RequeueAfter; got != tc.want {
			t.Errorf("RequeueAfter(%v) = %v, want %v", tc.delays, got, tc.want)
		}
	}
}

func TestResyncOfHealthyKeyIsDropped(t *testing.T) {
	l, _ := newTestLoop(RetryPolicy{MaxAttempts: 1, RetryOnResync: true}, nil)
	defer l.Queue().ShutDown()
	if l.Resync(cache.ObjectName{Name: "healthy"}) || l.Queue().Len() != 0 {
		t.Errorf("a resync of a healthy key was queued")
	}
}

// TestLoopRun checks that queued keys reach the sync function with the key in the logger
// context, that failures are retried through the queue, that a Result's RequeueAfter
// syncs the key again, and that Run returns when its context ends.
func TestLoopRun(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	var mu sync.Mutex
	calls := map[string]int{}
	done := make(chan struct{})
	l, _ := newTestLoop(RetryPolicy{MaxAttempts: 5}, func(_ context.Context, key cache.ObjectName) (Result, error) {
		mu.Lock()
		defer mu.Unlock()
		calls[key.String()]++
		if key.Name == "flaky" && calls[key.String()] < 3 {
			return Result{}, errSync
		}
		if key.Name == "later" && calls[key.String()] == 1 {
			return RequeueAfter(10 * time.Millisecond), nil
		}
		if calls["ns/ok"] == 1 && calls["ns/flaky"] == 3 && calls["ns/later"] == 2 {
			close(done)
		}
		return Result{}, nil
	})
	l.cfg.Synced = []cache.InformerSynced{func() bool { return true }}
	l.Enqueue(cache.ObjectName{Namespace: "ns", Name: "ok"})
	l.Enqueue(cache.ObjectName{Namespace: "ns", Name: "flaky"})
	l.Enqueue(cache.ObjectName{Namespace: "ns", Name: "later"})
	stopped := make(chan struct{})
	go func() {
		l.Run(ctx, 2)
		close(stopped)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("syncs did not happen: %v", calls)
	}
	cancel()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	if !l.Queue().ShuttingDown() {
		t.Error("the queue was not shut down")
	}
}

// TestRunWorkers checks the graceful stop: an in-flight sync finishes on a context that
// outlives the stop signal, no key is taken after the stop, and a sync that outlasts the
// shutdown timeout has its context cancelled.
func TestRunWorkers(t *testing.T) {
	tests := []struct {
		name          string
		timeout       time.Duration
		release       bool // release the in-flight sync after the stop
		abort         bool // stop through WithAbort's context (a lost lease)
		wantCancelled bool
	}{
		{name: "in-flight sync finishes", timeout: time.Minute, release: true},
		{name: "sync past the timeout is cancelled", timeout: 100 * time.Millisecond, wantCancelled: true},
		{name: "abort cancels the in-flight sync at once", timeout: time.Hour, abort: true, wantCancelled: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			abortCtx, abort := context.WithCancel(ctx)
			defer abort()
			if tt.abort {
				ctx = WithAbort(ctx, abortCtx)
			}
			ctx, cancel := context.WithCancel(ctx)
			queue := workqueue.NewTyped[string]()
			started, release := make(chan struct{}), make(chan struct{})
			var cancelled, processed atomic.Int32
			process := func(workCtx context.Context, key string) {
				processed.Add(1)
				if key != "slow" {
					return
				}
				close(started)
				select {
				case <-release:
				case <-workCtx.Done():
					cancelled.Add(1)
				}
			}
			queue.Add("slow")
			stopped := make(chan struct{})
			go func() {
				RunWorkers(ctx, queue, 1, tt.timeout, process)
				close(stopped)
			}()
			<-started
			if tt.abort {
				abort()
			}
			cancel()
			queue.Add("after-stop")
			if tt.release {
				select {
				case <-stopped:
					t.Fatal("RunWorkers returned while a sync was in flight")
				case <-time.After(100 * time.Millisecond):
				}
				close(release)
			}
			select {
			case <-stopped:
			case <-time.After(10 * time.Second):
				t.Fatal("RunWorkers did not return")
			}
			if got := cancelled.Load() == 1; got != tt.wantCancelled {
				t.Errorf("in-flight sync cancelled = %v, want %v", got, tt.wantCancelled)
			}
			if got := processed.Load(); got != 1 {
				t.Errorf("processed %d keys, want 1 (nothing after the stop)", got)
			}
		})
	}
}

// TestPanicRecovered checks that a sync that panics fails like a sync that returns an
// error (retried with backoff, a Warning Event) instead of stopping the process, and is
// counted.
func TestPanicRecovered(t *testing.T) {
	key := cache.ObjectName{Namespace: "ns", Name: "obj"}
	calls := 0
	l, recorder := newTestLoop(RetryPolicy{MaxAttempts: 3}, func(context.Context, cache.ObjectName) (Result, error) {
		calls++
		var m map[string]int
		m["boom"]++ //nolint:staticcheck // SA5000: a nil map, the bug whose panic this test recovers
		return Result{}, nil
	})
	_, ctx := ktesting.NewTestContext(t)
	before, err := testutil.GetCounterMetricValue(reconcilePanics.WithLabelValues("test"))
	if err != nil {
		t.Fatal(err)
	}
	l.process(ctx, key)
	if calls != 1 || l.queue.NumRequeues(key) != 1 {
		t.Errorf("after a panic: %d calls, %d requeues; want 1, 1 (retried as a failure)", calls, l.queue.NumRequeues(key))
	}
	after, err := testutil.GetCounterMetricValue(reconcilePanics.WithLabelValues("test"))
	if err != nil {
		t.Fatal(err)
	}
	if got := after - before; got != 1 {
		t.Errorf("controller_runtime_reconcile_panics_total grew by %v, want 1", got)
	}
	if ev := controllertest.DrainEvents(recorder); len(ev) != 1 || !strings.Contains(ev[0], "the sync panicked") {
		t.Errorf("events %q, want one Warning saying the sync panicked", ev)
	}
}

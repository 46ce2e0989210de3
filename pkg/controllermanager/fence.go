package controllermanager

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// leaseFence refuses the controllers' writes once this instance may no longer hold the
// leader lease. Leader election notices a lost lease only when its renew loop next runs:
// a leader frozen (SIGSTOP, a long GC pause, a stalled VM) longer than the lease resumes
// with its workers and its renew loop racing, and its workers would write while another
// instance already leads. The fence closes that gap: a write is let through only within
// the renew deadline of the start of the last successful renewal. Another instance can
// take the lease only a lease duration after it saw that renewal, which is later.
type leaseFence struct {
	// validFor is how long a successful renewal keeps the fence open (the renew deadline).
	validFor time.Duration
	now      func() time.Time
	// base is when the fence was made. Times are kept as durations since base: the
	// difference of two times that carry Go's monotonic clock reading (time.Now's) is
	// measured on that clock, so a step of the wall clock (an NTP correction, a VM
	// resumed) neither keeps the fence open longer nor closes it early.
	base time.Time
	// renewed is when the last successful acquisition or renewal started, as nanoseconds
	// since base; valid once everRenewed.
	renewed     atomic.Int64
	everRenewed atomic.Bool
}

// newLeaseFence returns a closed fence that a renewal opens for validFor.
func newLeaseFence(validFor time.Duration) *leaseFence {
	return &leaseFence{validFor: validFor, now: time.Now, base: time.Now()}
}

// held reports whether this instance surely still holds the lease, and since when the
// last renewal started.
func (f *leaseFence) held() (bool, time.Duration) {
	if !f.everRenewed.Load() {
		return false, 0
	}
	age := f.now().Sub(f.base) - time.Duration(f.renewed.Load())
	return age < f.validFor, age
}

// lock wraps the lease lock: each successful Create or Update that makes identity the
// holder opens the fence from the moment the request started.
func (f *leaseFence) lock(inner resourcelock.Interface) resourcelock.Interface {
	return &fencedLock{Interface: inner, fence: f}
}

// roundTripper refuses every request but reads (GET, HEAD, so watches too) while the
// fence is closed.
func (f *leaseFence) roundTripper(rt http.RoundTripper) http.RoundTripper {
	return fenceRoundTripper{fence: f, next: rt}
}

// fencedLock is a resourcelock.Interface that records successful renewals in fence.
type fencedLock struct {
	resourcelock.Interface
	fence *leaseFence
}

// Create creates the lease and, if that made this instance the holder, opens the fence.
func (l *fencedLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	start := l.fence.now()
	err := l.Interface.Create(ctx, ler)
	l.record(start, ler, err)
	return err
}

// Update updates the lease and, if that renewed this instance's hold, opens the fence.
func (l *fencedLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	start := l.fence.now()
	err := l.Interface.Update(ctx, ler)
	l.record(start, ler, err)
	return err
}

func (l *fencedLock) record(start time.Time, ler resourcelock.LeaderElectionRecord, err error) {
	if err == nil && ler.HolderIdentity == l.Identity() {
		l.fence.renewed.Store(int64(start.Sub(l.fence.base)))
		l.fence.everRenewed.Store(true)
	}
}

// fenceRoundTripper refuses writes while its fence is closed.
type fenceRoundTripper struct {
	fence *leaseFence
	next  http.RoundTripper
}

// RoundTrip passes reads and, while the lease is held, writes; it fails other writes.
func (rt fenceRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet || req.Method == http.MethodHead {
		return rt.next.RoundTrip(req)
	}
	if held, age := rt.fence.held(); !held {
		return nil, fmt.Errorf("refusing %s %s: the leader lease was last renewed %s ago (renew deadline %s), another instance may lead",
			req.Method, req.URL.Path, age.Round(time.Millisecond), rt.fence.validFor)
	}
	return rt.next.RoundTrip(req)
}

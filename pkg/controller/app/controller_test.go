package app

import (
	"context"
	"testing"
	"time"

	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
)

// TestRunFinishesInFlightSyncs checks graceful shutdown: when Run's context ends, a sync
// in progress runs to completion (its API calls are not cancelled), no new work is
// taken, and Run returns.
func TestRunFinishesInFlightSyncs(t *testing.T) {
	f := newFixture(t)
	app := newApp("test-app", testNow)
	f.addApps(app)
	inApply := make(chan struct{})
	release := make(chan struct{})
	f.kubeClient.PrependReactor("patch", "deployments", func(core.Action) (bool, runtimeObject, error) {
		close(inApply)
		<-release
		return false, nil, nil // let the tracker apply it
	})
	f.c.loop.Enqueue(nameOf(app))

	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan struct{})
	go func() {
		f.c.loop.RunWorkers(ctx, 2) // the caches are seeded: no informer to wait for
		close(done)
	}()
	<-inApply
	cancel()
	f.c.loop.Enqueue(cache.ObjectName{Namespace: "tcs", Name: "queued-after-stop"})
	select {
	case <-done:
		t.Fatal("Run returned while a sync was in flight")
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after the in-flight sync finished")
	}
	var services int
	for _, a := range f.kubeClient.Actions() {
		if a.GetResource().Resource == "services" {
			services++
		}
	}
	if services != 1 {
		t.Errorf("the in-flight sync did not complete: %d Service applies, want 1", services)
	}
}

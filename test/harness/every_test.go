package harness

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// TestEvery checks that Every calls do at each tick, not at once, and returns when ctx
// ends.
func TestEvery(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var calls atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		Every(ctx, 50*time.Millisecond, func() {
			if calls.Add(1) == 3 {
				cancel()
			}
		})
	}()
	if n := calls.Load(); n != 0 {
		t.Errorf("%d calls at once, want 0", n)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Every did not return after ctx ended")
	}
	if n := calls.Load(); n != 3 {
		t.Errorf("%d calls, want 3", n)
	}
}

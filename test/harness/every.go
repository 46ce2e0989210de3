package harness

import (
	"context"
	"time"
)

// Every calls do at each tick of period, the first a period from now, until ctx ends.
func Every(ctx context.Context, period time.Duration, do func()) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			do()
		case <-ctx.Done():
			return
		}
	}
}

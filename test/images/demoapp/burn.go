package main

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// A CPU load that rises and falls, from the server's environment, for the autoscaled
// Apps of the soak (test/soak): BURN_MILLICORES of CPU for BURN_SECONDS, then nothing for
// IDLE_SECONDS, over and over, the cycle aligned to the clock (from the Unix epoch) so
// that every pod of a Deployment burns and idles at once, the ones started late
// included. No request is needed: a HorizontalPodAutoscaler at a CPU target scales the
// pods up while they burn and down while they idle.

// burnSlice is the period of the duty cycle: in each, the burner spins for its share of
// a CPU and sleeps the rest.
const burnSlice = 100 * time.Millisecond

// burn is the CPU load of the server: millicores (0: none) during on, then off idle.
type burn struct {
	millicores int
	on, off    time.Duration
}

// parseBurn reads BURN_MILLICORES (0 to 4000, default 0), BURN_SECONDS and IDLE_SECONDS
// (1 to 3600, both required with a load).
func parseBurn(getenv func(string) string) (burn, error) {
	var b burn
	v := getenv("BURN_MILLICORES")
	if v == "" {
		return b, nil
	}
	m, err := strconv.Atoi(v)
	if err != nil || m < 0 || m > 4000 {
		return b, fmt.Errorf("BURN_MILLICORES=%q: want a whole number of millicores from 0 to 4000", v)
	}
	b.millicores = m
	for _, p := range []struct {
		name string
		d    *time.Duration
	}{{"BURN_SECONDS", &b.on}, {"IDLE_SECONDS", &b.off}} {
		v := getenv(p.name)
		sec, err := strconv.Atoi(v)
		if err != nil || sec < 1 || sec > 3600 {
			return b, fmt.Errorf("%s=%q: want a whole number of seconds from 1 to 3600 with BURN_MILLICORES", p.name, v)
		}
		*p.d = time.Duration(sec) * time.Second
	}
	return b, nil
}

// burning tells whether the cycle burns at elapsed from the epoch: the first on of each
// on+off.
func (b burn) burning(elapsed time.Duration) bool {
	return b.millicores > 0 && elapsed%(b.on+b.off) < b.on
}

// spin is the time of each burnSlice the burner spins for: its share of a CPU.
func (b burn) spin() time.Duration {
	return burnSlice * time.Duration(b.millicores) / 1000
}

// run burns until ctx is done: in each burnSlice of a burning phase it spins for spin()
// and sleeps the rest; idle, it sleeps.
func (b burn) run(ctx context.Context) {
	if b.millicores == 0 {
		return
	}
	t := time.NewTicker(burnSlice)
	defer t.Stop()
	sink := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !b.burning(time.Duration(time.Now().UnixNano())) {
			continue
		}
		for until := time.Now().Add(b.spin()); time.Now().Before(until); {
			sink++
		}
	}
}

package app

// Micro-benchmarks of the App controller, without a cluster. Each reports its figure
// next to a floor measured in the same run, with the same number of iterations, right
// after it, and the ratio (unit "x-floor..."): compare ratios between runs, not ns/op.
//
//	go test -run '^$' -bench . -benchmem ./pkg/controller/app/

import (
	"encoding/json"
	goruntime "runtime"
	"testing"
	"time"

	"github.com/app-controller/app-controller/pkg/controller"
)

// BenchmarkSteadyStateSync measures syncApp on an App whose Deployment and Service are
// up to date and whose status is current: the path of every resync and of every child
// status event that changes nothing. It writes nothing (checked before timing).
//
// Floors, run with the same iteration count after the sync:
//   - build: newDeployment + newService, the apply configurations every sync builds;
//   - json:  a JSON round trip (Marshal, Unmarshal into any) of the live Deployment,
//     what controller.UpToDate fundamentally costs per object.
func BenchmarkSteadyStateSync(b *testing.B) {
	app := newApp("bench-app", testNow)
	live := liveDeployment(b, app)
	f := newFixture(b)
	f.addApps(app)
	f.addDeployments(live)
	f.addServices(liveService(b, app))
	key := nameOf(app)

	// First sync: writes the status (Ready); the App the cache then holds is the
	// steady-state App. Seed a fresh fixture with it, so that no mutation-cache entry
	// (which expires) is involved in what is measured.
	if _, err := f.c.syncApp(f.ctx, key); err != nil {
		b.Fatal(err)
	}
	steady, _, err := f.c.getApp(key)
	if err != nil || steady == nil {
		b.Fatalf("App after the first sync: %v", err)
	}
	f = newFixture(b)
	f.addApps(steady)
	f.addDeployments(live)
	f.addServices(liveService(b, app))
	if _, err := f.c.syncApp(f.ctx, key); err != nil {
		b.Fatal(err)
	}
	if w := f.writes(); len(w) != 0 {
		b.Fatalf("the steady-state sync wrote %d times (%v): it is not the steady state", len(w), w)
	}

	syncOnce := func() {
		if _, err := f.c.syncApp(f.ctx, key); err != nil {
			b.Fatal(err)
		}
	}
	buildOnce := func() {
		if _, err := DesiredDeployment(steady); err != nil {
			b.Fatal(err)
		}
		if _, err := DesiredService(steady); err != nil {
			b.Fatal(err)
		}
	}
	jsonOnce := func() {
		data, err := json.Marshal(live)
		if err != nil {
			b.Fatal(err)
		}
		var out any
		if err := json.Unmarshal(data, &out); err != nil {
			b.Fatal(err)
		}
	}

	b.ReportAllocs()
	goruntime.GC()
	b.ResetTimer()
	syncCost := measure(b.N, syncOnce)
	b.StopTimer()
	if w := f.writes(); len(w) != 0 {
		b.Fatalf("the steady-state sync wrote %d times during the benchmark", len(w))
	}
	build := measureFloor(b.N, buildOnce)
	jsonRT := measureFloor(b.N, jsonOnce)
	syncCost.reportAgainst(b, "build", build)
	syncCost.reportAgainst(b, "json", jsonRT)
}

// BenchmarkUpToDate measures controller.UpToDate on a live child and the apply
// configuration the App wants for it (equal: the common case), against the floor
// json.Marshal of the same live object.
func BenchmarkUpToDate(b *testing.B) {
	app := newApp("bench-app", testNow)
	desiredDeployment, err := DesiredDeployment(app)
	if err != nil {
		b.Fatal(err)
	}
	desiredService, err := DesiredService(app)
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name          string
		live, desired any
	}{
		{"Deployment", liveDeployment(b, app), desiredDeployment},
		{"Service", liveService(b, app), desiredService},
	} {
		b.Run(bc.name, func(b *testing.B) {
			if ok, err := controller.UpToDate(bc.live, bc.desired); err != nil || !ok {
				b.Fatalf("UpToDate = %v, %v; want true: the inputs are not the steady state", ok, err)
			}
			b.ReportAllocs()
			goruntime.GC()
			b.ResetTimer()
			upToDate := measure(b.N, func() {
				if _, err := controller.UpToDate(bc.live, bc.desired); err != nil {
					b.Fatal(err)
				}
			})
			b.StopTimer()
			marshal := measureFloor(b.N, func() {
				if _, err := json.Marshal(bc.live); err != nil {
					b.Fatal(err)
				}
			})
			upToDate.reportAgainst(b, "marshal", marshal)
		})
	}
}

// cost is the time and allocations of one operation, averaged over a measurement.
type cost struct {
	nsPerOp, allocsPerOp, bytesPerOp float64
}

// measure runs op n times and returns its average cost.
func measure(n int, op func()) cost {
	var before, after goruntime.MemStats
	goruntime.ReadMemStats(&before)
	start := time.Now()
	for range n {
		op()
	}
	elapsed := time.Since(start)
	goruntime.ReadMemStats(&after)
	return cost{
		nsPerOp:     float64(elapsed.Nanoseconds()) / float64(n),
		allocsPerOp: float64(after.Mallocs-before.Mallocs) / float64(n),
		bytesPerOp:  float64(after.TotalAlloc-before.TotalAlloc) / float64(n),
	}
}

// measureFloor measures a floor outside the benchmark timer, from a collected heap.
func measureFloor(n int, op func()) cost {
	goruntime.GC()
	return measure(n, op)
}

// reportAgainst reports the floor's cost and c's ratios to it: time (x-floor-NAME) and
// allocations (allocs-x-floor-NAME).
func (c cost) reportAgainst(b *testing.B, name string, floor cost) {
	b.ReportMetric(floor.nsPerOp, "floor-"+name+"-ns/op")
	b.ReportMetric(floor.allocsPerOp, "floor-"+name+"-allocs/op")
	b.ReportMetric(ratio(c.nsPerOp, floor.nsPerOp), "x-floor-"+name)
	b.ReportMetric(ratio(c.allocsPerOp, floor.allocsPerOp), "allocs-x-floor-"+name)
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

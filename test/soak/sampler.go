package soak

import (
	"context"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/app-controller/app-controller/test/harness"
)

// Sample is what one controller process's /metrics said at one moment.
type Sample struct {
	// T is the time since the start of the churn, in seconds.
	T        float64 `json:"t"`
	Instance string  `json:"instance"`
	Process  string  `json:"process"`
	Shard    string  `json:"shard"`
	// Leader: the process held its shard's Lease (leader_election_master_status).
	Leader bool `json:"leader"`
	// RSSMiB is process_resident_memory_bytes; HeapLiveMiB go_gc_heap_live_bytes (the
	// heap marked live by the last GC), HeapInuseMiB go_memstats_heap_inuse_bytes.
	RSSMiB       float64 `json:"rss_mib"`
	HeapLiveMiB  float64 `json:"heap_live_mib"`
	HeapInuseMiB float64 `json:"heap_inuse_mib"`
	Goroutines   float64 `json:"goroutines"`
	// Queue is the App work queue's depth (workqueue_depth{name="app"}).
	Queue float64 `json:"queue"`
	// Syncs is controller_runtime_reconcile_total of the App controller so far.
	Syncs float64 `json:"syncs"`
	// Stores are app_controller_informer_store_objects by "factory/resource".
	Stores map[string]float64 `json:"stores,omitempty"`
	// StoresAPI are, by the same keys, the objects the API server held that each store
	// should hold (storecount.go), counted right after the scrapes; none for a store
	// the harness cannot count, or whose count failed.
	StoresAPI map[string]float64 `json:"stores_api,omitempty"`
	// CountSkewS is how long after this scrape the last of its stores' counts ended,
	// in seconds: the skew the floor of their excess absorbs (trends.go).
	CountSkewS float64 `json:"count_skew_s,omitempty"`
}

// LoadSample is the machine's load average (/proc/loadavg) at one moment.
type LoadSample struct {
	T     float64 `json:"t"`
	Load1 float64 `json:"load1"`
	Load5 float64 `json:"load5"`
}

// appQueue is the App controller's work queue and controller name.
const appQueue = "app"

// sampler reads every running instance's /metrics and the machine's load every
// interval, and counts from the API server what the instances' informer stores should
// hold.
type sampler struct {
	fleet fleet
	// counter counts the stores' objects in the API (nil: no counts, every store
	// judged on its own size).
	counter storeCounter
	start   time.Time

	mu      sync.Mutex
	samples []Sample
	load    []LoadSample
	errors  int
	// countFails are the counts that failed, countFailure the first one's error.
	countFails   int
	countFailure string
}

func mib(v float64) float64 { return v / (1 << 20) }

// isLeader tells from a scrape of in whether it holds its shard's Lease.
func isLeader(families map[string]*dto.MetricFamily, in instance) bool {
	v, _ := harness.Value(families, "leader_election_master_status", map[string]string{"name": in.lease})
	return v == 1
}

// sampleOf reads a Sample from a scrape.
func sampleOf(in instance, families map[string]*dto.MetricFamily) Sample {
	s := Sample{Instance: in.name, Process: in.process, Shard: in.shard}
	s.Leader = isLeader(families, in)
	rss, _ := harness.Value(families, "process_resident_memory_bytes", nil)
	live, _ := harness.Value(families, "go_gc_heap_live_bytes", nil)
	inuse, _ := harness.Value(families, "go_memstats_heap_inuse_bytes", nil)
	s.RSSMiB, s.HeapLiveMiB, s.HeapInuseMiB = mib(rss), mib(live), mib(inuse)
	s.Goroutines, _ = harness.Value(families, "go_goroutines", nil)
	s.Queue, _ = harness.Value(families, "workqueue_depth", map[string]string{"name": appQueue})
	s.Syncs, _ = harness.Value(families, "controller_runtime_reconcile_total", map[string]string{"controller": appQueue})
	for _, m := range families["app_controller_informer_store_objects"].GetMetric() {
		var factory, resource string
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "factory":
				factory = l.GetValue()
			case "resource":
				resource = l.GetValue()
			}
		}
		if s.Stores == nil {
			s.Stores = map[string]float64{}
		}
		s.Stores[factory+"/"+resource] = m.GetGauge().GetValue()
	}
	return s
}

// run samples every interval until ctx ends.
func (s *sampler) run(ctx context.Context, interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		s.once(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// once takes one sample of each running instance and of the load.
func (s *sampler) once(ctx context.Context) {
	s.take(ctx, time.Since(s.start).Seconds())
}

// take takes the samples of time t (seconds since the start): each running
// instance's scrape, then the API's counts of their stores.
func (s *sampler) take(ctx context.Context, t float64) {
	if l, ok := readLoad(); ok {
		l.T = t
		s.mu.Lock()
		s.load = append(s.load, l)
		s.mu.Unlock()
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		taken   []Sample
		scraped []time.Time
	)
	for _, in := range s.fleet.running() {
		wg.Go(func() {
			families, err := s.fleet.scrape(ctx, in)
			at := time.Now()
			if err != nil {
				s.mu.Lock()
				s.errors++
				s.mu.Unlock()
				return
			}
			sample := sampleOf(in, families)
			sample.T = t
			mu.Lock()
			taken, scraped = append(taken, sample), append(scraped, at)
			mu.Unlock()
		})
	}
	wg.Wait()
	s.countStores(ctx, taken, scraped)
	s.mu.Lock()
	s.samples = append(s.samples, taken...)
	s.mu.Unlock()
}

// countStores sets the API's counts of samples' stores (scraped at scraped): each
// query counted once, for every process whose store asks it (both shards' stores of a
// resource, but the Apps', ask the same), all at once after the scrapes.
func (s *sampler) countStores(ctx context.Context, samples []Sample, scraped []time.Time) {
	if s.counter == nil {
		return
	}
	type result struct {
		n    int
		err  error
		done time.Time
	}
	results := map[storeQuery]*result{}
	for _, sample := range samples {
		for store := range sample.Stores {
			if q, ok := queryOf(store, sample.Shard); ok && results[q] == nil {
				results[q] = &result{}
			}
		}
	}
	countCtx, cancel := context.WithTimeout(ctx, countTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for q, r := range results {
		wg.Go(func() {
			r.n, r.err = s.counter.count(countCtx, q)
			r.done = time.Now()
		})
	}
	wg.Wait()
	s.mu.Lock()
	for _, q := range slices.SortedFunc(maps.Keys(results), func(a, b storeQuery) int { return strings.Compare(a.String(), b.String()) }) {
		// A count the end of the sampling cut is no failure.
		if err := results[q].err; err != nil && ctx.Err() == nil {
			if s.countFails == 0 {
				s.countFailure = err.Error()
			}
			s.countFails++
		}
	}
	s.mu.Unlock()
	for i := range samples {
		for store := range samples[i].Stores {
			q, ok := queryOf(store, samples[i].Shard)
			if !ok || results[q].err != nil {
				continue
			}
			if samples[i].StoresAPI == nil {
				samples[i].StoresAPI = map[string]float64{}
			}
			samples[i].StoresAPI[store] = float64(results[q].n)
			samples[i].CountSkewS = max(samples[i].CountSkewS, round2(results[q].done.Sub(scraped[i]).Seconds()))
		}
	}
}

// readLoad reads /proc/loadavg.
func readLoad() (LoadSample, bool) {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return LoadSample{}, false
	}
	f := strings.Fields(string(data))
	if len(f) < 2 {
		return LoadSample{}, false
	}
	l1, err1 := strconv.ParseFloat(f[0], 64)
	l5, err5 := strconv.ParseFloat(f[1], 64)
	return LoadSample{Load1: l1, Load5: l5}, err1 == nil && err5 == nil
}

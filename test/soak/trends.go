package soak

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"time"
)

// Trend is the slope of one series of one shard's leader over the last two thirds of
// the run, and whether it grows beyond its bound.
type Trend struct {
	Shard  string `json:"shard"`
	Series string `json:"series"`
	// N samples from Segments processes (each leader, its first Warmup left out).
	N        int     `json:"n"`
	Segments int     `json:"segments"`
	Mean     float64 `json:"mean"`
	// SlopePerHour and its 95% confidence interval [CILow, CIHigh]; Rho the residuals'
	// lag-1 autocorrelation the interval allows for.
	SlopePerHour float64 `json:"slope_per_hour"`
	CILow        float64 `json:"ci_low_per_hour"`
	CIHigh       float64 `json:"ci_high_per_hour"`
	Rho          float64 `json:"rho"`
	// BoundPerHour is the largest growth per hour that passes: a share of the mean (a
	// fifth, half for the resident memory), at least the series' floor.
	BoundPerHour float64 `json:"bound_per_hour"`
	// Growing: the slope exceeds the bound and its whole interval is above zero.
	Growing bool `json:"growing"`
}

// The bound of a trend: a fifth of the series' mean per hour, at least a floor per
// series. A controller whose heap or goroutines grow by a fifth every hour at a
// constant load doubles in five hours and outgrows the chart's limit within a day;
// docs/soak.md says what leaks these bounds catch in 30 minutes and which they do not.
// The resident memory gets half its mean: it follows the heap's high-water mark, which
// every relist after a fault raises and the Go runtime gives back slowly, so it creeps
// for many minutes after a leader starts (seen at +20 MiB/h on the real node with a flat
// live heap); the live heap and the goroutines are the leak signals, the resident
// memory the backstop for what lies outside the heap.
const boundRelative = 0.2

// soakEventTTL is how long the soak's apiserver keeps an Event (localcluster's
// EventTTL): the trends judge the last two thirds of a run, which for a run of 30
// minutes or more starts after one TTL.
const soakEventTTL = 10 * time.Minute

// minTrendRun is the shortest run whose trends are judged: the last two thirds of a
// shorter one are a few samples of caches and a heap still filling after the leaders'
// start (the 2-minute smoke saw a live heap at +600 MiB/h over 80 s, its interval above
// zero); they are computed and printed all the same.
const minTrendRun = 10 * time.Minute

// trendsNotJudged says why the trends of a run of duration d are not judged, "" when
// they are.
func trendsNotJudged(d time.Duration) string {
	if d < minTrendRun {
		return fmt.Sprintf("a run shorter than %s", minTrendRun)
	}
	return ""
}

// seriesRSS is the resident memory's series.
const seriesRSS = "rss_mib"

var (
	trendRelative = map[string]float64{seriesRSS: 0.5}
	trendFloors   = map[string]float64{
		seriesRSS:       16,
		"heap_live_mib": 2,
		"goroutines":    10,
		"queue":         10,
		"store":         10,
	}
)

// trends fits every series of each shard's leader, from the samples taken from
// window on until the churn ends (end: the final convergence and checks are no steady
// load), each leader's first warmup left out.
func trends(samples []Sample, window, end, warmup time.Duration) []Trend {
	var out []Trend
	for _, shard := range []string{shardA, shardB} {
		// When each process of the shard was first seen leading.
		firstLed := map[string]float64{}
		var leading []Sample
		for _, s := range samples {
			if s.Shard != shard || !s.Leader {
				continue
			}
			if _, ok := firstLed[s.Process]; !ok {
				firstLed[s.Process] = s.T
			}
			if s.T >= window.Seconds() && s.T <= end.Seconds() && s.T-firstLed[s.Process] >= warmup.Seconds() {
				leading = append(leading, s)
			}
		}
		series := map[string]func(Sample) (float64, bool){
			seriesRSS:       func(s Sample) (float64, bool) { return s.RSSMiB, true },
			"heap_live_mib": func(s Sample) (float64, bool) { return s.HeapLiveMiB, true },
			"goroutines":    func(s Sample) (float64, bool) { return s.Goroutines, true },
			"queue":         func(s Sample) (float64, bool) { return s.Queue, true },
		}
		stores := map[string]bool{}
		for _, s := range leading {
			for k := range s.Stores {
				stores[k] = true
			}
		}
		for k := range stores {
			series["store:"+k] = func(s Sample) (float64, bool) {
				v, ok := s.Stores[k]
				return v, ok
			}
		}
		for _, name := range slices.Sorted(maps.Keys(series)) {
			var points []point
			for _, s := range leading {
				if v, ok := series[name](s); ok {
					points = append(points, point{segment: s.Process, hours: s.T / 3600, value: v})
				}
			}
			f, ok := fitSlope(points)
			if !ok {
				continue
			}
			floor := trendFloors[name]
			if floor == 0 {
				floor = trendFloors["store"]
			}
			relative := trendRelative[name]
			if relative == 0 {
				relative = boundRelative
			}
			bound := math.Max(relative*math.Abs(f.mean), floor)
			out = append(out, Trend{Shard: shard, Series: name, N: f.n, Segments: f.segments, Mean: round2(f.mean),
				SlopePerHour: round2(f.slope), CILow: round2(f.slope - f.halfWidth), CIHigh: round2(f.slope + f.halfWidth),
				Rho: round2(f.rho), BoundPerHour: round2(bound), Growing: f.growing(bound)})
		}
	}
	return out
}

package soak

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
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
	// StoreMean is, for a store judged on its excess over the API's count, the mean
	// of the store itself at the samples of its excess (Mean is the excess's).
	StoreMean float64 `json:"store_mean,omitempty"`
	// SlopePerHour and its 95% confidence interval [CILow, CIHigh]; Rho the residuals'
	// lag-1 autocorrelation the interval allows for.
	SlopePerHour float64 `json:"slope_per_hour"`
	CILow        float64 `json:"ci_low_per_hour"`
	CIHigh       float64 `json:"ci_high_per_hour"`
	Rho          float64 `json:"rho"`
	// BoundPerHour is the largest growth per hour that passes: a share of the mean (a
	// fifth, half for the resident memory), at least the series' floor (for a store's
	// excess, whose mean is about 0, the floor).
	BoundPerHour float64 `json:"bound_per_hour"`
	// Growing: the slope exceeds the bound and its whole interval is above zero.
	Growing bool `json:"growing"`
}

// storeMean is " (store mean M)", the mean of the store itself, for a store judged on
// its excess; "" for other series.
func (t Trend) storeMean() string {
	if !strings.HasPrefix(t.Series, seriesStoreExcess) {
		return ""
	}
	return fmt.Sprintf(" (store mean %.1f)", t.StoreMean)
}

// The bound of a trend: a fifth of the series' mean per hour, at least a floor per
// series. A controller whose heap or goroutines grow by a fifth every hour at a
// constant load doubles in five hours and outgrows the chart's limit within a day;
// docs/soak.md says what leaks these bounds catch in 30 minutes and which they do not.
// The resident memory gets half its mean: it follows the heap's high-water mark, which
// every relist after a fault raises and the Go runtime gives back slowly, so it creeps
// for many minutes after a leader starts (seen at +20 MiB/h on the real node with a flat
// live heap); the live heap and the goroutines are the leak signals, the resident
// memory the backstop for what lies outside the heap. An informer store counted by the
// API is judged on its excess over the count, about 0 in a sound cache whatever the
// cluster holds: its bound is its floor.
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

// The series of an informer store ("factory/resource" after the prefix): its excess
// over the objects the API server holds that it should hold (storecount.go), or, for a
// store the harness cannot count (a factory whose selection it does not know), its own
// size.
const (
	seriesStoreExcess = "store_excess:"
	seriesStore       = "store:"
)

// isStoreSeries tells whether series is an informer store's.
func isStoreSeries(series string) bool {
	return strings.HasPrefix(series, seriesStoreExcess) || strings.HasPrefix(series, seriesStore)
}

var (
	trendRelative = map[string]float64{seriesRSS: 0.5}
	trendFloors   = map[string]float64{
		seriesRSS:       16,
		"heap_live_mib": 2,
		"goroutines":    10,
		"queue":         10,
		// A store counted by the API: the floor of its excess's bound. A sound cache's
		// excess is 0 but for the skew: the counts start after the scrapes (a few
		// hundred ms: CountSkewS), and the controller's watch delivers an object tens
		// of ms after the API has it, so a sample misses the objects created and still
		// holds those deleted within that second or so. At the churn's pace (36
		// operations a minute; the busiest store, the pods', sees about two creates and
		// deletes a second) that is ±1 object a sample, ±5 in a burst (an App deleted
		// with its pods, a canary scaled), as often up as down. It has no trend of its
		// own: the skew biases the excess by the store's net growth within it, which
		// for the canaries in flight (+10 an hour at most) is a few thousandths of an
		// object. A burst tilts the slope by its size times its distance from its
		// leader's mid-point over the fit's sum of squares: ±5 at the last sample of 20
		// minutes of one leader (120 samples, 1.1 h²) is 0.75/h, and the 95% interval
		// allows for such noise. 10 an hour, the floor of a store judged on its size,
		// is more than ten times that and a tenth of the leak it is there for (a cache
		// that keeps the objects deleted twice a minute: +120/h). Measured in a
		// 60-minute run on the real node (docs/soak.md): the counts 0.08 s after their
		// scrape at the median, 0.74 s at p99; the managed pods' and Services' excess a
		// mean of -0.1 to 0.0, slopes within ±1/h.
		seriesStoreExcess: 10,
		// A store judged on its own size.
		seriesStore: 10,
	}
)

// trendFloor is the floor of series' bound.
func trendFloor(series string) float64 {
	switch {
	case strings.HasPrefix(series, seriesStoreExcess):
		return trendFloors[seriesStoreExcess]
	case strings.HasPrefix(series, seriesStore):
		return trendFloors[seriesStore]
	}
	return trendFloors[series]
}

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
		// Each store, and whether the API counted it at some sample: a store the API
		// counts is judged on its excess at the samples with a count (a count that
		// failed leaves its sample out), the others on their size.
		stores := map[string]bool{}
		for _, s := range leading {
			for k := range s.Stores {
				_, counted := s.StoresAPI[k]
				stores[k] = stores[k] || counted
			}
		}
		// storeOf is, for an excess series, the store's own size at the same samples.
		storeOf := map[string]func(Sample) float64{}
		for k, counted := range stores {
			if !counted {
				series[seriesStore+k] = func(s Sample) (float64, bool) {
					v, ok := s.Stores[k]
					return v, ok
				}
				continue
			}
			series[seriesStoreExcess+k] = func(s Sample) (float64, bool) {
				v, ok := s.Stores[k]
				api, counted := s.StoresAPI[k]
				return v - api, ok && counted
			}
			storeOf[seriesStoreExcess+k] = func(s Sample) float64 { return s.Stores[k] }
		}
		for _, name := range slices.Sorted(maps.Keys(series)) {
			var points []point
			var storeSum float64
			for _, s := range leading {
				if v, ok := series[name](s); ok {
					points = append(points, point{segment: s.Process, hours: s.T / 3600, value: v})
					if store := storeOf[name]; store != nil {
						storeSum += store(s)
					}
				}
			}
			f, ok := fitSlope(points)
			if !ok {
				continue
			}
			relative := trendRelative[name]
			if relative == 0 {
				relative = boundRelative
			}
			bound := math.Max(relative*math.Abs(f.mean), trendFloor(name))
			t := Trend{Shard: shard, Series: name, N: f.n, Segments: f.segments, Mean: round2(f.mean),
				SlopePerHour: round2(f.slope), CILow: round2(f.slope - f.halfWidth), CIHigh: round2(f.slope + f.halfWidth),
				Rho: round2(f.rho), BoundPerHour: round2(bound), Growing: f.growing(bound)}
			if storeOf[name] != nil {
				t.StoreMean = round2(storeSum / float64(len(points)))
			}
			out = append(out, t)
		}
	}
	return out
}

package soak

import (
	"math"
)

// Trends: is a series (memory, goroutines, a cache, the queue) growing while the churn is
// steady? A series is sampled from the leader of a shard, and the leader changes when
// a fault kills it or makes it lose its lease: each process is a segment, with a level
// of its own. The trend is the least-squares slope common to the segments, each with
// its own intercept (the within-segment slope: a leak that restarts with each process
// still shows; the step from one process to the next does not count), with a 95%
// confidence interval that allows for the samples' autocorrelation.

// point is one sample of a series: its segment (process), time in hours, value.
type point struct {
	segment string
	hours   float64
	value   float64
}

// fit is the common slope of points and what it rests on.
type fit struct {
	// slope is per hour, halfWidth the half width of its 95% confidence interval.
	slope, halfWidth float64
	mean             float64
	n, segments      int
	// rho is the lag-1 autocorrelation of the residuals the interval allows for.
	rho float64
}

// fitSlope fits value = a(segment) + slope * hours by least squares. Segments of fewer
// than 3 points are left out. ok is false with too few points to say anything.
func fitSlope(points []point) (fit, bool) {
	bySegment := map[string][]point{}
	var order []string
	for _, p := range points {
		if _, seen := bySegment[p.segment]; !seen {
			order = append(order, p.segment)
		}
		bySegment[p.segment] = append(bySegment[p.segment], p)
	}
	var f fit
	var sxx, sxy, sum float64
	type centered struct{ x, y float64 }
	var segments [][]centered
	for _, name := range order {
		ps := bySegment[name]
		if len(ps) < 3 {
			continue
		}
		var mx, my float64
		for _, p := range ps {
			mx += p.hours
			my += p.value
		}
		mx /= float64(len(ps))
		my /= float64(len(ps))
		seg := make([]centered, len(ps))
		for i, p := range ps {
			seg[i] = centered{p.hours - mx, p.value - my}
			sxx += seg[i].x * seg[i].x
			sxy += seg[i].x * seg[i].y
			sum += p.value
		}
		segments = append(segments, seg)
		f.n += len(ps)
		f.segments++
	}
	if f.n < f.segments+3 || sxx == 0 {
		return f, false
	}
	f.slope = sxy / sxx
	f.mean = sum / float64(f.n)
	// Residuals, their variance and lag-1 autocorrelation (within segments).
	var sse, lag, lag0 float64
	for _, seg := range segments {
		prev := math.NaN()
		for _, c := range seg {
			e := c.y - f.slope*c.x
			sse += e * e
			if !math.IsNaN(prev) {
				lag += e * prev
				lag0 += prev * prev
			}
			prev = e
		}
	}
	if lag0 > 0 {
		f.rho = math.Max(0, math.Min(0.95, lag/lag0))
	}
	dof := float64(f.n - f.segments - 1)
	se := math.Sqrt(sse / dof / sxx)
	// With autocorrelated residuals the n samples carry the information of fewer
	// independent ones: widen the interval accordingly (an AR(1) correction).
	inflation := math.Sqrt((1 + f.rho) / (1 - f.rho))
	effective := float64(f.n)*(1-f.rho)/(1+f.rho) - float64(f.segments) - 1
	f.halfWidth = tQuantile975(effective) * se * inflation
	return f, true
}

// tQuantile975 is the 97.5% quantile of Student's t distribution with dof degrees of
// freedom (a two-sided 95% interval), at least 1 degree.
func tQuantile975(dof float64) float64 {
	table := []float64{12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
		2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
		2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042}
	switch d := int(math.Floor(dof)); {
	case d < 1:
		return table[0]
	case d <= len(table):
		return table[d-1]
	case d <= 60:
		return 2.000
	case d <= 120:
		return 1.980
	default:
		return 1.960
	}
}

// growing tells whether f shows growth beyond bound (per hour): the slope is above the
// bound and its whole 95% interval above zero. A series that is flat within its noise
// passes however noisy; one that grows faster than the bound fails as soon as the
// samples show the growth is real.
func (f fit) growing(bound float64) bool {
	return f.slope > bound && f.slope-f.halfWidth > 0
}

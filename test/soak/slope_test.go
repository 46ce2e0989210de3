package soak

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// series makes the points of a series sampled every 10 s for minutes, split into
// processes of the given minutes each, with level(segment) + perHour * t + noise.
func series(minutes float64, segmentMinutes float64, level func(int) float64, perHour, noise float64, seed uint64) []point {
	rng := rand.New(rand.NewPCG(seed, 1))
	var out []point
	for s := 0.0; s < minutes*60; s += 10 {
		seg := int(s / 60 / segmentMinutes)
		h := s / 3600
		out = append(out, point{segment: fmt.Sprint(seg), hours: h, value: level(seg) + perHour*h + noise*rng.NormFloat64()})
	}
	return out
}

// TestFitSlope checks the trend against series of known slope: flat ones (noisy, with
// a new level in each process) are not growing, growing ones are, also when each
// process starts again from the same level (a leak that a restart hides), and the
// interval covers the true slope.
func TestFitSlope(t *testing.T) {
	flat := func(int) float64 { return 100 }
	steps := func(seg int) float64 { return 100 + 15*float64(seg%2) }
	tests := []struct {
		name        string
		points      []point
		bound       float64
		trueSlope   float64
		wantGrowing bool
	}{
		{name: "flat and noisy", points: series(20, 20, flat, 0, 5, 1), bound: 20, wantGrowing: false},
		{name: "flat, a new level in each process", points: series(20, 5, steps, 0, 2, 2), bound: 20, wantGrowing: false},
		{name: "growing 50 an hour", points: series(20, 20, flat, 50, 5, 3), bound: 20, trueSlope: 50, wantGrowing: true},
		{name: "growing in each process, reset by restarts", points: series(20, 5, flat, 60, 2, 4), bound: 20, trueSlope: 60, wantGrowing: true},
		{name: "growing but slower than the bound", points: series(20, 20, flat, 10, 0.5, 5), bound: 20, trueSlope: 10, wantGrowing: false},
		{name: "shrinking", points: series(20, 20, flat, -80, 2, 6), bound: 20, trueSlope: -80, wantGrowing: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, ok := fitSlope(tc.points)
			if !ok {
				t.Fatal("no fit")
			}
			if got := f.growing(tc.bound); got != tc.wantGrowing {
				t.Errorf("growing(%v) = %v, want %v (slope %.2f ± %.2f per hour, rho %.2f)", tc.bound, got, tc.wantGrowing, f.slope, f.halfWidth, f.rho)
			}
			if math.Abs(f.slope-tc.trueSlope) > f.halfWidth {
				t.Errorf("slope %.2f ± %.2f per hour does not cover the true %v", f.slope, f.halfWidth, tc.trueSlope)
			}
		})
	}
}

// TestFitSlopeExact checks the fit on noiseless points: the exact slope, a zero
// interval, and segments too short to use left out.
func TestFitSlopeExact(t *testing.T) {
	points := []point{
		{"a", 0, 10}, {"a", 1, 12}, {"a", 2, 14},
		{"b", 3, 50}, {"b", 4, 52}, {"b", 5, 54}, {"b", 6, 56},
		{"c", 7, 1000}, {"c", 8, 0}, // two points: left out
	}
	f, ok := fitSlope(points)
	if !ok {
		t.Fatal("no fit")
	}
	if f.slope != 2 || f.halfWidth != 0 || f.n != 7 || f.segments != 2 {
		t.Errorf("fit %+v, want slope 2, half width 0, 7 points in 2 segments", f)
	}
	if _, ok := fitSlope(points[:3]); ok {
		t.Errorf("a fit from 3 points of one segment: too few to say anything")
	}
}

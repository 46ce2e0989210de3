package soak

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestCheckScaling pins what counts as the CPU load scaling an App: an autoscaler's scale
// write above the count before it, from minReplicas or more (up), or below it (down);
// the range kept (1 to minReplicas when autoscaling is turned on) and the controller's
// own writes are not. The invariant wants an App scaled both ways in a real run of
// minScalingRun or more, and fails without one.
func TestCheckScaling(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 16, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	ownerOf := func(_, name string) string { return "ns/" + name[:1] }
	scale := func(s int, name string, n int64) deploymentWrite {
		return deploymentWrite{at: at(s), namespace: "ns", name: name, scale: true, replicas: true, count: n}
	}
	apply := func(s int, name string, n int64) deploymentWrite {
		return deploymentWrite{at: at(s), namespace: "ns", name: name, replicas: true, count: n}
	}
	// a: created at 1, kept at 2 by its range, up to 3 by the load, down to 2, up again.
	// b: created at 1, kept at 2, never loaded; turned off (the controller's 1) and on.
	// c: up only.
	rising := []deploymentWrite{
		apply(0, "a-deploy", 1), scale(5, "a-deploy", 2), scale(60, "a-deploy", 3),
		{at: at(70), namespace: "ns", name: "a-deploy"}, // a template, no count
		apply(0, "b-deploy", 1), scale(5, "b-deploy", 2), apply(100, "b-deploy", 1), scale(110, "b-deploy", 2),
		apply(0, "c-deploy", 2), scale(60, "c-deploy", 3),
	}
	falling := append(slices.Clone(rising), scale(200, "a-deploy", 2), scale(300, "a-deploy", 3))

	c := checkScaling(falling, 2, ownerOf, true, 8*time.Minute)
	if c.Ups != 3 || c.Downs != 1 || !slices.Equal(c.UpAndDown, []string{"ns/a"}) {
		t.Errorf("ups %d, downs %d, both ways %v; want 3, 1, [ns/a]", c.Ups, c.Downs, c.UpAndDown)
	}
	if got := c.ByApp["ns/a"]; got != [2]int{2, 1} {
		t.Errorf("ns/a: %v, want 2 ups and 1 down", got)
	}
	if _, ok := c.ByApp["ns/b"]; ok {
		t.Errorf("ns/b scaled %v: its range kept is no load", c.ByApp["ns/b"])
	}
	if i, ok := c.invariant(); !ok || !i.Pass || i.Value != 1 {
		t.Errorf("invariant %+v (judged %v), want a pass of 1", i, ok)
	}
	if line := c.scalingLine([]string{"ns/a", "ns/b"}); !strings.Contains(line, "of the 2 distinct Apps the metrics-server faults judged, 1 scaled") {
		t.Errorf("line %q does not say how many of the judged Apps scaled", line)
	}

	// No App came down: the invariant fails.
	c = checkScaling(rising, 2, ownerOf, true, 8*time.Minute)
	if i, ok := c.invariant(); !ok || i.Pass || i.Value != 0 {
		t.Errorf("no App scaled down: invariant %+v (judged %v), want a failure", i, ok)
	}
	// Too short, or on kwok: not judged, and the line says why.
	for _, tc := range []struct {
		real bool
		d    time.Duration
		why  string
	}{{true, 3 * time.Minute, "shorter than"}, {false, time.Hour, "kwok"}} {
		c = checkScaling(rising, 2, ownerOf, tc.real, tc.d)
		if _, ok := c.invariant(); ok || !strings.Contains(c.scalingLine(nil), "not judged: ") || !strings.Contains(c.NotJudged, tc.why) {
			t.Errorf("real %v, %s: judged %v (%q), want not judged: %s", tc.real, tc.d, ok, c.NotJudged, tc.why)
		}
	}
}

package bench

import (
	"reflect"
	"testing"
	"time"
)

// TestGoalTracker checks what waitReached reads: an object counts once first seen in the
// goal's state since the goal was set (already in it: when set) and while it still is.
func TestGoalTracker(t *testing.T) {
	g := newGoalTracker[int]()
	at := func(s int) time.Time { return time.Unix(int64(s), 0) }
	g.observe("a", 1, at(0))
	if _, stuck := g.reached([]string{"a"}); !reflect.DeepEqual(stuck, []string{"a"}) {
		t.Errorf("no goal: stuck %q, want a", stuck)
	}
	g.observe("b", 2, at(1))
	g.setGoal(func(n int) bool { return n >= 2 }, at(2))
	g.observe("a", 2, at(3))
	g.observe("c", 5, at(4))
	g.observe("c", 0, at(5)) // left the goal's state
	if _, stuck := g.reached([]string{"a", "b", "c", "d"}); !reflect.DeepEqual(stuck, []string{"c", "d"}) {
		t.Errorf("stuck %q, want c (left it) and d (never seen)", stuck)
	}
	g.observe("a", 3, at(6)) // still in it: reached when first seen
	last, stuck := g.reached([]string{"a", "b"})
	if len(stuck) != 0 || !last.Equal(at(3)) {
		t.Errorf("reached at %s, stuck %q; want %s (a), none", last, stuck, at(3))
	}
}

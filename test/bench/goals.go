package bench

import "time"

// goalTracker records a watch's objects by name as last seen, and when each was first
// seen in the state of the goal last set: what the waits for a goal read. The watch's
// lock guards it.
type goalTracker[T any] struct {
	last      map[string]T
	goal      func(T) bool
	reachedAt map[string]time.Time
}

func newGoalTracker[T any]() goalTracker[T] {
	return goalTracker[T]{last: map[string]T{}}
}

// observe records obj, the object name as seen at now.
func (g *goalTracker[T]) observe(name string, obj T, now time.Time) {
	g.last[name] = obj
	if g.goal != nil && g.goal(obj) {
		if _, seen := g.reachedAt[name]; !seen {
			g.reachedAt[name] = now
		}
	}
}

// setGoal sets the goal: from now on, each object is recorded when first seen in its
// state (an object already in it is recorded now).
func (g *goalTracker[T]) setGoal(goal func(T) bool, now time.Time) {
	g.goal, g.reachedAt = goal, map[string]time.Time{}
	for name, obj := range g.last {
		if goal(obj) {
			g.reachedAt[name] = now
		}
	}
}

// reached returns when the last of names was first seen in the goal's state if each was
// and is in it now, else those that are not.
func (g *goalTracker[T]) reached(names []string) (last time.Time, stuck []string) {
	for _, name := range names {
		at, seen := g.reachedAt[name]
		if obj, ok := g.last[name]; !seen || !ok || !g.goal(obj) {
			stuck = append(stuck, name)
			continue
		}
		last = latest(last, at)
	}
	return last, stuck
}

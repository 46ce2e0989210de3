package controller

import (
	"fmt"
	"slices"
	"testing"

	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

func names(keys ...string) []cache.ObjectName {
	out := make([]cache.ObjectName, len(keys))
	for i, k := range keys {
		out[i] = cache.ObjectName{Namespace: "ns", Name: k}
	}
	return out
}

// drain takes every key from q in order, marking each done.
func drain(q workqueue.TypedInterface[cache.ObjectName]) []string {
	var out []string
	for q.Len() > 0 {
		key, _ := q.Get()
		out = append(out, key.Name)
		q.Done(key)
	}
	return out
}

// wantOrder drains q and fails the test unless it held the keys named want, in order.
func wantOrder(t *testing.T, q workqueue.TypedInterface[cache.ObjectName], want ...string) {
	t.Helper()
	if got := drain(q); !slices.Equal(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
}

// TestUrgentFirst drives UrgentFirst through client-go's work queue, as the Loop does.
func TestUrgentFirst(t *testing.T) {
	urgent := map[string]bool{}
	// newQueue returns a queue holding keys, added in order.
	newQueue := func(keys ...string) workqueue.TypedInterface[cache.ObjectName] {
		q := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[cache.ObjectName]{
			Queue: NewUrgentFirst(func(k cache.ObjectName) bool { return urgent[k.Name] }),
		})
		for _, k := range names(keys...) {
			q.Add(k)
		}
		return q
	}

	t.Run("urgent keys first, first in first out in each lane", func(t *testing.T) {
		clear(urgent)
		urgent["u1"], urgent["u2"] = true, true
		q := newQueue("a", "u1", "b", "u2", "c")
		wantOrder(t, q, "u1", "u2", "a", "b", "c")
	})

	t.Run("a waiting key that became urgent moves, once", func(t *testing.T) {
		clear(urgent)
		q := newQueue("a", "b", "c")
		urgent["c"] = true
		q.Add(names("c")[0]) // queued again: Touch
		q.Add(names("c")[0])
		if q.Len() != 3 {
			t.Errorf("Len %d after moving a key, want 3", q.Len())
		}
		wantOrder(t, q, "c", "a", "b")
	})

	t.Run("a key no longer urgent keeps its place", func(t *testing.T) {
		clear(urgent)
		urgent["a"] = true
		q := newQueue("b", "a")
		urgent["a"] = false
		q.Add(names("a")[0])
		wantOrder(t, q, "a", "b")
	})

	t.Run("the other lane gets one key after MaxUrgentRun urgent ones", func(t *testing.T) {
		clear(urgent)
		q := newQueue("new1", "new2")
		var want []string
		for i := range 2*MaxUrgentRun + 1 {
			k := fmt.Sprintf("u%02d", i)
			urgent[k] = true
			q.Add(names(k)[0])
		}
		for i := range MaxUrgentRun {
			want = append(want, fmt.Sprintf("u%02d", i))
		}
		want = append(want, "new1")
		for i := MaxUrgentRun; i < 2*MaxUrgentRun; i++ {
			want = append(want, fmt.Sprintf("u%02d", i))
		}
		want = append(want, "new2", fmt.Sprintf("u%02d", 2*MaxUrgentRun))
		wantOrder(t, q, want...)
	})

	t.Run("a key taken and queued again after a move keeps no stale place", func(t *testing.T) {
		clear(urgent)
		q := newQueue("a", "b", "c")
		urgent["b"] = true
		q.Add(names("b")[0]) // moved: a stale entry stays in the other lane
		key, _ := q.Get()
		if key.Name != "b" {
			t.Fatalf("first key %s, want b", key.Name)
		}
		q.Done(key)
		urgent["b"] = false
		q.Add(key) // queued again, behind c
		wantOrder(t, q, "a", "c", "b")
	})

	t.Run("a key queued while it is processed is pushed when done", func(t *testing.T) {
		clear(urgent)
		q := newQueue("a", "b")
		key, _ := q.Get() // a, processing
		urgent["a"] = true
		q.Add(key)
		q.Done(key) // pushed now, urgent
		q.Add(names("c")[0])
		wantOrder(t, q, "a", "b", "c")
	})
}

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

// TestUrgentFirst drives UrgentFirst through client-go's work queue, as the Loop does.
func TestUrgentFirst(t *testing.T) {
	urgent := map[string]bool{}
	newQueue := func() workqueue.TypedInterface[cache.ObjectName] {
		return workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[cache.ObjectName]{
			Queue: NewUrgentFirst(func(k cache.ObjectName) bool { return urgent[k.Name] }),
		})
	}

	t.Run("urgent keys first, first in first out in each lane", func(t *testing.T) {
		clear(urgent)
		urgent["u1"], urgent["u2"] = true, true
		q := newQueue()
		for _, k := range names("a", "u1", "b", "u2", "c") {
			q.Add(k)
		}
		if got, want := drain(q), []string{"u1", "u2", "a", "b", "c"}; !slices.Equal(got, want) {
			t.Errorf("order %v, want %v", got, want)
		}
	})

	t.Run("a waiting key that became urgent moves, once", func(t *testing.T) {
		clear(urgent)
		q := newQueue()
		for _, k := range names("a", "b", "c") {
			q.Add(k)
		}
		urgent["c"] = true
		q.Add(names("c")[0]) // queued again: Touch
		q.Add(names("c")[0])
		if q.Len() != 3 {
			t.Errorf("Len %d after moving a key, want 3", q.Len())
		}
		if got, want := drain(q), []string{"c", "a", "b"}; !slices.Equal(got, want) {
			t.Errorf("order %v, want %v", got, want)
		}
	})

	t.Run("a key no longer urgent keeps its place", func(t *testing.T) {
		clear(urgent)
		urgent["a"] = true
		q := newQueue()
		for _, k := range names("b", "a") {
			q.Add(k)
		}
		urgent["a"] = false
		q.Add(names("a")[0])
		if got, want := drain(q), []string{"a", "b"}; !slices.Equal(got, want) {
			t.Errorf("order %v, want %v", got, want)
		}
	})

	t.Run("the other lane gets one key after MaxUrgentRun urgent ones", func(t *testing.T) {
		clear(urgent)
		q := newQueue()
		q.Add(names("new1")[0])
		q.Add(names("new2")[0])
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
		if got := drain(q); !slices.Equal(got, want) {
			t.Errorf("order %v, want %v", got, want)
		}
	})

	t.Run("a key taken and queued again after a move keeps no stale place", func(t *testing.T) {
		clear(urgent)
		q := newQueue()
		for _, k := range names("a", "b", "c") {
			q.Add(k)
		}
		urgent["b"] = true
		q.Add(names("b")[0]) // moved: a stale entry stays in the other lane
		key, _ := q.Get()
		if key.Name != "b" {
			t.Fatalf("first key %s, want b", key.Name)
		}
		q.Done(key)
		urgent["b"] = false
		q.Add(key) // queued again, behind c
		if got, want := drain(q), []string{"a", "c", "b"}; !slices.Equal(got, want) {
			t.Errorf("order %v, want %v", got, want)
		}
	})

	t.Run("a key queued while it is processed is pushed when done", func(t *testing.T) {
		clear(urgent)
		q := newQueue()
		q.Add(names("a")[0])
		q.Add(names("b")[0])
		key, _ := q.Get() // a, processing
		urgent["a"] = true
		q.Add(key)
		q.Done(key) // pushed now, urgent
		q.Add(names("c")[0])
		if got, want := drain(q), []string{"a", "b", "c"}; !slices.Equal(got, want) {
			t.Errorf("order %v, want %v", got, want)
		}
	})
}

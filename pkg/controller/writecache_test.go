package controller

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestWriteCache(t *testing.T) {
	cm := func(rv string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "x", ResourceVersion: rv}}
	}
	const key = "ns/x"
	tests := []struct {
		name string
		// steps act on the informer's store and the cache.
		steps  func(store cache.Indexer, c *WriteCache, clk *clocktesting.FakePassiveClock)
		wantRV string // "" : not found
	}{
		{
			name:   "a create the informer has not seen is found",
			steps:  func(_ cache.Indexer, c *WriteCache, _ *clocktesting.FakePassiveClock) { c.Mutation(cm("5")) },
			wantRV: "5",
		},
		{
			name: "the own write wins over an older informer object",
			steps: func(s cache.Indexer, c *WriteCache, _ *clocktesting.FakePassiveClock) {
				_ = s.Add(cm("4"))
				c.Mutation(cm("5"))
			},
			wantRV: "5",
		},
		{
			name: "a newer informer object wins and drops the own write",
			steps: func(s cache.Indexer, c *WriteCache, _ *clocktesting.FakePassiveClock) {
				c.Mutation(cm("5"))
				_ = s.Add(cm("7"))
				c.Observed(cm("7"))
			},
			wantRV: "7",
		},
		{
			name: "a deletion delivered by the informer forgets the own write",
			steps: func(s cache.Indexer, c *WriteCache, _ *clocktesting.FakePassiveClock) {
				c.Mutation(cm("5"))
				c.Deleted(cm("6"))
			},
		},
		{
			name: "a write recorded after its deletion was delivered is ignored",
			steps: func(s cache.Indexer, c *WriteCache, _ *clocktesting.FakePassiveClock) {
				c.Deleted(cache.DeletedFinalStateUnknown{Key: key, Obj: cm("6")})
				c.Mutation(cm("5"))
			},
		},
		{
			name: "a create after a deletion is found",
			steps: func(s cache.Indexer, c *WriteCache, _ *clocktesting.FakePassiveClock) {
				c.Deleted(cm("6"))
				c.Mutation(cm("8"))
			},
			wantRV: "8",
		},
		{
			name: "an own write expires after the TTL",
			steps: func(s cache.Indexer, c *WriteCache, clk *clocktesting.FakePassiveClock) {
				c.Mutation(cm("5"))
				clk.SetTime(clk.Now().Add(2 * time.Minute))
			},
		},
		{
			name: "more than 100 own writes are all kept",
			steps: func(s cache.Indexer, c *WriteCache, _ *clocktesting.FakePassiveClock) {
				c.Mutation(cm("5"))
				for i := range 1000 {
					o := cm("9")
					o.Name = "other-" + string(rune('a'+i%26)) + string(rune('a'+i/26))
					c.Mutation(o)
				}
			},
			wantRV: "5",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
			c := NewWriteCache(store, time.Minute, clk)
			tc.steps(store, c, clk)
			obj, exists, err := c.GetByKey(key)
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if exists {
				got = obj.(*corev1.ConfigMap).ResourceVersion
			}
			if got != tc.wantRV {
				t.Errorf("GetByKey: resourceVersion %q, want %q", got, tc.wantRV)
			}
		})
	}
}

// TestWriteCacheEcho: Observed says whether the informer delivered the own write itself
// (its echo), not an older or newer version of the object, nor one never written.
func TestWriteCacheEcho(t *testing.T) {
	cm := func(rv string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "x", ResourceVersion: rv}}
	}
	for _, tc := range []struct {
		name     string
		written  string // "": no own write
		observed []string
		want     []bool
	}{
		{"the own write's echo", "5", []string{"5"}, []bool{true}},
		{"an older version, then the echo", "5", []string{"4", "5"}, []bool{false, true}},
		{"a newer version: someone wrote after us", "5", []string{"7"}, []bool{false}},
		{"the echo comes once", "5", []string{"5", "5"}, []bool{true, false}},
		{"no own write", "", []string{"5"}, []bool{false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
			c := NewWriteCache(store, time.Minute, clocktesting.NewFakePassiveClock(time.Now()))
			if tc.written != "" {
				c.Mutation(cm(tc.written))
			}
			for i, rv := range tc.observed {
				if got := c.Observed(cm(rv)); got != tc.want[i] {
					t.Errorf("Observed(rv %s) = %t, want %t", rv, got, tc.want[i])
				}
			}
		})
	}
}

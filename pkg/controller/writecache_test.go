package controller

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
)

// writeCacheCase is a case of the WriteCache's tests: steps act on the informer's store
// and the cache, then the reads of the ConfigMap ns/x find wantRV ("": not found).
type writeCacheCase struct {
	name   string
	steps  func(store cache.Indexer, c *WriteCache, clk *clocktesting.FakePassiveClock)
	wantRV string
}

// testCM returns the ConfigMap ns/x, labelled app=a, of uid at resourceVersion rv.
func testCM(uid, rv string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "x", UID: types.UID(uid),
		ResourceVersion: rv, Labels: map[string]string{"app": "a"}}}
}

// runWriteCacheCases runs each case on a store indexed by the label app and checks
// GetByKey and ByIndex. ByIndex lists the informer's objects only (a create not yet
// delivered is not indexed), each replaced by a newer own write, and hides what GetByKey
// hides of them.
func runWriteCacheCases(t *testing.T, tests []writeCacheCase) {
	const key = "ns/x"
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{"app": func(obj interface{}) ([]string, error) {
				return []string{obj.(metav1.Object).GetLabels()["app"]}, nil
			}})
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
			objs, err := c.ByIndex("app", "a")
			if err != nil {
				t.Fatal(err)
			}
			var listed []string
			for _, o := range objs {
				listed = append(listed, o.(*corev1.ConfigMap).ResourceVersion)
			}
			var want []string
			if inStore, _, _ := store.GetByKey(key); inStore != nil && exists && inStore.(*corev1.ConfigMap).UID == obj.(*corev1.ConfigMap).UID {
				want = []string{got}
			}
			if !slices.Equal(listed, want) {
				t.Errorf("ByIndex: resourceVersions %q, want %q", listed, want)
			}
		})
	}
}

func TestWriteCache(t *testing.T) {
	cm := func(rv string) *corev1.ConfigMap { return testCM("u1", rv) }
	const key = "ns/x"
	runWriteCacheCases(t, []writeCacheCase{
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
	})
}

// TestWriteCacheEcho: Observed says whether the informer delivered the own write itself
// (its echo), not an older or newer version of the object, nor one never written.
func TestWriteCacheEcho(t *testing.T) {
	cm := func(rv string) *corev1.ConfigMap { return testCM("u1", rv) }
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

// TestWriteCacheDeleting: an object the controller deleted is hidden from reads (by key
// and by index) until the informer delivers its deletion or shows it outliving the
// delete, or the TTL ends; an object created since under the same name is not.
func TestWriteCacheDeleting(t *testing.T) {
	cm := testCM
	runWriteCacheCases(t, []writeCacheCase{
		{
			name: "deleted, the informer not there yet: hidden",
			steps: func(s cache.Indexer, c *WriteCache, _ *clocktesting.FakePassiveClock) {
				_ = s.Add(cm("u1", "5"))
				c.Deleting(cm("u1", "5"))
			},
		},
		{
			name: "deleted after an own write of it: the own write is hidden too",
			steps: func(s cache.Indexer, c *WriteCache, _ *clocktesting.FakePassiveClock) {
				_ = s.Add(cm("u1", "5"))
				c.Mutation(cm("u1", "6"))
				c.Deleting(cm("u1", "6"))
			},
		},
		{
			name: "an update delivered before the delete is still hidden",
			steps: func(s cache.Indexer, c *WriteCache, _ *clocktesting.FakePassiveClock) {
				_ = s.Add(cm("u1", "5"))
				c.Deleting(cm("u1", "5"))
				_ = s.Update(cm("u1", "6"))
				c.Observed(cm("u1", "6"))
			},
		},
		{
			name: "an object that outlives its delete (a finalizer) is shown as the informer has it",
			steps: func(s cache.Indexer, c *WriteCache, _ *clocktesting.FakePassiveClock) {
				_ = s.Add(cm("u1", "5"))
				c.Deleting(cm("u1", "5"))
				terminating := cm("u1", "7")
				terminating.DeletionTimestamp = &metav1.Time{Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
				_ = s.Update(terminating)
				c.Observed(terminating)
			},
			wantRV: "7",
		},
		{
			name: "an object created since under the same name is found",
			steps: func(s cache.Indexer, c *WriteCache, _ *clocktesting.FakePassiveClock) {
				_ = s.Add(cm("u1", "5"))
				c.Deleting(cm("u1", "5"))
				c.Mutation(cm("u2", "8"))
			},
			wantRV: "8",
		},
		{
			name: "the informer's object of another UID is found",
			steps: func(s cache.Indexer, c *WriteCache, _ *clocktesting.FakePassiveClock) {
				c.Deleting(cm("u1", "5"))
				_ = s.Add(cm("u2", "9"))
			},
			wantRV: "9",
		},
		{
			name: "hidden no more after the TTL: the informer is the truth again",
			steps: func(s cache.Indexer, c *WriteCache, clk *clocktesting.FakePassiveClock) {
				_ = s.Add(cm("u1", "5"))
				c.Deleting(cm("u1", "5"))
				clk.SetTime(clk.Now().Add(2 * time.Minute))
			},
			wantRV: "5",
		},
		{
			name: "the deletion delivered, then a create of the same object's name",
			steps: func(s cache.Indexer, c *WriteCache, _ *clocktesting.FakePassiveClock) {
				_ = s.Add(cm("u1", "5"))
				c.Deleting(cm("u1", "5"))
				_ = s.Delete(cm("u1", "5"))
				c.Deleted(cm("u1", "6"))
				_ = s.Add(cm("u2", "10"))
			},
			wantRV: "10",
		},
	})
}

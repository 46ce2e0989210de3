package controller

import (
	"strconv"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// WriteCache answers reads with the newest of an informer's cache and the controller's
// own writes that the informer has not delivered yet: the per-object expectations of a
// controller. Unlike client-go's MutationCache (an LRU of 100 entries that ignores
// objects the informer has not seen), it holds one entry per written object, however
// many, and answers for objects the controller just created: a sync that runs before
// the informer sees a create, an update or a status write does not write again.
//
// It holds the controller's own deletes too (Deleting): reads stop returning an object
// the controller deleted, so that a sync that runs before the informer delivers the
// deletion neither deletes it again nor acts on it.
//
// An entry is dropped as soon as the informer delivers that resourceVersion or a newer
// one (Observed), when the informer delivers the object's deletion (Deleted, which must
// be called before the event handler queues anything, so that the sync it causes does
// not see the entry), or after the TTL: an informer that has not caught up in that time
// is not behind by a write but broken, and its cache is the truth again.
//
// Resource versions are compared as integers, as the API server's are (etcd revisions).
type WriteCache struct {
	store cache.Indexer
	ttl   time.Duration
	clock clock.PassiveClock

	lock   sync.Mutex
	writes map[string]ownWrite
	// gone holds the resourceVersion at which the informer saw an object deleted, so
	// that a write recorded after the delete event (a race) is known to be stale.
	gone map[string]goneEntry
	// deleting holds the UID of each object the controller deleted whose deletion the
	// informer has not delivered yet: reads hide that object.
	deleting  map[string]deletingEntry
	lastSweep time.Time
}

type ownWrite struct {
	obj runtime.Object
	rv  uint64
	at  time.Time
}

type goneEntry struct {
	rv uint64
	at time.Time
}

type deletingEntry struct {
	uid types.UID
	at  time.Time
}

// WriteCacheTTL is how long a WriteCache prefers a controller's own writes over an
// informer cache that has not caught up with them yet.
const WriteCacheTTL = time.Minute

// NewWriteCache returns a WriteCache over an informer's indexer; own writes are kept at
// most ttl (WriteCacheTTL if 0).
func NewWriteCache(store cache.Indexer, ttl time.Duration, clk clock.PassiveClock) *WriteCache {
	if ttl <= 0 {
		ttl = WriteCacheTTL
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &WriteCache{store: store, ttl: ttl, clock: clk,
		writes: map[string]ownWrite{}, gone: map[string]goneEntry{}, deleting: map[string]deletingEntry{},
		lastSweep: clk.Now()}
}

// resourceVersion parses obj's resourceVersion; ok is false if it is not an integer.
func resourceVersion(obj interface{}) (uint64, bool) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return 0, false
	}
	rv, err := strconv.ParseUint(m.GetResourceVersion(), 10, 64)
	return rv, err == nil
}

// keyOf returns the namespace/name key of obj.
func keyOf(obj interface{}) (string, bool) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	return key, err == nil
}

// Mutation records obj, which the controller has just written and the API server
// returned, so that reads see it until the informer does.
func (c *WriteCache) Mutation(obj runtime.Object) {
	key, ok := keyOf(obj)
	if !ok {
		return
	}
	// A resourceVersion that is not an integer (fake clients) counts as 0: the informer's
	// object, once there, is then always preferred; the write still covers a create.
	rv, _ := resourceVersion(obj)
	now := c.clock.Now()
	c.lock.Lock()
	defer c.lock.Unlock()
	c.sweepLocked(now)
	if g, found := c.gone[key]; found && rv <= g.rv {
		return // the informer already delivered the object's deletion
	}
	if c.hiddenLocked(key, obj) {
		return // the controller deleted this object since
	}
	if w, found := c.writes[key]; found && w.rv >= rv {
		return
	}
	if cur, exists, err := c.store.GetByKey(key); err == nil && exists {
		if crv, ok := resourceVersion(cur); !ok || crv >= rv {
			return // the informer is already there
		}
	}
	c.writes[key] = ownWrite{obj: obj, rv: rv, at: now}
}

// Observed tells the cache that the informer delivered obj: an own write it covers is
// no longer needed. It reports whether obj is that own write itself (the same
// resourceVersion): the echo of the controller's write, which the sync that made it has
// already seen in the API server's answer.
func (c *WriteCache) Observed(obj interface{}) (echo bool) {
	key, ok := keyOf(obj)
	if !ok {
		return false
	}
	rv, ok := resourceVersion(obj)
	if !ok {
		return false
	}
	c.lock.Lock()
	defer c.lock.Unlock()
	if m, ok := obj.(metav1.Object); ok && m.GetDeletionTimestamp() != nil && c.hiddenLocked(key, obj) {
		// The object outlives its delete (finalizers): the informer shows it as it is.
		delete(c.deleting, key)
	}
	if w, found := c.writes[key]; found && w.rv <= rv {
		delete(c.writes, key)
		return w.rv == rv
	}
	return false
}

// Deleted tells the cache that the informer delivered the deletion of obj (an object or
// a tombstone): the own writes of it are forgotten. Call it before queuing the sync the
// deletion causes.
func (c *WriteCache) Deleted(obj interface{}) {
	key, ok := keyOf(obj)
	if !ok {
		return
	}
	if t, isTombstone := obj.(cache.DeletedFinalStateUnknown); isTombstone {
		obj = t.Obj
	}
	rv, _ := resourceVersion(obj)
	now := c.clock.Now()
	c.lock.Lock()
	defer c.lock.Unlock()
	delete(c.writes, key)
	delete(c.deleting, key)
	c.gone[key] = goneEntry{rv: rv, at: now}
}

// Deleting tells the cache that the controller deleted obj (the API server accepted the
// delete, or answered that obj was already gone): reads no longer return it, nor an own
// write of it, until the informer delivers the deletion (Deleted) or an update showing
// that obj outlives its delete (finalizers), or the TTL ends. An object created since
// under the same name (another UID) is found as usual. An object without a UID (a fake
// client's) is not recorded: nothing would tell it from its successor.
func (c *WriteCache) Deleting(obj metav1.Object) {
	key, ok := keyOf(obj)
	if !ok || obj.GetUID() == "" {
		return
	}
	now := c.clock.Now()
	c.lock.Lock()
	defer c.lock.Unlock()
	c.sweepLocked(now)
	if w, found := c.writes[key]; found && sameUID(w.obj, obj.GetUID()) {
		delete(c.writes, key)
	}
	c.deleting[key] = deletingEntry{uid: obj.GetUID(), at: now}
}

// sameUID reports whether obj has the UID uid.
func sameUID(obj interface{}, uid types.UID) bool {
	m, ok := obj.(metav1.Object)
	return ok && m.GetUID() == uid
}

// hiddenLocked reports whether obj, of key, is an object the controller deleted whose
// deletion the informer has not delivered; the caller holds the lock.
func (c *WriteCache) hiddenLocked(key string, obj interface{}) bool {
	d, found := c.deleting[key]
	if !found {
		return false
	}
	if c.clock.Since(d.at) > c.ttl {
		delete(c.deleting, key)
		return false
	}
	return sameUID(obj, d.uid)
}

// GetByKey returns the newest of the informer's object and the own write of key.
func (c *WriteCache) GetByKey(key string) (interface{}, bool, error) {
	obj, exists, err := c.store.GetByKey(key)
	if err != nil {
		return nil, false, err
	}
	c.lock.Lock()
	defer c.lock.Unlock()
	if exists && c.hiddenLocked(key, obj) {
		obj, exists = nil, false
	}
	w, found := c.live(key)
	if !found {
		return obj, exists, nil
	}
	if exists {
		if rv, ok := resourceVersion(obj); !ok || rv >= w.rv {
			delete(c.writes, key)
			return obj, true, nil
		}
	}
	return w.obj, true, nil
}

// ByIndex returns the informer's objects in the index, each replaced by the own write
// of it when that is newer. Objects only the own writes know (just created) are not
// indexed; the informer's add event queues their owner again.
func (c *WriteCache) ByIndex(indexName, indexedValue string) ([]interface{}, error) {
	objs, err := c.store.ByIndex(indexName, indexedValue)
	if err != nil {
		return nil, err
	}
	c.lock.Lock()
	defer c.lock.Unlock()
	out := make([]interface{}, 0, len(objs))
	for _, obj := range objs {
		if key, ok := keyOf(obj); ok {
			if c.hiddenLocked(key, obj) {
				continue
			}
			if w, found := c.live(key); found {
				if rv, ok := resourceVersion(obj); ok && rv < w.rv {
					obj = w.obj
				}
			}
		}
		out = append(out, obj)
	}
	return out, nil
}

// Len returns the number of own writes held (for tests and metrics).
func (c *WriteCache) Len() int {
	c.lock.Lock()
	defer c.lock.Unlock()
	return len(c.writes)
}

// live returns the unexpired own write of key; the caller holds the lock.
func (c *WriteCache) live(key string) (ownWrite, bool) {
	w, found := c.writes[key]
	if !found {
		return w, false
	}
	if c.clock.Since(w.at) > c.ttl {
		delete(c.writes, key)
		return w, false
	}
	return w, true
}

// sweepLocked drops expired entries, at most once per TTL; the caller holds the lock.
func (c *WriteCache) sweepLocked(now time.Time) {
	if now.Sub(c.lastSweep) < c.ttl {
		return
	}
	c.lastSweep = now
	for key, w := range c.writes {
		if now.Sub(w.at) > c.ttl {
			delete(c.writes, key)
		}
	}
	for key, g := range c.gone {
		if now.Sub(g.at) > c.ttl {
			delete(c.gone, key)
		}
	}
	for key, d := range c.deleting {
		if now.Sub(d.at) > c.ttl {
			delete(c.deleting, key)
		}
	}
}

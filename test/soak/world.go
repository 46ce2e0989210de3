package soak

import (
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	appctrl "github.com/app-controller/app-controller/pkg/controller/app"
)

// world is what the driver made and what it saw of it: every App it created (live or
// deleted), what it expects of each generation of each, the timeline of each App's
// state as the App informer delivered it, and the operations in order. One lock guards
// it all.
type world struct {
	mu   sync.Mutex
	apps map[string]*appRecord // by namespace/name
	// configMaps are the ConfigMaps Apps may reference, by namespace/name, with the
	// version (data) the driver last wrote.
	configMaps map[string]int
	ops        []opRecord
	// historyLimit is every App's revisionHistoryLimit.
	historyLimit int
}

// appRecord is one App of the run.
type appRecord struct {
	namespace, name string
	uid             types.UID
	shard           string
	created         time.Time
	deleted         time.Time // zero while the App lives
	// conflict: an App whose Deployment name is held by a foreign Deployment, which
	// must say so (NameConflict) and never write it.
	conflict bool
	// kind is the App's kind: "" (no strategy, no autoscaling), kindGate, kindTimed or
	// kindAutoscaled.
	kind string
	// gens is what the driver wrote, in order: each generation, when, and what it
	// expects the App to say at it.
	gens []genRecord
	// history is the App's distinct specs (revisionHistoryLimit left out), the one made
	// current most recently last: the revisions the controller must hold are its last
	// historyLimit.
	history []appv1.AppSpec
	// states is the App's timeline: each change of what it says, as the informer
	// delivered it.
	states []stateRecord
	// latest is the App as last delivered.
	latest *appv1.App
	// pending: an operation is under way; the App is not picked for another.
	pending bool
}

// genRecord is a generation the driver wrote.
type genRecord struct {
	generation int64
	at         time.Time
	// expect is the Ready reason the App must report at this generation: "" for
	// Ready=True, else the reason of Ready=False (a broken pod, a name conflict).
	expect string
}

// stateRecord is what an App said from a moment on.
type stateRecord struct {
	at         time.Time
	generation int64
	// converged: the App reports at its generation what the driver expects of it.
	converged bool
	// ready and reason are its Ready condition's status and reason.
	ready, reason string
}

// opRecord is one operation of the driver on one App.
type opRecord struct {
	kind string
	app  string // namespace/name
	at   time.Time
	// generation is the App's generation after the operation (unchanged by the
	// operations that do not change the spec: shard moves, ConfigMap changes, deletes).
	generation int64
	// newGeneration: the operation changed the App's spec; newRevision: to one it never
	// had (a revision is made); historyFull: it already had historyLimit revisions (the
	// oldest goes).
	newGeneration, newRevision, historyFull bool
	// prev and spec are the App's spec before and after an operation that changed it.
	prev, spec *appv1.AppSpec
}

// newWorld returns an empty record of Apps whose revisionHistoryLimit is historyLimit.
func newWorld() *world {
	return &world{apps: map[string]*appRecord{}, configMaps: map[string]int{}, historyLimit: historyLimit}
}

// key is the namespace/name of an App.
func key(namespace, name string) string { return namespace + "/" + name }

func (r *appRecord) key() string { return key(r.namespace, r.name) }

// expectation is what the App must report at generation gen; ok is false for a
// generation the driver has not recorded (yet).
func (r *appRecord) expectation(gen int64) (string, bool) {
	for i := len(r.gens) - 1; i >= 0; i-- {
		if r.gens[i].generation == gen {
			return r.gens[i].expect, true
		}
	}
	return "", false
}

// lastGen is the generation the driver wrote last.
func (r *appRecord) lastGen() genRecord { return r.gens[len(r.gens)-1] }

// lastGeneration is the generation the driver wrote last, 0 before any.
func (r *appRecord) lastGeneration() int64 {
	if len(r.gens) == 0 {
		return 0
	}
	return r.lastGen().generation
}

// lastGeneration is the generation the driver wrote last to r, 0 before any.
func (w *world) lastGeneration(r *appRecord) int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return r.lastGeneration()
}

// expectReadyOrInactive is what an autoscaled App must report on kwok: no metric
// exists there, so its HorizontalPodAutoscaler cannot compute a count (ScalingActive
// False) and, after a grace of a minute, the App says Ready=False AutoscalerInactive;
// before that Ready=True.
const expectReadyOrInactive = "Ready|" + appv1.ReasonAutoscalerInactive

// reports tells whether a reports, at its generation, what expect asks: Ready=True
// (expect ""), or Ready=False with reason expect; both the status and the condition
// observed at the App's generation.
func reports(a *appv1.App, expect string) bool {
	c := meta.FindStatusCondition(a.Status.Conditions, appv1.ConditionReady)
	if c == nil || a.Status.ObservedGeneration != a.Generation || c.ObservedGeneration != a.Generation {
		return false
	}
	if expect == "" {
		return c.Status == metav1.ConditionTrue
	}
	if expect == expectReadyOrInactive {
		return c.Status == metav1.ConditionTrue || c.Status == metav1.ConditionFalse && c.Reason == appv1.ReasonAutoscalerInactive
	}
	return c.Status == metav1.ConditionFalse && c.Reason == expect
}

// observe records what the informer delivered of an App of the run.
func (w *world) observe(a *appv1.App, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := w.apps[key(a.Namespace, a.Name)]
	if r == nil || r.uid != "" && r.uid != a.UID {
		return
	}
	r.latest = a
	w.updateState(r, at)
}

// updateState appends r's state from its latest object if it changed (the driver's
// record of a generation may arrive after the object did).
func (w *world) updateState(r *appRecord, at time.Time) {
	a := r.latest
	if a == nil {
		return
	}
	s := stateRecord{at: at, generation: a.Generation}
	if expect, ok := r.expectation(a.Generation); ok {
		s.converged = reports(a, expect)
	}
	if c := meta.FindStatusCondition(a.Status.Conditions, appv1.ConditionReady); c != nil {
		s.ready, s.reason = string(c.Status), c.Reason
	}
	if n := len(r.states); n > 0 {
		last := r.states[n-1]
		if last.generation == s.generation && last.converged == s.converged && last.ready == s.ready && last.reason == s.reason {
			return
		}
	}
	r.states = append(r.states, s)
}

// wrote records a generation the driver wrote to r and what it expects of it, the spec
// it now has, and the operation.
func (w *world) wrote(r *appRecord, a *appv1.App, kind, expect string, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if r.uid == "" {
		r.uid = a.UID
	}
	op := opRecord{kind: kind, app: r.key(), at: at, generation: a.Generation}
	if n := len(r.gens); n == 0 || r.gens[n-1].generation != a.Generation {
		r.gens = append(r.gens, genRecord{generation: a.Generation, at: at, expect: expect})
		op.newGeneration = true
		if n := len(r.history); n > 0 {
			op.prev = r.history[n-1].DeepCopy()
		}
		op.newRevision, op.historyFull = r.makeCurrent(a.Spec, w.historyLimit)
		op.spec = r.history[len(r.history)-1].DeepCopy()
	}
	w.ops = append(w.ops, op)
	w.updateState(r, at)
}

// expectNow changes what r must report at the generation the driver wrote last: a
// rollout request changes it without a new generation (kubectl app abort: the App says
// RolloutAborted; kubectl app promote of an aborted rollout: Ready again).
func (w *world) expectNow(r *appRecord, expect string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(r.gens) == 0 {
		return
	}
	r.gens[len(r.gens)-1].expect = expect
	w.updateState(r, time.Now())
}

// record records an operation that did not change r's spec.
func (w *world) record(r *appRecord, kind string, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ops = append(w.ops, opRecord{kind: kind, app: r.key(), at: at, generation: r.lastGeneration()})
}

// makeCurrent records spec as r's newest revision. A spec among the last limit ones
// (those with a revision) moves to the end: a rollback renumbers its revision. Any other
// is appended (once in the history: an older copy, whose revision is gone, is dropped):
// a new revision. It tells whether the spec makes a new revision and whether the App
// already had limit revisions (the oldest then goes).
func (r *appRecord) makeCurrent(spec appv1.AppSpec, limit int) (isNew, full bool) {
	spec = *spec.DeepCopy()
	spec.RevisionHistoryLimit = nil
	kept := max(0, len(r.history)-limit)
	full = len(r.history)-kept >= limit
	for i, h := range r.history {
		if equality.Semantic.DeepEqual(h, spec) {
			r.history = append(append(r.history[:i:i], r.history[i+1:]...), spec)
			return i < kept, full
		}
	}
	r.history = append(r.history, spec)
	return true, full
}

// expectedRevisions are the specs whose revisions r must hold: its last limit distinct
// specs, and the versions its rollout (rollout, nil: none) runs, its stable and its
// canary, which the controller keeps beyond the limit while the rollout needs them (an
// App left aborted from a stable version older than the spec before the current one
// holds limit+1).
func (r *appRecord) expectedRevisions(limit int, rollout *appv1.RolloutStatus) []appv1.AppSpec {
	named := map[string]bool{}
	if rollout != nil && rollout.Stable != nil {
		named[rollout.Stable.Revision] = true
	}
	if rollout != nil && rollout.Canary != nil {
		named[rollout.Canary.Revision] = true
	}
	var out []appv1.AppSpec
	for i := range r.history {
		keep := i >= len(r.history)-limit
		if !keep && len(named) > 0 {
			_, hash, err := appctrl.RevisionData(&r.history[i])
			keep = err == nil && named[r.name+"-"+hash]
		}
		if keep {
			out = append(out, r.history[i])
		}
	}
	return out
}

// abortedWithin tells whether r said Ready=False RolloutAborted at some time in
// [from, to] (the state in force at from included).
func (r *appRecord) abortedWithin(from, to time.Time) bool {
	for _, s := range r.statesIn(from, to) {
		if s.reason == appv1.ReasonRolloutAborted {
			return true
		}
	}
	return false
}

// statesIn returns the states r was in at some time in [from, until]: the one in force
// at from, then every later one up to until.
func (r *appRecord) statesIn(from, until time.Time) []stateRecord {
	start := sort.Search(len(r.states), func(i int) bool { return r.states[i].at.After(from) })
	if start > 0 {
		start--
	}
	end := sort.Search(len(r.states), func(i int) bool { return r.states[i].at.After(until) })
	return r.states[start:max(start, end)]
}

// convergedNow tells whether the App reports, at the generation the driver wrote
// last, what it expects.
func (r *appRecord) convergedNow() bool {
	if r.latest == nil || len(r.gens) == 0 {
		return false
	}
	expect, ok := r.expectation(r.latest.Generation)
	return ok && r.latest.Generation == r.lastGen().generation && reports(r.latest, expect)
}

// convergedAt returns the first time at or after from when the App reported what the
// driver expects at a generation of at least gen, and whether it did by until.
func (r *appRecord) convergedAt(gen int64, from, until time.Time) (time.Time, bool) {
	for _, s := range r.statesIn(from, until) {
		if s.converged && s.generation >= gen {
			if s.at.Before(from) {
				return from, true
			}
			return s.at, true
		}
	}
	return time.Time{}, false
}

// live returns the Apps alive now, by key order.
func (w *world) live() []*appRecord {
	var out []*appRecord
	for _, r := range w.apps {
		if r.deleted.IsZero() {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key() < out[j].key() })
	return out
}

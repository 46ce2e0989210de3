package app

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// ContestPolicy says how the controller answers a competing writer: another client that
// keeps changing a field of a child that the App owns (an autoscaler scaling the
// Deployment of an App that sets replicas). Each change is repaired with one write, but
// once a child has been repaired Threshold times in a row, each repair less than Window
// after the previous one, the child is contested: the App gets the Contested condition
// and a Warning Event naming the other field manager, and each further repair waits,
// from InitialBackoff doubling up to MaxBackoff after the previous one. The condition
// clears once the child needed no repair for Window.
type ContestPolicy struct {
	// Threshold defaults to DefaultContestThreshold.
	Threshold int
	// Window defaults to DefaultContestWindow.
	Window time.Duration
	// InitialBackoff defaults to DefaultContestInitialBackoff.
	InitialBackoff time.Duration
	// MaxBackoff defaults to DefaultContestMaxBackoff.
	MaxBackoff time.Duration
}

// Defaults of ContestPolicy.
const (
	DefaultContestThreshold      = 3
	DefaultContestWindow         = 2 * time.Minute
	DefaultContestInitialBackoff = 5 * time.Second
	DefaultContestMaxBackoff     = 5 * time.Minute
)

// withDefaults returns p with its zero fields set to the defaults.
func (p ContestPolicy) withDefaults() ContestPolicy {
	if p.Threshold <= 0 {
		p.Threshold = DefaultContestThreshold
	}
	if p.Window <= 0 {
		p.Window = DefaultContestWindow
	}
	if p.InitialBackoff <= 0 {
		p.InitialBackoff = DefaultContestInitialBackoff
	}
	if p.MaxBackoff < p.InitialBackoff {
		p.MaxBackoff = max(DefaultContestMaxBackoff, p.InitialBackoff)
	}
	return p
}

// contestKey names one child of one App.
type contestKey struct {
	app  types.UID
	kind string
}

// contestState is the repair streak of one child.
type contestState struct {
	name string
	// repairs is the number of repairs in the streak.
	repairs int
	// lastRepair is the time of the last repair; lastDrift the last time a sync found
	// the child drifted (repaired or not).
	lastRepair, lastDrift time.Time
	// manager is the other field manager seen on the child at the last contested repair.
	manager string
	// reported: the Warning Event for this streak and manager was emitted.
	reported bool
}

// contestTracker remembers the repairs of each child, in memory: a restarted controller
// starts every streak afresh, which only delays the backoff by Threshold repairs.
type contestTracker struct {
	policy ContestPolicy
	clock  clock.PassiveClock

	mu sync.Mutex
	// states holds the streaks of each App, by kind of child.
	states map[types.UID]map[string]*contestState
}

func newContestTracker(policy ContestPolicy, clk clock.PassiveClock) *contestTracker {
	return &contestTracker{policy: policy.withDefaults(), clock: clk, states: map[types.UID]map[string]*contestState{}}
}

// backoff is the wait between the last repair of s and the next one.
func (t *contestTracker) backoff(s *contestState) time.Duration {
	if s.repairs < t.policy.Threshold {
		return 0
	}
	d := t.policy.InitialBackoff
	for i := t.policy.Threshold; i < s.repairs && d < t.policy.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, t.policy.MaxBackoff)
}

// live returns the streak of key, or nil when there is none or it ended: no drift for
// a whole Window.
func (t *contestTracker) live(key contestKey, now time.Time) *contestState {
	s := t.states[key.app][key.kind]
	if s != nil && now.Sub(s.lastDrift) > t.policy.Window {
		delete(t.states[key.app], key.kind)
		if len(t.states[key.app]) == 0 {
			delete(t.states, key.app)
		}
		return nil
	}
	return s
}

// streak returns the live streak of key, a new one if there is none; the caller holds
// the lock.
func (t *contestTracker) streak(key contestKey, now time.Time) *contestState {
	s := t.live(key, now)
	if s == nil {
		s = &contestState{}
		if t.states[key.app] == nil {
			t.states[key.app] = map[string]*contestState{}
		}
		t.states[key.app][key.kind] = s
	}
	return s
}

// beforeRepair is called when the child kind of app has drifted and is about to be
// repaired. It returns how long the repair must wait (0: repair now), and whether this
// repair makes or keeps the child contested, so that the caller looks up the other
// field manager.
func (t *contestTracker) beforeRepair(app *appv1.App, kind, name string) (wait time.Duration, contested bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.clock.Now()
	s := t.streak(contestKey{app.UID, kind}, now)
	if s.name == "" {
		s.name = name // a new streak
	}
	s.lastDrift = now
	if due := s.lastRepair.Add(t.backoff(s)); s.repairs > 0 && now.Before(due) {
		return due.Sub(now), true
	}
	return 0, s.repairs+1 >= t.policy.Threshold
}

// repaired records a repair of the child kind of app named name; manager is the other
// field manager found on it ("" if not looked up).
func (t *contestTracker) repaired(app *appv1.App, kind, name, manager string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.clock.Now()
	s := t.streak(contestKey{app.UID, kind}, now)
	s.name = name
	s.repairs++
	s.lastRepair, s.lastDrift = now, now
	if manager != "" && manager != s.manager {
		s.manager, s.reported = manager, false
	}
}

// contest is a contested child of an App, for its condition and Event.
type contest struct {
	kind, name, manager string
	repairs             int
	// wait is how long after the last repair the next one waits.
	wait time.Duration
	// report: no Warning Event was emitted for this streak and manager yet.
	report bool
	// message says it, for the Contested condition and the Warning Event.
	message string
}

// contests returns the contested children of app, and when app must be synced again: to
// repair a child whose repair waits, or to clear the condition after a quiet Window (0:
// never). It forgets the streaks that ended.
func (t *contestTracker) contests(app *appv1.App) ([]contest, time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.clock.Now()
	var out []contest
	var requeue time.Duration
	for _, kind := range slices.Sorted(maps.Keys(t.states[app.UID])) {
		s := t.live(contestKey{app.UID, kind}, now)
		if s == nil {
			continue
		}
		next := s.lastDrift.Add(t.policy.Window + time.Second) // the streak ends
		if s.lastDrift.After(s.lastRepair) {
			next = s.lastRepair.Add(t.backoff(s)) // a repair waits
		}
		if d := max(next.Sub(now), time.Millisecond); requeue == 0 || d < requeue {
			requeue = d
		}
		if s.repairs < t.policy.Threshold {
			continue
		}
		out = append(out, contest{kind: kind, name: s.name, manager: s.manager, repairs: s.repairs,
			wait: t.backoff(s), report: !s.reported})
		s.reported = true
	}
	return out, requeue
}

// forget drops the streaks of a deleted App.
func (t *contestTracker) forget(uid types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.states, uid)
}

// otherManager returns the field manager other than app-controller that wrote obj last
// (status writers excluded: the deployment controller writes status all the time), or
// "" if there is none.
func otherManager(obj metav1.Object) string {
	var best string
	var bestTime time.Time
	for _, e := range obj.GetManagedFields() {
		if e.Manager == appv1.FieldManager || e.Subresource == "status" {
			continue
		}
		var at time.Time
		if e.Time != nil {
			at = e.Time.Time
		}
		if best == "" || !at.Before(bestTime) {
			best, bestTime = e.Manager, at
		}
	}
	return best
}

// gateRepair is called before a child that drifted while the App's spec did not change
// is written back. It returns whether the repair must wait (the child is contested and
// its backoff runs), and otherwise the other field manager when this repair makes or
// keeps the child contested (looked up on the live object, since the caches drop
// managedFields).
func (k *childReconciler[T, A]) gateRepair(ctx context.Context, app *appv1.App, name string) (wait bool, manager string) {
	if k.contest == nil || app.Status.ObservedGeneration != app.Generation {
		return false, ""
	}
	delay, contested := k.contest.beforeRepair(app, k.kind, name)
	if delay > 0 {
		klog.FromContext(ctx).V(2).Info("Contested child: repair deferred", "kind", k.kind, "name", name, "delay", delay)
		return true, ""
	}
	if contested {
		if live, err := k.client(app.Namespace).Get(ctx, name, metav1.GetOptions{}); err == nil {
			manager = otherManager(live)
		}
	}
	return false, manager
}

// countRepair counts a write to the existing child holder describes as a drift repair
// (app_controller_child_repairs_total) when the App's spec has not changed since its
// last sync: then what differed was changed by someone else, not by the App. It also
// records the repair in the contest tracker, with the other field manager if known.
func (k *childReconciler[T, A]) countRepair(app *appv1.App, name string, holder nameHolder[T], manager string) {
	if holder.exists && app.Status.ObservedGeneration == app.Generation {
		childRepairs.WithLabelValues(k.kind).Inc()
		if k.contest != nil {
			k.contest.repaired(app, k.kind, name, manager)
		}
	}
}

// reportContests returns the contested children of app, sorted by kind, each with the
// message of the Contested condition, and emits a Warning Event when a child becomes
// contested (or by another manager). It also returns when app must be synced again, for
// a deferred repair that is due or a condition that may clear (0: not for a contest).
func (c *Controller) reportContests(app *appv1.App) ([]contest, time.Duration) {
	if c.contest == nil {
		return nil, 0
	}
	contests, requeue := c.contest.contests(app)
	sort.Slice(contests, func(i, j int) bool { return contests[i].kind < contests[j].kind })
	for i := range contests {
		ct := &contests[i]
		manager := ct.manager
		if manager == "" {
			manager = "unknown"
		}
		ct.message = fmt.Sprintf("%s %q was changed by field manager %q and restored %d times in a row; repairs now wait %s",
			ct.kind, ct.name, manager, ct.repairs, ct.wait)
		if ct.report {
			c.recorder.Eventf(app, corev1.EventTypeWarning, appv1.EventReasonContested,
				"%s. Stop the other writer, or stop setting the field in the App (an App without replicas leaves the Deployment's replica count to others)", ct.message)
		}
	}
	return contests, requeue
}

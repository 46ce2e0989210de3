package soak

import (
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	appctrl "github.com/app-controller/app-controller/pkg/controller/app"
	"github.com/app-controller/app-controller/pkg/controller/appfixture"
)

var t0 = time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)

// app returns an App at generation gen with image, reporting Ready (status, reason) at
// observed.
func app(name string, gen int64, image string, observed int64, status metav1.ConditionStatus, reason string) *appv1.App {
	a := appfixture.NewApp("ns", name, image, 1)
	a.UID = k8stypes.UID("uid-" + name)
	a.Generation = gen
	a.Spec.RevisionHistoryLimit = ptr.To[int32](historyLimit)
	a.Status.ObservedGeneration = observed
	a.Status.Conditions = []metav1.Condition{{Type: appv1.ConditionReady, Status: status, Reason: reason, ObservedGeneration: observed}}
	return a
}

// TestHistory checks the revisions the driver expects of an App: its last
// historyLimit distinct specs, a rollback renumbering one (no new revision), and a spec
// whose revision went beyond the limit coming back as a new one.
func TestHistory(t *testing.T) {
	spec := func(image string) appv1.AppSpec { return appfixture.NewApp("ns", "x", image, 1).Spec }
	r := &appRecord{}
	steps := []struct {
		image             string
		wantNew, wantFull bool
		wantRevisions     []string
	}{
		{"v1", true, false, []string{"v1"}},
		{"v2", true, false, []string{"v1", "v2"}},
		{"v1", false, true, []string{"v2", "v1"}}, // a rollback: v1's revision renumbered
		{"v3", true, true, []string{"v1", "v3"}},  // v2's revision goes
		{"v2", true, true, []string{"v3", "v2"}},  // v2's revision is gone: a new one
	}
	for i, s := range steps {
		isNew, full := r.makeCurrent(spec(s.image), historyLimit)
		var got []string
		for _, h := range r.expectedRevisions(historyLimit, nil) {
			got = append(got, h.DeploymentTemplate.Image)
		}
		if isNew != s.wantNew || full != s.wantFull || !slices.Equal(got, s.wantRevisions) {
			t.Errorf("step %d (%s): new %v, full %v, revisions %v; want %v, %v, %v", i, s.image, isNew, full, got, s.wantNew, s.wantFull, s.wantRevisions)
		}
	}
}

// TestHistoryRollout checks the revisions expected of an App whose rollout names an
// older version: an aborted rollout's stable version is kept beyond the limit, beside
// the last specs.
func TestHistoryRollout(t *testing.T) {
	spec := func(image string) appv1.AppSpec { return appfixture.NewApp("ns", "x", image, 1).Spec }
	revision := func(image string) *appv1.RolloutVersion {
		s := spec(image)
		_, hash, err := appctrl.RevisionData(&s)
		if err != nil {
			t.Fatal(err)
		}
		return &appv1.RolloutVersion{Revision: "x-" + hash}
	}
	r := &appRecord{name: "x"}
	for _, image := range []string{"v1", "v2", "v3", "v4"} {
		r.makeCurrent(spec(image), historyLimit)
	}
	for _, c := range []struct {
		name    string
		rollout *appv1.RolloutStatus
		want    []string
	}{
		{"no rollout", nil, []string{"v3", "v4"}},
		{"promoted", &appv1.RolloutStatus{Phase: appv1.RolloutHealthy, Stable: revision("v4")}, []string{"v3", "v4"}},
		{"aborted from v2 to v4", &appv1.RolloutStatus{Phase: appv1.RolloutAborted, Stable: revision("v2"), Canary: revision("v4")}, []string{"v2", "v3", "v4"}},
		{"from v3 to v4", &appv1.RolloutStatus{Stable: revision("v3"), Canary: revision("v4")}, []string{"v3", "v4"}},
	} {
		var got []string
		for _, h := range r.expectedRevisions(historyLimit, c.rollout) {
			got = append(got, h.DeploymentTemplate.Image)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: revisions %v, want %v", c.name, got, c.want)
		}
	}
}

// TestConvergence follows an App's timeline: converged at a generation when it reports
// at that generation what the driver expects (Ready, or the reason of a broken pod),
// not when an older generation's status is shown.
func TestConvergence(t *testing.T) {
	w := newWorld()
	r := &appRecord{namespace: "ns", name: "a", created: t0}
	w.apps[r.key()] = r
	w.wrote(r, app("a", 1, "v1", -1, metav1.ConditionUnknown, ""), opCreate, "", t0)
	w.observe(app("a", 1, "v1", 1, metav1.ConditionTrue, appv1.ReasonAvailable), t0.Add(2*time.Second))
	w.wrote(r, app("a", 2, "bad", 1, metav1.ConditionTrue, appv1.ReasonAvailable), opBreak, appv1.ReasonImagePullFailed, t0.Add(10*time.Second))
	w.observe(app("a", 2, "bad", 1, metav1.ConditionTrue, appv1.ReasonAvailable), t0.Add(11*time.Second)) // the old generation's status
	w.observe(app("a", 2, "bad", 2, metav1.ConditionFalse, appv1.ReasonRollingOut), t0.Add(12*time.Second))
	w.observe(app("a", 2, "bad", 2, metav1.ConditionFalse, appv1.ReasonImagePullFailed), t0.Add(15*time.Second))

	tests := []struct {
		gen         int64
		from, until time.Duration
		want        time.Duration
		ok          bool
	}{
		{gen: 1, from: 0, until: time.Minute, want: 2 * time.Second, ok: true},
		{gen: 1, from: 5 * time.Second, until: time.Minute, want: 5 * time.Second, ok: true}, // converged already then
		{gen: 2, from: 10 * time.Second, until: time.Minute, want: 15 * time.Second, ok: true},
		{gen: 2, from: 10 * time.Second, until: 14 * time.Second, ok: false},
	}
	for _, tc := range tests {
		at, ok := r.convergedAt(tc.gen, t0.Add(tc.from), t0.Add(tc.until))
		if ok != tc.ok || ok && at.Sub(t0) != tc.want {
			t.Errorf("convergedAt(%d, %s, %s) = %s, %v; want %s, %v", tc.gen, tc.from, tc.until, at.Sub(t0), ok, tc.want, tc.ok)
		}
	}
	if !r.convergedNow() {
		t.Errorf("the App reports its pull failure at generation 2: converged")
	}
}

// TestFaultConvergenceOverlap: a fault's Apps have the bound from the end of the last
// fault that started within it (an API server restart that outlasts the faults'
// interval holds them back), and so does a spec change; without such a fault the bound
// counts from the fault's own end.
func TestFaultConvergenceOverlap(t *testing.T) {
	const bound = time.Minute
	w := newWorld()
	r := &appRecord{namespace: "ns", name: "a", created: t0}
	w.apps[r.key()] = r
	w.wrote(r, app("a", 1, "v1", -1, metav1.ConditionUnknown, ""), opCreate, "", t0)
	w.observe(app("a", 1, "v1", 1, metav1.ConditionTrue, appv1.ReasonAvailable), t0.Add(2*time.Second))
	w.wrote(r, app("a", 2, "v2", 1, metav1.ConditionTrue, appv1.ReasonAvailable), opImage, "", t0.Add(20*time.Second))
	w.observe(app("a", 2, "v2", 2, metav1.ConditionTrue, appv1.ReasonAvailable), t0.Add(150*time.Second))
	kill := FaultRecord{Kind: FaultLeaderA, Start: t0.Add(30 * time.Second), End: t0.Add(30 * time.Second)}
	restart := FaultRecord{Kind: "apiserver-restart", Start: t0.Add(60 * time.Second), End: t0.Add(147 * time.Second)}

	faults := []FaultRecord{kill, restart}
	c := w.convergence(faults, bound, t0, t0.Add(5*time.Minute))
	for _, f := range faults {
		if len(f.NotConverged) > 0 || f.ConvergedAfterS != 3 {
			t.Errorf("%s: not converged %q, converged after %.2fs; want all, 3s after the restart", f.Kind, f.NotConverged, f.ConvergedAfterS)
		}
	}
	if len(c.OverBound) > 0 || c.MaxS != 3 {
		t.Errorf("the image change: over the bound %q, max %.2fs; want none, 3s after the restart", c.OverBound, c.MaxS)
	}

	alone := []FaultRecord{kill}
	w.convergence(alone, bound, t0, t0.Add(5*time.Minute))
	if len(alone[0].NotConverged) != 1 {
		t.Errorf("the kill alone: not converged %q; want the App, 120 s after the kill", alone[0].NotConverged)
	}
}

// TestClassify checks which writes of the controller are allowed: its Lease, Events, an
// App's status and children (by name), and nothing else, such as the decoy that a
// conflict App claims; and that a write that went through to an App's child after the
// App's deletion is told apart (a refused one is not).
func TestClassify(t *testing.T) {
	w := newWorld()
	for _, name := range []string{"a00001", "conflict-0"} {
		r := &appRecord{namespace: "soak-0", name: name}
		w.apps[r.key()] = r
	}
	writes := []write{
		{resource: "leases", namespace: leaseNamespace, name: "app-controller"},
		{resource: "events", namespace: "soak-0", name: "a00001.187a"},
		{resource: "apps/status", namespace: "soak-0", name: "a00001"},
		{resource: "deployments", namespace: "soak-0", name: "a00001-deploy"},
		{resource: "controllerrevisions", namespace: "soak-0", name: "a00001-7d9f8"},
		{resource: "services", namespace: "soak-0", name: "conflict-0-svc"},
		{resource: "ingresses", namespace: "soak-0", name: "a00001"},
		{resource: "deployments", namespace: "soak-0", name: decoyName},
		{resource: "configmaps", namespace: "soak-0", name: "cfg-0"},
		{resource: "deployments", namespace: "default", name: "a00001-deploy"},
		{resource: "leases", namespace: "soak-0", name: "x"},
	}
	writes = append(writes,
		write{resource: "services", namespace: "soak-0", name: "a00001-svc", at: t0.Add(time.Second), code: 201},
		write{resource: "apps/status", namespace: "soak-0", name: "a00001", at: t0.Add(time.Second), code: 404},
		// An Event recorded before the deletion and posted after it, one recorded after it,
		// and a patch (a repeat's count) after it.
		write{verb: "create", resource: "events", namespace: "soak-0", name: fmt.Sprintf("a00001.%x", t0.Add(-time.Second).UnixNano()), at: t0.Add(4 * time.Second), code: 201},
		write{verb: "create", resource: "events", namespace: "soak-0", name: fmt.Sprintf("a00001.%x", t0.Add(time.Second).UnixNano()), at: t0.Add(4 * time.Second), code: 201},
		write{verb: "patch", resource: "events", namespace: "soak-0", name: fmt.Sprintf("a00001.%x", t0.Add(-time.Second).UnixNano()), at: t0.Add(4 * time.Second), code: 200},
		// A patch whose repeat was recorded after the deletion, and one recorded before it
		// and posted after (the broadcaster retries while the API server restarts).
		write{verb: "patch", resource: "events", namespace: "soak-0", name: fmt.Sprintf("a00001.%x", t0.Add(-time.Second).UnixNano()), at: t0.Add(4 * time.Second), code: 200,
			recorded: t0.Add(time.Second)},
		write{verb: "patch", resource: "events", namespace: "soak-0", name: fmt.Sprintf("a00001.%x", t0.Add(-time.Second).UnixNano()), at: t0.Add(4 * time.Second), code: 200,
			recorded: t0.Add(-time.Second)})
	w.classify(writes, []string{"soak-0"}, map[string]time.Time{"soak-0/a00001": t0})
	want := []string{"lease", "event", "status", "child", "child", "child", "child", "foreign", "foreign", "foreign", "foreign",
		"after-delete", "status", "event", "after-delete", "after-delete", "after-delete", "event"}
	for i, wr := range writes {
		if wr.classification != want[i] {
			t.Errorf("%s %s/%s: %s, want %s", wr.resource, wr.namespace, wr.name, wr.classification, want[i])
		}
	}
}

// TestExpectedWrites checks the writes the exact-write tests pin per change: each child
// changed, the Event if one did, the revision, the status once or twice, the oldest
// revision when the history is full; nothing for a shard move or a delete.
func TestExpectedWrites(t *testing.T) {
	base := appfixture.NewApp("ns", "x", "v1", 1).Spec
	withImage := *base.DeepCopy()
	withImage.DeploymentTemplate.Image = "v2"
	withRoute := *base.DeepCopy()
	withRoute.Route = &appv1.Route{Hosts: []appv1.Hostname{"x.test"}}
	withEnvAndRoute := *withRoute.DeepCopy()
	withEnvAndRoute.DeploymentTemplate.Env = []corev1.EnvVar{{Name: "E", Value: "1"}}
	tests := []struct {
		name   string
		op     opRecord
		lo, hi int
		ok     bool
	}{
		{"create", opRecord{kind: opCreate, newGeneration: true, newRevision: true, spec: &base}, 5, 6, true},
		{"create with a route", opRecord{kind: opCreate, newGeneration: true, newRevision: true, spec: &withRoute}, 6, 7, true},
		{"image", opRecord{kind: opImage, newGeneration: true, newRevision: true, prev: &base, spec: &withImage}, 4, 5, true},
		{"image, history full", opRecord{kind: opImage, newGeneration: true, newRevision: true, historyFull: true, prev: &base, spec: &withImage}, 5, 6, true},
		{"rollback: renumbered, none deleted", opRecord{kind: opRollback, newGeneration: true, historyFull: true, prev: &withImage, spec: &base}, 4, 5, true},
		{"env and route", opRecord{kind: opEnv, newGeneration: true, newRevision: true, prev: &base, spec: &withEnvAndRoute}, 5, 6, true},
		{"configmap", opRecord{kind: opConfigMap}, 4, 4, true},
		{"shard move", opRecord{kind: opShardMove}, 0, 0, true},
		{"delete", opRecord{kind: opDelete}, 0, 0, true},
		{"not pinned: no new generation", opRecord{kind: opImage}, 0, 0, false},
	}
	for _, tc := range tests {
		lo, hi, _, ok := expectedWrites(tc.op)
		if lo != tc.lo || hi != tc.hi || ok != tc.ok {
			t.Errorf("%s: %d-%d, %v; want %d-%d, %v", tc.name, lo, hi, ok, tc.lo, tc.hi, tc.ok)
		}
	}
}

// TestChangeWrites attributes the writes of an App to its last change before them,
// leaves out the changes that a fault overlaps, and flags a kind whose changes cost more
// than the exact-write tests pin.
func TestChangeWrites(t *testing.T) {
	w := newWorld()
	r := &appRecord{namespace: "ns", name: "a"}
	w.apps[r.key()] = r
	base := appfixture.NewApp("ns", "a", "v1", 1).Spec
	changed := *base.DeepCopy()
	changed.DeploymentTemplate.Image = "v2"
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	w.ops = []opRecord{
		{kind: opImage, app: r.key(), at: at(100), newGeneration: true, newRevision: true, prev: &base, spec: &changed},
		{kind: opShardMove, app: r.key(), at: at(200)},
		{kind: opImage, app: r.key(), at: at(300), newGeneration: true, newRevision: true, prev: &changed, spec: &base},
	}
	wr := func(s int, verb, resource string) write {
		return write{at: at(s), verb: verb, resource: resource, namespace: "ns", owner: r.key(), classification: "child", code: 200}
	}
	writes := []write{
		wr(101, "patch", "deployments"), wr(101, "create", "controllerrevisions"), wr(101, "patch", "events"), wr(102, "patch", "apps/status"),
		wr(250, "patch", "apps/status"), // after the shard move: beyond its 0
		wr(301, "patch", "deployments"), wr(302, "patch", "apps/status"),
	}
	faults := []FaultRecord{{Start: at(320), End: at(325)}}
	got := w.changeWrites(writes, faults, time.Minute, t0, at(400))
	if len(got) != 2 {
		t.Fatalf("%d kinds of change, want image and shard-move: %+v", len(got), got)
	}
	image, shard := got[0], got[1]
	if image.Kind != opImage || image.Changes != 1 || image.Mean != 4 || !image.OK {
		t.Errorf("image: %+v; want the first change alone (the second overlaps the fault), 4 writes, ok", image)
	}
	if shard.Kind != opShardMove || shard.Changes != 1 || shard.Mean != 1 || shard.OK || len(shard.Outliers) != 1 {
		t.Errorf("shard-move: %+v; want 1 write where the tests pin none, not ok", shard)
	}
}

// TestSteadyAutoscaled: of the live autoscaled Apps, the one of the lowest key is never
// toggled by the churn; when it is deleted, the next one is.
func TestSteadyAutoscaled(t *testing.T) {
	w := &world{apps: map[string]*appRecord{}}
	for _, r := range []*appRecord{
		{namespace: "soak-0", name: "a00007", kind: kindAutoscaled},
		{namespace: "soak-1", name: "a00017", kind: kindAutoscaled},
		{namespace: "soak-0", name: "a00003", kind: kindGate},
	} {
		w.apps[r.key()] = r
	}
	steady := func() []string {
		var got []string
		for _, r := range w.apps {
			if w.steadyAutoscaled(r) {
				got = append(got, r.key())
			}
		}
		return got
	}
	if got := steady(); len(got) != 1 || got[0] != "soak-0/a00007" {
		t.Errorf("steady autoscaled Apps %v, want [soak-0/a00007]", got)
	}
	w.apps["soak-0/a00007"].deleted = time.Unix(1, 0)
	if got := steady(); len(got) != 1 || got[0] != "soak-1/a00017" {
		t.Errorf("after the deletion of soak-0/a00007: steady autoscaled Apps %v, want [soak-1/a00017]", got)
	}
}

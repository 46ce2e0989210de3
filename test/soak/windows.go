package soak

import (
	"fmt"
	"slices"
	"sort"
	"time"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// The invariants of two faults, each over its window (from faultWindowMargin before its
// start to faultWindowMargin after its end), from the audit log:
//   - metrics-server gone: the controller never writes the count of an autoscaled App's
//     Deployment (its autoscaling on: the HorizontalPodAutoscaler owns the count, even
//     while it has no metric), docs/autoscaling.md;
//   - the helm upgrade: the new version rewrites no child of an App that nobody changed
//     (no operation of the driver on it, no rollout under way) through the window. The
//     version upgraded to documents no rewrite of the
//     children (the previous commit's and this tree's children are the same): any write
//     is counted.

// faultWindowMargin is how far a fault's window reaches before its start and after its
// end: after it, the new leaders' first sync of every App and a resync (30 s); before,
// an App changed lately may still be converging. A minute, not the convergence bound:
// at the churn's pace most Apps are changed within a few minutes, and the checks need
// Apps left alone through the window.
const faultWindowMargin = time.Minute

// FaultWindowChecks are the checks of the metrics-server and helm-upgrade faults.
type FaultWindowChecks struct {
	// MetricsGoneApps is the number of Apps autoscaled through a metrics-server fault's
	// window; MetricsGoneReplicaWrites the controller's writes of their count then.
	MetricsGoneApps          int      `json:"metrics_gone_apps"`
	MetricsGoneReplicaWrites []string `json:"metrics_gone_replica_writes"`
	// MetricsGoneJudged are those Apps (the report says which of them the CPU load
	// scaled).
	MetricsGoneJudged []string `json:"metrics_gone_judged,omitempty"`
	// UpgradeApps is the number of Apps at rest through the upgrade's window;
	// UpgradeChildWrites the controller's writes of their children then.
	UpgradeApps        int      `json:"upgrade_apps"`
	UpgradeChildWrites []string `json:"upgrade_child_writes"`
	// UpgradeRollouts is the number of rollouts under way when an upgrade started (the
	// step invariant reads their every status write across it: a reset is a jump).
	UpgradeRollouts int `json:"upgrade_rollouts"`
	// Upgrades and MetricsGone count the faults checked.
	Upgrades    int `json:"upgrades"`
	MetricsGone int `json:"metrics_gone"`
}

// windowApp is what checkFaultWindows needs of an App: when it lived, whether it was
// autoscaled from the start, when the driver changed it or its autoscaling, when a
// rollout of it was under way (a status write with a canary).
type windowApp struct {
	created, deleted time.Time
	autoscaled       bool
	ops              []time.Time
	toggles          []toggle
	rolling          []time.Time
}

// quiet tells whether a lived through [from, to] and nothing changed it then.
func (a *windowApp) quiet(from, to time.Time) bool {
	if a.created.After(from) || !a.deleted.IsZero() && a.deleted.Before(to) {
		return false
	}
	for _, ts := range [][]time.Time{a.ops, a.rolling} {
		for _, t := range ts {
			if !t.Before(from) && !t.After(to) {
				return false
			}
		}
	}
	return true
}

// autoscaledThrough tells whether a's autoscaling was on through [from, to], not
// turned on or off then.
func (a *windowApp) autoscaledThrough(from, to time.Time) bool {
	on := a.autoscaled
	for _, t := range a.toggles {
		switch {
		case t.at.Before(from):
			on = t.on
		case !t.at.After(to):
			return false
		}
	}
	return on
}

// countsTaken returns the controller's writes of the count of an autoscaled App's
// Deployment (autoscaled) from f's start to to that take the count from the autoscaler:
// after the autoscaler wrote the Deployment's scale (the count is then its own), or with
// another count than the last one written (by anyone: the controller's writes and the
// autoscaler's, in the audit log with their bodies). While the controller alone owns the
// count it carries the live one in its applies (docs/autoscaling.md, the handover): the
// same count, not taken.
func countsTaken(deployments []deploymentWrite, autoscaled map[string]bool, f FaultRecord, to time.Time, ownerOf func(ns, name string) string) []string {
	ordered := append([]deploymentWrite(nil), deployments...)
	sort.SliceStable(ordered, func(i, j int) bool { return ordered[i].at.Before(ordered[j].at) })
	type countState struct {
		known, scaled bool
		count         int64
	}
	last := map[string]*countState{}
	var out []string
	for _, dw := range ordered {
		k := key(dw.namespace, dw.name)
		st := last[k]
		if st == nil {
			st = &countState{}
			last[k] = st
		}
		taken := !dw.scale && dw.replicas && (st.scaled || st.known && dw.count != st.count)
		if taken && !dw.at.Before(f.Start) && !dw.at.After(to) && autoscaled[ownerOf(dw.namespace, dw.name)] {
			was := "the autoscaler's since it wrote the scale"
			if !st.scaled {
				was = fmt.Sprintf("%d before", st.count)
			}
			out = append(out, fmt.Sprintf("Deployment %s: spec.replicas %d written by %s at %s (%s), during %s (%s-%s)",
				k, dw.count, dw.user, dw.at.Format(stampMilli), was, f.Kind, f.Start.Format(time.TimeOnly), f.End.Format(time.TimeOnly)))
		}
		if dw.scale {
			st.scaled = true
		}
		if dw.replicas {
			st.known, st.count = true, dw.count
		}
	}
	return out
}

// checkFaultWindows checks the windows of the metrics-server and helm-upgrade faults
// (margin before and after each): apps by App, writes the controller's (classified), b the Deployment writes with their
// bodies.
func checkFaultWindows(apps map[string]*windowApp, writes []write, b *bodies, faults []FaultRecord, margin time.Duration, ownerOf func(ns, name string) string) *FaultWindowChecks {
	c := &FaultWindowChecks{}
	names := sortedKeys(apps)
	for _, f := range faults {
		from, to := f.Start.Add(-margin), f.End.Add(margin)
		switch f.Kind {
		case FaultMetricsServer:
			c.MetricsGone++
			autoscaled := map[string]bool{}
			for _, app := range names {
				if a := apps[app]; a.autoscaledThrough(from, to) && (a.deleted.IsZero() || a.deleted.After(to)) && !a.created.After(from) {
					autoscaled[app] = true
				}
			}
			c.MetricsGoneApps += len(autoscaled)
			for _, app := range sortedKeys(autoscaled) {
				if !slices.Contains(c.MetricsGoneJudged, app) {
					c.MetricsGoneJudged = append(c.MetricsGoneJudged, app)
				}
			}
			c.MetricsGoneReplicaWrites = append(c.MetricsGoneReplicaWrites, countsTaken(b.deployments, autoscaled, f, to, ownerOf)...)
		case FaultHelmUpgrade:
			c.Upgrades++
			quiet := map[string]bool{}
			for _, app := range names {
				if apps[app].quiet(from, to) {
					quiet[app] = true
				}
			}
			c.UpgradeApps += len(quiet)
			c.UpgradeRollouts += rolloutsUnderWay(b.status, f.Start)
			for _, wr := range writes {
				if wr.classification != "child" || wr.code >= 300 || wr.at.Before(f.Start) || wr.at.After(to) || !quiet[wr.owner] {
					continue
				}
				c.UpgradeChildWrites = append(c.UpgradeChildWrites, fmt.Sprintf("%s %s %s of %s by %s at %s, during %s (%s-%s)",
					wr.verb, wr.resource, key(wr.namespace, wr.name), wr.owner, wr.user, wr.at.Format(stampMilli), f.Kind, f.Start.Format(time.TimeOnly), f.End.Format(time.TimeOnly)))
			}
		}
	}
	return c
}

// rolloutsUnderWay counts the Apps whose last status written before at (of ws) has a
// rollout under way: a canary, not aborted.
func rolloutsUnderWay(ws []statusWrite, at time.Time) int {
	last := map[string]statusWrite{}
	for _, sw := range ws {
		if sw.at.Before(at) && (last[sw.app].at.IsZero() || sw.rv > last[sw.app].rv) {
			last[sw.app] = sw
		}
	}
	n := 0
	for _, sw := range last {
		if ro := sw.rollout; ro != nil && ro.Canary != nil && ro.Phase != appv1.RolloutAborted {
			n++
		}
	}
	return n
}

// checkFaultWindows gathers what the check of the fault windows needs of the run.
func (w *world) checkFaultWindows(writes []write, b *bodies, faults []FaultRecord) *FaultWindowChecks {
	w.mu.Lock()
	apps := map[string]*windowApp{}
	for k, r := range w.apps {
		apps[k] = &windowApp{created: r.created, deleted: r.deleted, autoscaled: r.kind == kindAutoscaled}
	}
	for _, op := range w.ops {
		if a := apps[op.app]; a != nil {
			a.ops = append(a.ops, op.at)
		}
	}
	for app, ts := range w.toggles() {
		if a := apps[app]; a != nil {
			a.toggles = ts
		}
	}
	w.mu.Unlock()
	for _, sw := range b.status {
		if a := apps[sw.app]; a != nil && sw.rollout != nil && sw.rollout.Canary != nil {
			a.rolling = append(a.rolling, sw.at)
		}
	}
	for _, a := range apps {
		sort.Slice(a.toggles, func(i, j int) bool { return a.toggles[i].at.Before(a.toggles[j].at) })
	}
	return checkFaultWindows(apps, writes, b, faults, faultWindowMargin, func(ns, name string) string {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.ownerOf(ns, name)
	})
}

package soak

import (
	"testing"
	"time"

	"github.com/app-controller/app-controller/internal/localcluster"
)

// TestCheckFaultWindows pins what the metrics-server and helm-upgrade faults count: the
// controller's writes that take an autoscaled App's count in the fault's window (its
// autoscaling on throughout; the count the autoscaler's, or another than the last), and its writes of the children of an App that nobody
// changed and that rolled nothing from a minute before the upgrade to a minute after.
func TestCheckFaultWindows(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 14, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	const margin = time.Minute
	// Each fault from 600 s to 660 s: its window 540-720 s.
	fault := func(kind string) []FaultRecord { return []FaultRecord{{Kind: kind, Start: at(600), End: at(660)}} }
	ownerOf := func(_, name string) string { return "ns/" + name[:1] }
	t.Run("metrics-server gone", func(t *testing.T) {
		apps := map[string]*windowApp{
			"ns/a": {autoscaled: true},                                              // autoscaled throughout
			"ns/b": {autoscaled: true, toggles: []toggle{{at: at(560), on: false}}}, // turned off in the window
			"ns/c": {},                                                              // never autoscaled: owns its count
			"ns/d": {autoscaled: true, toggles: []toggle{{at: at(100), on: false}, {at: at(200), on: true}}},
		}
		b := &bodies{deployments: []deploymentWrite{
			// a: the autoscaler took the count before the fault; the controller writes one.
			{at: at(300), namespace: "ns", name: "a-deploy", scale: true, replicas: true, count: 3},
			{at: at(610), namespace: "ns", name: "a-deploy", replicas: true, count: 3},
			{at: at(620), namespace: "ns", name: "a-deploy"}, // a template, no count
			// b: turned off in the window: the controller's count again.
			{at: at(610), namespace: "ns", name: "b-deploy", replicas: true, count: 1},
			// c: never autoscaled: its own count.
			{at: at(610), namespace: "ns", name: "c-deploy", replicas: true, count: 5},
			// d: the controller alone owns the count (the autoscaler never wrote it): the
			// same count carried (the handover) is not taken; another one is.
			{at: at(250), namespace: "ns", name: "d-deploy", replicas: true, count: 2},
			{at: at(605), namespace: "ns", name: "d-deploy", replicas: true, count: 2},
			{at: at(700), namespace: "ns", name: "d-deploy", replicas: true, count: 3},
			{at: at(800), namespace: "ns", name: "d-deploy", replicas: true, count: 2}, // after the window
		}}
		c := checkFaultWindows(apps, nil, b, fault(FaultMetricsServer), margin, ownerOf)
		if c.MetricsGone != 1 || c.MetricsGoneApps != 2 || len(c.MetricsGoneReplicaWrites) != 2 {
			t.Errorf("%d faults, %d Apps autoscaled, writes %q; want 1, 2 (a, d), a's at 610 s and d's at 700 s", c.MetricsGone, c.MetricsGoneApps, c.MetricsGoneReplicaWrites)
		}
	})
	t.Run("helm upgrade", func(t *testing.T) {
		apps := map[string]*windowApp{
			"ns/a": {},                                   // at rest
			"ns/b": {ops: []time.Time{at(470), at(550)}}, // changed in the window
			"ns/c": {rolling: []time.Time{at(550)}},      // a rollout under way
			"ns/d": {created: at(700)},                   // created in the window
			"ns/e": {ops: []time.Time{at(400)}},          // changed before the window
		}
		child := func(name string, s int) write {
			return write{at: at(s), verb: "patch", resource: resourceDeployments, namespace: "ns", name: name, owner: "ns/" + name[:1], classification: "child", code: 200}
		}
		writes := []write{child("a-deploy", 620), child("b-deploy", 620), child("c-deploy", 620), child("d-deploy", 720), child("e-deploy", 700),
			child("e-deploy", 590), // before the upgrade
			{at: at(620), verb: "patch", resource: resourceAppStatus, namespace: "ns", name: "a", owner: "ns/a", classification: "status", code: 200}}
		c := checkFaultWindows(apps, writes, &bodies{}, fault(FaultHelmUpgrade), margin, ownerOf)
		if c.Upgrades != 1 || c.UpgradeApps != 2 || len(c.UpgradeChildWrites) != 2 {
			t.Errorf("%d upgrades, %d Apps at rest, writes %q; want 1, 2 (a, e), a's and e's at 620 and 700 s", c.Upgrades, c.UpgradeApps, c.UpgradeChildWrites)
		}
	})
}

// TestCompleteFaults pins where -upgrade-from puts the helm upgrade (the middle of the
// faults, once) and the faults a kwok node cannot make.
func TestCompleteFaults(t *testing.T) {
	cfg := Config{Node: localcluster.NodeReal, UpgradeFrom: "HEAD~1", Repo: "."}
	cfg.Faults = DefaultFaults(cfg.Node)
	if err := cfg.completeFaults(); err != nil {
		t.Fatal(err)
	}
	if n := len(DefaultFaults(localcluster.NodeReal)); len(cfg.Faults) != n+1 || cfg.Faults[n/2] != FaultHelmUpgrade {
		t.Errorf("faults %v: want %s at %d of %d", cfg.Faults, FaultHelmUpgrade, n/2, n+1)
	}
	for _, bad := range []Config{
		{Node: localcluster.NodeKwok, Faults: []string{FaultMetricsServer}},
		{Node: localcluster.NodeReal, Faults: []string{FaultHelmUpgrade}},
		{Node: localcluster.NodeKwok, Faults: []string{}, UpgradeFrom: "HEAD~1", Repo: "."},
	} {
		if err := bad.completeFaults(); err == nil {
			t.Errorf("%s faults %v, upgrade from %q: no error", bad.Node, bad.Faults, bad.UpgradeFrom)
		}
	}
}

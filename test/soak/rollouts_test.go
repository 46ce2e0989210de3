package soak

import (
	"testing"
	"time"
)

// TestCheckReplicaFights pins which of the controller's replica writes after an
// autoscaler's scale write count as a fight: only those made while the App's
// autoscaling stayed on. The smoke counted the handover (autoscaling turned off, the
// autoscaler's last scale write racing the controller's forced count) as one.
func TestCheckReplicaFights(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 6, 4, 30, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	const ns, dep, app = "soak-1", "a00017-deploy", "soak-1/a00017"
	scale := func(at int) deploymentWrite {
		return deploymentWrite{at: ms(at), namespace: ns, name: dep, user: "system:serviceaccount:kube-system:horizontal-pod-autoscaler", scale: true}
	}
	replicas := func(at int) deploymentWrite {
		return deploymentWrite{at: ms(at), namespace: ns, name: dep, user: "soak:shard-b-1", replicas: true}
	}
	ownerOf := func(_, _ string) string { return app }
	for _, tc := range []struct {
		name    string
		writes  []deploymentWrite
		toggles []toggle
		fights  int
	}{
		{name: "autoscaled throughout: a fight", writes: []deploymentWrite{scale(0), replicas(500)}, fights: 1},
		{name: "turned off before the autoscaler's last scale write: the handover",
			writes: []deploymentWrite{scale(365), replicas(940), replicas(3000)}, toggles: []toggle{{at: ms(100), on: false}}},
		{name: "turned off between the two writes", writes: []deploymentWrite{scale(0), replicas(500)}, toggles: []toggle{{at: ms(200), on: false}}},
		{name: "turned on between the two writes", writes: []deploymentWrite{scale(0), replicas(500)}, toggles: []toggle{{at: ms(200), on: true}}},
		{name: "turned on before the scale write: a fight",
			writes: []deploymentWrite{scale(300), replicas(500)}, toggles: []toggle{{at: ms(0), on: false}, {at: ms(100), on: true}}, fights: 1},
		{name: "turned off after the controller's write: a fight", writes: []deploymentWrite{scale(0), replicas(500)}, toggles: []toggle{{at: ms(600), on: false}}, fights: 1},
		{name: "no scale write", writes: []deploymentWrite{replicas(500)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &RolloutChecks{}
			c.checkReplicaFights(tc.writes, map[string][]toggle{app: tc.toggles}, ownerOf)
			if len(c.ReplicaFights) != tc.fights {
				t.Errorf("fights = %d %q, want %d", len(c.ReplicaFights), c.ReplicaFights, tc.fights)
			}
		})
	}
}

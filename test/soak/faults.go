package soak

import (
	"context"
	"fmt"
	"time"

	"github.com/app-controller/app-controller/internal/localcluster"
	"github.com/app-controller/app-controller/test/harness"
)

// FaultRecord is one injected fault: what, from when to when, and what followed.
type FaultRecord struct {
	Kind string `json:"kind"`
	// Start and End bound the fault: from its injection until the faulty part is back
	// (a killed leader: the kill itself; the API server: ready again; etcd: resumed).
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// StartS and EndS are Start and End in seconds since the start of the churn.
	StartS float64 `json:"start_s"`
	EndS   float64 `json:"end_s"`
	Detail string  `json:"detail"`
	Error  string  `json:"error,omitempty"`
	// ConvergedAfterS is how long after End every App that lived then reported what
	// the driver expected of it (its generation at End or a later one); NotConverged
	// lists those that did not within the bound.
	ConvergedAfterS float64  `json:"converged_after_s"`
	NotConverged    []string `json:"not_converged,omitempty"`
}

// etcdPause is how long the etcd fault freezes etcd: longer than the leader's renew
// deadline (10 s), so that leaders lose their lease.
const etcdPause = 20 * time.Second

// injector makes the faults.
type injector struct {
	cluster *localcluster.Cluster
	fleet   fleet
	start   time.Time
}

// inject makes one fault of kind and returns its record.
func (j *injector) inject(ctx context.Context, kind string) FaultRecord {
	rec := FaultRecord{Kind: kind, Start: time.Now()}
	var err error
	switch kind {
	case FaultLeaderA, FaultLeaderB:
		shard := shardA
		if kind == FaultLeaderB {
			shard = shardB
		}
		var leader instance
		if leader, err = j.leader(ctx, shard); err == nil {
			rec.Start = time.Now()
			err = j.fleet.kill(ctx, leader)
			rec.Detail = "SIGKILL of the leader of shard " + shard + ", " + leader.process
		}
	case FaultAPIServer:
		err = j.cluster.Restart(ctx, localcluster.APIServer)
		rec.Detail = "kube-apiserver stopped (SIGTERM) and started again"
	case FaultEtcd:
		if err = j.cluster.Pause(localcluster.Etcd); err == nil {
			time.Sleep(etcdPause)
			err = j.cluster.Resume(localcluster.Etcd)
		}
		rec.Detail = fmt.Sprintf("etcd frozen (SIGSTOP) for %s", etcdPause)
	case FaultWatchCut:
		var rev int64
		if rev, err = j.cluster.CompactEtcd(ctx); err == nil {
			var n int
			n, err = j.cluster.CutAPIServerConnections(ctx)
			rec.Detail = fmt.Sprintf("etcd compacted at revision %d, then %d connections to kube-apiserver cut (ss -K): every watch ends and resumes or relists", rev, n)
		}
	case FaultKubelet:
		err = j.cluster.Restart(ctx, localcluster.Kubelet)
		rec.Detail = "the real node's kubelet stopped (SIGTERM) and started again"
	case FaultContainerd:
		err = j.cluster.Restart(ctx, localcluster.Containerd)
		rec.Detail = "the real node's containerd stopped (SIGTERM) and started again; the containers run on"
	default:
		err = fmt.Errorf("unknown fault %q", kind)
	}
	rec.End = time.Now()
	rec.StartS, rec.EndS = rec.Start.Sub(j.start).Seconds(), rec.End.Sub(j.start).Seconds()
	if err != nil {
		rec.Error = err.Error()
	}
	return rec
}

// leader finds the process that leads shard now, from the instances' /metrics.
func (j *injector) leader(ctx context.Context, shard string) (instance, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		for _, in := range j.fleet.running() {
			if in.shard != shard {
				continue
			}
			families, err := j.fleet.scrape(ctx, in)
			if err != nil {
				continue
			}
			if v, _ := harness.Value(families, "leader_election_master_status", map[string]string{"name": in.lease}); v == 1 {
				return in, nil
			}
		}
		if time.Now().After(deadline) {
			return instance{}, fmt.Errorf("no leader of shard %s for a minute", shard)
		}
		select {
		case <-ctx.Done():
			return instance{}, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// schedule injects cfg's faults in turn, the first at FirstFault, then every
// FaultInterval, none later than until (from start), and returns their records once
// ctx ends or the schedule is over.
func (j *injector) schedule(ctx context.Context, kinds []string, first, every, until time.Duration, report func(FaultRecord)) []FaultRecord {
	var out []FaultRecord
	for i := 0; len(kinds) > 0; i++ {
		at := first + time.Duration(i)*every
		if at > until {
			break
		}
		select {
		case <-ctx.Done():
			return out
		case <-time.After(time.Until(j.start.Add(at))):
		}
		rec := j.inject(ctx, kinds[i%len(kinds)])
		report(rec)
		out = append(out, rec)
	}
	return out
}

package soak

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	gatewayclientset "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/app-controller/app-controller/internal/localcluster"
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
	kube    kubernetes.Interface
	fleet   fleet
	world   *world
	start   time.Time
	// gateway reads the Gateway API (nil without a Gateway: on kwok).
	gateway gatewayclientset.Interface
}

// The node-pressure fault: the real node's nodefs (a tmpfs of nodeFS bytes) filled to
// nodeFSFill of its size, above the kubelet's eviction threshold (a quarter free), for
// nodePressureHold once the kubelet evicted a pod.
const (
	nodeFS           = 512 << 20
	nodeFSFill       = 0.85
	nodePressureHold = 20 * time.Second
)

// nodePressure fills the node's filesystem until the kubelet signals DiskPressure and
// evicts pods, holds it, frees it and waits until the pressure is over.
func (j *injector) nodePressure(ctx context.Context) (string, error) {
	if err := j.cluster.FillNodeFS(ctx, nodeFSFill); err != nil {
		return "", err
	}
	filled := time.Now()
	freed := false
	defer func() {
		if !freed {
			_ = j.cluster.FillNodeFS(context.Background(), 0)
		}
	}()
	pressure := func(want corev1.ConditionStatus) func() (bool, error) {
		return func() (bool, error) {
			node, err := j.kube.CoreV1().Nodes().Get(ctx, localcluster.RealNodeName, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			for _, c := range node.Status.Conditions {
				if c.Type == corev1.NodeDiskPressure {
					return c.Status == want, nil
				}
			}
			return false, nil
		}
	}
	evicted := func() ([]string, error) {
		pods, err := j.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "status.phase=Failed"})
		if err != nil {
			return nil, err
		}
		var names []string
		for _, p := range pods.Items {
			if p.Status.Reason == "Evicted" && p.Status.StartTime != nil {
				names = append(names, p.Namespace+"/"+p.Name)
			}
		}
		return names, nil
	}
	before, _ := evicted()
	if err := poll(ctx, time.Minute, pressure(corev1.ConditionTrue)); err != nil {
		return "", fmt.Errorf("the node reports no DiskPressure a minute after its filesystem was filled to %.0f%%: %w", 100*nodeFSFill, err)
	}
	inPressure := time.Since(filled)
	var names []string
	if err := poll(ctx, time.Minute, func() (bool, error) {
		now, err := evicted()
		names = newNames(before, now)
		return err == nil && len(names) > 0, nil
	}); err != nil {
		return "", fmt.Errorf("DiskPressure for a minute and no pod evicted: %w", err)
	}
	time.Sleep(nodePressureHold)
	now, _ := evicted()
	names = newNames(before, now)
	if err := j.cluster.FillNodeFS(ctx, 0); err != nil {
		return "", err
	}
	freed = true
	released := time.Now()
	if err := poll(ctx, 3*time.Minute, pressure(corev1.ConditionFalse)); err != nil {
		return "", fmt.Errorf("the node still reports DiskPressure 3 minutes after its filesystem was freed: %w", err)
	}
	return fmt.Sprintf("the node's %d MiB nodefs filled to %.0f%%: DiskPressure after %.0fs, %d pods evicted by the kubelet (%s); freed %s later, DiskPressure over %.0fs after",
		nodeFS>>20, 100*nodeFSFill, inPressure.Seconds(), len(names), strings.Join(names[:min(len(names), 4)], ", "),
		released.Sub(filled).Round(time.Second), time.Since(released).Seconds()), nil
}

// newNames returns the names of now that are not in before.
func newNames(before, now []string) []string {
	var out []string
	for _, n := range now {
		if !slices.Contains(before, n) {
			out = append(out, n)
		}
	}
	return out
}

// poll calls done every second until it says so, for at most timeout.
func poll(ctx context.Context, timeout time.Duration, done func() (bool, error)) error {
	return wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(context.Context) (bool, error) { return done() })
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
	case FaultNodePressure:
		rec.Detail, err = j.nodePressure(ctx)
	case FaultRolloutKillStep, FaultRolloutKillPause, FaultRolloutKillPromoting, FaultRolloutKillAborting:
		err = j.rolloutKill(ctx, kind, &rec)
	case FaultMetricsServer:
		err = j.metricsServerGone(ctx, &rec)
	case FaultGatewayRestart:
		err = j.gatewayRestart(ctx, &rec)
	case FaultHelmUpgrade:
		f, ok := j.fleet.(*chartFleet)
		if !ok {
			err = errors.New("the helm upgrade needs the chart's fleet (a real node)")
			break
		}
		rec.Detail, err = f.upgrade(ctx)
	default:
		err = fmt.Errorf("unknown fault %q", kind)
	}
	if rec.End.IsZero() {
		rec.End = time.Now()
	}
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
			if isLeader(families, in) {
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
// ctx (the churn's) ends or the schedule is over. A fault under way runs in run (the
// run's context), not ctx: cut at the churn's end, a restart left its component down
// into the convergence check (the smoke beside make test's other lanes, at a load of 70:
// the API server not ready in the 60 s left of the churn).
func (j *injector) schedule(ctx, run context.Context, kinds []string, first, every, until time.Duration, report func(FaultRecord)) []FaultRecord {
	var out []FaultRecord
	upgraded := false
	for i, k := 0, 0; len(kinds) > 0; i++ {
		at := first + time.Duration(i)*every
		if at > until {
			break
		}
		kind := kinds[k%len(kinds)]
		k++
		if kind == FaultHelmUpgrade && upgraded {
			// Once in a run: the fleet runs this tree's release since.
			if len(kinds) == 1 {
				break
			}
			kind = kinds[k%len(kinds)]
			k++
		}
		upgraded = upgraded || kind == FaultHelmUpgrade
		select {
		case <-ctx.Done():
			return out
		case <-time.After(time.Until(j.start.Add(at))):
		}
		rec := j.inject(run, kind)
		report(rec)
		out = append(out, rec)
	}
	return out
}

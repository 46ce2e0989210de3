package reliability

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/app-controller/app-controller/internal/localcluster"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// TestEtcdFrozenAndAPIServerRestarted freezes etcd (SIGSTOP) for 20s while Apps are
// created and changed, then restarts kube-apiserver: the controller keeps running and
// converges after.
func TestEtcdFrozenAndAPIServerRestarted(t *testing.T) {
	e := newEnv(t)
	cluster := framework.Cluster()
	const before, added = 10, 10
	id, c, start := e.startConverged(t, "etcd-frozen", before)

	// Freeze etcd, and meanwhile create Apps and change the existing ones' image: the
	// clients retry until their writes get through.
	if err := cluster.Pause(localcluster.Etcd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.Resume(localcluster.Etcd) })
	frozen := time.Now()
	var wg sync.WaitGroup
	wg.Go(func() { e.createApps(t, before, added) })
	for i := range before {
		wg.Go(func() {
			if err := e.setImage(i, "nginx:1.27"); err != nil {
				t.Errorf("changing App %d: %v", i, err)
			}
		})
	}
	time.Sleep(20 * time.Second)
	if err := cluster.Resume(localcluster.Etcd); err != nil {
		t.Fatal(err)
	}
	t.Logf("etcd frozen for %.1fs", time.Since(frozen).Seconds())
	if err := cluster.Restart(context.Background(), localcluster.APIServer); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	t.Logf("kube-apiserver restarted (%.1fs after etcd resumed)", restarted.Sub(frozen).Seconds()-20)
	wg.Wait()

	took := e.waitAllReady(t, before+added, converge)
	e.converged(t, before+added)
	if c.exited() {
		t.Errorf("the controller exited: %v", c.Exited())
	}
	onlyOwnWrites(t, audit(t, start, id), e.ns, "")
	t.Logf("all %d Apps Ready %.1fs after kube-apiserver was back", before+added, took.Seconds())
	logWrites(t, "controller, from the freeze on", e.ns, audit(t, frozen, id))
}

// TestWatchExpiry pauses the controller (SIGSTOP) while Apps are created and changed,
// compacts etcd, and restarts kube-apiserver so that the controller's watches end and
// neither etcd nor the new watch cache holds their resource versions: on SIGCONT the
// informers get 410 Gone, relist, and the controller converges.
func TestWatchExpiry(t *testing.T) {
	e := newEnv(t)
	cluster := framework.Cluster()
	const before, added = 10, 10
	id, c, start := e.startConverged(t, "watch-expiry", before)

	c.signal(t, sigstop)
	paused := time.Now()
	var wg sync.WaitGroup
	wg.Go(func() { e.createApps(t, before, added) })
	for i := range before {
		wg.Go(func() {
			if err := e.setImage(i, fmt.Sprintf("nginx:1.%d", 20+i)); err != nil {
				t.Errorf("changing App %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	rev, err := cluster.CompactEtcd(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := cluster.Restart(context.Background(), localcluster.APIServer); err != nil {
		t.Fatal(err)
	}
	t.Logf("etcd compacted at revision %d; kube-apiserver restarted", rev)
	resumed := time.Now()
	c.signal(t, sigcont)
	t.Logf("controller paused for %.1fs", resumed.Sub(paused).Seconds())

	took := e.waitAllReady(t, before+added, converge)
	e.converged(t, before+added)
	if c.exited() {
		t.Errorf("the controller exited: %v", c.Exited())
	}

	// The informers relisted: a list of Apps (or a watch list, which sends the initial
	// state) after the resume.
	relists := 0
	for _, ev := range audit(t, resumed, id) {
		if ev.Resource() != "apps" {
			continue
		}
		t.Logf("after the resume: %s %s %s", ev.Stage, ev.Verb, ev.RequestURI)
		if ev.Verb == "list" && ev.Stage == "ResponseComplete" || ev.Verb == "watch" && ev.Stage == "ResponseStarted" && containsInitialEvents(ev.RequestURI) {
			relists++
		}
	}
	if relists == 0 {
		t.Errorf("no relist of Apps after the resume")
	}
	expired := len(c.Lines("too old resource version")) + len(c.Lines("410")) + len(c.Lines("Expired"))
	onlyOwnWrites(t, audit(t, start, id), e.ns, "")
	t.Logf("all %d Apps Ready %.1fs after SIGCONT; %d relists of Apps, %d log lines about expired watches",
		before+added, took.Seconds(), relists, expired)
	logWrites(t, "controller, from the resume on", e.ns, audit(t, resumed, id))
}

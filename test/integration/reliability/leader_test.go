package reliability

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/app-controller/app-controller/test/integration/framework"
)

// Leader election timings of the test: kube-controller-manager's defaults, short enough
// for a takeover within seconds. A leader that cannot renew within renewDeadline exits;
// CI's API server, beside a whole make test, answered lease updates 504; with the 4s
// deadline these tests had, the third instance most likely lost its lease and exited
// (25 changed Apps were left unconverged, 90s on): waitAllReady now says so at once.
const (
	leaseDuration = 15 * time.Second
	renewDeadline = 10 * time.Second
	retryPeriod   = 2 * time.Second
)

// Log lines of leader election (pkg/controllermanager/leaderelection.go).
const (
	logAcquired = "Acquired the leader lease"
	logWaiting  = "Waiting for the leader lease"
)

// clockStepEnv, set to a negative duration (e.g. -30s), makes TestLeaderFailover step this
// machine's wall clock back by that much just before the frozen old leader resumes, and
// forward again once it exited: the old leader's lease fence must still count the time it
// was frozen (Go's monotonic clock), or it would take its last renewal for a recent one
// and write. It needs root (CAP_SYS_TIME) and moves the clock of everything on the
// machine, so only run it alone: go test -run TestLeaderFailover with the variable set.
const clockStepEnv = "APP_CONTROLLER_TEST_CLOCK_STEP"

// stepClock moves this machine's wall clock (CLOCK_REALTIME) by d.
func stepClock(t *testing.T, d time.Duration) {
	t.Helper()
	ts := unix.NsecToTimespec(time.Now().Add(d).UnixNano())
	if err := unix.ClockSettime(unix.CLOCK_REALTIME, &ts); err != nil {
		t.Fatalf("stepping the wall clock by %s: %v", d, err)
	}
}

// TestLeaderFailover runs two instances with --leader-elect. The leader is SIGKILLed
// while 100 Apps are created: the standby takes over within the lease duration and
// converges them. Then the new leader is frozen (SIGSTOP) longer than the lease while
// Apps change: a third instance takes over, and the old leader, resumed, writes nothing
// from then on and exits (with clockStepEnv set, also after the wall clock stepped back).
func TestLeaderFailover(t *testing.T) {
	e := newEnv(t)
	const n = 100
	leaderFlags := []string{"--leader-elect", "--leader-elect-namespace", e.ns,
		"--leader-elect-lease-duration", leaseDuration.String(),
		"--leader-elect-renew-deadline", renewDeadline.String(),
		"--leader-elect-retry-period", retryPeriod.String()}
	ctx := context.Background()
	var step time.Duration
	if v := os.Getenv(clockStepEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d >= 0 {
			t.Fatalf("%s=%q: want a negative duration (%v)", clockStepEnv, v, err)
		}
		step = d
	}
	start := time.Now()

	a, b := newIdentity("leader-a"), newIdentity("leader-b")
	ca := startController(t, a, leaderFlags...)
	ca.waitLog(t, logAcquired, converge)
	cb := startController(t, b, leaderFlags...)
	cb.waitLog(t, logWaiting, converge)

	var wg sync.WaitGroup
	wg.Go(func() { e.createApps(t, 0, n) })
	framework.Eventually(t, converge, func() (bool, error) {
		list, err := e.kube.AppsV1().Deployments(e.ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		return err == nil && len(list.Items)-1 >= n/4, err
	})
	ca.kill(t)
	killed := time.Now()
	cb.waitLog(t, logAcquired, converge)
	takeover := time.Since(killed)
	wg.Wait()
	took := e.waitAllReady(t, n, converge, cb)
	t.Logf("leader SIGKILLed; the standby took the lease %.1fs later (lease %s); all %d Apps Ready %.1fs after the kill",
		takeover.Seconds(), leaseDuration, n, took.Seconds()+takeover.Seconds())
	if takeover > leaseDuration+5*time.Second {
		t.Errorf("the standby took %s to take over, want at most the lease duration %s + 5s", takeover, leaseDuration)
	}
	e.converged(t, n)
	logWrites(t, "killed leader", e.ns, audit(t, start, a))
	logWrites(t, "standby, from the kill on", e.ns, audit(t, killed, b))

	// Partition: b frozen longer than the lease while Apps change.
	c := newIdentity("leader-c")
	cc := startController(t, c, leaderFlags...)
	cc.waitLog(t, logWaiting, converge)
	cb.signal(t, sigstop)
	frozen := time.Now()
	for i := range n / 4 {
		wg.Go(func() {
			if err := e.setImage(i, fmt.Sprintf("nginx:1.%d", i)); err != nil {
				t.Errorf("changing App %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	cc.waitLog(t, logAcquired, converge)
	tookOver := time.Since(frozen)
	if wait := leaseDuration + 2*time.Second - time.Since(frozen); wait > 0 {
		time.Sleep(wait)
	}
	stepped := false
	restore := func() {
		if stepped {
			stepClock(t, -step)
			stepped = false
			t.Logf("wall clock stepped by %s again", -step)
		}
	}
	if step != 0 {
		stepClock(t, step)
		stepped = true
		t.Cleanup(restore) // if the test stops before the old leader exited
		t.Logf("wall clock stepped by %s while the old leader is frozen", step)
	}
	resumed := time.Now()
	mark := auditMark(t) // the old leader's writes from here on, by their place in the log
	cb.signal(t, sigcont)
	code := cb.waitExit(t, 30*time.Second)
	exitedAfter := time.Since(resumed)
	restore()
	took = e.waitAllReady(t, n, converge, cc)
	t.Logf("old leader frozen %.1fs; the third instance took over %.1fs after the freeze; the old leader exited %.1fs after SIGCONT (status %d); all Apps Ready %.1fs after SIGCONT",
		resumed.Sub(frozen).Seconds(), tookOver.Seconds(), exitedAfter.Seconds(), code, took.Seconds()+exitedAfter.Seconds())
	if code == 0 {
		t.Errorf("the old leader exited with status 0 after losing its lease, want a failure")
	}
	e.converged(t, n)

	after := auditFrom(t, mark, b)
	for _, ev := range after {
		if !ev.IsWrite() {
			continue
		}
		if ev.Resource() == "leases" && ev.Code() >= 400 {
			t.Logf("old leader's refused lease write after SIGCONT: %s", ev)
			continue // leader election trying to renew and being refused: no change
		}
		t.Errorf("the old leader wrote after SIGCONT: %s", ev)
	}
	onlyOwnWrites(t, audit(t, start, a, b, c), e.ns, e.ns)
	logWrites(t, "old leader, after SIGCONT", e.ns, after)
	logWrites(t, "new leader, from the freeze on", e.ns, audit(t, frozen, c))
}

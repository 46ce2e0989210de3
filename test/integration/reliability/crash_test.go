package reliability

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/app-controller/app-controller/pkg/controllermanager"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// TestKillWhileConverging SIGKILLs the controller while it converges 200 Apps, then
// starts a new one: every App converges with one Deployment and one Service.
func TestKillWhileConverging(t *testing.T) {
	e := newEnv(t)
	const n = 200
	first := newIdentity("first")
	start := time.Now()
	c1 := startController(t, first)
	e.createApps(t, 0, n)

	// Kill it half-way through creating the children.
	ctx := context.Background()
	var created int
	framework.Eventually(t, converge, func() (bool, error) {
		list, err := e.kube.AppsV1().Deployments(e.ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false, err
		}
		created = len(list.Items) - 1 // the foreign one
		return created >= n/3, nil
	})
	c1.kill(t)
	killed := time.Now()
	ready, _, _ := e.readyCount(ctx)
	t.Logf("SIGKILLed the first controller %.1fs after its start, with %d of %d Deployments created and %d Apps Ready",
		killed.Sub(start).Seconds(), created, n, ready)

	second := newIdentity("second")
	startController(t, second)
	took := e.waitAllReady(t, n, converge)
	e.converged(t, n)

	events := audit(t, start, first, second)
	onlyOwnWrites(t, events, e.ns, "")
	t.Logf("all %d Apps Ready %.1fs after the restart", n, took.Seconds())
	logWrites(t, "first controller (killed)", e.ns, audit(t, start, first))
	w := logWrites(t, "second controller", e.ns, audit(t, killed, second))
	if w > 4*n {
		t.Errorf("the second controller made %d writes for %d Apps: more than 4 an App", w, n)
	}
}

// TestKillBetweenDeploymentAndService stops a controller between an App's Deployment
// and its Service: an in-process controller whose Service writes fail is stopped once
// the Deployments exist; a fresh one creates the Services and nothing twice.
func TestKillBetweenDeploymentAndService(t *testing.T) {
	e := newEnv(t)
	const n = 3
	broken := newIdentity("no-services")
	cfg := broken.restConfig(t)
	var refused atomic.Int32
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return framework.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method != http.MethodGet && strings.Contains(req.URL.Path, "/services") {
				refused.Add(1)
				return nil, errors.New("injected: the process dies before its Service write")
			}
			return rt.RoundTrip(req)
		})
	})
	start := time.Now()
	m := framework.StartManager(t, cfg, controllermanager.NewOptions())
	e.createApps(t, 0, n)
	ctx := context.Background()
	framework.Eventually(t, converge, func() (bool, error) {
		list, err := e.kube.AppsV1().Deployments(e.ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) == n+1 && refused.Load() >= n, err
	})
	if err := m.Stop(t); err != nil {
		t.Fatalf("stopping the first controller: %v", err)
	}
	stopped := time.Now()
	svcs, err := e.kube.CoreV1().Services(e.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(svcs.Items) != 1 {
		t.Fatalf("%d Services after the first controller, want only the foreign one", len(svcs.Items))
	}
	t.Logf("first controller stopped with %d Deployments and no Service (%d Service writes refused)", n, refused.Load())

	fresh := newIdentity("fresh")
	framework.StartManager(t, fresh.restConfig(t), controllermanager.NewOptions())
	took := e.waitAllReady(t, n, converge)
	e.converged(t, n)
	onlyOwnWrites(t, audit(t, start, broken, fresh), e.ns, "")
	t.Logf("all %d Apps Ready %.1fs after the fresh controller started", n, took.Seconds())
	w := logWrites(t, "fresh controller", e.ns, audit(t, stopped, fresh))
	for _, ev := range audit(t, stopped, fresh) {
		if ev.IsWrite() && ev.Resource() == "deployments" && ev.Code() == http.StatusCreated {
			t.Errorf("the fresh controller created a Deployment again: %s", ev)
		}
	}
	if w > 4*n {
		t.Errorf("the fresh controller made %d writes for %d Apps", w, n)
	}
}

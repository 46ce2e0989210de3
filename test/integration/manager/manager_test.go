// Package manager tests the controller-manager around the controllers against a real
// control plane: leader election between instances, health probes and metrics.
package manager

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controllermanager"
	"github.com/app-controller/app-controller/pkg/version"
	"github.com/app-controller/app-controller/test/integration/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

const converge = 60 * time.Second

// start runs a manager with the App controller until it is stopped or the test ends.
func start(t *testing.T, mutate func(*controllermanager.Options)) *framework.Manager {
	t.Helper()
	opts := controllermanager.NewOptions()
	opts.Controllers = []string{"app"}
	opts.ShutdownTimeout = 5 * time.Second
	mutate(opts)
	return framework.StartManager(t, framework.Config(t), opts)
}

func leaderOpts(ns string) func(*controllermanager.Options) {
	return func(o *controllermanager.Options) {
		o.LeaderElect = true
		o.LeaderElectNamespace = ns
		o.LeaderElectName = "app-controller"
		o.LeaderElectLeaseDuration = 3 * time.Second
		o.LeaderElectRenewDeadline = 2 * time.Second
		o.LeaderElectRetryPeriod = 300 * time.Millisecond
	}
}

// holder returns the holder of the lease, "" if none.
func holder(t *testing.T, ns string) string {
	t.Helper()
	lease, err := framework.Client(t).CoordinationV1().Leases(ns).Get(context.Background(), "app-controller", metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil {
		return ""
	}
	return *lease.Spec.HolderIdentity
}

// waitAppReady creates an App and waits until it is Ready: some instance leads.
func waitAppReady(t *testing.T, ns, name string) {
	t.Helper()
	client := framework.AppClient(t)
	replicas := int32(1)
	_, err := client.AppcontrollerV1().Apps(ns).Create(context.Background(), &appv1.App{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appv1.AppSpec{DeploymentTemplate: &appv1.DeploymentTemplate{
			Name: name, Image: "nginx", Replicas: &replicas}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, converge, func() (bool, error) {
		app, err := client.AppcontrollerV1().Apps(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range app.Status.Conditions {
			if c.Type == "Ready" && c.Status == metav1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
}

// TestLeaderElection runs two instances: one leads and reconciles, the other stands by;
// when the leader stops gracefully it releases the lease and the standby takes over.
func TestLeaderElection(t *testing.T) {
	ns := framework.Namespace(t)
	a := start(t, leaderOpts(ns))
	var leaderA string
	framework.Eventually(t, converge, func() (bool, error) {
		leaderA = holder(t, ns)
		return leaderA != "", nil
	})
	b := start(t, leaderOpts(ns))
	waitAppReady(t, ns, "first")
	// Several retry periods later, the first instance still leads.
	time.Sleep(time.Second)
	if got := holder(t, ns); got != leaderA {
		t.Fatalf("lease holder changed from %s to %s while the leader ran", leaderA, got)
	}

	if err := a.Stop(t); err != nil {
		t.Errorf("the leader's graceful stop returned %v", err)
	}
	framework.Eventually(t, converge, func() (bool, error) {
		h := holder(t, ns)
		return h != "" && h != leaderA, nil
	})
	waitAppReady(t, ns, "second")
	if err := b.Stop(t); err != nil {
		t.Errorf("the second leader's stop returned %v", err)
	}
}

// TestLeadershipLost takes the lease away from the leader: it stops its controllers and
// RunWithConfig fails, so that the process exits instead of running as a second leader.
func TestLeadershipLost(t *testing.T) {
	ns := framework.Namespace(t)
	a := start(t, leaderOpts(ns))
	framework.Eventually(t, converge, func() (bool, error) { return holder(t, ns) != "", nil })

	leases := framework.Client(t).CoordinationV1().Leases(ns)
	framework.Eventually(t, converge, func() (bool, error) {
		lease, err := leases.Get(context.Background(), "app-controller", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		lease.Spec.HolderIdentity = ptr.To("thief")
		lease.Spec.LeaseDurationSeconds = ptr.To[int32](3600)
		lease.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
		_, err = leases.Update(context.Background(), lease, metav1.UpdateOptions{})
		return err == nil, nil
	})
	if err := a.Wait(t); err == nil || !strings.Contains(err.Error(), "leader election lost") {
		t.Errorf("RunWithConfig returned %v, want leader election lost", err)
	}
}

// TestProbesAndMetrics checks /healthz, /readyz and the Prometheus metrics, including the
// workqueue metrics of the named App queue and the build info.
func TestProbesAndMetrics(t *testing.T) {
	ns := framework.Namespace(t)
	health, metrics := framework.FreeAddr(t), framework.FreeAddr(t)
	start(t, func(o *controllermanager.Options) {
		o.HealthProbeBindAddress = health
		o.MetricsBindAddress = metrics
	})
	framework.Eventually(t, converge, func() (bool, error) {
		code, _ := get("http://" + health + "/readyz")
		return code == http.StatusOK, nil
	})
	if code, body := get("http://" + health + "/healthz"); code != http.StatusOK || body != "ok" {
		t.Errorf("/healthz = %d %q", code, body)
	}
	waitAppReady(t, ns, "metered")
	code, body := get("http://" + metrics + "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics = %d", code)
	}
	info := version.Get()
	buildInfo := fmt.Sprintf("app_controller_build_info{commit=%q,go_version=%q,version=%q} 1\n", info.Commit, info.GoVersion, info.Version)
	for _, want := range []string{`workqueue_adds_total{name="app"}`, `workqueue_depth{name="app"}`, "rest_client_requests_total", buildInfo} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func get(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, fmt.Sprint(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

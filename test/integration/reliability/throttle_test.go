package reliability

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/utils/ptr"

	"github.com/app-controller/app-controller/test/harness"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// throttleManifest puts every request of the ServiceAccount %[1]s/app-controller, but
// its leader election Lease requests (the shipped FlowSchema, applied beside it), in a
// priority level of 10 nominal shares (about 24 seats of the API server's 600) that
// neither lends nor borrows seats and rejects (HTTP 429) what it cannot run at once;
// the ServiceAccount is cluster-admin.
const throttleManifest = `apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata: {name: throttled-%[1]s}
spec:
  type: Limited
  limited:
    nominalConcurrencyShares: 10
    lendablePercent: 0
    borrowingLimitPercent: 0
    limitResponse: {type: Reject}
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: throttled-%[1]s}
spec:
  priorityLevelConfiguration: {name: throttled-%[1]s}
  matchingPrecedence: 160
  distinguisherMethod: {type: ByUser}
  rules:
  - subjects: [{kind: ServiceAccount, serviceAccount: {name: app-controller, namespace: %[1]s}}]
    resourceRules: [{verbs: ["*"], apiGroups: ["*"], resources: ["*"], clusterScope: true, namespaces: ["*"]}]
    nonResourceRules: [{verbs: ["*"], nonResourceURLs: ["*"]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: throttled-%[1]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects: [{kind: ServiceAccount, name: app-controller, namespace: %[1]s}]
`

// TestThrottledByPriorityAndFairness runs the controller, with leader election, as a
// ServiceAccount whose requests API Priority and Fairness rejects with HTTP 429 whenever
// its priority level is busy (kept busy by a load of the same user), while 40 Apps are
// created. client-go retries the 429s after the server's Retry-After (which the server
// doubles while it keeps rejecting, up to 32s, like TCP); the leader keeps its Lease,
// whose requests the shipped FlowSchema (config/flowcontrol) sends to the built-in
// leader-election level; every App converges once the load stops.
func TestThrottledByPriorityAndFairness(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const n = 40
	user := "system:serviceaccount:" + e.ns + ":app-controller"

	shipped := framework.RepoFile(t, "config", "flowcontrol", "flowschema.yaml")
	shippedHere := strings.ReplaceAll(strings.ReplaceAll(string(shipped), "app-controller-system", e.ns),
		"name: app-controller-leader-election", "name: app-controller-leader-election-"+e.ns)
	manifest := filepath.Join(t.TempDir(), "throttle.yaml")
	if err := os.WriteFile(manifest, []byte(shippedHere+"---\n"+fmt.Sprintf(throttleManifest, e.ns)), 0o644); err != nil {
		t.Fatal(err)
	}
	framework.Kubectl(t, "apply", "-f", manifest)
	t.Cleanup(func() {
		_ = e.kube.FlowcontrolV1().FlowSchemas().Delete(ctx, "throttled-"+e.ns, metav1.DeleteOptions{})
		_ = e.kube.FlowcontrolV1().FlowSchemas().Delete(ctx, "app-controller-leader-election-"+e.ns, metav1.DeleteOptions{})
		_ = e.kube.FlowcontrolV1().PriorityLevelConfigurations().Delete(ctx, "throttled-"+e.ns, metav1.DeleteOptions{})
		_ = e.kube.RbacV1().ClusterRoleBindings().Delete(ctx, "throttled-"+e.ns, metav1.DeleteOptions{})
	})
	// The API server has taken both schemas in once they are not dangling.
	framework.Eventually(t, converge, func() (bool, error) {
		for _, name := range []string{"throttled-" + e.ns, "app-controller-leader-election-" + e.ns} {
			fs, err := e.kube.FlowcontrolV1().FlowSchemas().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			found := false
			for _, c := range fs.Status.Conditions {
				found = found || c.Type == "Dangling" && c.Status == "False"
			}
			if !found {
				return false, nil
			}
		}
		return true, nil
	})

	// The ServiceAccount's kubeconfig: the admin's, impersonating it (and its groups,
	// without system:masters, which the exempt level would serve).
	kubeconfig := impersonatingKubeconfig(t, user, "system:serviceaccounts", "system:serviceaccounts:"+e.ns, "system:authenticated")
	addr := framework.FreeAddr(t)
	metricsURL := "http://" + addr + "/metrics"
	args := []string{"--kubeconfig", kubeconfig, "--metrics-bind-address", addr, "--leader-elect", "--leader-elect-namespace", e.ns,
		"--leader-elect-lease-duration", leaseDuration.String(), "--leader-elect-renew-deadline", renewDeadline.String(),
		"--leader-elect-retry-period", retryPeriod.String(), "-v=2"}
	p, err := harness.Start(framework.BuildBinary(t, "app-controller"), args, filepath.Join(t.TempDir(), "throttled.log"))
	if err != nil {
		t.Fatal(err)
	}
	c := &controller{Process: p, id: identity(user)}
	t.Cleanup(func() {
		_ = c.Stop(syscall.SIGKILL, time.Minute)
		if t.Failed() {
			failed := c.Lines("Sync failed")
			t.Logf("%d failed syncs; first: %q", len(failed), failed[:min(3, len(failed))])
			if list, err := e.app.AppcontrollerV1().Apps(e.ns).List(ctx, metav1.ListOptions{}); err == nil {
				for i := range list.Items {
					if a := &list.Items[i]; !isReady(a) {
						t.Logf("App %s: generation %d, observed %d, conditions %+v", a.Name, a.Generation, a.Status.ObservedGeneration, a.Status.Conditions)
					}
				}
			}
			t.Logf("nominal seats of the level: %v", apiserverMetric(t, e.kube, "apiserver_flowcontrol_nominal_limit_seats", map[string]string{"priority_level": "throttled-" + e.ns}))
			t.Logf("log of the controller: %s", c.LogPath())
			t.Logf("last lines of the controller:\n%s", c.Tail(30))
		}
	})
	c.waitLog(t, logAcquired, converge)
	lease, err := e.kube.CoordinationV1().Leases(e.ns).Get(ctx, "app-controller", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	holder, transitions, renewedBefore := ptr.Deref(lease.Spec.HolderIdentity, ""), ptr.Deref(lease.Spec.LeaseTransitions, 0), lease.Spec.RenewTime.Time

	// The load: the same user lists ConfigMaps from 48 clients at once, so the level's
	// seats are busy whenever the controller asks for one.
	loadCfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	loadCfg.QPS, loadCfg.Burst = -1, 0 // no client-side limit
	load, err := kubernetes.NewForConfig(loadCfg)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 48 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, _ = load.CoreV1().ConfigMaps(e.ns).List(ctx, metav1.ListOptions{})
			}
		})
	}
	stopLoad := sync.OnceFunc(func() { close(stop); wg.Wait() })
	t.Cleanup(stopLoad)

	start := time.Now()
	e.createApps(t, 0, n)
	// The controller's requests are refused with 429 and retried.
	var throttled float64
	framework.Eventually(t, converge, func() (bool, error) {
		throttled = metric(t, metricsURL, "rest_client_requests_total", map[string]string{"code": "429"})
		return throttled >= 20, nil
	})
	// A few lease renewals (one per retry period) under the load.
	time.Sleep(3 * retryPeriod)
	throttled = metric(t, metricsURL, "rest_client_requests_total", map[string]string{"code": "429"})
	rejected := apiserverMetric(t, e.kube, "apiserver_flowcontrol_rejected_requests_total", map[string]string{"priority_level": "throttled-" + e.ns})
	underLoad, err := e.kube.CoordinationV1().Leases(e.ns).Get(ctx, "app-controller", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if renewed := underLoad.Spec.RenewTime.Time; !renewed.After(renewedBefore) || time.Since(renewed) > renewDeadline {
		t.Errorf("under the load the Lease was last renewed %s ago (at %s; acquired at %s), want within the renew deadline %s",
			time.Since(renewed), renewed, renewedBefore, renewDeadline)
	}
	stopLoad()
	t.Logf("load stopped %.1fs after the first create; %.0f 429s so far", time.Since(start).Seconds(), throttled)
	took := e.waitAllReady(t, n, 4*time.Minute)
	t.Logf("throttled: the API server rejected %.0f requests of the level (HTTP 429), %.0f of them the controller's; all %d Apps Ready %.1fs after the first create, %.1fs after the load stopped",
		rejected, throttled, n, time.Since(start).Seconds(), took.Seconds())
	e.converged(t, n)

	lease, err = e.kube.CoordinationV1().Leases(e.ns).Get(ctx, "app-controller", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(lease.Spec.HolderIdentity, "") != holder || ptr.Deref(lease.Spec.LeaseTransitions, 0) != transitions || c.exited() {
		t.Errorf("leadership lost: holder %q -> %q, transitions %d -> %d, exited %v", holder, ptr.Deref(lease.Spec.HolderIdentity, ""),
			transitions, ptr.Deref(lease.Spec.LeaseTransitions, 0), c.Exited())
	}
	if lines := c.Lines("Released the leader lease"); len(lines) > 0 {
		t.Errorf("the controller lost its lease: %q", lines)
	}
	t.Logf("the leader kept its Lease (holder %s, %d transitions, renewed %s ago)", holder, transitions, time.Since(lease.Spec.RenewTime.Time).Round(time.Millisecond))
	if rejected < throttled {
		t.Errorf("the API server counts %.0f rejections, fewer than the controller's %.0f 429s", rejected, throttled)
	}
}

// impersonatingKubeconfig writes the admin kubeconfig impersonating user in groups and
// returns its path.
func impersonatingKubeconfig(t *testing.T, user string, groups ...string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(framework.Cluster().Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, auth := range cfg.AuthInfos {
		auth.Impersonate = user
		auth.ImpersonateGroups = groups
	}
	path := filepath.Join(t.TempDir(), "impersonating.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// apiserverMetric returns the sum of the API server's samples of name whose labels
// include labels.
func apiserverMetric(t *testing.T, kube kubernetes.Interface, name string, labels map[string]string) float64 {
	t.Helper()
	body, err := kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatalf("reading the API server's metrics: %v", err)
	}
	families, err := testutil.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parsing the API server's metrics: %v", err)
	}
	v, _ := harness.Value(families, name, labels)
	return v
}

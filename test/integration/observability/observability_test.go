package observability

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controllermanager"
	appclientset "github.com/app-controller/app-controller/pkg/generated/clientset/versioned"
	"github.com/app-controller/app-controller/test/harness"
	"github.com/app-controller/app-controller/test/integration/framework"
	"github.com/app-controller/app-controller/test/monitoring"
)

const converge = 90 * time.Second

// TestMetrics runs the manager on the seed's examples (namespace tcs) until both Apps
// are Ready, then scrapes /metrics and checks each series app-controller documents, a
// drift repair, and that every metric the shipped alerts and dashboard query is exported.
func TestMetrics(t *testing.T) {
	ctx := context.Background()
	kube := framework.Client(t)
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tcs"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.CoreV1().Namespaces().Delete(context.Background(), "tcs", metav1.DeleteOptions{}) })
	framework.Kubectl(t, "apply", "-f", "../../../artifacts/example/")

	// Counters are per process: other tests of this binary may have counted before.
	retriesBefore := 0.0
	if before, err := testutil.GetCounterValuesFromGatherer(legacyregistry.DefaultGatherer,
		"app_controller_retries_exhausted_total", map[string]string{"controller": "app"}, "controller"); err == nil {
		retriesBefore = before["app"]
	}
	leaseNS := framework.Namespace(t)
	addr := framework.FreeAddr(t)
	opts := controllermanager.NewOptions()
	opts.MetricsBindAddress = addr
	opts.ShutdownTimeout = 5 * time.Second
	opts.LeaderElect = true
	opts.LeaderElectNamespace = leaseNS
	opts.LeaderElectName = "app-controller"
	framework.StartManager(t, framework.Config(t), opts)

	apps := framework.AppClient(t)
	framework.Eventually(t, converge, func() (bool, error) {
		list, err := apps.AppcontrollerV1().Apps("tcs").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		ready := 0
		for _, app := range list.Items {
			for _, c := range app.Status.Conditions {
				if c.Type == appv1.ConditionReady && c.Status == metav1.ConditionTrue && c.ObservedGeneration == app.Generation {
					ready++
				}
			}
		}
		return len(list.Items) == 2 && ready == 2, nil
	})

	// The App gauges read the informer cache, which may lag the API server a little.
	// Other tests of this binary may leave Apps in namespaces being deleted: the gauges
	// must count what the API server holds, of which the two Ready examples.
	var families map[string]*dto.MetricFamily
	var wantReady, wantConflicts int
	var err error
	waitGauges := func() {
		t.Helper()
		framework.Eventually(t, converge, func() (bool, error) {
			wantReady, wantConflicts, err = clusterCounts(ctx, apps)
			if err != nil {
				return false, err
			}
			families, err = harness.Scrape(t.Context(), "http://"+addr+"/metrics")
			if err != nil {
				return false, err
			}
			ready, _ := harness.Value(families, "app_controller_apps", map[string]string{"ready": "True"})
			conflicts, _ := harness.Value(families, "app_controller_name_conflicts", nil)
			return wantReady >= 2 && ready == float64(wantReady) && conflicts == float64(wantConflicts), nil
		})
	}
	waitGauges()

	// Drift: scale the Deployment by hand; the controller puts it back and counts a repair.
	before, _ := harness.Value(families, "app_controller_child_repairs_total", map[string]string{"kind": "Deployment"})
	framework.Kubectl(t, "-n", "tcs", "scale", "deployment/app-deploy", "--replicas=5")
	framework.Eventually(t, converge, func() (bool, error) {
		families, err = harness.Scrape(t.Context(), "http://"+addr+"/metrics")
		if err != nil {
			return false, err
		}
		v, _ := harness.Value(families, "app_controller_child_repairs_total", map[string]string{"kind": "Deployment"})
		return v >= before+1, nil
	})
	// The scaled Deployment makes its App roll out again for a moment.
	waitGauges()

	app := map[string]string{"controller": "app"}
	tests := []struct {
		name   string
		labels map[string]string
		// check gets the value (a histogram's sample count) and the number of series.
		check func(v float64, n int) bool
		want  string
	}{
		{"controller_runtime_reconcile_total", map[string]string{"controller": "app", "result": "success"}, func(v float64, n int) bool { return n == 1 && v > 0 }, "> 0"},
		{"controller_runtime_reconcile_total", map[string]string{"controller": "app"}, func(v float64, n int) bool { return n == 4 }, "4 results"},
		{"controller_runtime_reconcile_errors_total", app, func(v float64, n int) bool { return n == 1 && v >= 0 }, "a series"},
		{"controller_runtime_reconcile_panics_total", app, func(v float64, n int) bool { return n == 1 && v == 0 }, "a series at 0"},
		{"app_controller_memory_limit_bytes", nil, func(v float64, n int) bool { return n == 1 && v == 0 }, "one series, 0 without MEMORY_LIMIT"},
		{"controller_runtime_reconcile_time_seconds", app, func(v float64, n int) bool { return n == 1 && v > 0 }, "observations"},
		{"controller_runtime_active_workers", app, func(v float64, n int) bool { return n == 1 && v >= 0 && v <= float64(opts.Workers) }, "0..workers"},
		{"controller_runtime_max_concurrent_reconciles", app, func(v float64, n int) bool { return n == 1 && v == float64(opts.Workers) }, fmt.Sprint(opts.Workers)},
		{"app_controller_apps", map[string]string{"ready": "True", "reason": appv1.ReasonAvailable}, func(v float64, n int) bool { return v == float64(wantReady) }, fmt.Sprint(wantReady)},
		{"app_controller_name_conflicts", nil, func(v float64, n int) bool { return n == 1 && v == float64(wantConflicts) }, fmt.Sprint(wantConflicts)},
		{"app_controller_retries_exhausted_total", app, func(v float64, n int) bool { return n == 1 && v == retriesBefore }, fmt.Sprintf("%v (none in this test)", retriesBefore)},
		{"app_controller_child_repairs_total", map[string]string{"kind": "Deployment"}, func(v float64, n int) bool { return n == 1 && v >= 1 }, ">= 1"},
		{"app_controller_child_repairs_total", map[string]string{"kind": "Service"}, func(v float64, n int) bool { return n == 1 }, "a series"},
		{"workqueue_depth", map[string]string{"name": "app"}, func(v float64, n int) bool { return n == 1 }, "a series"},
		{"workqueue_queue_duration_seconds", map[string]string{"name": "app"}, func(v float64, n int) bool { return n == 1 && v > 0 }, "observations"},
		{"rest_client_requests_total", nil, func(v float64, n int) bool { return v > 0 }, "> 0"},
		{"leader_election_master_status", map[string]string{"name": "app-controller"}, func(v float64, n int) bool { return n == 1 && v == 1 }, "1"},
		{"go_goroutines", nil, func(v float64, n int) bool { return v > 0 }, "> 0"},
		{"process_cpu_seconds_total", nil, func(v float64, n int) bool { return n == 1 && v > 0 }, "> 0"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s%v", tt.name, tt.labels), func(t *testing.T) {
			if v, n := harness.Value(families, tt.name, tt.labels); !tt.check(v, n) {
				t.Errorf("%s%v = %v (%d series), want %s", tt.name, tt.labels, v, n, tt.want)
			}
		})
	}

	t.Run("promlint", func(t *testing.T) {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		problems, err := testutil.NewPromLinter(resp.Body).Lint()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			// Only this project's metrics: the others are client-go's and Prometheus's.
			if strings.HasPrefix(p.Metric, "app_controller_") || strings.HasPrefix(p.Metric, "controller_runtime_") {
				t.Errorf("promlint: %s", p.String())
			}
		}
	})

	t.Run("alerts and dashboard query exported metrics", func(t *testing.T) {
		exported := func(name string) bool {
			if _, ok := families[name]; ok {
				return true
			}
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if f, ok := families[strings.TrimSuffix(name, suffix)]; ok && strings.HasSuffix(name, suffix) &&
					(f.GetType() == dto.MetricType_HISTOGRAM || f.GetType() == dto.MetricType_SUMMARY && suffix != "_bucket") {
					return true
				}
			}
			// up is the scrape health Prometheus records for every target.
			return name == "up"
		}
		rules, err := monitoring.Rules("../../../config/prometheus/rules.yaml")
		if err != nil {
			t.Fatal(err)
		}
		queries, err := monitoring.DashboardQueries("../../../config/grafana/app-controller.json")
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rules {
			queries = append(queries, monitoring.DashboardQuery{Panel: "alert " + r.Alert, Expr: r.Expr})
		}
		checked := 0
		for _, q := range queries {
			names, err := monitoring.MetricNames(q.Expr)
			if err != nil {
				t.Errorf("%s: %v", q.Panel, err)
			}
			for _, name := range names {
				checked++
				if !exported(name) {
					t.Errorf("%s queries %s, which app-controller does not export", q.Panel, name)
				}
			}
		}
		t.Logf("%d metric references in %d queries checked", checked, len(queries))
	})
}

// clusterCounts returns how many Apps in the cluster are Ready and how many have a name
// conflict, by their conditions.
func clusterCounts(ctx context.Context, apps appclientset.Interface) (ready, conflicts int, err error) {
	list, err := apps.AppcontrollerV1().Apps("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, 0, err
	}
	for _, app := range list.Items {
		for _, c := range app.Status.Conditions {
			switch {
			case c.Type == appv1.ConditionReady && c.Status == metav1.ConditionTrue:
				ready++
			case c.Type == appv1.ConditionNamesAccepted && c.Status == metav1.ConditionFalse:
				conflicts++
			}
		}
	}
	return ready, conflicts, nil
}

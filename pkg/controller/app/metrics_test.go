package app

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/testutil"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// TestChildRepairsMetric checks that app_controller_child_repairs_total counts a write
// to an existing child only when it corrects drift, not when it follows a spec change or
// creates the child.
func TestChildRepairsMetric(t *testing.T) {
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	synced := syncedApp
	tests := []struct {
		name           string
		setup          func(t *testing.T, f *fixture) *appv1.App
		wantDeployment float64
		wantService    float64
	}{
		{
			name: "new App: creating children is no repair",
			setup: func(t *testing.T, f *fixture) *appv1.App {
				app := newApp("test-app", created)
				f.addApps(app)
				return app
			},
		},
		{
			name: "scaled Deployment, spec unchanged: one Deployment repair",
			setup: func(t *testing.T, f *fixture) *appv1.App {
				app := synced(t, newApp("test-app", created))
				f.addApps(app)
				f.addScaledChildren(t, app, 5)
				return app
			},
			wantDeployment: 1,
		},
		{
			name: "Service selector edited by hand: one Service repair",
			setup: func(t *testing.T, f *fixture) *appv1.App {
				app := synced(t, newApp("test-app", created))
				f.addApps(app)
				f.addDeployments(liveDeployment(t, app))
				s := liveService(t, app)
				s.Spec.Selector = map[string]string{"app": "other"}
				f.addServices(s)
				return app
			},
			wantService: 1,
		},
		{
			name: "image changed in the spec: an update, no repair",
			setup: func(t *testing.T, f *fixture) *appv1.App {
				app := synced(t, newApp("test-app", created))
				f.addDeployments(liveDeployment(t, app))
				f.addServices(liveService(t, app))
				app = app.DeepCopy()
				app.Generation = 2
				app.Spec.DeploymentTemplate.Image = "nginx:2"
				f.addApps(app)
				return app
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			app := tt.setup(t, f)
			beforeD := counterValue(t, childRepairs, "Deployment")
			beforeS := counterValue(t, childRepairs, "Service")
			if err := f.sync(app.Namespace, app.Name); err != nil {
				t.Fatal(err)
			}
			if got := counterValue(t, childRepairs, "Deployment") - beforeD; got != tt.wantDeployment {
				t.Errorf("Deployment repairs: +%v, want +%v", got, tt.wantDeployment)
			}
			if got := counterValue(t, childRepairs, "Service") - beforeS; got != tt.wantService {
				t.Errorf("Service repairs: +%v, want +%v", got, tt.wantService)
			}
		})
	}
}

// counterValue is the value of vec's counter of label.
func counterValue(t *testing.T, vec *metrics.CounterVec, label string) float64 {
	t.Helper()
	v, err := testutil.GetCounterMetricValue(vec.WithLabelValues(label))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestAppsCollector checks app_controller_apps and app_controller_name_conflicts, which
// are computed from the App cache at scrape time.
func TestAppsCollector(t *testing.T) {
	withReady := func(name string, status metav1.ConditionStatus, reason string, conflict bool) *appv1.App {
		app := newApp(name, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		app.Status.Conditions = []metav1.Condition{{Type: appv1.ConditionReady, Status: status, Reason: reason}}
		if conflict {
			app.Status.Conditions = append(app.Status.Conditions,
				metav1.Condition{Type: appv1.ConditionNamesAccepted, Status: metav1.ConditionFalse, Reason: appv1.ReasonNameConflict})
		}
		return app
	}
	tests := []struct {
		name   string
		apps   []*appv1.App
		synced bool
		want   string
	}{
		{name: "cache not synced: nothing", synced: false, apps: []*appv1.App{withReady("a", metav1.ConditionTrue, appv1.ReasonAvailable, false)}},
		{name: "no Apps: no conflicts", synced: true, want: `
# HELP app_controller_name_conflicts [ALPHA] Number of Apps with a child name held by something else (NamesAccepted=False)
# TYPE app_controller_name_conflicts gauge
app_controller_name_conflicts 0
`},
		{name: "by Ready status and reason", synced: true, apps: []*appv1.App{
			withReady("a", metav1.ConditionTrue, appv1.ReasonAvailable, false),
			withReady("b", metav1.ConditionTrue, appv1.ReasonAvailable, false),
			withReady("c", metav1.ConditionFalse, appv1.ReasonNameConflict, true),
			newApp("d", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		}, want: `
# HELP app_controller_apps [ALPHA] Number of Apps by the status and reason of their Ready condition (reason NotObserved: no Ready condition yet)
# TYPE app_controller_apps gauge
app_controller_apps{ready="False",reason="NameConflict"} 1
app_controller_apps{ready="True",reason="Available"} 2
app_controller_apps{ready="Unknown",reason="NotObserved"} 1
# HELP app_controller_name_conflicts [ALPHA] Number of Apps with a child name held by something else (NamesAccepted=False)
# TYPE app_controller_name_conflicts gauge
app_controller_name_conflicts 1
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.addApps(tt.apps...)
			// A collector of its own: the package's is registered in the legacy registry.
			c := &appsCollector{}
			c.track(f.c.appLister, func() bool { return false })
			defer c.track(f.c.appLister, func() bool { return tt.synced })()
			if err := testutil.CustomCollectAndCompare(c, strings.NewReader(tt.want),
				"app_controller_apps", "app_controller_name_conflicts"); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestAppsCollectorAddsNamespaces checks that the collector adds up the caches of the
// App controllers of several --watch-namespace, skipping one not synced yet.
func TestAppsCollectorAddsNamespaces(t *testing.T) {
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a, b, unsynced := newFixture(t), newFixture(t), newFixture(t)
	a.addApps(newApp("one", created))
	b.addApps(newApp("two", created), newApp("three", created))
	unsynced.addApps(newApp("four", created))
	c := &appsCollector{}
	defer c.track(a.c.appLister, func() bool { return true })()
	defer c.track(b.c.appLister, func() bool { return true })()
	defer c.track(unsynced.c.appLister, func() bool { return false })()
	want := `
# HELP app_controller_apps [ALPHA] Number of Apps by the status and reason of their Ready condition (reason NotObserved: no Ready condition yet)
# TYPE app_controller_apps gauge
app_controller_apps{ready="Unknown",reason="NotObserved"} 3
`
	if err := testutil.CustomCollectAndCompare(c, strings.NewReader(want), "app_controller_apps"); err != nil {
		t.Error(err)
	}
}

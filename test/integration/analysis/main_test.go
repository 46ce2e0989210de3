// Package analysis tests the canary analysis of the App controller (metric checks against
// a real Prometheus, AnalysisTemplates, webhook gates, restarts, the cost at scale)
// against a real control plane, as test/integration/app does the rest of the controller,
// apart from it so that the two run side by side, each on its own control plane. The
// helpers of this file are those of test/integration/app's main_test.go that these
// tests use.
package analysis

import (
	"context"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/app-controller/app-controller/internal/localcluster"
	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	appctrl "github.com/app-controller/app-controller/pkg/controller/app"
	"github.com/app-controller/app-controller/pkg/controller/appfixture"
	"github.com/app-controller/app-controller/pkg/controllermanager"
	appclientset "github.com/app-controller/app-controller/pkg/generated/clientset/versioned"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// The Gateway API CRDs are installed: App routes with parentRefs become HTTPRoutes.
func TestMain(m *testing.M) {
	framework.MainWithOptions(m, func(o *localcluster.Options) {
		o.GatewayAPI = true
		// TestAnalysisScale's N Apps run two pods each (stable and canary).
		if n, err := strconv.Atoi(os.Getenv(scaleAppsEnv)); err == nil && n > 0 {
			o.PodCapacity = 2*n + 200
		}
	})
}

// converge bounds how long the controller and the cluster may take to converge.
const converge = 60 * time.Second

// manager is an app-controller running in the test process.
type manager struct {
	mu sync.Mutex
	// log lists the controller's requests that are not reads, as "METHOD path".
	log []string
	// at is the time of each write of log.
	at []time.Time
	// run is the running manager.
	run *framework.Manager
	// beforeWrite, if set, sees each of the controller's writes before it is sent.
	beforeWrite func(*http.Request)
}

// startManager runs the App controller (only) against the test cluster until the test
// ends, with the given resync period.
func startManager(t *testing.T, resync time.Duration) *manager {
	t.Helper()
	opts := controllermanager.NewOptions()
	opts.ResyncPeriod = resync
	return startManagerWith(t, opts)
}

// startManagerWith runs the App controller (only) with opts until the test ends.
func startManagerWith(t *testing.T, opts *controllermanager.Options) *manager {
	t.Helper()
	m := &manager{}
	cfg := framework.Config(t)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return framework.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			switch req.Method {
			case http.MethodGet, http.MethodHead:
			default:
				m.mu.Lock()
				m.log = append(m.log, req.Method+" "+req.URL.Path)
				m.at = append(m.at, time.Now())
				hook := m.beforeWrite
				m.mu.Unlock()
				if hook != nil {
					hook(req)
				}
			}
			return rt.RoundTrip(req)
		})
	})
	opts.Controllers = []string{appctrl.ControllerName}
	opts.ShutdownTimeout = 5 * time.Second

	m.run = framework.StartManager(t, cfg, opts)
	return m
}

// writesIn returns the writes made so far to objects in namespace ns.
func (m *manager) writesIn(ns string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, w := range m.log {
		if strings.Contains(w, "/namespaces/"+ns+"/") {
			out = append(out, w)
		}
	}
	return out
}

// clients are the typed clients of the tests (admin, not the controller's).
type clients struct {
	kube kubernetes.Interface
	app  appclientset.Interface
	cfg  *rest.Config
}

func newClients(t *testing.T) clients {
	t.Helper()
	cfg := framework.Config(t)
	app, err := appclientset.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return clients{kube: framework.Client(t), app: app, cfg: cfg}
}

// getApp returns the App or fails the test.
func (c clients) getApp(t *testing.T, ns, name string) *appv1.App {
	t.Helper()
	app, err := c.app.AppcontrollerV1().Apps(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting App %s/%s: %v", ns, name, err)
	}
	return app
}

// waitReady waits until the App is Ready at its current generation.
func (c clients) waitReady(t *testing.T, ns, name string) *appv1.App {
	t.Helper()
	var app *appv1.App
	framework.Eventually(t, converge, func() (bool, error) {
		app = c.getApp(t, ns, name)
		return app.Status.ObservedGeneration == app.Generation && framework.AppCondition(app, appv1.ConditionReady) == "True/Available", nil
	})
	return app
}

// waitCondition waits until the App's condition has the given "Status/Reason".
func (c clients) waitCondition(t *testing.T, ns, name, conditionType, want string) *appv1.App {
	t.Helper()
	var app *appv1.App
	framework.Eventually(t, converge, func() (bool, error) {
		app = c.getApp(t, ns, name)
		return framework.AppCondition(app, conditionType) == want, nil
	})
	return app
}

// waitDeployment waits until the Deployment exists and check passes.
func (c clients) waitDeployment(t *testing.T, ns, name string, check func(*appsv1.Deployment) bool) *appsv1.Deployment {
	t.Helper()
	return framework.WaitFor(t, converge, c.kube.AppsV1().Deployments(ns).Get, name, check)
}

// newApp returns an App with a Deployment NAME-deploy and a Service NAME-svc.
var newApp = appfixture.NewApp

// create creates the App or fails the test.
func (c clients) create(t *testing.T, app *appv1.App) *appv1.App {
	t.Helper()
	created, err := c.app.AppcontrollerV1().Apps(app.Namespace).Create(context.Background(), app, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating App %s: %v", app.Name, err)
	}
	return created
}

// update applies mutate to the latest App and updates it, retrying on conflicts.
func (c clients) update(t *testing.T, ns, name string, mutate func(*appv1.App)) {
	t.Helper()
	framework.Eventually(t, converge, func() (bool, error) {
		app := c.getApp(t, ns, name)
		mutate(app)
		_, err := c.app.AppcontrollerV1().Apps(ns).Update(context.Background(), app, metav1.UpdateOptions{})
		return err == nil, nil
	})
}

// The canary helpers of test/integration/app's rollout_test.go that these tests use.

func rolloutApp(ns, name string, replicas int32, steps ...appv1.CanaryStep) *appv1.App {
	app := newApp(ns, name, "nginx:1", replicas)
	app.Spec.Rollout = &appv1.Rollout{Canary: &appv1.CanaryStrategy{Steps: steps, ScaleDownDelaySeconds: ptr.To[int32](0)}}
	return app
}

func setWeight(w int32) appv1.CanaryStep { return appv1.CanaryStep{SetWeight: ptr.To(w)} }

// waitRollout waits until the App's rollout is in phase at step, at its generation.
func (c clients) waitRollout(t *testing.T, ns, name string, phase appv1.RolloutPhase, step int32) *appv1.App {
	t.Helper()
	var app *appv1.App
	deadline := time.Now().Add(converge)
	for {
		app = c.getApp(t, ns, name)
		r := app.Status.Rollout
		if r != nil && app.Status.ObservedGeneration == app.Generation && r.Phase == phase && r.CurrentStepIndex == step {
			return app
		}
		if time.Now().After(deadline) {
			t.Fatalf("App %s: rollout %+v, want %s at step %d", name, r, phase, step)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

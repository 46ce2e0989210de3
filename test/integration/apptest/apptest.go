// Package apptest holds the helpers that the App controller's integration tests share
// (test/integration/app and test/integration/analysis): the admin's clients and their
// waits on an App, an App controller run in the test process that records each write it
// makes, and the builders of a canary rollout. The control plane they run against is
// test/integration/framework's; a test package still calls framework.Main from its own
// TestMain.
package apptest

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller/appfixture"
	"github.com/app-controller/app-controller/pkg/controllermanager"
	appclientset "github.com/app-controller/app-controller/pkg/generated/clientset/versioned"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// Converge bounds how long the controller and the cluster may take to converge.
const Converge = 60 * time.Second

// Manager is an App controller running in the test process, whose requests that are not
// reads are recorded as "METHOD path", each with its time.
type Manager struct {
	// Run is the running manager (Run.Stop stops it before the test ends).
	Run *framework.Manager

	mu sync.Mutex
	// log lists the controller's requests that are not reads, as "METHOD path".
	log []string
	// at is the time of each write of log.
	at []time.Time
	// beforeWrite, if set, sees each of the controller's writes before it is sent.
	beforeWrite func(*http.Request)
}

// StartManager runs the App controller (only) against the test cluster until the test
// ends, with the given resync period.
func StartManager(t *testing.T, resync time.Duration) *Manager {
	t.Helper()
	opts := controllermanager.NewOptions()
	opts.ResyncPeriod = resync
	return StartManagerWith(t, opts)
}

// StartManagerWith runs the App controller (only) with opts until the test ends. It sets
// opts.Controllers and a shutdown timeout of 5 s.
func StartManagerWith(t *testing.T, opts *controllermanager.Options) *Manager {
	t.Helper()
	m := &Manager{}
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
	m.Run = framework.StartAppController(t, cfg, opts)
	return m
}

// SetBeforeWrite makes hook see each of the controller's later writes before it is sent
// (nil: none). The hook runs on the controller's goroutine.
func (m *Manager) SetBeforeWrite(hook func(*http.Request)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.beforeWrite = hook
}

// WritesIn returns the writes made so far to objects in namespace ns.
func (m *Manager) WritesIn(ns string) []string {
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

// WritesTo returns the times of the controller's writes whose path ends with suffix.
func (m *Manager) WritesTo(suffix string) []time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []time.Time
	for i, w := range m.log {
		if strings.HasSuffix(w, suffix) {
			out = append(out, m.at[i])
		}
	}
	return out
}

// Clients are the typed clients of the tests (the admin's, not the controller's).
type Clients struct {
	Kube kubernetes.Interface
	App  appclientset.Interface
	// Cfg is the admin's rest config they were made from.
	Cfg *rest.Config
}

// NewClients returns the admin's clients of the test cluster.
func NewClients(t *testing.T) Clients {
	t.Helper()
	return Clients{Kube: framework.Client(t), App: framework.AppClient(t), Cfg: framework.Config(t)}
}

// GetApp returns the App or fails the test.
func (c Clients) GetApp(t *testing.T, ns, name string) *appv1.App {
	t.Helper()
	app, err := c.App.AppcontrollerV1().Apps(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting App %s/%s: %v", ns, name, err)
	}
	return app
}

// WaitReady waits until the App is Ready at its current generation.
func (c Clients) WaitReady(t *testing.T, ns, name string) *appv1.App {
	t.Helper()
	var app *appv1.App
	framework.Eventually(t, Converge, func() (bool, error) {
		app = c.GetApp(t, ns, name)
		return app.Status.ObservedGeneration == app.Generation && framework.AppCondition(app, appv1.ConditionReady) == "True/Available", nil
	})
	return app
}

// WaitCondition waits until the App's condition has the given "Status/Reason".
func (c Clients) WaitCondition(t *testing.T, ns, name, conditionType, want string) *appv1.App {
	t.Helper()
	var app *appv1.App
	framework.Eventually(t, Converge, func() (bool, error) {
		app = c.GetApp(t, ns, name)
		return framework.AppCondition(app, conditionType) == want, nil
	})
	return app
}

// WaitDeployment waits until the Deployment exists and check passes.
func (c Clients) WaitDeployment(t *testing.T, ns, name string, check func(*appsv1.Deployment) bool) *appsv1.Deployment {
	t.Helper()
	return framework.WaitFor(t, Converge, c.Kube.AppsV1().Deployments(ns).Get, name, check)
}

// WaitRollout waits until the App's rollout is in phase at step, at its generation.
func (c Clients) WaitRollout(t *testing.T, ns, name string, phase appv1.RolloutPhase, step int32) *appv1.App {
	t.Helper()
	var app *appv1.App
	deadline := time.Now().Add(Converge)
	for {
		app = c.GetApp(t, ns, name)
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

// WaitAborted waits until the App's rollout is aborted at step (WaitRollout) and checks
// that it says why: reason as its abortReason, each of want in its abortMessage, and its
// Ready condition False for RolloutAborted. It returns the App for the checks a test
// adds.
func (c Clients) WaitAborted(t *testing.T, ns, name string, step int32, reason string, want ...string) *appv1.App {
	t.Helper()
	app := c.WaitRollout(t, ns, name, appv1.RolloutAborted, step)
	r := app.Status.Rollout
	if r.AbortReason != reason {
		t.Errorf("%s: aborted for %s (%q), want %s", name, r.AbortReason, r.AbortMessage, reason)
	}
	for _, w := range want {
		if !strings.Contains(r.AbortMessage, w) {
			t.Errorf("%s: abort message %q, want it to contain %q", name, r.AbortMessage, w)
		}
	}
	if got := framework.AppCondition(app, appv1.ConditionReady); got != "False/"+appv1.ReasonRolloutAborted {
		t.Errorf("%s: aborted, Ready %s; want False/%s", name, got, appv1.ReasonRolloutAborted)
	}
	return app
}

// Events returns "Type Reason Message" of the Events about an object.
func (c Clients) Events(t *testing.T, ns, kind, name string) []string {
	t.Helper()
	return framework.Events(t, c.Kube, ns, kind, name)
}

// Create creates the App or fails the test.
func (c Clients) Create(t *testing.T, app *appv1.App) *appv1.App {
	t.Helper()
	created, err := c.App.AppcontrollerV1().Apps(app.Namespace).Create(context.Background(), app, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating App %s: %v", app.Name, err)
	}
	return created
}

// Delete deletes the App or fails the test.
func (c Clients) Delete(t *testing.T, ns, name string) {
	t.Helper()
	if err := c.App.AppcontrollerV1().Apps(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting App %s/%s: %v", ns, name, err)
	}
}

// Update applies mutate to the latest App and updates it, retrying on conflicts.
func (c Clients) Update(t *testing.T, ns, name string, mutate func(*appv1.App)) {
	t.Helper()
	framework.Eventually(t, Converge, func() (bool, error) {
		app := c.GetApp(t, ns, name)
		mutate(app)
		_, err := c.App.AppcontrollerV1().Apps(ns).Update(context.Background(), app, metav1.UpdateOptions{})
		return err == nil, nil
	})
}

// RolloutApp returns an App of replicas running nginx:1 with a Deployment NAME-deploy and
// a Service NAME-svc (appfixture.NewApp), whose canary rollout has steps, the canary
// removed at once after a promotion.
func RolloutApp(ns, name string, replicas int32, steps ...appv1.CanaryStep) *appv1.App {
	app := appfixture.NewApp(ns, name, "nginx:1", replicas)
	app.Spec.Rollout = &appv1.Rollout{Canary: &appv1.CanaryStrategy{Steps: steps, ScaleDownDelaySeconds: ptr.To[int32](0)}}
	return app
}

// SetWeight is a canary step that sends w percent to the canary.
func SetWeight(w int32) appv1.CanaryStep { return appv1.CanaryStep{SetWeight: ptr.To(w)} }

// Pause is a canary step that pauses for d, or until promoted when d is 0.
func Pause(d time.Duration) appv1.CanaryStep {
	p := &appv1.CanaryPause{}
	if d > 0 {
		p.Duration = &metav1.Duration{Duration: d}
	}
	return appv1.CanaryStep{Pause: p}
}

// Package app tests the App controller end to end against a real control plane:
// kube-apiserver and etcd, kube-controller-manager (garbage collector, deployment and
// replicaset controllers), kube-scheduler and kwok, which runs the pods.
package app

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

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

// eventDriven starts the App controller with a long resync, so that what it repairs it
// repairs on watch events, and returns the admin's clients and a new namespace.
func eventDriven(t *testing.T) (clients, string) {
	t.Helper()
	c := newClients(t)
	startManager(t, 10*time.Minute)
	return c, framework.Namespace(t)
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

// waitGone waits until get returns NotFound.
func waitGone(t *testing.T, what string, get func() error) {
	t.Helper()
	framework.Eventually(t, converge, func() (bool, error) {
		err := get()
		return err != nil && strings.Contains(err.Error(), "not found"), nil
	})
}

// events returns "Type Reason Message" of the Events about an object.
func (c clients) events(t *testing.T, ns, kind, name string) []string {
	t.Helper()
	return framework.Events(t, c.kube, ns, kind, name)
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

// delete deletes the App or fails the test.
func (c clients) delete(t *testing.T, ns, name string) {
	t.Helper()
	if err := c.app.AppcontrollerV1().Apps(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting App %s/%s: %v", ns, name, err)
	}
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

// kubectlEdit is how the tests edit a child by hand, as `kubectl edit` would.
var kubectlEdit = metav1.UpdateOptions{FieldManager: "kubectl-edit"}

// editBackoff spaces the tries of a hand edit that met another writer: the deployment
// controller writes a Deployment's status until well after the App reads Ready.
var editBackoff = wait.Backoff{Steps: 8, Duration: 20 * time.Millisecond, Factor: 2, Jitter: 0.1}

// getUpdater is a typed client of one kind of object in one namespace.
type getUpdater[T any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
}

// edit updates the live object name after mutate, as field manager kubectl-edit, again
// from a fresh read when another writer came in between (a conflict), and returns the API
// server's answer to the last try.
func edit[T any](t *testing.T, client getUpdater[T], kind, name string, mutate func(T)) (T, error) {
	t.Helper()
	var updated T
	err := retry.RetryOnConflict(editBackoff, func() error {
		obj, err := client.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("getting %s %s to edit it: %v", kind, name, err)
		}
		mutate(obj)
		updated, err = client.Update(context.Background(), obj, kubectlEdit)
		return err
	})
	return updated, err
}

// editDeployment edits the Deployment (edit) and returns the API server's answer.
func (c clients) editDeployment(t *testing.T, ns, name string, mutate func(*appsv1.Deployment)) (*appsv1.Deployment, error) {
	t.Helper()
	return edit(t, c.kube.AppsV1().Deployments(ns), "Deployment", name, mutate)
}

// editService edits the Service (edit); the edit must be accepted.
func (c clients) editService(t *testing.T, ns, name string, mutate func(*corev1.Service)) *corev1.Service {
	t.Helper()
	updated, err := edit(t, c.kube.CoreV1().Services(ns), "Service", name, mutate)
	if err != nil {
		t.Fatalf("editing Service %s/%s: %v", ns, name, err)
	}
	return updated
}

func mustQuantity(t *testing.T, s string) resource.Quantity {
	t.Helper()
	q, err := resource.ParseQuantity(s)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

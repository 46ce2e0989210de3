// Package app tests the App controller end to end against a real control plane:
// kube-apiserver and etcd, kube-controller-manager (garbage collector, deployment and
// replicaset controllers), kube-scheduler and kwok, which runs the pods.
package app

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	"github.com/app-controller/app-controller/internal/localcluster"
	"github.com/app-controller/app-controller/pkg/controller/appfixture"
	"github.com/app-controller/app-controller/pkg/controllermanager"
	"github.com/app-controller/app-controller/test/integration/apptest"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// The Gateway API CRDs are installed: App routes with parentRefs become HTTPRoutes.
func TestMain(m *testing.M) {
	framework.MainWithOptions(m, func(o *localcluster.Options) {
		o.GatewayAPI = true
	})
}

// The shared helpers of test/integration/apptest, under the names the tests use.
const converge = apptest.Converge

var (
	rolloutApp = apptest.RolloutApp
	setWeight  = apptest.SetWeight
	pause      = apptest.Pause
	// newApp returns an App with a Deployment NAME-deploy and a Service NAME-svc.
	newApp = appfixture.NewApp
)

// manager is an App controller running in the test process, its writes recorded
// (apptest.Manager), with the helpers of this package's tests as methods.
type manager struct{ *apptest.Manager }

// startManager runs the App controller (only) against the test cluster until the test
// ends, with the given resync period.
func startManager(t *testing.T, resync time.Duration) *manager {
	t.Helper()
	return &manager{apptest.StartManager(t, resync)}
}

// startManagerWith runs the App controller (only) with opts until the test ends.
func startManagerWith(t *testing.T, opts *controllermanager.Options) *manager {
	t.Helper()
	return &manager{apptest.StartManagerWith(t, opts)}
}

// clients are the admin's clients and their waits on an App (apptest.Clients), with the
// helpers of this package's tests as methods.
type clients struct{ apptest.Clients }

// newClients returns the admin's clients of the test cluster.
func newClients(t *testing.T) clients {
	t.Helper()
	return clients{apptest.NewClients(t)}
}

// eventDriven starts the App controller with a long resync, so that what it repairs it
// repairs on watch events, and returns the admin's clients and a new namespace.
func eventDriven(t *testing.T) (clients, string) {
	t.Helper()
	c := newClients(t)
	startManager(t, 10*time.Minute)
	return c, framework.Namespace(t)
}

// readyWeb is eventDriven with the App web (nginx, replicas) created and Ready.
func readyWeb(t *testing.T, replicas int32) (clients, string) {
	t.Helper()
	c, ns := eventDriven(t)
	c.Create(t, newApp(ns, "web", "nginx", replicas))
	c.WaitReady(t, ns, "web")
	return c, ns
}

// waitWebGone waits until the Deployment web-deploy of ns (what names it in a failure)
// and its Service web-svc are gone.
func (c clients) waitWebGone(t *testing.T, ns, what string) {
	t.Helper()
	ctx := context.Background()
	waitGone(t, what, func() error {
		_, err := c.Kube.AppsV1().Deployments(ns).Get(ctx, "web-deploy", metav1.GetOptions{})
		return err
	})
	waitGone(t, "Service", func() error {
		_, err := c.Kube.CoreV1().Services(ns).Get(ctx, "web-svc", metav1.GetOptions{})
		return err
	})
}

// waitGone waits until get returns NotFound.
func waitGone(t *testing.T, what string, get func() error) {
	t.Helper()
	framework.Eventually(t, converge, func() (bool, error) {
		err := get()
		return err != nil && strings.Contains(err.Error(), "not found"), nil
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
	return edit(t, c.Kube.AppsV1().Deployments(ns), "Deployment", name, mutate)
}

// editService edits the Service (edit); the edit must be accepted.
func (c clients) editService(t *testing.T, ns, name string, mutate func(*corev1.Service)) *corev1.Service {
	t.Helper()
	updated, err := edit(t, c.Kube.CoreV1().Services(ns), "Service", name, mutate)
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

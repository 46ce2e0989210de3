package realnode

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// appWait is how long WaitApp waits: an App's rollout step on the real node (pods
// pulled, started and Ready, a route read by Traefik) takes well under it.
const appWait = 3 * time.Minute

// Apply applies manifest to the test cluster with `kubectl apply --server-side`, as a
// user does.
func Apply(t testing.TB, manifest []byte) {
	t.Helper()
	RunStdin(t, manifest, filepath.Join(BinDir(t), "kubectl"),
		"--kubeconfig", framework.Cluster().Kubeconfig, "apply", "--server-side", "-f", "-")
}

// PatchApp merge-patches the App name of namespace ns with patch; a refusal fails the
// test.
func PatchApp(t testing.TB, ns, name, patch string) {
	t.Helper()
	_, err := framework.AppClient(t).AppcontrollerV1().Apps(ns).Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("patching App %s with %s: %v", name, patch, err)
	}
}

// WaitApp waits until the App name of namespace ns has a status of its current
// generation that done accepts, logs what and returns the App; after appWait it fails
// the test.
func WaitApp(t testing.TB, ns, name, what string, done func(*appv1.App) bool) *appv1.App {
	t.Helper()
	apps := framework.AppClient(t)
	var app *appv1.App
	framework.Eventually(t, appWait, func() (bool, error) {
		a, err := apps.AppcontrollerV1().Apps(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil || a.Status.ObservedGeneration != a.Generation || !done(a) {
			return false, nil
		}
		app = a
		return true, nil
	})
	t.Logf("App %s: %s", name, what)
	return app
}

// WaitRouted waits (WaitApp) until the App name of namespace ns is Ready and its route
// accepted, and returns it.
func WaitRouted(t testing.TB, ns, name string) *appv1.App {
	t.Helper()
	return WaitApp(t, ns, name, "Ready, its route accepted", func(app *appv1.App) bool {
		return meta.IsStatusConditionTrue(app.Status.Conditions, appv1.ConditionReady) &&
			meta.IsStatusConditionTrue(app.Status.Conditions, appv1.ConditionRouteAccepted)
	})
}

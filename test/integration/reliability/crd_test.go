package reliability

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/app-controller/app-controller/internal/localcluster"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// TestCRDDeletedAndRecreated deletes the App CRD under a running controller (every App
// goes with it, and the garbage collector takes their children), then installs it again
// and creates new Apps: the controller does not exit, its informers recover on their
// own, and the new Apps converge.
func TestCRDDeletedAndRecreated(t *testing.T) {
	e := newEnv(t)
	const n = 5
	_, c, _ := e.startConverged(t, "crd-recreated", n)

	cfg := framework.Config(t)
	ext, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const crd = "apps.appcontroller.k8s.io"
	root := framework.RepoRoot(t)
	reinstall := func() error {
		return localcluster.InstallCRDs(ctx, cfg, filepath.Join(root, "config", "crd", "bases"))
	}
	t.Cleanup(func() { _ = reinstall() }) // the other tests of this binary need it
	if err := ext.ApiextensionsV1().CustomResourceDefinitions().Delete(ctx, crd, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	framework.Eventually(t, converge, func() (bool, error) {
		_, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	// The children go with their Apps.
	framework.Eventually(t, converge, func() (bool, error) {
		_, err := e.kube.AppsV1().Deployments(e.ns).Get(ctx, appName(0)+"-deploy", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	t.Logf("CRD gone, the children garbage collected %.1fs after the delete", time.Since(deleted).Seconds())
	time.Sleep(3 * time.Second) // the controller's watches fail meanwhile

	if err := reinstall(); err != nil {
		t.Fatal(err)
	}
	recreated := time.Now()
	e.createApps(t, n, n)
	took := e.waitAllReady(t, n, converge)
	if c.exited() {
		t.Errorf("the controller exited: %v", c.Exited())
	}
	t.Logf("CRD recreated; %d new Apps Ready %.1fs after it (%.1fs after their creation)", n, time.Since(recreated).Seconds(), took.Seconds())
}

package app

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/app-controller/app-controller/pkg/controllermanager"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// TestAppSelectorShards runs two instances with disjoint --app-selector: each reconciles
// the Apps its selector picks, and writes nothing for the other's. Then an App moves from
// one to the other by a change of its label (docs/how-to/sharding.md): the instance it left
// writes nothing more for it, the one it joined takes it over without recreating its
// children, and applies its next change.
func TestAppSelectorShards(t *testing.T) {
	c := newClients(t)
	ns := framework.Namespace(t)
	shard := func(sel string) *manager {
		opts := controllermanager.NewOptions()
		opts.AppSelector = sel
		return startManagerWith(t, opts)
	}
	a, b := shard("shard=a"), shard("shard=b")
	for _, name := range []string{"a", "b"} {
		app := newApp(ns, "app-"+name, "nginx", 1)
		app.Labels = map[string]string{"shard": name}
		c.Create(t, app)
	}
	c.WaitReady(t, ns, "app-a")
	c.WaitReady(t, ns, "app-b")
	// writesFor counts m's writes for the App named app (its children and its status).
	writesFor := func(m *manager, app string) (n int) {
		for _, w := range m.WritesIn(ns) {
			if strings.Contains(w, "/"+app) {
				n++
			}
		}
		return n
	}
	for _, tc := range []struct {
		m          *manager
		own, other string
	}{{a, "app-a", "app-b"}, {b, "app-b", "app-a"}} {
		if own, other := writesFor(tc.m, tc.own), writesFor(tc.m, tc.other); own == 0 || other != 0 {
			t.Errorf("the instance of %s wrote %d times for it and %d times for %s; want some and none", tc.own, own, other, tc.other)
		}
	}

	// Move app-a to shard b, as docs/how-to/sharding.md says: a change of its label.
	ctx := context.Background()
	deployment, err := c.Kube.AppsV1().Deployments(ns).Get(ctx, "app-a-deploy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a.waitQuiet(t, ns)
	b.waitQuiet(t, ns)
	beforeA, beforeB := writesFor(a, "app-a"), writesFor(b, "app-a")
	if _, err := c.App.AppcontrollerV1().Apps(ns).Patch(ctx, "app-a", types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"shard":"b"}}}`), metav1.PatchOptions{FieldManager: "kubectl-label"}); err != nil {
		t.Fatal(err)
	}
	b.waitQuiet(t, ns)
	t.Logf("moved app-a to shard b: instance b wrote %d times for it on taking it over", writesFor(b, "app-a")-beforeB)
	if _, err := c.App.AppcontrollerV1().Apps(ns).Patch(ctx, "app-a", types.MergePatchType,
		[]byte(`{"spec":{"deploymentTemplate":{"image":"nginx:1.27"}}}`), metav1.PatchOptions{FieldManager: "kubectl-patch"}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, converge, func() (bool, error) {
		d, err := c.Kube.AppsV1().Deployments(ns).Get(ctx, "app-a-deploy", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if d.UID != deployment.UID {
			t.Fatalf("the move recreated the Deployment (UID %s, was %s)", d.UID, deployment.UID)
		}
		return d.Spec.Template.Spec.Containers[0].Image == "nginx:1.27", nil
	})
	c.WaitReady(t, ns, "app-a")
	b.waitQuiet(t, ns)
	if n := writesFor(a, "app-a") - beforeA; n != 0 {
		t.Errorf("instance a wrote %d times for app-a after it moved to shard b, want 0: %v", n, a.WritesIn(ns))
	}
	if n := writesFor(b, "app-a") - beforeB; n == 0 {
		t.Error("instance b wrote nothing for app-a: the image change was not applied by the shard it moved to")
	}
}

package nodelabel

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"

	"github.com/app-controller/app-controller/pkg/controller/controllertest"
)

// fixture is a Controller on a fake clientset, which models server-side apply with
// field ownership, and a node cache seeded from the clientset by hand (the informer
// never runs).
type fixture struct {
	t        *testing.T
	ctx      context.Context
	c        *Controller
	client   *kubefake.Clientset
	nodes    coreinformers.NodeInformer
	recorder *record.FakeRecorder
}

// newFixture builds a Controller with the rules of rulesYAML.
func newFixture(t *testing.T, rulesYAML string) *fixture {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	f := &fixture{t: t, ctx: ctx, client: kubefake.NewClientset(), recorder: record.NewFakeRecorder(100)}
	f.nodes = informers.NewSharedInformerFactory(f.client, 0).Core().V1().Nodes()
	c, err := NewController(ctx, f.client, f.nodes, mustParse(t, rulesYAML), f.recorder, Options{})
	if err != nil {
		t.Fatalf("NewController: %v", err)
	}
	f.c = c
	t.Cleanup(c.loop.Queue().ShutDown)
	return f
}

// createNode creates node through the clientset as field manager manager (its labels
// then belong to that manager) and copies it into the cache.
func (f *fixture) createNode(node *corev1.Node, manager string) {
	f.t.Helper()
	if _, err := f.client.CoreV1().Nodes().Create(f.ctx, node, metav1.CreateOptions{FieldManager: manager}); err != nil {
		f.t.Fatalf("creating node %s: %v", node.Name, err)
	}
	f.refresh(node.Name)
}

// refresh copies the node from the clientset into the cache, without managedFields as
// the manager's informer transform does.
func (f *fixture) refresh(name string) *corev1.Node {
	f.t.Helper()
	node, err := f.client.CoreV1().Nodes().Get(f.ctx, name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatalf("getting node %s: %v", name, err)
	}
	node.SetManagedFields(nil)
	if err := f.nodes.Informer().GetIndexer().Update(node); err != nil {
		f.t.Fatal(err)
	}
	return node
}

// live returns the node as the clientset holds it, managedFields included.
func (f *fixture) live(name string) *corev1.Node {
	f.t.Helper()
	node, err := f.client.CoreV1().Nodes().Get(f.ctx, name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatalf("getting node %s: %v", name, err)
	}
	return node
}

// sync runs syncNode for the named node, after clearing the recorded actions.
func (f *fixture) sync(name string) error {
	f.client.ClearActions()
	_, err := f.c.syncNode(f.ctx, cache.ObjectName{Name: name})
	return err
}

// mustSync runs sync for the named node and stops the test if it fails.
func (f *fixture) mustSync(name string) {
	f.t.Helper()
	if err := f.sync(name); err != nil {
		f.t.Fatalf("sync: %v", err)
	}
}

// wantQuiet fails the test if the last sync wrote or recorded Events; what names the
// node in the failure.
func (f *fixture) wantQuiet(what string) {
	f.t.Helper()
	if w := f.writes(); len(w) != 0 {
		f.t.Errorf("%s written: %v", what, w)
	}
	if e := f.events(); len(e) != 0 {
		f.t.Errorf("%s got events: %v", what, e)
	}
}

// writes returns the write actions (everything but get, list and watch) since the last
// sync.
func (f *fixture) writes() []core.Action { return controllertest.Writes(f.client.Actions()) }

// events drains the recorded events.
func (f *fixture) events() []string { return controllertest.DrainEvents(f.recorder) }

// queued drains the queue and returns the names it held, sorted.
func (f *fixture) queued() []string { return controllertest.DrainQueue(f.c.loop.Queue()) }

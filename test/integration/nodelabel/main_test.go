// Package nodelabel tests the node labeler end to end against a real control plane with
// kwok nodes: server-side apply ownership of labels, conflicts with other field managers,
// Events, and the controller-manager's --controllers and --node-label-config handling.
//
// The tests use their own nodes (named nl-*) and labels (it.example.com/*), and leave
// the cluster's kwok-node-0 alone.
package nodelabel

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/app-controller/app-controller/internal/localcluster"
	"github.com/app-controller/app-controller/pkg/controllermanager"
	"github.com/app-controller/app-controller/test/integration/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

// converge bounds how long the controller and the cluster may take to converge.
const converge = 60 * time.Second

// adminManager is the field manager of the labels the tests set as "someone else".
const adminManager = "it-admin"

// writeConfig writes rules to a file of the test's temporary directory and returns its
// path.
func writeConfig(t *testing.T, rules string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, []byte(rules), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// startManager runs the controller-manager in the test process with the given
// --controllers and --node-label-config until the test ends.
func startManager(t *testing.T, controllers []string, configPath string) {
	t.Helper()
	opts := controllermanager.NewOptions()
	opts.Controllers = controllers
	opts.NodeLabelConfig = configPath
	opts.ResyncPeriod = 10 * time.Second
	opts.ShutdownTimeout = 5 * time.Second

	framework.StartManager(t, framework.Config(t), opts)
}

// createNode creates a kwok node with extra labels set by adminManager, and deletes it
// when the test ends.
func createNode(t *testing.T, kube kubernetes.Interface, name string, labels map[string]string) {
	t.Helper()
	ctx := context.Background()
	if err := localcluster.CreateKwokNode(ctx, kube, name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	if len(labels) > 0 {
		setLabels(t, kube, name, labels)
	}
}

// setLabels sets (value) or removes (empty value) labels on a node as adminManager, with
// a merge patch.
func setLabels(t *testing.T, kube kubernetes.Interface, name string, labels map[string]string) {
	t.Helper()
	var parts []string
	for k, v := range labels {
		if v == "" {
			parts = append(parts, quote(k)+":null")
		} else {
			parts = append(parts, quote(k)+":"+quote(v))
		}
	}
	patch := `{"metadata":{"labels":{` + strings.Join(parts, ",") + `}}}`
	if _, err := kube.CoreV1().Nodes().Patch(context.Background(), name, types.MergePatchType, []byte(patch),
		metav1.PatchOptions{FieldManager: adminManager}); err != nil {
		t.Fatalf("patching the labels of node %s: %v", name, err)
	}
}

// quote returns s as a JSON string.
func quote(s string) string {
	return `"` + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), `"`, `\"`) + `"`
}

// getNode returns the node or fails the test.
func getNode(t *testing.T, kube kubernetes.Interface, name string) *corev1.Node {
	t.Helper()
	node, err := kube.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting node %s: %v", name, err)
	}
	return node
}

// waitLabels waits until the node's labels pass check and returns the node.
func waitLabels(t *testing.T, kube kubernetes.Interface, name string, check func(map[string]string) bool) *corev1.Node {
	t.Helper()
	var node *corev1.Node
	framework.Eventually(t, converge, func() (bool, error) {
		node = getNode(t, kube, name)
		return check(node.Labels), nil
	})
	return node
}

// waitEvent waits for an Event about the node that starts with prefix and returns it.
func waitEvent(t *testing.T, kube kubernetes.Interface, node, prefix string) string {
	t.Helper()
	return framework.WaitEvent(t, kube, metav1.NamespaceAll, "Node", node, prefix, converge)
}

// labelManagers returns the field managers that own the label key on node.
func labelManagers(node *corev1.Node, key string) []string {
	var out []string
	for _, f := range node.ManagedFields {
		if f.FieldsV1 != nil && strings.Contains(f.FieldsV1.GetRawString(), `"f:`+key+`"`) {
			out = append(out, f.Manager)
		}
	}
	return out
}

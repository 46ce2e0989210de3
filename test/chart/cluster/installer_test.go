package cluster

import (
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/app-controller/app-controller/test/integration/framework"
)

// TestInstaller runs make build-installer with an image and checks dist/install.yaml (here
// written to a temporary file): it holds the namespace, the CRD, the RBAC and the
// Deployment running that image, and the API server takes all of it in a server-side
// dry run (after the namespace was created, as kubectl apply would have).
func TestInstaller(t *testing.T) {
	root, binDir := framework.RepoRoot(t), framework.BinDir(t)
	const img = "registry.example.com/platform/app-controller:v1.2.3"
	out := filepath.Join(t.TempDir(), "install.yaml")
	// KUBECTL: the control plane's kubectl, wherever the tests found it.
	cmd := exec.Command("make", "--no-print-directory", "build-installer", "IMG="+img, "INSTALLER="+out, "KUBECTL="+filepath.Join(binDir, "kubectl"))
	cmd.Dir = root
	if output, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make build-installer: %v\n%s", err, output)
	}
	objs := decodeFile(t, out)
	var kinds []string
	var ns string
	for _, obj := range objs {
		kinds = append(kinds, obj.GetKind())
		switch obj.GetKind() {
		case "Namespace":
			ns = obj.GetName()
		case "Deployment":
			args := containerArgs(t, obj) // also checks there is one container
			containers, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
			if got := containers[0].(map[string]any)["image"]; got != img {
				t.Errorf("Deployment image = %v, want %s (args %v)", got, img, args)
			}
		}
	}
	for _, want := range []string{"Namespace", "CustomResourceDefinition", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Deployment"} {
		if !slices.Contains(kinds, want) {
			t.Errorf("install.yaml has no %s; kinds: %v", want, kinds)
		}
	}
	if ns == "" {
		t.Fatal("install.yaml creates no namespace")
	}

	ctx := context.Background()
	_, err := framework.Client(t).CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	a := newApplier(t)
	for _, obj := range objs {
		if _, err := a.apply(ctx, obj, "", true); err != nil {
			t.Error(err)
		}
	}
	t.Logf("%d objects of install.yaml taken in a dry run", len(objs))
}

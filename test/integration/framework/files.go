package framework

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/app-controller/app-controller/internal/localcluster"
)

// RepoRoot returns the repository's root directory, or fails t.
func RepoRoot(t testing.TB) string {
	t.Helper()
	return must(t, localcluster.RepoRoot)
}

// RepoFile returns the content of the repository's file at path, its elements from the
// root ("config", "rbac", "role.yaml"), or fails t.
func RepoFile(t testing.TB, path ...string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(append([]string{RepoRoot(t)}, path...)...))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// BinDir returns the directory of the binaries built by make (bin/), or fails t.
func BinDir(t testing.TB) string {
	t.Helper()
	return must(t, localcluster.BinDirFromEnv)
}

// must returns what get returns, or fails t with its error.
func must[T any](t testing.TB, get func() (T, error)) T {
	t.Helper()
	v, err := get()
	if err != nil {
		t.Fatalf("framework: %v", err)
	}
	return v
}

// AppCRD returns the App CRD as the API server holds it, or fails t.
func AppCRD(t testing.TB) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	client, err := apiextensionsclient.NewForConfig(Config(t))
	if err != nil {
		t.Fatal(err)
	}
	crd, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), "apps.appcontroller.k8s.io", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting the App CRD: %v", err)
	}
	return crd
}

package gitops

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// TestWriteCapture checks that a capture is the App's JSON indented by two spaces with a
// newline at the end, as json.MarshalIndent writes it, the masks replaced in turn.
func TestWriteCapture(t *testing.T) {
	app := &appv1.App{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns-1"}}
	app.Spec.DeploymentTemplate = &appv1.DeploymentTemplate{Name: "web", Image: "localhost:5000/demoapp"}
	r, err := Read("../../config/argocd/health.lua", app)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "capture.json")
	if err := WriteCapture(path, r.JSON, "localhost:5000", "REGISTRY", "ns-1", "NAMESPACE"); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	masked := app.DeepCopy()
	masked.Namespace = "NAMESPACE"
	masked.Spec.DeploymentTemplate.Image = "REGISTRY/demoapp"
	obj, _, err := Object(masked)
	if err != nil {
		t.Fatal(err)
	}
	want, err := json.MarshalIndent(obj, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want)+"\n" {
		t.Errorf("capture:\n%s\nwant:\n%s", got, want)
	}
	if err := WriteCapture(path, r.JSON, "odd"); err == nil {
		t.Error("masks not in pairs: no error")
	}
}

package app

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// updateGolden rewrites the golden files instead of comparing with them. Use it only on
// purpose: the golden files hold the children the controller made before the App API
// grew, and an upgrade must not change them.
var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/*.golden.json")

// TestSeedExamplesChildrenUnchanged checks that the children the controller wants for the
// seed's example Apps (artifacts/example) are byte for byte the apply configurations the
// controller made before the optional fields were added: same fields, same
// applied-config hash, so upgrading the controller writes nothing and rolls nothing out.
// testdata/previous_fields.yaml adds an App using every field of that API. Each App is
// checked as written and as the apiserver stores it (schema defaults applied).
func TestSeedExamplesChildrenUnchanged(t *testing.T) {
	files, err := filepath.Glob("../../../artifacts/example/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no seed examples found: %v", err)
	}
	// And an App with every field the API had before it grew.
	files = append(files, filepath.Join("testdata", "previous_fields.yaml"))
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		written := &appv1.App{}
		if err := yaml.UnmarshalStrict(data, written); err != nil {
			t.Fatalf("decoding %s: %v", file, err)
		}
		// A fixed UID: the owner reference carries it.
		written.UID = types.UID("00000000-0000-0000-0000-" + strings.Repeat("0", 12))
		stored := written.DeepCopy()
		applySchemaDefaults(stored)

		for _, tc := range []struct {
			variant string
			app     *appv1.App
		}{{"written", written}, {"stored", stored}} {
			name := strings.TrimSuffix(filepath.Base(file), ".yaml") + "." + tc.variant
			t.Run(name, func(t *testing.T) {
				deployment, err := DesiredDeployment(tc.app)
				if err != nil {
					t.Fatal(err)
				}
				service, err := DesiredService(tc.app)
				if err != nil {
					t.Fatal(err)
				}
				got, err := json.MarshalIndent(map[string]any{"deployment": deployment, "service": service}, "", "  ")
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, '\n')
				golden := filepath.Join("testdata", name+".golden.json")
				if *updateGolden {
					if err := os.WriteFile(golden, got, 0o644); err != nil {
						t.Fatal(err)
					}
					return
				}
				want, err := os.ReadFile(golden)
				if err != nil {
					t.Fatalf("reading golden file (create it with -update-golden, only from the previous controller): %v", err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("children of %s changed; an upgrade would rewrite them.\ngot:\n%s\nwant:\n%s", file, got, want)
				}
			})
		}
	}
}

// applySchemaDefaults sets what the CRD's schema defaults set when the apiserver stores
// an App (config/crd/bases: replicas 1, Service port 8080, type ClusterIP).
func applySchemaDefaults(app *appv1.App) {
	if t := app.Spec.DeploymentTemplate; t != nil && t.Replicas == nil {
		t.Replicas = ptr.To[int32](1)
	}
	if t := app.Spec.ServiceTemplate; t != nil {
		if t.Port == 0 {
			t.Port = 8080
		}
		if t.Type == "" {
			t.Type = corev1.ServiceTypeClusterIP
		}
	}
}

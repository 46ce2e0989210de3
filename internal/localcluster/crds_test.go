package localcluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadCRDs(t *testing.T) {
	write := func(t *testing.T, files map[string]string) string {
		t.Helper()
		dir := t.TempDir()
		for name, content := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	crd := func(name string) string {
		return "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: " + name + "\n"
	}
	tests := []struct {
		name      string
		files     map[string]string
		wantNames []string
		wantErr   string
	}{
		{
			name:      "one per file, sorted by file",
			files:     map[string]string{"b.yaml": crd("bs.example.com"), "a.yaml": crd("as.example.com"), "notes.txt": "x"},
			wantNames: []string{"as.example.com", "bs.example.com"},
		},
		{
			name:      "several documents, empty ones skipped",
			files:     map[string]string{"all.yaml": "---\n" + crd("as.example.com") + "---\n---\n" + crd("bs.example.com")},
			wantNames: []string{"as.example.com", "bs.example.com"},
		},
		{
			name:    "not a CRD",
			files:   map[string]string{"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"},
			wantErr: "is not an apiextensions.k8s.io CustomResourceDefinition",
		},
		{
			name:    "empty directory",
			files:   map[string]string{},
			wantErr: "no CustomResourceDefinitions",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			crds, err := ReadCRDs(write(t, tt.files))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ReadCRDs() error = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, c := range crds {
				names = append(names, c.Name)
			}
			if strings.Join(names, ",") != strings.Join(tt.wantNames, ",") {
				t.Errorf("ReadCRDs() names = %v, want %v", names, tt.wantNames)
			}
		})
	}
}

func TestReadCRDsOfTheRepository(t *testing.T) {
	crds, err := ReadCRDs(filepath.Join("..", "..", "config", "crd", "bases"))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range crds {
		found = found || c.Name == "apps.appcontroller.k8s.io"
	}
	if !found {
		t.Errorf("apps.appcontroller.k8s.io not among the repository's CRDs")
	}
}

package localcluster

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// makeBinDir fills dir with fake binaries (all but the skipped ones) and, unless
// noStages, a kwok-stages directory with one Stage file.
func makeBinDir(t *testing.T, dir string, noStages bool, skip ...string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range requiredBinaries {
		if slices.Contains(skip, name) {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if noStages {
		return
	}
	stages := filepath.Join(dir, kwokStagesDir)
	if err := os.MkdirAll(stages, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stages, "node-initialize.yaml"), []byte("kind: Stage\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeGoMod(t *testing.T, dir, module string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	content := "// a comment\nmodule " + module + " // trailing comment\n\ngo 1.26.0\n"
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestBinDirFromEnv(t *testing.T) {
	tests := []struct {
		name string
		// setup prepares root (a fresh temporary directory) and returns the value of
		// $APP_CONTROLLER_BIN_DIR and the working directory to use.
		setup   func(t *testing.T, root string) (env, wd string)
		want    string // relative to root; "" when an error is expected
		wantErr []string
	}{
		{
			name: "env points at complete directory",
			setup: func(t *testing.T, root string) (string, string) {
				makeBinDir(t, filepath.Join(root, "mybin"), false)
				return filepath.Join(root, "mybin"), root
			},
			want: "mybin",
		},
		{
			name: "env points at empty directory",
			setup: func(t *testing.T, root string) (string, string) {
				return root, root
			},
			wantErr: []string{"run `make tools`", "kube-apiserver", "etcd", "kwok"},
		},
		{
			name: "one binary missing",
			setup: func(t *testing.T, root string) (string, string) {
				makeBinDir(t, filepath.Join(root, "bin"), false, "kube-scheduler")
				return filepath.Join(root, "bin"), root
			},
			wantErr: []string{"run `make tools`", "kube-scheduler"},
		},
		{
			name: "kwok stages missing",
			setup: func(t *testing.T, root string) (string, string) {
				makeBinDir(t, filepath.Join(root, "bin"), true)
				return filepath.Join(root, "bin"), root
			},
			wantErr: []string{"run `make tools`", "kwok stages"},
		},
		{
			name: "repo root found from a subdirectory, past another module",
			setup: func(t *testing.T, root string) (string, string) {
				writeGoMod(t, root, ModulePath)
				writeGoMod(t, filepath.Join(root, "hack", "tools"), ModulePath+"/hack/tools")
				makeBinDir(t, filepath.Join(root, "bin"), false)
				wd := filepath.Join(root, "hack", "tools", "etcd")
				if err := os.MkdirAll(wd, 0o755); err != nil {
					t.Fatal(err)
				}
				return "", wd
			},
			want: "bin",
		},
		{
			name: "repo root found but binaries missing",
			setup: func(t *testing.T, root string) (string, string) {
				writeGoMod(t, root, ModulePath)
				return "", root
			},
			wantErr: []string{"run `make tools`", "bin"},
		},
		{
			name: "no repo root",
			setup: func(t *testing.T, root string) (string, string) {
				writeGoMod(t, root, "example.com/other")
				return "", root
			},
			wantErr: []string{"APP_CONTROLLER_BIN_DIR", ModulePath},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root, err := filepath.EvalSymlinks(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			env, wd := tt.setup(t, root)
			t.Setenv(BinDirEnv, env)
			t.Chdir(wd)

			got, err := BinDirFromEnv()
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatalf("BinDirFromEnv() = %q, want an error", got)
				}
				for _, want := range tt.wantErr {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("BinDirFromEnv() error = %q, want it to contain %q", err, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("BinDirFromEnv(): %v", err)
			}
			if want := filepath.Join(root, tt.want); got != want {
				t.Errorf("BinDirFromEnv() = %q, want %q", got, want)
			}
		})
	}
}

func TestModulePath(t *testing.T) {
	tests := []struct {
		gomod string
		want  string
	}{
		{"module github.com/app-controller/app-controller\n\ngo 1.26.0\n", ModulePath},
		{"// comment\nmodule \"github.com/app-controller/app-controller\"\n", ModulePath},
		{"module github.com/app-controller/app-controller/hack/tools // tools\n", ModulePath + "/hack/tools"},
		{"go 1.26.0\n", ""},
	}
	for _, tt := range tests {
		if got := modulePath([]byte(tt.gomod)); got != tt.want {
			t.Errorf("modulePath(%q) = %q, want %q", tt.gomod, got, tt.want)
		}
	}
}

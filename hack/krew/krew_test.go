package main

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// manifest is the part of a krew Plugin manifest the test checks.
type manifest struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version          string `json:"version"`
		ShortDescription string `json:"shortDescription"`
		Platforms        []struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			URI    string `json:"uri"`
			SHA256 string `json:"sha256"`
			Files  []struct {
				From string `json:"from"`
				To   string `json:"to"`
			} `json:"files"`
			Bin string `json:"bin"`
		} `json:"platforms"`
	} `json:"spec"`
}

// TestDist packs small fake binaries with the real template (app.yaml) and
// checks the rendered manifest against the archives: sha256, URI, files and binary.
func TestDist(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	complete := write("kubectl_complete-app", "#!/bin/sh\nexec kubectl-app __complete \"$@\"\n", 0o755)
	readme := write("README.md", "# kubectl app\n", 0o644)
	platforms := []string{"linux/amd64", "darwin/arm64", "windows/amd64"}
	var binaries []Binary
	for _, p := range platforms {
		binaries = append(binaries, Binary{Platform: p, Path: write(strings.ReplaceAll(p, "/", "-"), "binary for "+p, 0o755)})
	}
	dist := filepath.Join(dir, "dist")
	opts := Options{Version: "v1.2.3", Template: "app.yaml", Dist: dist, URIBase: DefaultURIBase, Binaries: binaries, Files: []string{complete, readme}}
	path, err := Dist(opts)
	if err != nil {
		t.Fatalf("Dist: %v", err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m manifest
	if err := yaml.Unmarshal(data, &m); err != nil {
		t.Fatalf("parsing the rendered manifest: %v\n%s", err, data)
	}
	if m.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || m.Kind != "Plugin" || m.Metadata.Name != "app" || m.Spec.Version != "v1.2.3" || m.Spec.ShortDescription == "" {
		t.Errorf("manifest header: %+v", m)
	}
	if len(m.Spec.Platforms) != len(platforms) {
		t.Fatalf("manifest has %d platforms, want %d:\n%s", len(m.Spec.Platforms), len(platforms), data)
	}
	for i, want := range platforms {
		p := m.Spec.Platforms[i]
		t.Run(want, func(t *testing.T) {
			goos, arch, _ := strings.Cut(want, "/")
			if p.Selector.MatchLabels["os"] != goos || p.Selector.MatchLabels["arch"] != arch {
				t.Errorf("selector %v, want os %s arch %s", p.Selector.MatchLabels, goos, arch)
			}
			name := "kubectl-app_v1.2.3_" + goos + "_" + arch + ".tar.gz"
			if wantURI := "https://github.com/app-controller/app-controller/releases/download/v1.2.3/" + name; p.URI != wantURI {
				t.Errorf("uri %s, want %s", p.URI, wantURI)
			}
			archive := filepath.Join(dist, name)
			raw, err := os.ReadFile(archive)
			if err != nil {
				t.Fatalf("reading the archive: %v", err)
			}
			sum := sha256.Sum256(raw)
			if got := hex.EncodeToString(sum[:]); p.SHA256 != got {
				t.Errorf("sha256 in the manifest %s, of the archive %s", p.SHA256, got)
			}
			contents := readArchive(t, archive)
			wantBin := "kubectl-app"
			if goos == "windows" {
				wantBin += ".exe"
			}
			if p.Bin != wantBin {
				t.Errorf("bin %s, want %s", p.Bin, wantBin)
			}
			wantContents := map[string]string{
				wantBin:                "binary for " + want,
				"kubectl_complete-app": "#!/bin/sh\nexec kubectl-app __complete \"$@\"\n",
				"README.md":            "# kubectl app\n",
			}
			if len(contents) != len(wantContents) {
				t.Errorf("archive holds %d files, want %d", len(contents), len(wantContents))
			}
			for name, content := range wantContents {
				if got, ok := contents[name]; !ok || got.content != content {
					t.Errorf("archive entry %s: %q (present %v), want %q", name, got.content, ok, content)
				}
			}
			if contents[wantBin].mode&0o111 == 0 || contents["kubectl_complete-app"].mode&0o111 == 0 {
				t.Errorf("binary or completion script not executable: %o, %o", contents[wantBin].mode, contents["kubectl_complete-app"].mode)
			}
			var from []string
			for _, f := range p.Files {
				from = append(from, f.From)
				if _, ok := contents[f.From]; !ok || f.To != "." {
					t.Errorf("files entry %+v: not in the archive, or not installed to .", f)
				}
			}
			if !slices.Contains(from, p.Bin) {
				t.Errorf("files %v do not install bin %s", from, p.Bin)
			}
		})
	}

	t.Run("reproducible", func(t *testing.T) {
		first, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Dist(opts); err != nil {
			t.Fatal(err)
		}
		second, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if string(first) != string(second) {
			t.Error("a second run with the same inputs rendered another manifest (archives differ)")
		}
	})
}

func TestDistErrors(t *testing.T) {
	tests := []struct {
		name    string
		opts    Options
		wantErr string
	}{
		{name: "git describe version", opts: Options{Version: "decf461-dirty", Binaries: []Binary{{Platform: "linux/amd64", Path: "x"}}}, wantErr: "not a semantic version"},
		{name: "no binaries", opts: Options{Version: "v0.1.0"}, wantErr: "no binary"},
		{name: "bad platform", opts: Options{Version: "v0.1.0", Dist: t.TempDir(), Binaries: []Binary{{Platform: "linux", Path: "x"}}}, wantErr: "want OS/ARCH"},
		{name: "missing binary", opts: Options{Version: "v0.1.0", Dist: t.TempDir(), Binaries: []Binary{{Platform: "linux/amd64", Path: "/nonexistent"}}}, wantErr: "reading /nonexistent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Dist(tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Dist: %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestRenderMissingKey(t *testing.T) {
	if _, err := Render("{{ .Nope }}", "v0.1.0", nil); err == nil {
		t.Error("Render of a template naming an unknown field: no error")
	}
}

// archived is an entry of an archive.
type archived struct {
	content string
	mode    int64
}

// readArchive returns the regular files of a tar.gz by name.
func readArchive(t *testing.T, path string) map[string]archived {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s is not gzip: %v", path, err)
	}
	tr := tar.NewReader(gz)
	out := map[string]archived{}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("reading %s: %v", path, err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[hdr.Name] = archived{content: string(data), mode: hdr.Mode}
	}
}

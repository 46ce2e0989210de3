package ociimage

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

// The image `make image` wrote; `make test-image` sets these.
const (
	envLayout    = "IMAGE_LAYOUT"    // the OCI layout directory
	envBinaries  = "IMAGE_BINARIES"  // holds <os>-<arch>/app-controller, the binaries it was built from
	envPlatforms = "IMAGE_PLATFORMS" // the platforms it was built for, comma-separated (PLATFORMS)
	envSBOM      = "IMAGE_SBOM"      // the SBOM make image wrote beside the layout (the host platform's)
)

// The repository's LICENSE, which make image puts into the image (from this package's
// directory, hack/tools/imagebuild/ociimage).
const licenseFile = "../../../../LICENSE"

// sbomFileName is the SBOM of each platform beside its binary, <os>-<arch>/sbom.cdx.json.
const sbomFileName = "sbom.cdx.json"

// wantPlatforms returns the platforms the index must hold, in order: those of
// $IMAGE_PLATFORMS (the Makefile's PLATFORMS, which `make test-image` passes), each with
// the binary it was built from under dir (<os>-<arch>/app-controller).
func wantPlatforms(t *testing.T, dir string) []Platform {
	t.Helper()
	list := os.Getenv(envPlatforms)
	if list == "" {
		t.Fatalf("%s is not set: run `make test-image`, which passes the platforms the image was built for", envPlatforms)
	}
	var out []Platform
	for _, spec := range strings.Split(list, ",") {
		p, err := ParsePlatform(spec + "=" + filepath.Join(dir, strings.ReplaceAll(spec, "/", "-"), "app-controller"))
		if err != nil {
			t.Fatalf("%s: %v", envPlatforms, err)
		}
		p.SBOM = filepath.Join(filepath.Dir(p.Binary), sbomFileName)
		out = append(out, p)
	}
	return out
}

// TestBuiltImage checks the image `make image` built: a valid index of the platforms it
// was built for ($IMAGE_PLATFORMS), each with the user, entrypoint and labels; the host
// platform's binary is static, runs and names the commit of the revision label; the base
// files are right; and building again from the same binaries and labels gives the same
// index digest.
func TestBuiltImage(t *testing.T) {
	dir := os.Getenv(envLayout)
	if dir == "" {
		t.Skipf("%s is not set: run `make test-image`, which builds the image first", envLayout)
	}
	top, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := validate.Index(top); err != nil {
		t.Fatalf("the layout does not validate: %v", err)
	}
	idx, err := ReadIndex(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}

	var opts Options
	images := map[string]v1.Image{}
	for _, desc := range m.Manifests {
		if desc.Platform == nil {
			t.Fatalf("manifest %s has no platform", desc.Digest)
		}
		p := desc.Platform.String()
		img, err := idx.Image(desc.Digest)
		if err != nil {
			t.Fatal(err)
		}
		images[p] = img
		t.Run(p, func(t *testing.T) { opts = checkConfig(t, img, desc.Platform) })
	}
	platforms := wantPlatforms(t, os.Getenv(envBinaries))
	var wantNames []string
	for _, p := range platforms {
		wantNames = append(wantNames, p.String())
		if images[p.String()] == nil {
			t.Errorf("the index lacks %s; it has %v", p, keys(images))
		}
	}
	if len(images) != len(platforms) {
		t.Errorf("the index has %v, want only %v", keys(images), wantNames)
	}
	if t.Failed() {
		t.FailNow()
	}

	host := "linux/" + runtime.GOARCH
	if runtime.GOARCH == "arm64" {
		host += "/v8"
	}
	img := images[host]
	if img == nil {
		t.Fatalf("no image for the host platform %s", host)
	}
	files := extract(t, img)
	t.Run("static binary", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "app-controller")
		if err := os.WriteFile(path, files["app-controller"].body, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := checkStatic(path); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(path, "--version").CombinedOutput()
		if err != nil {
			t.Fatalf("app-controller --version: %v\n%s", err, out)
		}
		if want := "commit " + opts.Revision; !strings.Contains(string(out), want) {
			t.Errorf("app-controller --version printed %q, want it to contain %q (the revision label)", out, want)
		}
		if want := "version " + opts.Version + ","; !strings.Contains(string(out), want) {
			t.Errorf("app-controller --version printed %q, want it to contain %q (the version label)", out, want)
		}
		t.Logf("app-controller --version: %s", strings.TrimSpace(string(out)))
	})
	t.Run("base files", func(t *testing.T) { checkBase(t, files) })
	t.Run("SBOM", func(t *testing.T) { checkSBOM(t, files, opts.Version) })

	t.Run("reproducible", func(t *testing.T) {
		if os.Getenv(envBinaries) == "" {
			t.Skipf("%s is not set", envBinaries)
		}
		opts.Platforms = platforms
		opts.Entrypoint = "/app-controller"
		opts.Files = []File{{Path: DocDir + "/LICENSE", Source: licenseFile}}
		want, err := idx.Digest()
		if err != nil {
			t.Fatal(err)
		}
		if got := indexDigest(t, opts); got != want {
			t.Errorf("built again from the same binaries and labels: index %s, the layout holds %s", got, want)
		}
	})
}

// checkConfig checks the config of one image and returns the build options its labels
// give.
func checkConfig(t *testing.T, img v1.Image, platform *v1.Platform) Options {
	t.Helper()
	if err := validate.Image(img); err != nil {
		t.Fatalf("image does not validate: %v", err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.OS != platform.OS || cfg.Architecture != platform.Architecture || cfg.Variant != platform.Variant {
		t.Errorf("config platform %s/%s/%s, index says %s", cfg.OS, cfg.Architecture, cfg.Variant, platform)
	}
	if cfg.Config.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532", cfg.Config.User)
	}
	if len(cfg.Config.Entrypoint) != 1 || cfg.Config.Entrypoint[0] != "/app-controller" {
		t.Errorf("entrypoint %q, want [/app-controller]", cfg.Config.Entrypoint)
	}
	labels := cfg.Config.Labels
	for _, key := range []string{LabelSource, LabelRevision, LabelVersion, LabelCreated} {
		if labels[key] == "" {
			t.Errorf("label %s is missing", key)
		}
	}
	if got := labels[LabelSource]; got != "https://github.com/app-controller/app-controller" {
		t.Errorf("source label %q", got)
	}
	created, err := time.Parse(time.RFC3339, labels[LabelCreated])
	if err != nil {
		t.Errorf("created label: %v", err)
	} else if !cfg.Created.Equal(created) {
		t.Errorf("config created %v, label %v", cfg.Created.Time, created)
	}
	return Options{Created: created, Version: labels[LabelVersion], Revision: labels[LabelRevision], Source: labels[LabelSource]}
}

type file struct {
	hdr  *tar.Header
	body []byte
}

// extract reads the flattened file system of img.
func extract(t *testing.T, img v1.Image) map[string]file {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	files := map[string]file{}
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[strings.TrimSuffix(hdr.Name, "/")] = file{hdr: hdr, body: body}
	}
}

func checkBase(t *testing.T, files map[string]file) {
	t.Helper()
	tests := []struct {
		path string
		mode fs.FileMode
		want string // a line the file holds
	}{
		{path: "etc/passwd", mode: 0o644, want: "nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin"},
		{path: "etc/passwd", mode: 0o644, want: "root:x:0:0:root:/root:/sbin/nologin"},
		{path: "etc/group", mode: 0o644, want: "nonroot:x:65532:"},
		{path: "etc/group", mode: 0o644, want: "root:x:0:"},
		{path: "tmp", mode: fs.ModeDir | fs.ModeSticky | 0o777},
		{path: "home/nonroot", mode: fs.ModeDir | 0o700},
		{path: "app-controller", mode: 0o755},
		{path: "usr/share/doc/app-controller/LICENSE", mode: 0o644, want: "                                 Apache License"},
		{path: "usr/share/doc/app-controller/sbom.cdx.json", mode: 0o644},
	}
	for _, tt := range tests {
		t.Run(tt.path+" "+tt.want, func(t *testing.T) {
			f, ok := files[tt.path]
			if !ok {
				t.Fatalf("%s is missing", tt.path)
			}
			if got := f.hdr.FileInfo().Mode(); got != tt.mode {
				t.Errorf("mode %v, want %v", got, tt.mode)
			}
			if tt.want != "" && !contains(strings.Split(string(f.body), "\n"), tt.want) {
				t.Errorf("lacks the line %q:\n%s", tt.want, f.body)
			}
		})
	}
	if f := files["home/nonroot"]; f.hdr != nil && (f.hdr.Uid != NonrootUID || f.hdr.Gid != NonrootUID) {
		t.Errorf("home/nonroot is owned by %d:%d, want nonroot", f.hdr.Uid, f.hdr.Gid)
	}
}

// checkStatic fails if the ELF file at path asks for a dynamic loader.
func checkStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("opening %s as ELF: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s has a PT_INTERP program header: it is dynamically linked", path)
		}
	}
	if f.Section(".interp") != nil {
		return fmt.Errorf("%s has an .interp section: it is dynamically linked", path)
	}
	return nil
}

// TestCheckStatic: the check tells a dynamically linked binary (/bin/sh) from a static
// one (a minimal program built with CGO_ENABLED=0).
func TestCheckStatic(t *testing.T) {
	dynamic, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh on PATH")
	}
	if dynamic, err = filepath.EvalSymlinks(dynamic); err != nil {
		t.Fatal(err)
	}
	if err := checkStatic(dynamic); err == nil {
		t.Errorf("checkStatic(%s) = nil, want dynamically linked", dynamic)
	}

	dir := t.TempDir()
	for name, content := range map[string]string{
		"go.mod":  "module static\n",
		"main.go": "package main\n\nfunc main() {}\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	build := exec.Command("go", "build", "-o", "static", ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building a static binary: %v\n%s", err, out)
	}
	if err := checkStatic(filepath.Join(dir, "static")); err != nil {
		t.Errorf("checkStatic of a CGO_ENABLED=0 binary: %v", err)
	}
}

func contains(lines []string, want string) bool {
	for _, l := range lines {
		if l == want {
			return true
		}
	}
	return false
}

func keys(m map[string]v1.Image) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// cycloneDX is the part of a CycloneDX JSON document the image test reads.
type cycloneDX struct {
	BOMFormat   string `json:"bomFormat"`
	SpecVersion string `json:"specVersion"`
	Version     int    `json:"version"`
	Metadata    struct {
		Component  cdxComponent `json:"component"`
		Properties []struct {
			Name  string `json:"name"`
			Value string `json:"value"`
		} `json:"properties"`
	} `json:"metadata"`
	Components []cdxComponent `json:"components"`
}

type cdxComponent struct {
	BOMRef  string `json:"bom-ref"`
	Type    string `json:"type"`
	Name    string `json:"name"`
	Version string `json:"version"`
	PURL    string `json:"purl"`
}

// checkSBOM checks the SBOM of the host platform's image: a CycloneDX JSON document
// (bomFormat, specVersion 1.x, version) whose main component is the module
// github.com/app-controller/app-controller at the version label, which lists every
// module the binary was built from (its build info) at the same version,
// k8s.io/client-go among them, and the Go standard library, and which names the
// binary's SHA-256; the copy make image wrote beside the layout is the same document.
func checkSBOM(t *testing.T, files map[string]file, version string) {
	t.Helper()
	f, ok := files[strings.TrimPrefix(SBOMPath, "/")]
	if !ok {
		t.Fatalf("the image has no %s", SBOMPath)
	}
	var bom cycloneDX
	dec := json.NewDecoder(bytes.NewReader(f.body))
	if err := dec.Decode(&bom); err != nil {
		t.Fatalf("%s is not JSON: %v", SBOMPath, err)
	}
	if bom.BOMFormat != "CycloneDX" || !strings.HasPrefix(bom.SpecVersion, "1.") || bom.Version < 1 {
		t.Errorf("bomFormat %q, specVersion %q, version %d: want CycloneDX, 1.x, >= 1", bom.BOMFormat, bom.SpecVersion, bom.Version)
	}
	main := bom.Metadata.Component
	if main.Name != "github.com/app-controller/app-controller" || main.Type != "application" || main.Version != version {
		t.Errorf("main component %+v: want the application github.com/app-controller/app-controller at %s", main, version)
	}

	binary := files["app-controller"].body
	info, err := buildinfo.Read(bytes.NewReader(binary))
	if err != nil {
		t.Fatalf("reading the build info of /app-controller: %v", err)
	}
	listed := map[string]string{}
	for _, c := range bom.Components {
		if c.Name == "" || c.Version == "" || !strings.HasPrefix(c.PURL, "pkg:golang/") {
			t.Errorf("component %+v: want a name, a version and a pkg:golang purl", c)
		}
		listed[c.Name] = c.Version
	}
	for _, dep := range info.Deps {
		want := dep.Version
		if dep.Replace != nil {
			want = dep.Replace.Version
		}
		if got, ok := listed[dep.Path]; !ok {
			t.Errorf("the SBOM lacks the module %s %s that the binary was built from", dep.Path, want)
		} else if got != want {
			t.Errorf("the SBOM lists %s %s, the binary was built from %s", dep.Path, got, want)
		}
	}
	clientGo := ""
	for _, dep := range info.Deps {
		if dep.Path == "k8s.io/client-go" {
			clientGo = dep.Version
		}
	}
	if clientGo == "" || listed["k8s.io/client-go"] != clientGo {
		t.Errorf("k8s.io/client-go: the SBOM lists %q, the binary has %q", listed["k8s.io/client-go"], clientGo)
	}
	if got := listed["std"]; got != info.GoVersion {
		t.Errorf("the SBOM lists the standard library at %q, the binary was built with %s", got, info.GoVersion)
	}
	sum := sha256.Sum256(binary)
	found := false
	for _, p := range bom.Metadata.Properties {
		if p.Name == "cdx:gomod:binary:hash:SHA-256" {
			found = true
			if p.Value != hex.EncodeToString(sum[:]) {
				t.Errorf("the SBOM describes a binary of SHA-256 %s, the image holds %x", p.Value, sum)
			}
		}
	}
	if !found {
		t.Error("the SBOM names no SHA-256 of the binary (cdx:gomod:binary:hash:SHA-256)")
	}
	t.Logf("SBOM: CycloneDX %s, %s %s, %d components, k8s.io/client-go %s", bom.SpecVersion, main.Name, main.Version, len(bom.Components), listed["k8s.io/client-go"])

	if path := os.Getenv(envSBOM); path != "" {
		beside, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("the SBOM beside the layout: %v", err)
		}
		if !bytes.Equal(beside, f.body) {
			t.Errorf("%s differs from the image's %s", path, SBOMPath)
		}
	}
}

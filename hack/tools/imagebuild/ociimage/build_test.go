package ociimage

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

var testCreated = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// testOptions builds from small fake binaries in a temporary directory.
func testOptions(t *testing.T) Options {
	t.Helper()
	dir := t.TempDir()
	var platforms []Platform
	for _, arch := range []string{"amd64", "arm64"} {
		path := filepath.Join(dir, arch)
		if err := os.WriteFile(path, []byte("binary for "+arch), 0o755); err != nil {
			t.Fatal(err)
		}
		p, err := ParsePlatform("linux/" + arch + "=" + path)
		if err != nil {
			t.Fatal(err)
		}
		p.SBOM = filepath.Join(dir, arch+".cdx.json")
		if err := os.WriteFile(p.SBOM, []byte(`{"bomFormat":"CycloneDX","arch":"`+arch+`"}`), 0o644); err != nil {
			t.Fatal(err)
		}
		platforms = append(platforms, p)
	}
	license := filepath.Join(dir, "LICENSE")
	if err := os.WriteFile(license, []byte("license text"), 0o644); err != nil {
		t.Fatal(err)
	}
	return Options{
		Platforms:  platforms,
		Created:    testCreated,
		Version:    "v0.1.0",
		Revision:   "0123456789abcdef0123456789abcdef01234567",
		Source:     "https://github.com/app-controller/app-controller",
		Entrypoint: "/app-controller",
		Files:      []File{{Path: DocDir + "/LICENSE", Source: license}},
	}
}

func indexDigest(t *testing.T, opts Options) v1.Hash {
	t.Helper()
	res, err := Build(opts)
	if err != nil {
		t.Fatal(err)
	}
	d, err := res.Index.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestBuildReproducible: the digest depends on the inputs only, not on when or where
// the binaries were written; and each input does change it.
func TestBuildReproducible(t *testing.T) {
	base := testOptions(t)
	want := indexDigest(t, base)

	tests := []struct {
		name   string
		mutate func(t *testing.T, o *Options)
		same   bool
	}{
		{"same inputs", func(*testing.T, *Options) {}, true},
		{"binary touched and copied elsewhere", func(t *testing.T, o *Options) {
			for i := range o.Platforms {
				data, err := os.ReadFile(o.Platforms[i].Binary)
				if err != nil {
					t.Fatal(err)
				}
				path := filepath.Join(t.TempDir(), "copy")
				if err := os.WriteFile(path, data, 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.Chtimes(path, time.Now(), time.Now()); err != nil {
					t.Fatal(err)
				}
				o.Platforms[i].Binary = path
			}
		}, true},
		{"sub-second creation time", func(_ *testing.T, o *Options) { o.Created = o.Created.Add(300 * time.Millisecond) }, true},
		{"creation time in another zone", func(_ *testing.T, o *Options) { o.Created = o.Created.In(time.FixedZone("X", 3600)) }, true},
		{"other creation time", func(_ *testing.T, o *Options) { o.Created = o.Created.Add(time.Second) }, false},
		{"other revision", func(_ *testing.T, o *Options) { o.Revision = "ffff" }, false},
		{"other version", func(_ *testing.T, o *Options) { o.Version = "v0.2.0" }, false},
		{"other binary", func(t *testing.T, o *Options) {
			if err := os.WriteFile(o.Platforms[0].Binary, []byte("changed"), 0o755); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"other SBOM", func(t *testing.T, o *Options) {
			if err := os.WriteFile(o.Platforms[1].SBOM, []byte(`{"bomFormat":"CycloneDX","x":1}`), 0o644); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"no SBOM", func(_ *testing.T, o *Options) { o.Platforms[0].SBOM = "" }, false},
		{"LICENSE executable", func(_ *testing.T, o *Options) { o.Files[0].Executable = true }, false},
		{"other LICENSE", func(t *testing.T, o *Options) {
			if err := os.WriteFile(o.Files[0].Source, []byte("changed"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := testOptions(t)
			tt.mutate(t, &opts)
			got := indexDigest(t, opts)
			if (got == want) != tt.same {
				t.Errorf("digest %s, first build %s: want same=%v", got, want, tt.same)
			}
		})
	}
}

// TestLayerHeaders checks every tar header: sorted, fixed times and owners, no names.
func TestLayerHeaders(t *testing.T) {
	res, err := Build(testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	layers, err := res.Images[0].Layers()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		prev := ""
		for {
			hdr, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			names = append(names, hdr.Name)
			if hdr.Name <= prev {
				t.Errorf("%s comes after %s: entries are not sorted", hdr.Name, prev)
			}
			prev = hdr.Name
			wantUID := 0
			if hdr.Name == "home/nonroot/" {
				wantUID = NonrootUID
			}
			if !hdr.ModTime.Equal(testCreated) || !hdr.AccessTime.IsZero() || !hdr.ChangeTime.IsZero() {
				t.Errorf("%s: mtime %v atime %v ctime %v, want mtime %v only", hdr.Name, hdr.ModTime, hdr.AccessTime, hdr.ChangeTime, testCreated)
			}
			if hdr.Uid != wantUID || hdr.Gid != wantUID || hdr.Uname != "" || hdr.Gname != "" || len(hdr.PAXRecords) != 0 || len(hdr.Xattrs) != 0 { //nolint:staticcheck // Xattrs: none may be set.
				t.Errorf("%s: owner %d:%d (%q:%q), PAX %v: want %d:%d, no names, no records", hdr.Name, hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname, hdr.PAXRecords, wantUID, wantUID)
			}
		}
		rc.Close()
	}
	want := []string{"etc/", "etc/group", "etc/passwd", "home/", "home/nonroot/", "tmp/",
		"app-controller", "usr/", "usr/share/", "usr/share/doc/", "usr/share/doc/app-controller/",
		"usr/share/doc/app-controller/LICENSE", "usr/share/doc/app-controller/sbom.cdx.json"}
	if len(names) != len(want) {
		t.Fatalf("entries %v, want %v", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Fatalf("entries %v, want %v", names, want)
		}
	}
}

// TestFileModes: a file is 0644, an executable one 0755, like the entrypoint.
func TestFileModes(t *testing.T) {
	opts := testOptions(t)
	opts.Files = append(opts.Files, File{Path: "/consume-cpu/consume-cpu", Source: opts.Platforms[0].Binary, Executable: true})
	res, err := Build(opts)
	if err != nil {
		t.Fatal(err)
	}
	layers, err := res.Images[0].Layers()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := layers[1].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	modes := map[string]int64{}
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		modes[hdr.Name] = hdr.Mode
	}
	for name, want := range map[string]int64{"app-controller": 0o755, "consume-cpu/": 0o755, "consume-cpu/consume-cpu": 0o755, "usr/share/doc/app-controller/LICENSE": 0o644} {
		if got, ok := modes[name]; !ok || got != want {
			t.Errorf("%s: mode %o (present %v), want %o", name, got, ok, want)
		}
	}
}

// TestBaseLayerShared: both platforms carry the same base layer blob.
func TestBaseLayerShared(t *testing.T) {
	res, err := Build(testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	var bases []v1.Hash
	for _, img := range res.Images {
		m, err := img.Manifest()
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Layers) != 2 {
			t.Fatalf("%d layers, want 2", len(m.Layers))
		}
		bases = append(bases, m.Layers[0].Digest)
	}
	if bases[0] != bases[1] {
		t.Errorf("base layers differ: %v", bases)
	}
}

func TestBuildRejects(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(o *Options)
	}{
		{"no platform", func(o *Options) { o.Platforms = nil }},
		{"no creation time", func(o *Options) { o.Created = time.Time{} }},
		{"relative entrypoint", func(o *Options) { o.Entrypoint = "app-controller" }},
		{"platform twice", func(o *Options) { o.Platforms = append(o.Platforms, o.Platforms[0]) }},
		{"missing binary", func(o *Options) { o.Platforms[0].Binary = "/nonexistent/app-controller" }},
		{"missing SBOM", func(o *Options) { o.Platforms[1].SBOM = "/nonexistent/sbom.cdx.json" }},
		{"missing file", func(o *Options) { o.Files[0].Source = "/nonexistent/LICENSE" }},
		{"file at the SBOM's path", func(o *Options) { o.Files = append(o.Files, File{Path: SBOMPath, Source: o.Files[0].Source}) }},
		{"file at the entrypoint", func(o *Options) { o.Files = append(o.Files, File{Path: "/app-controller", Source: o.Files[0].Source}) }},
		{"relative file path", func(o *Options) { o.Files[0].Path = "LICENSE" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := testOptions(t)
			tt.mutate(&opts)
			if _, err := Build(opts); err == nil {
				t.Error("Build succeeded, want an error")
			}
		})
	}
}

func TestParsePlatform(t *testing.T) {
	tests := []struct {
		in      string
		want    Platform
		wantErr bool
	}{
		{in: "linux/amd64=bin/a", want: Platform{OS: "linux", Architecture: "amd64", Binary: "bin/a"}},
		{in: "linux/arm64=bin/b", want: Platform{OS: "linux", Architecture: "arm64", Variant: "v8", Binary: "bin/b"}},
		{in: "linux/arm/v7=bin/c", want: Platform{OS: "linux", Architecture: "arm", Variant: "v7", Binary: "bin/c"}},
		{in: "linux/amd64", wantErr: true},
		{in: "linux=bin/a", wantErr: true},
		{in: "/amd64=bin/a", wantErr: true},
		{in: "linux/amd64=", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParsePlatform(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error %v, want error %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestRefName(t *testing.T) {
	tests := map[string]string{
		"app-controller:latest":                  "latest",
		"example.com/app-controller:v0.1.0":      "v0.1.0",
		"localhost:5000/app-controller":          "latest",
		"localhost:5000/app-controller:v1":       "v1",
		"example.com/app-controller@sha256:abcd": "sha256:abcd",
	}
	for in, want := range tests {
		t.Run(in, func(t *testing.T) {
			if got := RefName(in); got != want {
				t.Errorf("RefName(%q) = %q, want %q", in, got, want)
			}
		})
	}
}

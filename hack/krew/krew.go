package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"text/template"
	"time"
)

// DefaultURIBase is where the release archives are downloaded from.
const DefaultURIBase = "https://github.com/app-controller/app-controller/releases/download/{version}"

// pluginName is the name of the binary in the archives (kubectl runs kubectl-app for
// `kubectl app`).
const pluginName = "kubectl-app"

// semver is the form of a version krew accepts: vMAJOR.MINOR.PATCH, with an optional
// pre-release and build.
var semver = regexp.MustCompile(`^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)

// archiveTime is the modification time of every archive entry: archives of the same
// inputs are the same bytes.
var archiveTime = time.Unix(0, 0).UTC()

// Binary is a kubectl-app binary built for a platform.
type Binary struct {
	// Platform is OS/ARCH, such as linux/amd64.
	Platform string
	// Path is the binary's file.
	Path string
}

// Options say what Dist packs and renders.
type Options struct {
	Version  string
	Template string
	Dist     string
	URIBase  string
	Binaries []Binary
	// Files go into every archive, by their base name, next to the binary.
	Files []string
}

// Platform is an archive as the manifest template sees it.
type Platform struct {
	OS, Arch string
	// URI and SHA256 of the archive.
	URI, SHA256 string
	// Files are the names of the archive's entries; Bin is the binary's.
	Files []string
	Bin   string
	// Archive is the archive's path on disk.
	Archive string
}

// Dist writes an archive per binary into opts.Dist and renders the manifest template
// into opts.Dist/app.yaml, whose path it returns.
func Dist(opts Options) (string, error) {
	if !semver.MatchString(opts.Version) {
		return "", fmt.Errorf("version %q is not a semantic version krew accepts (vMAJOR.MINOR.PATCH): set VERSION=v0.1.0", opts.Version)
	}
	if len(opts.Binaries) == 0 {
		return "", fmt.Errorf("no binary to pack: give --binary OS/ARCH=PATH")
	}
	if err := os.MkdirAll(opts.Dist, 0o755); err != nil {
		return "", fmt.Errorf("creating %s: %w", opts.Dist, err)
	}
	uriBase := strings.ReplaceAll(opts.URIBase, "{version}", opts.Version)
	var platforms []Platform
	for _, b := range opts.Binaries {
		p, err := pack(opts, b, uriBase)
		if err != nil {
			return "", err
		}
		platforms = append(platforms, p)
	}
	tmpl, err := os.ReadFile(opts.Template)
	if err != nil {
		return "", fmt.Errorf("reading the manifest template: %w", err)
	}
	manifest, err := Render(string(tmpl), opts.Version, platforms)
	if err != nil {
		return "", err
	}
	out := filepath.Join(opts.Dist, "app.yaml")
	if err := os.WriteFile(out, manifest, 0o644); err != nil {
		return "", fmt.Errorf("writing the manifest: %w", err)
	}
	return out, nil
}

// pack writes the archive of b and returns its Platform.
func pack(opts Options, b Binary, uriBase string) (Platform, error) {
	goos, arch, ok := strings.Cut(b.Platform, "/")
	if !ok || goos == "" || arch == "" {
		return Platform{}, fmt.Errorf("platform %q: want OS/ARCH", b.Platform)
	}
	bin := pluginName
	if goos == "windows" {
		bin += ".exe"
	}
	entries := []entry{{name: bin, path: b.Path, mode: 0o755}}
	for _, f := range opts.Files {
		mode := int64(0o644)
		if st, err := os.Stat(f); err == nil && st.Mode()&0o111 != 0 {
			mode = 0o755
		}
		entries = append(entries, entry{name: filepath.Base(f), path: f, mode: mode})
	}
	name := fmt.Sprintf("%s_%s_%s_%s.tar.gz", pluginName, opts.Version, goos, arch)
	archive := filepath.Join(opts.Dist, name)
	sum, err := writeArchive(archive, entries)
	if err != nil {
		return Platform{}, fmt.Errorf("packing %s: %w", name, err)
	}
	p := Platform{OS: goos, Arch: arch, URI: uriBase + "/" + name, SHA256: sum, Bin: bin, Archive: archive}
	for _, e := range entries {
		p.Files = append(p.Files, e.name)
	}
	return p, nil
}

// entry is a file of an archive.
type entry struct {
	name, path string
	mode       int64
}

// writeArchive writes a tar.gz of entries to path and returns its sha256, in hex.
func writeArchive(path string, entries []entry) (string, error) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		data, err := os.ReadFile(e.path)
		if err != nil {
			return "", fmt.Errorf("reading %s: %w", e.path, err)
		}
		hdr := &tar.Header{Name: e.name, Mode: e.mode, Size: int64(len(data)), ModTime: archiveTime, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return "", fmt.Errorf("writing the header of %s: %w", e.name, err)
		}
		if _, err := tw.Write(data); err != nil {
			return "", fmt.Errorf("writing %s: %w", e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return "", fmt.Errorf("closing the tar stream: %w", err)
	}
	if err := gz.Close(); err != nil {
		return "", fmt.Errorf("closing the gzip stream: %w", err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	sum := sha256.Sum256(buf.Bytes())
	return hex.EncodeToString(sum[:]), nil
}

// Render executes the manifest template with the version and the platforms' archives.
// A template that refers to something it is not given is an error.
func Render(tmpl, version string, platforms []Platform) ([]byte, error) {
	t, err := template.New("manifest").Option("missingkey=error").Parse(tmpl)
	if err != nil {
		return nil, fmt.Errorf("parsing the manifest template: %w", err)
	}
	var out bytes.Buffer
	data := struct {
		Version   string
		Platforms []Platform
	}{version, platforms}
	if err := t.Execute(&out, data); err != nil {
		return nil, fmt.Errorf("rendering the manifest template: %w", err)
	}
	return out.Bytes(), nil
}

// Package ociimage builds the app-controller container image without a container engine:
// a multi-platform OCI image index whose images hold the static binary, the passwd and
// group files of a distroless "nonroot" base, a writable /tmp and, under DocDir, the
// binary's SBOM and the files of Options.Files (the LICENSE). The same inputs always give
// the same digests: every tar header is fixed and every timestamp is Created.
package ociimage

import (
	"archive/tar"
	"bytes"
	"cmp"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// OCI annotation and label keys the image carries
// (https://github.com/opencontainers/image-spec/blob/main/annotations.md).
const (
	LabelSource   = "org.opencontainers.image.source"
	LabelRevision = "org.opencontainers.image.revision"
	LabelVersion  = "org.opencontainers.image.version"
	LabelCreated  = "org.opencontainers.image.created"
	// AnnotationRefName names an image index inside an OCI layout (the tag).
	AnnotationRefName = "org.opencontainers.image.ref.name"
)

// The user the image runs as: distroless's "nonroot".
const (
	NonrootUID  = 65532
	User        = "65532:65532"
	NonrootHome = "/home/nonroot"
)

// Files of the base layer, as gcr.io/distroless/static:nonroot has them (root and
// nonroot; their shells do not exist, nobody logs in).
const (
	passwd = "root:x:0:0:root:/root:/sbin/nologin\n" +
		"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group = "root:x:0:\n" +
		"nonroot:x:65532:\n"
)

// Where the image holds the documents that travel with the binary: its SBOM (a
// CycloneDX JSON document of the platform's binary, `make image` writes it with
// cyclonedx-gomod) and the files of Options.Files, such as the LICENSE.
const (
	DocDir   = "/usr/share/doc/app-controller"
	SBOMPath = DocDir + "/sbom.cdx.json"
)

// Platform is one image of the index: where it runs and the binary it holds.
type Platform struct {
	OS           string
	Architecture string
	// Variant is the CPU variant, "v8" for arm64, as distroless sets it; may be empty.
	Variant string
	// Binary is the path of the statically linked binary on this machine.
	Binary string
	// SBOM is the path on this machine of the binary's SBOM, put at SBOMPath in the
	// image; empty: none.
	SBOM string
}

// File is a file of every image of the index, read from Source on this machine.
type File struct {
	// Path is where the file lands in the image: absolute, such as DocDir + "/LICENSE".
	Path string
	// Source is the file's path on this machine.
	Source string
	// Executable gives the file mode 0755 instead of 0644: a helper program beside the
	// entrypoint (resource-consumer's consume-cpu).
	Executable bool
}

// ParseFile parses "path-in-image=path-on-this-machine".
func ParseFile(s string) (File, error) {
	inImage, source, ok := strings.Cut(s, "=")
	if !ok || source == "" || !strings.HasPrefix(inImage, "/") || strings.HasSuffix(inImage, "/") {
		return File{}, fmt.Errorf("file %q: want /absolute/path/in/image=local-path", s)
	}
	return File{Path: inImage, Source: source}, nil
}

// String returns os/arch[/variant].
func (p Platform) String() string {
	s := p.OS + "/" + p.Architecture
	if p.Variant != "" {
		s += "/" + p.Variant
	}
	return s
}

// OCI returns the platform of the image's index descriptor.
func (p Platform) OCI() *v1.Platform {
	return &v1.Platform{OS: p.OS, Architecture: p.Architecture, Variant: p.Variant}
}

// ParsePlatform parses "os/arch[/variant]=path". arm64 gets the variant v8 when none is
// given.
func ParsePlatform(s string) (Platform, error) {
	spec, binary, ok := strings.Cut(s, "=")
	if !ok || binary == "" {
		return Platform{}, fmt.Errorf("platform %q: want os/arch=path", s)
	}
	parts := strings.Split(spec, "/")
	if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" {
		return Platform{}, fmt.Errorf("platform %q: want os/arch[/variant]=path", s)
	}
	p := Platform{OS: parts[0], Architecture: parts[1], Binary: binary}
	if len(parts) == 3 {
		p.Variant = parts[2]
	} else if p.Architecture == "arm64" {
		p.Variant = "v8"
	}
	return p, nil
}

// Options are the inputs of Build. The same Options and binaries give the same digests.
type Options struct {
	// Platforms are the images of the index, in this order.
	Platforms []Platform
	// Created is the creation time of the images: config, history, label and every
	// file's modification time. Truncated to seconds, in UTC.
	Created time.Time
	// Version, Revision and Source fill the org.opencontainers.image.* labels.
	Version, Revision, Source string
	// Entrypoint is where the binary lands in the image, such as /app-controller.
	Entrypoint string
	// Cmd are the entrypoint's default arguments (the image config's Cmd); may be empty.
	Cmd []string
	// User is the image's user, uid:gid; empty means User (distroless's nonroot).
	User string
	// Files are put into every image (mode 0644, or 0755 if Executable), beside the
	// binary.
	Files []File
}

// Result is what Build made.
type Result struct {
	// Index is the multi-platform image index.
	Index v1.ImageIndex
	// Platforms and Images are the index's platforms and their images, in the order of
	// Options.Platforms.
	Platforms []Platform
	Images    []v1.Image
}

// Image returns the image of the platform goos/arch, nil if there is none.
func (r *Result) Image(goos, arch string) v1.Image {
	for i, p := range r.Platforms {
		if p.OS == goos && p.Architecture == arch {
			return r.Images[i]
		}
	}
	return nil
}

// Labels returns the OCI labels of the images built with opts.
func (o Options) Labels() map[string]string {
	return map[string]string{
		LabelSource:   o.Source,
		LabelRevision: o.Revision,
		LabelVersion:  o.Version,
		LabelCreated:  o.created().Format(time.RFC3339),
	}
}

func (o Options) created() time.Time { return o.Created.UTC().Truncate(time.Second) }

func (o Options) validate() error {
	if len(o.Platforms) == 0 {
		return fmt.Errorf("no platform given")
	}
	if o.Created.IsZero() {
		return fmt.Errorf("no creation time given")
	}
	if !strings.HasPrefix(o.Entrypoint, "/") || strings.HasSuffix(o.Entrypoint, "/") {
		return fmt.Errorf("entrypoint %q: want an absolute file path", o.Entrypoint)
	}
	seen := map[string]bool{}
	for _, p := range o.Platforms {
		if seen[p.String()] {
			return fmt.Errorf("platform %s given twice", p)
		}
		seen[p.String()] = true
	}
	paths := map[string]bool{o.Entrypoint: true, SBOMPath: true}
	for _, f := range o.Files {
		if !strings.HasPrefix(f.Path, "/") || strings.HasSuffix(f.Path, "/") {
			return fmt.Errorf("file %q: want an absolute file path", f.Path)
		}
		if paths[f.Path] {
			return fmt.Errorf("file %s: the path is taken (the entrypoint, the SBOM or another file)", f.Path)
		}
		paths[f.Path] = true
	}
	return nil
}

// Build builds the image of every platform and the index over them, in memory.
func Build(opts Options) (*Result, error) {
	if err := opts.validate(); err != nil {
		return nil, fmt.Errorf("checking the image options: %w", err)
	}
	created := opts.created()
	base, err := baseLayer(created)
	if err != nil {
		return nil, fmt.Errorf("building the base layer: %w", err)
	}
	labels := opts.Labels()
	res := &Result{Platforms: opts.Platforms}
	var adds []mutate.IndexAddendum
	for _, p := range opts.Platforms {
		img, err := platformImage(opts, p, base, labels)
		if err != nil {
			return nil, fmt.Errorf("building the %s image: %w", p, err)
		}
		res.Images = append(res.Images, img)
		adds = append(adds, mutate.IndexAddendum{
			Add: img,
			Descriptor: v1.Descriptor{
				Platform: p.OCI(),
			},
		})
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	idx = mutate.AppendManifests(idx, adds...)
	res.Index = mutate.Annotations(idx, labels).(v1.ImageIndex)
	return res, nil
}

// platformImage is the image of one platform: the shared base layer and the binary.
func platformImage(opts Options, p Platform, base v1.Layer, labels map[string]string) (v1.Image, error) {
	binary, err := os.ReadFile(p.Binary)
	if err != nil {
		return nil, fmt.Errorf("reading the binary: %w", err)
	}
	created := opts.created()
	entries := []entry{{name: opts.Entrypoint, mode: 0o755, body: binary}}
	var files []File
	if p.SBOM != "" {
		files = append(files, File{Path: SBOMPath, Source: p.SBOM})
	}
	for _, f := range append(files, opts.Files...) {
		body, err := os.ReadFile(f.Source)
		if err != nil {
			return nil, fmt.Errorf("reading %s for %s: %w", f.Source, f.Path, err)
		}
		mode := int64(0o644)
		if f.Executable {
			mode = 0o755
		}
		entries = append(entries, entry{name: f.Path, mode: mode, body: body})
	}
	binLayer, err := layer(withParents(entries), created)
	if err != nil {
		return nil, fmt.Errorf("building the binary layer: %w", err)
	}
	cfg := &v1.ConfigFile{
		Architecture: p.Architecture,
		OS:           p.OS,
		Variant:      p.Variant,
		Created:      v1.Time{Time: created},
		Config: v1.Config{
			User:       cmp.Or(opts.User, User),
			Entrypoint: []string{opts.Entrypoint},
			Cmd:        opts.Cmd,
			Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
			WorkingDir: "/",
			Labels:     labels,
		},
		RootFS: v1.RootFS{Type: "layers"},
	}
	img, err := mutate.ConfigFile(empty.Image, cfg)
	if err != nil {
		return nil, fmt.Errorf("setting the config: %w", err)
	}
	img = mutate.MediaType(img, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, MediaType: types.OCILayer, History: v1.History{
			Created: v1.Time{Time: created}, CreatedBy: "imagebuild: /etc/passwd, /etc/group, /home/nonroot, /tmp"}},
		mutate.Addendum{Layer: binLayer, MediaType: types.OCILayer, History: v1.History{
			Created: v1.Time{Time: created}, CreatedBy: "imagebuild: " + opts.Entrypoint}},
	)
	if err != nil {
		return nil, fmt.Errorf("adding the layers: %w", err)
	}
	return img, nil
}

// baseLayer holds what every platform shares: users, groups, nonroot's home and /tmp.
func baseLayer(created time.Time) (v1.Layer, error) {
	return layer([]entry{
		{name: "/etc/", mode: 0o755},
		{name: "/etc/group", mode: 0o644, body: []byte(group)},
		{name: "/etc/passwd", mode: 0o644, body: []byte(passwd)},
		{name: "/home/", mode: 0o755},
		{name: NonrootHome + "/", mode: 0o700, uid: NonrootUID},
		{name: "/tmp/", mode: 0o1777},
	}, created)
}

// withParents adds a directory entry (0755, root) for every parent directory of the
// entries that has none, but the root.
func withParents(entries []entry) []entry {
	have := map[string]bool{}
	for _, e := range entries {
		have[e.name] = true
	}
	out := entries
	for _, e := range entries {
		for dir := path.Dir(strings.TrimSuffix(e.name, "/")); dir != "/" && dir != "."; dir = path.Dir(dir) {
			if !have[dir+"/"] {
				have[dir+"/"] = true
				out = append(out, entry{name: dir + "/", mode: 0o755})
			}
		}
	}
	return out
}

// entry is a file of a layer; a name ending in / is a directory.
type entry struct {
	name string
	mode int64
	uid  int
	body []byte
}

// layer makes a gzip-compressed OCI layer of entries, sorted by name, with fixed headers:
// mtime created, owner uid (0 unless set) with the same gid, no user or group names, no
// access or change times.
func layer(entries []entry, created time.Time) (v1.Layer, error) {
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{
			Name:    strings.TrimPrefix(e.name, "/"),
			Mode:    e.mode,
			Uid:     e.uid,
			Gid:     e.uid,
			ModTime: created,
			Format:  tar.FormatPAX,
		}
		if strings.HasSuffix(e.name, "/") {
			hdr.Typeflag = tar.TypeDir
		} else {
			hdr.Typeflag = tar.TypeReg
			hdr.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("writing the tar header of %s: %w", e.name, err)
		}
		if _, err := tw.Write(e.body); err != nil {
			return nil, fmt.Errorf("writing %s into the layer: %w", e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("closing the layer: %w", err)
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressionLevel(gzip.DefaultCompression), tarball.WithCompressedCaching)
}

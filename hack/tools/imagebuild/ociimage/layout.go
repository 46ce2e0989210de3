package ociimage

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// WriteLayout replaces dir with an OCI image layout holding idx, named tag (the
// org.opencontainers.image.ref.name annotation), so that no blob of an earlier build
// lingers.
func WriteLayout(dir string, idx v1.ImageIndex, tag string) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("removing the old layout %s: %w", dir, err)
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("creating the layout %s: %w", dir, err)
	}
	var opts []layout.Option
	if tag != "" {
		opts = append(opts, layout.WithAnnotations(map[string]string{AnnotationRefName: tag}))
	}
	if err := p.AppendIndex(idx, opts...); err != nil {
		return fmt.Errorf("writing the image index into %s: %w", dir, err)
	}
	return nil
}

// RefName is the tag part of an image name (example.com/app:v1 -> v1), "latest" when
// there is none; a digest reference gives its digest.
func RefName(image string) string {
	if i := strings.LastIndex(image, "@"); i >= 0 {
		return image[i+1:]
	}
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		return image[i+1:]
	}
	return "latest"
}

// ReadIndex returns the one image index of the layout in dir.
func ReadIndex(dir string) (v1.ImageIndex, error) {
	top, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("opening the layout %s: %w", dir, err)
	}
	m, err := top.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("reading index.json of %s: %w", dir, err)
	}
	var found []v1.Descriptor
	for _, d := range m.Manifests {
		if d.MediaType == types.OCIImageIndex || d.MediaType == types.DockerManifestList {
			found = append(found, d)
		}
	}
	if len(found) != 1 {
		return nil, fmt.Errorf("layout %s holds %d image indexes, want 1", dir, len(found))
	}
	idx, err := top.ImageIndex(found[0].Digest)
	if err != nil {
		return nil, fmt.Errorf("reading the image index %s of %s: %w", found[0].Digest, dir, err)
	}
	return idx, nil
}

// WriteTarball writes img into path as a `docker load` tarball tagged ref (a name such
// as example.com/app-controller:v0.1.0; without a registry, Docker Hub's).
func WriteTarball(path, ref string, img v1.Image) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("parsing the tag %q: %w", ref, err)
	}
	if err := tarball.WriteToFile(path, tag, img); err != nil {
		return fmt.Errorf("writing the image tarball %s: %w", path, err)
	}
	return nil
}

// Push pushes the image index of the layout in dir, with every image and blob it
// references, to ref, with the credentials of the default keychain (docker's
// config.json, as `docker login` and `crane auth login` write it) unless opts say
// otherwise. It returns the digest of the pushed index.
func Push(ctx context.Context, dir, ref string, opts ...remote.Option) (v1.Hash, error) {
	idx, err := ReadIndex(dir)
	if err != nil {
		return v1.Hash{}, err
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("parsing the image reference %q: %w", ref, err)
	}
	opts = append([]remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}, opts...)
	if err := remote.WriteIndex(r, idx, opts...); err != nil {
		return v1.Hash{}, fmt.Errorf("pushing the image index to %s: %w", r, err)
	}
	digest, err := idx.Digest()
	if err != nil {
		return v1.Hash{}, fmt.Errorf("computing the index digest: %w", err)
	}
	return digest, nil
}

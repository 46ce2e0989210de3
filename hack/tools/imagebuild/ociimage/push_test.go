package ociimage

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// TestPush pushes a layout to an in-process registry and pulls the index and every
// image back by the tag: the digests are those that were built.
func TestPush(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")

	res, err := Build(testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "oci")
	if err := WriteLayout(dir, res.Index, "v0.1.0"); err != nil {
		t.Fatal(err)
	}
	want, err := res.Index.Digest()
	if err != nil {
		t.Fatal(err)
	}

	ref := host + "/app-controller/app-controller:v0.1.0"
	pushed, err := Push(context.Background(), dir, ref)
	if err != nil {
		t.Fatal(err)
	}
	if pushed != want {
		t.Errorf("Push returned %s, built %s", pushed, want)
	}

	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := remote.Index(r)
	if err != nil {
		t.Fatalf("pulling the index back: %v", err)
	}
	if got, _ := pulled.Digest(); got != want {
		t.Errorf("pulled index %s, pushed %s", got, want)
	}
	for i, p := range res.Platforms {
		img, err := remote.Image(r, remote.WithPlatform(*p.OCI()))
		if err != nil {
			t.Fatalf("pulling the %s image back: %v", p, err)
		}
		got, _ := img.Digest()
		built, _ := res.Images[i].Digest()
		if got != built {
			t.Errorf("%s: pulled %s, built %s", p, got, built)
		}
		// The layers are really there: the binary layer reads back.
		layers, err := img.Layers()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := layers[len(layers)-1].Compressed(); err != nil {
			t.Errorf("%s: reading the pushed binary layer: %v", p, err)
		}
	}

	if _, err := Push(context.Background(), filepath.Join(t.TempDir(), "missing"), ref); err == nil {
		t.Error("pushing a missing layout succeeded")
	}
}

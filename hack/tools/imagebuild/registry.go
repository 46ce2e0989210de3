package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/app-controller/app-controller/hack/tools/imagebuild/ociimage"
)

// serveRegistry runs an OCI registry on --listen until ctx is cancelled: blobs on disk
// under --dir, manifests in memory. Before it says it is ready it pushes each --image
// (repository:tag=OCI layout) to itself, so a pod can pull 127.0.0.1:PORT/agnhost:2.66.1
// as soon as the registry is up. Only a loopback address is accepted: the real node
// reaches it through a forwarder its cluster opens inside the node's network namespace.
func serveRegistry(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("imagebuild registry", flag.ContinueOnError)
	listen := fs.String("listen", "", "loopback address to serve on, 127.0.0.1:PORT")
	dir := fs.String("dir", "", "directory for the blobs (created)")
	var images stringsFlag
	fs.Var(&images, "image", "repository:tag=OCI layout directory to load at start; repeat for each")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *listen == "" || *dir == "" {
		return errors.New("usage: imagebuild registry --listen 127.0.0.1:PORT --dir DIR [--image REPO:TAG=LAYOUT ...]")
	}
	host, _, err := net.SplitHostPort(*listen)
	if err != nil {
		return fmt.Errorf("parsing --listen: %w", err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("--listen %s: the registry serves only on a loopback address", *listen)
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return fmt.Errorf("creating the blob directory: %w", err)
	}
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", *listen, err)
	}
	srv := &http.Server{
		Handler:           registry.New(registry.WithBlobHandler(registry.NewDiskBlobHandler(*dir)), registry.Logger(log.New(os.Stderr, "", log.LstdFlags))),
		ReadHeaderTimeout: 10 * time.Second,
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()

	for _, image := range images {
		ref, layout, ok := strings.Cut(image, "=")
		if !ok || ref == "" || layout == "" {
			_ = srv.Close()
			return fmt.Errorf("--image %q: want repository:tag=layout-directory", image)
		}
		digest, err := ociimage.Push(ctx, layout, *listen+"/"+ref)
		if err != nil {
			_ = srv.Close()
			return fmt.Errorf("loading %s: %w", ref, err)
		}
		fmt.Printf("loaded %s/%s@%s from %s\n", *listen, ref, digest, layout)
	}
	fmt.Printf("registry ready on %s\n", *listen)

	select {
	case err := <-served:
		return fmt.Errorf("serving the registry: %w", err)
	case <-ctx.Done():
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(shutdownCtx)
	}
}

// Command imagebuild builds and pushes the app-controller container image without a
// container engine (make image, make image-push).
//
//	imagebuild build --layout DIR [--tarball FILE --tarball-platform linux/amd64] --tag IMG \
//	    --platform linux/amd64=bin/image/linux-amd64/app-controller --platform linux/arm64=... \
//	    [--sbom linux/amd64=bin/image/linux-amd64/sbom.cdx.json ...] [--file /usr/share/doc/app-controller/LICENSE=LICENSE ...] \
//	    [--executable /consume-cpu/consume-cpu=bin/consume-cpu ...] \
//	    --created-epoch SECONDS --version V --revision SHA --source URL
//	imagebuild push --layout DIR IMG
//	imagebuild registry --listen 127.0.0.1:PORT --dir DIR [--image REPO:TAG=LAYOUT ...]
//
// The registry serves the local cluster's real node (internal/localcluster): an OCI
// registry on loopback with its blobs on disk, loaded at start with the images of
// --image (agnhost, the pause image).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/app-controller/app-controller/hack/tools/imagebuild/ociimage"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: imagebuild build|push|registry [flags]")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2:]); err != nil {
		fmt.Fprintln(os.Stderr, "imagebuild:", err)
		os.Exit(1)
	}
}

// run runs the command cmd with its arguments until it ends or SIGINT or SIGTERM stops
// it.
func run(cmd string, args []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch cmd {
	case "build":
		return build(args)
	case "push":
		return push(ctx, args)
	case "registry":
		return serveRegistry(ctx, args)
	default:
		return fmt.Errorf("unknown command %q: want build, push or registry", cmd)
	}
}

// stringsFlag collects the values of a repeated flag.
type stringsFlag []string

func (s *stringsFlag) String() string { return strings.Join(*s, " ") }

func (s *stringsFlag) Set(v string) error {
	*s = append(*s, v)
	return nil
}

// filesFlag collects repeated --file (or, with executable, --executable)
// /path/in/image=local-path flags into files.
type filesFlag struct {
	files      *[]ociimage.File
	executable bool
}

func (f filesFlag) String() string {
	if f.files == nil {
		return ""
	}
	return fmt.Sprint(*f.files)
}

func (f filesFlag) Set(s string) error {
	file, err := ociimage.ParseFile(s)
	if err != nil {
		return err
	}
	file.Executable = f.executable
	*f.files = append(*f.files, file)
	return nil
}

// platformsFlag collects repeated --platform os/arch=path flags.
type platformsFlag []ociimage.Platform

func (p *platformsFlag) String() string { return fmt.Sprint(*p) }

func (p *platformsFlag) Set(s string) error {
	platform, err := ociimage.ParsePlatform(s)
	if err != nil {
		return err
	}
	*p = append(*p, platform)
	return nil
}

func build(args []string) error {
	fs := flag.NewFlagSet("imagebuild build", flag.ContinueOnError)
	var platforms platformsFlag
	fs.Var(&platforms, "platform", "os/arch[/variant]=path of a static binary; repeat for each image of the index")
	var sboms stringsFlag
	fs.Var(&sboms, "sbom", "os/arch[/variant]=path of the SBOM of that platform's binary, put at "+ociimage.SBOMPath+"; repeat for each platform")
	var files []ociimage.File
	fs.Var(filesFlag{files: &files}, "file", "/path/in/image=local-path of a file every image holds (mode 0644); repeat for each")
	fs.Var(filesFlag{files: &files, executable: true}, "executable", "/path/in/image=local-path of a program every image holds beside the entrypoint (mode 0755); repeat for each")
	layoutDir := fs.String("layout", "", "OCI layout directory to write the index into (replaced)")
	tarballPath := fs.String("tarball", "", "also write the image of --tarball-platform here as a `docker load` tarball")
	tarballPlatform := fs.String("tarball-platform", "", "os/arch of the image written to --tarball")
	digestFile := fs.String("digest-file", "", "also write the image index's digest (sha256:...) to this file")
	tag := fs.String("tag", "", "image name and tag, such as example.com/app-controller:v0.1.0 (tarball tag and layout ref name)")
	epoch := fs.String("created-epoch", "", "creation time in seconds since the epoch (SOURCE_DATE_EPOCH, or the commit time)")
	entrypoint := fs.String("entrypoint", "/app-controller", "path of the binary in the image")
	var cmdArgs stringsFlag
	fs.Var(&cmdArgs, "arg", "a default argument of the entrypoint (the image's Cmd); repeat for each")
	opts := ociimage.Options{}
	fs.StringVar(&opts.Version, "version", "", "org.opencontainers.image.version")
	fs.StringVar(&opts.Revision, "revision", "", "org.opencontainers.image.revision (git commit)")
	fs.StringVar(&opts.User, "user", ociimage.User, "the image's user, uid:gid")
	fs.StringVar(&opts.Source, "source", "https://github.com/app-controller/app-controller", "org.opencontainers.image.source")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *layoutDir == "" || *tag == "" || *epoch == "" || opts.Version == "" || opts.Revision == "" {
		return fmt.Errorf("--layout, --tag, --created-epoch, --version and --revision are required")
	}
	seconds, err := strconv.ParseInt(strings.TrimSpace(*epoch), 10, 64)
	if err != nil {
		return fmt.Errorf("parsing --created-epoch %q: %w", *epoch, err)
	}
	opts.Created = time.Unix(seconds, 0)
	for _, s := range sboms {
		spec, path, ok := strings.Cut(s, "=")
		found := false
		for i := range platforms {
			if ok && path != "" && (platforms[i].String() == spec || platforms[i].OS+"/"+platforms[i].Architecture == spec) {
				platforms[i].SBOM = path
				found = true
			}
		}
		if !found {
			return fmt.Errorf("--sbom %q: want os/arch=path of a platform given with --platform", s)
		}
	}
	opts.Platforms = platforms
	opts.Files = files
	opts.Entrypoint = *entrypoint
	opts.Cmd = cmdArgs

	res, err := ociimage.Build(opts)
	if err != nil {
		return err
	}
	if err := ociimage.WriteLayout(*layoutDir, res.Index, ociimage.RefName(*tag)); err != nil {
		return err
	}
	for i, p := range res.Platforms {
		digest, err := res.Images[i].Digest()
		if err != nil {
			return fmt.Errorf("computing the digest of the %s image: %w", p, err)
		}
		fmt.Printf("image %-14s %s\n", p, digest)
	}
	if *tarballPath != "" {
		osName, arch, _ := strings.Cut(*tarballPlatform, "/")
		img := res.Image(osName, arch)
		if img == nil {
			return fmt.Errorf("--tarball-platform %q is not one of the built platforms", *tarballPlatform)
		}
		if err := ociimage.WriteTarball(*tarballPath, *tag, img); err != nil {
			return err
		}
		fmt.Printf("docker load -i %s   # %s, %s\n", *tarballPath, *tarballPlatform, *tag)
	}
	digest, err := res.Index.Digest()
	if err != nil {
		return fmt.Errorf("computing the index digest: %w", err)
	}
	fmt.Printf("OCI layout %s: image index %s\n", *layoutDir, digest)
	if *digestFile != "" {
		if err := os.WriteFile(*digestFile, []byte(digest.String()+"\n"), 0o644); err != nil {
			return fmt.Errorf("writing the index digest: %w", err)
		}
	}
	return nil
}

func push(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("imagebuild push", flag.ContinueOnError)
	layoutDir := fs.String("layout", "", "OCI layout directory written by imagebuild build")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *layoutDir == "" || fs.NArg() != 1 {
		return fmt.Errorf("usage: imagebuild push --layout DIR registry/repository:tag")
	}
	digest, err := ociimage.Push(ctx, *layoutDir, fs.Arg(0))
	if err != nil {
		return err
	}
	fmt.Printf("pushed %s@%s\n", fs.Arg(0), digest)
	return nil
}

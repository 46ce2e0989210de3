// Command krew packs kubectl-app into krew archives and renders the krew manifest.
//
// For each --binary OS/ARCH=PATH it writes DIST/kubectl-app_VERSION_OS_ARCH.tar.gz with
// the binary (kubectl-app, kubectl-app.exe on windows) and every --file, then renders
// --template (hack/krew/app.yaml) into DIST/app.yaml with the version and each archive's
// platform, URI and sha256. `make plugin-dist` runs it.
//
//	go run ./hack/krew --version v0.1.0 --template hack/krew/app.yaml --dist dist \
//	  --file cmd/kubectl-app/kubectl_complete-app --file README.md \
//	  --binary linux/amd64=dist/build/linux-amd64/kubectl-app
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string { return strings.Join(*s, ",") }

func (s *stringList) Set(v string) error {
	*s = append(*s, v)
	return nil
}

func main() {
	var opts Options
	var binaries, files stringList
	flag.StringVar(&opts.Version, "version", "", "Version of the release, vMAJOR.MINOR.PATCH (krew wants a semantic version).")
	flag.StringVar(&opts.Template, "template", "hack/krew/app.yaml", "The manifest template.")
	flag.StringVar(&opts.Dist, "dist", "dist", "Directory of the archives and of the rendered app.yaml.")
	flag.StringVar(&opts.URIBase, "uri-base", DefaultURIBase, "URI the archives are downloaded from; {version} stands for --version.")
	flag.Var(&binaries, "binary", "OS/ARCH=PATH of a binary to pack (repeatable).")
	flag.Var(&files, "file", "A file every archive carries besides the binary (repeatable).")
	flag.Parse()
	opts.Files = files
	for _, b := range binaries {
		platform, path, ok := strings.Cut(b, "=")
		if !ok {
			fmt.Fprintf(os.Stderr, "error: --binary %q: want OS/ARCH=PATH\n", b)
			os.Exit(2)
		}
		opts.Binaries = append(opts.Binaries, Binary{Platform: platform, Path: path})
	}
	manifest, err := Dist(opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("wrote %s\n", manifest)
}

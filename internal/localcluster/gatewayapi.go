package localcluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// The Gateway API's CustomResourceDefinitions come from the module that ships its Go
// types, sigs.k8s.io/gateway-api (the version go.mod pins), so the tests run against
// the real schema and its validation rules, and no copy of the YAML is kept here.

// gatewayAPIModule is the module whose config/crd/standard holds the Gateway API CRDs.
const gatewayAPIModule = "sigs.k8s.io/gateway-api"

// GatewayAPICRDDir returns the directory of the Gateway API's standard CRDs in the Go
// module cache, for the version the module in the working directory requires; the
// module is downloaded if it is not there yet.
func GatewayAPICRDDir(ctx context.Context) (string, error) {
	dir, err := goModuleDir(ctx, "list", "-m", "-f", "{{.Dir}}", gatewayAPIModule)
	if err == nil && dir == "" {
		// Required but not downloaded yet: `go list -m` does not download.
		dir, err = goModuleDir(ctx, "mod", "download", "-json", gatewayAPIModule)
	}
	if err != nil {
		return "", err
	}
	crds := filepath.Join(dir, "config", "crd", "standard")
	if _, err := os.Stat(crds); err != nil {
		return "", fmt.Errorf("finding the Gateway API CRDs of %s: %w", gatewayAPIModule, err)
	}
	return crds, nil
}

// goModuleDir runs the go command with args and returns the module directory it
// prints: the whole output of `go list -m -f {{.Dir}}`, or the "Dir" of `go mod
// download -json`.
func goModuleDir(ctx context.Context, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("locating module %s (go %s): %w: %s", gatewayAPIModule, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	out := strings.TrimSpace(stdout.String())
	if args[0] != "mod" {
		return out, nil
	}
	for line := range strings.Lines(out) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), `"Dir": "`); ok {
			return strings.TrimSuffix(strings.TrimSuffix(v, ","), `"`), nil
		}
	}
	return "", fmt.Errorf("locating module %s: go %s printed no Dir", gatewayAPIModule, strings.Join(args, " "))
}

// gatewayAPICRDFiles returns the CRD files of the standard channel in dir: every
// gateway.networking.k8s.io_*.yaml but the ValidatingAdmissionPolicy the release ships
// beside them (gateway.networking.k8s.io_vap_*.yaml). A gateway controller (Traefik,
// Envoy Gateway) watches more kinds than HTTPRoute and waits for their CRDs.
func gatewayAPICRDFiles(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "gateway.networking.k8s.io_*.yaml"))
	if err != nil {
		return nil, fmt.Errorf("listing the Gateway API CRDs: %w", err)
	}
	files = slices.DeleteFunc(files, func(f string) bool { return strings.Contains(filepath.Base(f), "_vap_") })
	if len(files) == 0 {
		return nil, fmt.Errorf("no Gateway API CRDs in %s", dir)
	}
	sort.Strings(files)
	return files, nil
}

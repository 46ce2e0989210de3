package localcluster

import (
	"bytes"
	"context"
	"encoding/json"
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
// module cache, for the version the module in the working directory requires: `go mod
// download -json` names it, and downloads the module if it is not there yet.
func GatewayAPICRDDir(ctx context.Context) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", gatewayAPIModule)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("locating module %s (go mod download): %w: %s", gatewayAPIModule, err, strings.TrimSpace(stderr.String()))
	}
	var module struct{ Dir, Error string }
	if err := json.Unmarshal(stdout.Bytes(), &module); err != nil {
		return "", fmt.Errorf("locating module %s: reading what go mod download printed: %w", gatewayAPIModule, err)
	}
	if module.Dir == "" {
		return "", fmt.Errorf("locating module %s: go mod download named no directory: %s", gatewayAPIModule, module.Error)
	}
	crds := filepath.Join(module.Dir, "config", "crd", "standard")
	if _, err := os.Stat(crds); err != nil {
		return "", fmt.Errorf("finding the Gateway API CRDs of %s: %w", gatewayAPIModule, err)
	}
	return crds, nil
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

// Package chart tests the Helm chart charts/app-controller and the one-file installer
// dist/install.yaml: offline (load, lint, render, schema) and against a local control
// plane (server-side dry runs, a real install, the controller running with exactly the
// chart's RBAC, uninstall). It is its own Go module so that Helm's dependencies stay out
// of the project's go.mod; go.mod also pins the helm command built into bin/helm.
package chart

package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// Releases as users get them, for the tests that install one and upgrade to another (the
// install e2e, the soak's helm upgrade): `make release` of a source tree, its image and
// chart pushed to a registry, and a checkout of an earlier commit to make the previous
// release from.

// Release is what `make release` made of one version.
type Release struct {
	Version, ChartVersion string
	// Repository is the image's repository (REGISTRY/app-controller); Digest the image
	// index's digest, as install.yaml pins it; Dist the release's directory.
	Repository, Digest, Dist string
	// Output is what make release printed.
	Output string
}

// ReleaseOptions say which release MakeRelease makes.
type ReleaseOptions struct {
	// Dir is the source tree (its Makefile); Version the release's (vX.Y.Z[-PRE]); Dist
	// the directory it is written to (RELEASE_DIST).
	Dir, Version, Dist string
	// Registry, if set, receives the image and the chart (REGISTRY).
	Registry string
	// Changelog is the CHANGELOG with a section for Version ("": the tree's own).
	Changelog string
	// CosignKey, if set, signs the release (its password in $COSIGN_PASSWORD).
	CosignKey string
}

// MakeRelease runs `make release` in o.Dir for the host's platform only (the image and
// the plugin: the cost of a release is its builds) and returns what it made. The image's
// digest is the one install.yaml pins.
func MakeRelease(ctx context.Context, o ReleaseOptions) (Release, error) {
	host := "linux/" + runtime.GOARCH
	args := []string{"--no-print-directory", "release", "VERSION=" + o.Version, "REGISTRY=" + o.Registry,
		"RELEASE_DIST=" + o.Dist, "RELEASE_PLATFORMS=" + host, "PLUGIN_PLATFORMS=" + host}
	if o.Changelog != "" {
		args = append(args, "CHANGELOG="+o.Changelog)
	}
	if o.CosignKey != "" {
		args = append(args, "COSIGN_KEY="+o.CosignKey)
	}
	cmd := exec.CommandContext(ctx, "make", args...)
	cmd.Dir = o.Dir
	// Not the variables of a make that runs the caller (make soak's NODE, make e2e's):
	// the release is the tree's, as a user makes it.
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); name != "MAKEFLAGS" && name != "MFLAGS" && name != "MAKELEVEL" {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, err := cmd.CombinedOutput()
	rel := Release{Version: o.Version, ChartVersion: strings.TrimPrefix(o.Version, "v"), Dist: o.Dist, Output: string(out)}
	if err != nil {
		return rel, fmt.Errorf("make release VERSION=%s in %s: %w\n%s", o.Version, o.Dir, err, out)
	}
	rel.Repository = "app-controller"
	if o.Registry != "" {
		rel.Repository = o.Registry + "/app-controller"
	}
	install, err := os.ReadFile(filepath.Join(o.Dist, "install.yaml"))
	if err != nil {
		return rel, fmt.Errorf("reading the release's install.yaml: %w", err)
	}
	if rel.Digest, err = ImageDigest(string(install), rel.Repository+":"+o.Version); err != nil {
		return rel, err
	}
	return rel, nil
}

// ImageDigest returns the digest by which installYAML pins the image ref (ref@sha256:...).
func ImageDigest(installYAML, ref string) (string, error) {
	_, rest, ok := strings.Cut(installYAML, "image: "+ref+"@")
	if !ok {
		return "", fmt.Errorf("install.yaml does not pin %s by digest", ref)
	}
	digest, _, _ := strings.Cut(rest, "\n")
	if !strings.HasPrefix(digest, "sha256:") || len(digest) != len("sha256:")+64 {
		return "", fmt.Errorf("install.yaml pins %s to %q, want sha256:<64 hex digits>", ref, digest)
	}
	return digest, nil
}

// checkoutTime is the time CheckoutCommit dates a checkout's files back to: older than
// any tool built from them.
var checkoutTime = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// releaseTools are the tools `make release` (without signing) runs from bin/.
var releaseTools = []string{"imagebuild", "cyclonedx-gomod", "helm", "kubectl"}

// CheckoutCommit checks out commit rev of the repository at repo into dir (a detached
// `git worktree`), ready for `make release` without building its tools again: its files
// dated back (a fresh checkout's files are newer than any tool, and make would rebuild
// them) and its bin/ linking the release's tools of binDir. RemoveCheckout removes it.
// It returns the commit's abbreviated hash and subject.
func CheckoutCommit(ctx context.Context, repo, rev, dir, binDir string) (string, error) {
	git := func(dir string, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("git %s: %w\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out)), nil
	}
	// A checkout at dir left by an earlier run that ended before it removed it goes
	// first (none: an error, ignored).
	_, _ = git(repo, "worktree", "remove", "--force", dir)
	if _, err := git(repo, "worktree", "add", "--detach", dir, rev); err != nil {
		return "", err
	}
	files, err := git(dir, "ls-files")
	if err != nil {
		return "", err
	}
	for f := range strings.SplitSeq(files, "\n") {
		if _, err := os.Lstat(filepath.Join(dir, f)); err != nil {
			continue // a submodule's path, a file the checkout left out
		}
		if err := os.Chtimes(filepath.Join(dir, f), checkoutTime, checkoutTime); err != nil {
			return "", fmt.Errorf("dating back %s: %w", f, err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		return "", err
	}
	for _, tool := range releaseTools {
		if err := os.Symlink(filepath.Join(binDir, tool), filepath.Join(dir, "bin", tool)); err != nil {
			return "", fmt.Errorf("linking %s into the checkout: %w", tool, err)
		}
	}
	return git(dir, "log", "-1", "--format=%h %s")
}

// RemoveCheckout removes a checkout of CheckoutCommit.
func RemoveCheckout(repo, dir string) error {
	cmd := exec.Command("git", "worktree", "remove", "--force", dir)
	cmd.Dir = repo
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("git worktree remove %s: %w\n%s", dir, err, out)
	}
	return nil
}

package install_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/app-controller/app-controller/internal/localcluster"
	"github.com/app-controller/app-controller/test/e2e/realnode"
	"github.com/app-controller/app-controller/test/harness"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// The two releases the test makes from this tree, as `make release` makes them, into the
// cluster's registry: the previous one, installed first, and the current one, the
// upgrade. They differ by their version (stamped into the binary, the image tag, the
// chart's version and appVersion, the labels of everything the chart renders).
const (
	previousVersion = "v0.0.9"
	currentVersion  = "v0.1.0"
)

// appCRD is the name of the App CRD.
const appCRD = "apps.appcontroller.k8s.io"

// aRelease is what `make release` made of one version.
type aRelease struct {
	version, chartVersion string
	// digest is the image index's digest, dist the release's directory.
	digest, dist string
}

// releases are the previous and the current release, pushed to the cluster's registry.
type releases struct {
	registry, repository string
	previous, current    aRelease
}

// chart is the OCI reference of the chart in the cluster's registry.
func (r *releases) chart() string { return "oci://" + r.registry + "/charts/app-controller" }

// makeReleases makes the previous and the current release with `make release
// REGISTRY=...` (the host's platform only, to keep the cost low) and checks what a user
// of a release checks: every file against checksums.txt, and, with the public key of the
// key the test made, cosign's signatures of checksums.txt and of the pushed image index.
// An image signed with another key does not verify. The previous release's notes come
// from a CHANGELOG of its own, with a section for it.
func makeReleases(t *testing.T, registry string) *releases {
	t.Helper()
	dir := t.TempDir()
	cosign := filepath.Join(realnode.BinDir(t), "cosign")
	// An empty password for the test's keys: cosign reads it from the environment.
	t.Setenv("COSIGN_PASSWORD", "")
	key := filepath.Join(dir, "release")
	other := filepath.Join(dir, "other")
	for _, prefix := range []string{key, other} {
		realnode.Run(t, cosign, "generate-key-pair", "--output-key-prefix", prefix)
	}
	changelog := filepath.Join(dir, "CHANGELOG.md")
	if err := os.WriteFile(changelog, []byte("# Changelog\n\n## [0.0.9] - 2026-11-01\n\n### Added\n\n- The previous release of the upgrade test.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := &releases{registry: registry, repository: registry + "/app-controller"}
	root, err := localcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	rels := []struct {
		into      *aRelease
		version   string
		changelog string
		made      harness.Release
		err       error
	}{
		{into: &r.previous, version: previousVersion, changelog: changelog},
		{into: &r.current, version: currentVersion},
	}
	// Both at once: each into its own directory (RELEASE_DIST, its image's build under
	// it), and each mostly links and waits on its tools, one core at a time.
	var wg sync.WaitGroup
	for i := range rels {
		rel := &rels[i]
		wg.Go(func() {
			rel.made, rel.err = harness.MakeRelease(t.Context(), harness.ReleaseOptions{Dir: root, Version: rel.version, Dist: filepath.Join(dir, rel.version),
				Registry: registry, Changelog: rel.changelog, CosignKey: key + ".key"})
		})
	}
	wg.Wait()
	for _, rel := range rels {
		if rel.err != nil {
			t.Fatal(rel.err)
		}
	}
	for _, rel := range rels {
		dist := rel.made.Dist
		t.Logf("make release VERSION=%s REGISTRY=%s COSIGN_KEY=...: %s", rel.version, registry, lastLine(rel.made.Output))
		*rel.into = aRelease{version: rel.version, chartVersion: rel.made.ChartVersion, dist: dist, digest: rel.made.Digest}

		check := exec.Command("sha256sum", "-c", "checksums.txt")
		check.Dir = dist
		if out, err := check.CombinedOutput(); err != nil {
			t.Fatalf("sha256sum -c checksums.txt in %s: %v\n%s", dist, err, out)
		} else {
			t.Logf("sha256sum -c checksums.txt: %d files OK", strings.Count(string(out), ": OK"))
		}
		realnode.Run(t, cosign, "verify-blob", "--key", key+".pub", "--insecure-ignore-tlog",
			"--bundle", filepath.Join(dist, "checksums.txt.sigstore.json"), filepath.Join(dist, "checksums.txt"))
		image := r.repository + "@" + rel.into.digest
		verify := func(pub string) []string {
			return []string{"verify", "--key", pub, "--insecure-ignore-tlog", "--allow-http-registry", "--allow-insecure-registry", image}
		}
		out := realnode.Run(t, cosign, verify(key+".pub")...)
		t.Logf("cosign verify --key release.pub %s: %s %s", image, grepLine(out, "Verification for"), grepLine(out, "verified against the specified public key"))
		if out, err := realnode.TryRun(cosign, verify(other+".pub")...); err == nil {
			t.Fatalf("cosign verify with another key accepted the image's signature:\n%s", out)
		}
	}
	return r
}

// crdLabels returns the labels of the App CRD and whether it is kept on uninstall.
func crdLabels(t testing.TB) (map[string]string, bool) {
	t.Helper()
	client, err := apiextensionsclient.NewForConfig(framework.Config(t))
	if err != nil {
		t.Fatal(err)
	}
	crd, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), appCRD, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading the App CRD: %v", err)
	}
	return crd.Labels, crd.Annotations["helm.sh/resource-policy"] == "keep"
}

// checkCRDOf fails the test unless the App CRD is the chart's of release rel: its
// labels name that chart version and appVersion, and it is kept on uninstall.
func checkCRDOf(t testing.TB, rel aRelease) {
	t.Helper()
	labels, kept := crdLabels(t)
	if labels["helm.sh/chart"] != "app-controller-"+rel.chartVersion || labels["app.kubernetes.io/version"] != rel.version || !kept {
		t.Fatalf("App CRD: labels helm.sh/chart=%q app.kubernetes.io/version=%q, kept on uninstall %t; want the chart %s's (app-controller-%s, %s), kept",
			labels["helm.sh/chart"], labels["app.kubernetes.io/version"], kept, rel.version, rel.chartVersion, rel.version)
	}
}

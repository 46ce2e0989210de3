package plugin

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"text/tabwriter"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	appclientset "github.com/app-controller/app-controller/pkg/generated/clientset/versioned"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// update rewrites the golden files with the outputs of this run:
//
//	go test ./test/integration/plugin/ -run TestKubectlApp/golden -update
var update = flag.Bool("update", false, "rewrite the golden files of testdata/ with this run's outputs")

// golden is a command whose masked output is compared with testdata/NAME.golden.
type golden struct {
	name string
	args []string
	// table: the output is a table, realigned after masking.
	table bool
	// sortCauses sorts the "* field: message" lines of an invalid object's error: the
	// API server reports the causes of a CRD's schema validation in no fixed order.
	sortCauses bool
	wantCode   int
}

// checkGoldens creates the App web with `kubectl app create`, waits until it is Ready,
// then compares the outputs of the plugin's commands with their golden files. Outputs
// are masked first: the namespace, ages, IP addresses, the generated suffixes of
// ReplicaSet, Pod and EndpointSlice names, and the plugin's build.
func checkGoldens(t *testing.T, plugin kubectlApp, apps appclientset.Interface, kube kubernetes.Interface) {
	ns := framework.Namespace(t)
	checkGolden(t, ns, "create", plugin.run(t, "create", "web", "--image", "nginx", "--replicas", "2", "--port", "8080",
		"--deployment", "web-deploy", "--service", "web-svc", "-n", ns), golden{})
	waitAppCondition(t, apps, ns, "web", appv1.ConditionReady, "True/Available")
	waitEndpointSlice(t, kube, ns, "web-svc")

	for _, g := range []golden{
		{name: "list", args: []string{"list", "-n", ns}, table: true},
		{name: "list-wide", args: []string{"list", "-n", ns, "-o", "wide"}, table: true},
		{name: "list-name", args: []string{"list", "-n", ns, "-o", "name"}},
		{name: "status", args: []string{"status", "web", "-n", ns}, table: true},
		{name: "status-jsonpath", args: []string{"status", "web", "-n", ns, "-o", `jsonpath={.apiVersion} {.kind} {.spec}{"\n"}`}},
		{name: "tree", args: []string{"tree", "web", "-n", ns}, table: true},
		{name: "tree-name", args: []string{"tree", "web", "-n", ns, "-o", "name"}},
		{name: "create-dry-run-client", args: []string{"create", "api", "--image", "registry.example.com/api:v1", "--port", "80", "--dry-run=client", "-o", "yaml"}},
		{name: "create-dry-run-server", args: []string{"create", "api", "--image", "nginx", "--dry-run=server", "-n", ns, "-o", "jsonpath={.spec}"}},
		{name: "create-command", args: []string{"create", "echo", "--image", "registry.example.com/agnhost:2.63.0", "--port", "8080", "--dry-run=server", "-n", ns, "-o", "jsonpath={.spec}", "--", "/agnhost", "netexec", "--http-port", "8080"}},
		{name: "create-exists", args: []string{"create", "web", "--image", "nginx", "-n", ns}, wantCode: 2},
		{name: "create-invalid", args: []string{"create", "Bad_Name", "--image", "nginx", "--port", "8080", "--replicas", "-1", "-n", ns}, sortCauses: true, wantCode: 2},
		{name: "create-invalid-one-cause", args: []string{"create", "api", "--image", "nginx", "--service", "Bad_svc", "-n", ns}, wantCode: 2},
		{name: "version-client", args: []string{"version", "--client"}},
		{name: "version", args: []string{"version"}},
	} {
		t.Run(g.name, func(t *testing.T) {
			r := plugin.run(t, g.args...)
			if r.code != g.wantCode {
				t.Errorf("exit code %d, want %d", r.code, g.wantCode)
			}
			checkGolden(t, ns, g.name, r, g)
		})
	}
	checkLifecycleGoldens(t, plugin, apps, ns)
}

// checkLifecycleGoldens changes the image of the App web as a user does (an update with
// a change cause), then compares the outputs of history, rollback and restart with their
// golden files.
func checkLifecycleGoldens(t *testing.T, plugin kubectlApp, apps appclientset.Interface, ns string) {
	ctx := context.Background()
	framework.Eventually(t, converge, func() (bool, error) {
		app, err := apps.AppcontrollerV1().Apps(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		app.Spec.DeploymentTemplate.Image = "nginx:stable"
		app.Annotations = map[string]string{appv1.ChangeCauseAnnotation: "kubectl set image: nginx:stable"}
		_, err = apps.AppcontrollerV1().Apps(ns).Update(ctx, app, metav1.UpdateOptions{})
		return err == nil, nil
	})
	// waitRevision waits until the App has want revisions, the newest current.
	waitRevision := func(want int) {
		framework.Eventually(t, converge, func() (bool, error) {
			lines := strings.Split(strings.TrimSpace(plugin.run(t, "history", "web", "-n", ns).stdout), "\n")
			return len(lines) == want+1 && strings.Contains(lines[want], "(current)"), nil
		})
	}
	waitRevision(2)
	for _, g := range []golden{
		{name: "history", args: []string{"history", "web", "-n", ns}, table: true},
		{name: "history-revision", args: []string{"history", "web", "-n", ns, "--revision", "2"}},
		{name: "rollback", args: []string{"rollback", "web", "-n", ns}},
		{name: "rollback-missing", args: []string{"rollback", "web", "-n", ns, "--to-revision", "9"}, wantCode: 2},
		{name: "restart", args: []string{"restart", "web", "-n", ns}},
	} {
		t.Run(g.name, func(t *testing.T) {
			r := plugin.run(t, g.args...)
			if r.code != g.wantCode {
				t.Errorf("exit code %d, want %d", r.code, g.wantCode)
			}
			checkGolden(t, ns, g.name, r, g)
		})
	}
	waitRevision(2) // revision 1 became revision 3
	checkGolden(t, ns, "history-after-rollback", plugin.run(t, "history", "web", "-n", ns), golden{table: true})
}

// checkGolden compares the masked stdout and stderr of r with testdata/NAME.golden, or
// writes it there with -update.
func checkGolden(t *testing.T, ns, name string, r result, g golden) {
	t.Helper()
	got := mask(r.stdout, ns, g.table)
	if r.stderr != "" {
		stderr := mask(r.stderr, ns, false)
		if g.sortCauses {
			stderr = sortCauseLines(stderr)
		}
		got += "--- stderr\n" + stderr
	}
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading the golden file (run with -update to write it): %v", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (run with -update to rewrite it)\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

// Masks of what changes from run to run.
var masks = []struct {
	re   *regexp.Regexp
	with string
}{
	// The plugin's build: version, commit, Go, platform.
	{regexp.MustCompile(`Plugin Version: .*`), "Plugin Version: VERSION (commit COMMIT, GO, PLATFORM)"},
	{regexp.MustCompile(`(?m)^(\s*)(version|commit|goVersion|platform): .*$`), "$1$2: MASKED"},
	// Generated names: Pods of a ReplicaSet, the ReplicaSet's pod-template-hash, the
	// EndpointSlice's suffix.
	{regexp.MustCompile(`web-deploy-[a-z0-9]{6,10}-[a-z0-9]{5}\b`), "web-deploy-HASH-XXXXX"},
	{regexp.MustCompile(`web-deploy-[a-z0-9]{6,10}\b`), "web-deploy-HASH"},
	{regexp.MustCompile(`web-svc-[a-z0-9]{5}\b`), "web-svc-XXXXX"},
	// The hash of an App's spec in the name of its revisions.
	{regexp.MustCompile(`\bweb-[0-9a-f]{10}\b`), "web-SPECHASH"},
	{regexp.MustCompile(`\b\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}\b`), "IP"},
	// Ages, of an Event seen several times too.
	{regexp.MustCompile(`\b\d+[smhd](\d+[smh])?( \(x\d+ over \d+[smhd](\d+[smh])?\))?(\s|$)`), "AGE$4"},
}

// columnGap separates the columns of a table line: two spaces or more after a character
// that is not a space nor tree drawing (whose "│   " is indentation).
var columnGap = regexp.MustCompile(`([^\s│├└─]) {2,}`)

// mask replaces what changes from run to run in out; a table is realigned afterwards,
// since masking changes the widths of its columns.
func mask(out, ns string, table bool) string {
	out = strings.ReplaceAll(out, ns, "NAMESPACE")
	for _, m := range masks {
		out = m.re.ReplaceAllString(out, m.with)
	}
	if !table {
		return out
	}
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 8, 3, ' ', 0)
	for _, line := range strings.SplitAfter(out, "\n") {
		if line == "" {
			continue
		}
		// Cells end where two spaces or more follow a non-space; the indentation of the
		// line (tree drawing, the Events table) stays with the first cell.
		line = columnGap.ReplaceAllString(strings.TrimRight(line, " \n"), "${1}\t")
		fmt.Fprintln(tw, line)
	}
	if err := tw.Flush(); err != nil {
		panic(fmt.Sprintf("realigning a table: %v", err))
	}
	return buf.String()
}

// sortCauseLines sorts the lines of out that start with "* ", in place among the others.
func sortCauseLines(out string) string {
	lines := strings.SplitAfter(out, "\n")
	var causes []string
	for _, l := range lines {
		if strings.HasPrefix(l, "* ") {
			causes = append(causes, l)
		}
	}
	sort.Strings(causes)
	for i, l := range lines {
		if strings.HasPrefix(l, "* ") {
			lines[i], causes = causes[0], causes[1:]
		}
	}
	return strings.Join(lines, "")
}

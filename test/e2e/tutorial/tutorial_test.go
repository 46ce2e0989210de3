// Package tutorial_test runs the tutorial docs/getting-started.md as written: every `sh`
// block of the page, in order, in one shell, on a cluster whose node runs pods for real,
// as the reader's second terminal would after `make dev NODE=real`. Then it checks what
// the tutorial left behind through the API.
package tutorial_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/app-controller/app-controller/internal/localcluster"
	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	appclient "github.com/app-controller/app-controller/pkg/generated/clientset/versioned"
	"github.com/app-controller/app-controller/test/e2e/realnode"
	"github.com/app-controller/app-controller/test/harness"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// The cluster of `make dev NODE=real` (but for the Gateway API's CRDs, which the tutorial
// does not use); the App CRD is installed by the test, as make dev does.
func TestMain(m *testing.M) { realnode.Main(m) }

const (
	page = "docs/getting-started.md"
	// notRun marks the blocks the test does not run: what make dev and make cluster-down
	// do, which the test does itself.
	notRun = "<!-- not run by the test"
	// scriptTimeout bounds the whole tutorial (it ran in 15 s; its waits allow 3 minutes
	// each for image pulls and rollouts on a slow machine).
	scriptTimeout = 8 * time.Minute
)

// skippable are the only commands a block marked notRun may hold.
var skippable = []string{"make dev NODE=real", "make cluster-down"}

// block is a fenced code block of the page.
type block struct {
	line   int // of its opening fence
	info   string
	text   string
	marked bool // preceded by a notRun comment
}

// parseBlocks returns the fenced code blocks of a Markdown page.
func parseBlocks(t *testing.T, path string) []block {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var blocks []block
	var cur *block
	var lines []string
	previous := ""
	s := bufio.NewScanner(f)
	for n := 1; s.Scan(); n++ {
		line := s.Text()
		switch {
		case cur == nil && strings.HasPrefix(line, "```"):
			cur = &block{line: n, info: strings.TrimSpace(strings.TrimPrefix(line, "```")), marked: strings.HasPrefix(previous, notRun)}
			lines = nil
		case cur != nil && strings.TrimSpace(line) == "```":
			cur.text = strings.Join(lines, "\n")
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			lines = append(lines, line)
		}
		if strings.TrimSpace(line) != "" {
			previous = line
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if cur != nil {
		t.Fatalf("%s:%d: code block not closed", path, cur.line)
	}
	return blocks
}

// script returns the shell blocks as one bash script, each announced by its line in
// the page, and checks that the blocks left out are only what the test does itself.
func script(t *testing.T, blocks []block) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("set -o errexit -o nounset -o pipefail\nset -o xtrace\n")
	run := 0
	for _, bl := range blocks {
		if bl.info != "sh" {
			continue
		}
		if bl.marked {
			if !slices.Contains(skippable, strings.TrimSpace(bl.text)) {
				t.Fatalf("%s:%d: a block marked %q holds %q: only %q may be left out", page, bl.line, notRun, bl.text, skippable)
			}
			t.Logf("%s:%d: not run (the test does it): %s", page, bl.line, bl.text)
			continue
		}
		fmt.Fprintf(&b, "echo '### %s:%d'\n%s\n", page, bl.line, bl.text)
		run++
	}
	if run < 5 {
		t.Fatalf("%s: %d shell blocks to run, want the whole tutorial", page, run)
	}
	return b.String()
}

func TestGettingStarted(t *testing.T) {
	ctx := context.Background()
	root := realnode.Root(t)
	blocks := parseBlocks(t, filepath.Join(root, page))
	sh := script(t, blocks)
	cluster := framework.Cluster()

	// What make dev NODE=real does once the cluster is up: the CRD (make install), the
	// plugin in bin/, the controller in the foreground (make run). The binaries are
	// built into the test's directories, not bin/, which other tests may be reading.
	begin := time.Now()
	realnode.Make(t, "install")
	controllerBin := framework.BuildBinary(t, "app-controller")
	pluginBin := framework.BuildBinary(t, "kubectl-app")
	controller, err := harness.Start(controllerBin, []string{"--kubeconfig", cluster.Kubeconfig, "-v=2"},
		filepath.Join(t.TempDir(), "app-controller.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := controller.Stop(syscall.SIGTERM, 30*time.Second); err != nil {
			t.Errorf("stopping the controller: %v", err)
		}
		if t.Failed() {
			t.Logf("the controller's log, last lines:\n%s", controller.Tail(60))
		}
	})
	t.Logf("make install, the controller and the plugin built and started in %.1fs", time.Since(begin).Seconds())

	// The reader's second terminal: the repository's root as make dev leaves it, with
	// .local/kubeconfig, .local/registry and bin/ (kubectl, kubectl-app).
	dir := t.TempDir()
	for _, d := range []string{"bin", ".local", "home"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	kubeconfig, err := os.ReadFile(cluster.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for path, data := range map[string]string{".local/kubeconfig": string(kubeconfig), ".local/registry": cluster.Registry + "\n"} {
		if err := os.WriteFile(filepath.Join(dir, path), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for name, target := range map[string]string{"kubectl": filepath.Join(realnode.BinDir(t), "kubectl"), "kubectl-app": pluginBin} {
		if err := os.Symlink(target, filepath.Join(dir, "bin", name)); err != nil {
			t.Fatal(err)
		}
	}

	scriptCtx, cancel := context.WithTimeout(ctx, scriptTimeout)
	defer cancel()
	cmd := exec.CommandContext(scriptCtx, "bash", "-c", sh)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+filepath.Join(dir, "home"), "KUBECONFIG=")
	begin = time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("the tutorial's commands (%.1fs):\n%s", time.Since(begin).Seconds(), out)
	if err != nil {
		t.Fatalf("the tutorial failed: %v (the last block announced above is the one that failed)", err)
	}

	// What the tutorial left: the App back on the good image at revision 5, Ready, with
	// its route's Ingress and its environment from the ConfigMap.
	apps, err := appclient.NewForConfig(framework.Config(t))
	if err != nil {
		t.Fatal(err)
	}
	app, err := apps.AppcontrollerV1().Apps("demo").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := cluster.Registry + "/" + localcluster.AgnhostImage; app.Spec.DeploymentTemplate.Image != want {
		t.Errorf("the App's image is %q after the rollback, want %q", app.Spec.DeploymentTemplate.Image, want)
	}
	ready := meta.FindStatusCondition(app.Status.Conditions, appv1.ConditionReady)
	if ready == nil || ready.Status != metav1.ConditionTrue || app.Status.ObservedGeneration != app.Generation {
		t.Errorf("the App is not Ready at its generation %d: observed %d, Ready %+v", app.Generation, app.Status.ObservedGeneration, ready)
	}
	if got := app.Spec.DeploymentTemplate.Command; !slices.Equal(got, []string{"/agnhost", "netexec", "--http-port", "8080"}) {
		t.Errorf("the App's command is %q, want what followed -- on kubectl app create", got)
	}
	client := framework.Client(t)
	revisions, err := client.AppsV1().ControllerRevisions("demo").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var numbers []int64
	for _, r := range revisions.Items {
		if owner := metav1.GetControllerOf(&r); owner != nil && owner.UID == app.UID {
			numbers = append(numbers, r.Revision)
		}
	}
	slices.Sort(numbers)
	// Revisions 1 (create), 2 (route), 3 (envFrom), 4 (the bad image); the rollback
	// wrote revision 3's spec back, which is now revision 5.
	if !slices.Equal(numbers, []int64{1, 2, 4, 5}) {
		t.Errorf("the App's revisions are %v, want 1, 2, 4 and 5 (revision 3 rolled back to is 5)", numbers)
	}
	ingress, err := client.NetworkingV1().Ingresses("demo").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the route's Ingress: %v", err)
	}
	if owner := metav1.GetControllerOf(ingress); owner == nil || owner.UID != app.UID || ingress.Spec.Rules[0].Host != "web.example.com" {
		t.Errorf("Ingress web: controller %+v, rules %+v, want the App's, for web.example.com", owner, ingress.Spec.Rules)
	}
	pods, err := client.CoreV1().Pods("demo").List(ctx, metav1.ListOptions{LabelSelector: appv1.InstanceLabel + "=web"})
	if err != nil {
		t.Fatal(err)
	}
	running := 0
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			running++
			if ref := p.Spec.Containers[0].EnvFrom; len(ref) != 1 || ref[0].ConfigMapRef == nil || ref[0].ConfigMapRef.Name != "web-config" {
				t.Errorf("pod %s: envFrom %+v, want the ConfigMap web-config", p.Name, ref)
			}
		}
	}
	if running != 1 {
		t.Errorf("%d running pods of the App, want 1", running)
	}
}

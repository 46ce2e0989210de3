// Package plugin tests the kubectl plugin kubectl-app end to end: the binary, built from
// cmd/kubectl-app, run against a real control plane (kube-apiserver, etcd,
// kube-controller-manager with the deployment, replicaset, endpointslice and garbage
// collector controllers, kube-scheduler and kwok, which runs the pods), with the App and
// Service->Ingress controllers running in the test process.
package plugin

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appctrl "github.com/app-controller/app-controller/pkg/controller/app"
	ingressctrl "github.com/app-controller/app-controller/pkg/controller/ingress"
	"github.com/app-controller/app-controller/pkg/controllermanager"
	"github.com/app-controller/app-controller/test/integration/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

// converge bounds how long the controllers and the cluster may take to converge.
const converge = 60 * time.Second

// runTimeout bounds one run of the plugin.
const runTimeout = 60 * time.Second

// startManager runs the App and Service->Ingress controllers in the test process until
// the test ends.
func startManager(t *testing.T) {
	t.Helper()
	opts := controllermanager.NewOptions()
	opts.Controllers = []string{appctrl.ControllerName, ingressctrl.ControllerName}
	opts.ShutdownTimeout = 5 * time.Second

	framework.StartManager(t, framework.Config(t), opts)
}

// kubectlApp is the plugin binary, built for the test.
type kubectlApp struct {
	bin      string
	cacheDir string
}

// buildPlugin builds cmd/kubectl-app into a temporary directory removed when the test
// ends.
func buildPlugin(t *testing.T) kubectlApp {
	t.Helper()
	start := time.Now()
	bin := framework.BuildBinary(t, "kubectl-app")
	t.Logf("built kubectl-app in %s", time.Since(start).Round(time.Millisecond))
	return kubectlApp{bin: bin, cacheDir: filepath.Join(t.TempDir(), "cache")}
}

// result is the outcome of a run of the plugin.
type result struct {
	stdout, stderr string
	code           int
}

// run runs the plugin with args against the test cluster and returns its output and
// exit code. It fails the test if the plugin cannot be started or runs too long.
func (k kubectlApp) run(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	// The connection flags go before a --, after which the words are the App's command.
	flags := []string{"--kubeconfig", framework.Cluster().Kubeconfig, "--cache-dir", k.cacheDir}
	line := append(slices.Clone(args), flags...)
	if dash := slices.Index(args, "--"); dash >= 0 {
		line = slices.Concat(args[:dash], flags, args[dash:])
	}
	cmd := exec.CommandContext(ctx, k.bin, line...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var exitErr *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exitErr) && ctx.Err() == nil:
		r.code = exitErr.ExitCode()
	default:
		t.Fatalf("running kubectl-app %s: %v\nstderr:\n%s", strings.Join(line, " "), err, r.stderr)
	}
	t.Logf("$ kubectl app %s   # exit code %d, %s\n%s%s", strings.Join(args, " "), r.code,
		time.Since(start).Round(time.Millisecond), r.stdout, r.stderr)
	return r
}

// treeLine is a line of the output of `kubectl app tree`.
type treeLine struct {
	depth   int
	object  string // Kind/name
	health  string
	message string
	parent  string // Kind/name of the line it hangs from; "" for the App
}

// parseTree parses the output of `kubectl app tree`: each level of the tree indents the
// NAME column by two runes of drawing (├─ └─ │ and spaces).
func parseTree(t *testing.T, out string) []treeLine {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[0], "NAME") {
		t.Fatalf("tree output has no header and lines:\n%s", out)
	}
	var parsed []treeLine
	var stack []string // stack[d] is the object of the last line at depth d
	for _, line := range lines[1:] {
		rest := strings.TrimLeft(line, "│├└─ ")
		drawing := []rune(line[:len(line)-len(rest)])
		fields := strings.Fields(rest)
		if len(drawing)%2 != 0 || len(fields) < 2 {
			t.Fatalf("unexpected tree line %q in:\n%s", line, out)
		}
		l := treeLine{depth: len(drawing) / 2, object: fields[0], health: fields[1], message: strings.Join(fields[2:], " ")}
		if l.depth > len(stack) {
			t.Fatalf("tree line %q is indented past its parent in:\n%s", line, out)
		}
		stack = append(stack[:l.depth], l.object)
		if l.depth > 0 {
			l.parent = stack[l.depth-1]
		}
		parsed = append(parsed, l)
	}
	return parsed
}

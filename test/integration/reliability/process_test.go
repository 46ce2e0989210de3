package reliability

import (
	"fmt"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/app-controller/app-controller/test/harness"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// identity is a controller instance's user name: its requests impersonate it (in group
// system:masters), so the audit log tells instances apart.
type identity string

// identityCounter makes each identity unique in the test binary.
var identityCounter struct {
	sync.Mutex
	n int
}

// newIdentity returns a fresh identity named after what.
func newIdentity(what string) identity {
	identityCounter.Lock()
	defer identityCounter.Unlock()
	identityCounter.n++
	return identity(fmt.Sprintf("reliability-%s-%d", what, identityCounter.n))
}

// restConfig returns the admin config impersonating id.
func (id identity) restConfig(t *testing.T) *rest.Config {
	cfg := framework.Config(t)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: string(id), Groups: []string{"system:masters"}}
	return cfg
}

// kubeconfig writes the admin kubeconfig impersonating id and returns its path.
func (id identity) kubeconfig(t *testing.T) string {
	t.Helper()
	return impersonatingKubeconfig(t, string(id), "system:masters")
}

// controller is an app-controller process (harness.Process), run with its default flags
// but its kubeconfig (impersonating its identity) and the flags a test adds.
type controller struct {
	*harness.Process
	id identity
}

// startController starts the controller binary as id with the extra flags, and stops it
// (SIGKILL) at the end of the test if it still runs.
func startController(t *testing.T, id identity, extra ...string) *controller {
	t.Helper()
	args := append([]string{"--kubeconfig", id.kubeconfig(t)}, extra...)
	p, err := harness.Start(framework.BuildBinary(t, "app-controller"), args, filepath.Join(t.TempDir(), string(id)+".log"))
	if err != nil {
		t.Fatal(err)
	}
	c := &controller{Process: p, id: id}
	t.Cleanup(func() {
		_ = c.Stop(syscall.SIGKILL, time.Minute)
		if t.Failed() {
			t.Logf("log of %s: %s", c.id, c.LogPath())
			t.Logf("last lines of %s:\n%s", c.id, c.Tail(30))
		}
	})
	return c
}

// signal sends sig to the process.
func (c *controller) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := c.Signal(sig); err != nil {
		t.Fatalf("signalling %s: %v", c.id, err)
	}
}

// kill SIGKILLs the process and waits until it is gone.
func (c *controller) kill(t *testing.T) {
	t.Helper()
	c.signal(t, syscall.SIGKILL)
	<-c.Done()
}

func (c *controller) exited() bool { return c.Exited() != nil }

// waitExit waits up to timeout for the process to exit and returns its exit code.
func (c *controller) waitExit(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-c.Done():
	case <-time.After(timeout):
		t.Fatalf("%s still running after %s", c.id, timeout)
	}
	return c.ExitCode()
}

// waitLog waits until a log line contains s.
func (c *controller) waitLog(t *testing.T, s string, timeout time.Duration) {
	t.Helper()
	framework.Eventually(t, timeout, func() (bool, error) {
		if len(c.Lines(s)) > 0 {
			return true, nil
		}
		if err := c.Exited(); err != nil {
			return false, fmt.Errorf("%s before logging %q: %w", c.id, s, err)
		}
		return false, nil
	})
}

// metric returns the value of the sample of the controller's metric name whose labels
// include labels, read from url, or -1 if there is none.
func metric(t *testing.T, url, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := harness.Scrape(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	v, n := harness.Value(families, name, labels)
	if n == 0 {
		return -1
	}
	return v
}

// Signals for controller.signal.
const (
	sigstop = syscall.SIGSTOP
	sigcont = syscall.SIGCONT
)

package app

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/app-controller/app-controller/test/integration/framework"
)

// TestSignals runs the real binary, through a proxy that holds its Deployment writes for
// a few seconds so that a sync is in flight when the signal comes: the first SIGTERM lets
// that sync finish (the Deployment gets created) and exits with status 0; a second signal
// during the stop exits at once with status 1 (the seed's behaviour).
func TestSignals(t *testing.T) {
	c := newClients(t)
	ns := framework.Namespace(t)
	const hold = 3 * time.Second
	held := make(chan struct{}, 10)
	proxy := slowWritesProxy(t, ns, hold, held)

	bin := framework.BuildBinary(t, "app-controller")

	// start runs the binary and returns once its App controller has started its workers.
	start := func(t *testing.T, extra ...string) (*exec.Cmd, <-chan string) {
		t.Helper()
		// The seed's flag spellings: -kubeConfig and -master.
		args := append([]string{"-kubeConfig", framework.Cluster().Kubeconfig, "-master", proxy,
			"--controllers", "app", "--shutdown-timeout", "20s"}, extra...)
		cmd := exec.Command(bin, args...)
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill() })
		lines := make(chan string, 1000)
		started := make(chan struct{})
		go func() {
			defer close(lines)
			s := bufio.NewScanner(stderr)
			for s.Scan() {
				if strings.Contains(s.Text(), "Starting controller") {
					close(started)
				}
				select {
				case lines <- s.Text():
				default:
				}
			}
			_, _ = io.Copy(io.Discard, stderr)
		}()
		select {
		case <-started:
		case <-time.After(converge):
			t.Fatal("the controller did not start")
		}
		return cmd, lines
	}
	exitCode := func(t *testing.T, cmd *exec.Cmd) int {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				return exit.ExitCode()
			}
			if err != nil {
				t.Fatal(err)
			}
			return 0
		case <-time.After(converge):
			t.Fatal("the controller did not exit")
			return -1
		}
	}

	t.Run("SIGTERM lets the in-flight sync finish and exits 0", func(t *testing.T) {
		cmd, lines := start(t)
		c.Create(t, newApp(ns, "term", "nginx", 1))
		<-held // the controller is applying the Deployment
		signalled := time.Now()
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if code := exitCode(t, cmd); code != 0 {
			t.Errorf("exit status %d, want 0", code)
		}
		if waited := time.Since(signalled); waited < hold/2 {
			t.Errorf("exited %s after SIGTERM, before the held write (%s) could finish", waited, hold)
		}
		if _, err := c.Kube.AppsV1().Deployments(ns).Get(context.Background(), "term-deploy", metav1.GetOptions{}); err != nil {
			t.Errorf("the in-flight apply did not complete: %v", err)
		}
		var log []string
		for l := range lines {
			log = append(log, l)
		}
		if all := strings.Join(log, "\n"); !strings.Contains(all, "Stopped controller") {
			t.Errorf("no graceful stop in the log:\n%s", all)
		}
	})

	t.Run("a second SIGINT exits at once with status 1", func(t *testing.T) {
		cmd, _ := start(t)
		for len(held) > 0 {
			<-held // announcements of the first run
		}
		c.Create(t, newApp(ns, "int", "nginx", 1))
		<-held
		if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond) // the graceful stop is now waiting for the held write
		signalled := time.Now()
		if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		if code := exitCode(t, cmd); code != 1 {
			t.Errorf("exit status %d, want 1", code)
		}
		if waited := time.Since(signalled); waited > hold/2 {
			t.Errorf("took %s to exit after the second signal, want at once", waited)
		}
	})
}

// slowWritesProxy serves the API server on plain HTTP at the returned URL, as the admin,
// holding every Deployment write for hold and announcing it on held.
func slowWritesProxy(t *testing.T, ns string, hold time.Duration, held chan<- struct{}) string {
	t.Helper()
	cfg := framework.Config(t)
	target, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = transport
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Only this test's Deployments: the controller also syncs the Apps other tests of
		// the package left in namespaces still being deleted.
		if r.Method == http.MethodPatch && strings.Contains(r.URL.Path, "/namespaces/"+ns+"/deployments/") {
			select {
			case held <- struct{}{}:
			default:
			}
			time.Sleep(hold)
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

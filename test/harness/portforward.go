package harness

import (
	"bufio"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strconv"
	"time"
)

// PortForward is a `kubectl port-forward` to a pod or a Service: a connection to its
// local end reaches the target's port through the API server and the kubelet, never
// from this machine's network namespace to a pod or Service address.
type PortForward struct {
	// URL is the local end, http://127.0.0.1:LOCALPORT.
	URL  string
	cmd  *exec.Cmd
	done chan struct{}
}

// forwarding is the line kubectl port-forward prints once it listens.
var forwarding = regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+) ->`)

// StartPortForward runs `kubectl port-forward TARGET :PORT` (target as kubectl takes it,
// e.g. pod/NAME) in namespace with kubectl and kubeconfig, and returns once it listens,
// within 30 s. kubectl exits when the connection to the target is lost (the pod went
// away): Done is closed then.
func StartPortForward(kubectl, kubeconfig, namespace, target string, port int) (*PortForward, error) {
	cmd := exec.Command(kubectl, "--kubeconfig", kubeconfig, "-n", namespace, "port-forward", "--address", "127.0.0.1", target, ":"+strconv.Itoa(port))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting kubectl port-forward %s: %w", target, err)
	}
	f := &PortForward{cmd: cmd, done: make(chan struct{})}
	local := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			if m := forwarding.FindStringSubmatch(s.Text()); m != nil {
				local <- m[1]
				break
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		_ = cmd.Wait()
		close(f.done)
	}()
	select {
	case port := <-local:
		f.URL = "http://127.0.0.1:" + port
		return f, nil
	case <-f.done:
		return nil, fmt.Errorf("kubectl port-forward %s/%s exited before it listened", namespace, target)
	case <-time.After(30 * time.Second):
		f.Stop()
		return nil, fmt.Errorf("kubectl port-forward %s/%s: no local port after 30s", namespace, target)
	}
}

// Done is closed once kubectl has exited.
func (f *PortForward) Done() <-chan struct{} { return f.done }

// Stop ends the port-forward and waits until kubectl has exited.
func (f *PortForward) Stop() {
	_ = f.cmd.Process.Kill()
	<-f.done
}

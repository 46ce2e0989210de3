package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// controllerProc is bin/app-controller run as a separate process with its default flags
// but --kubeconfig, and --metrics-bind-address for the harness to read its work queue.
type controllerProc struct {
	cmd        *exec.Cmd
	metricsURL string
	done       chan struct{}
	err        error
	start      time.Time
	// last holds the process's figures read just before it was stopped.
	last procStats
}

// startController starts the controller with its stderr and stdout appended to logPath,
// adding extraFlags to its command line.
func startController(bin, kubeconfig, logPath string, extraFlags []string) (*controllerProc, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the controller log: %w", err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	args := append([]string{"--kubeconfig=" + kubeconfig, "--metrics-bind-address=" + addr}, extraFlags...)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := &controllerProc{cmd: cmd, metricsURL: "http://" + addr + "/metrics", done: make(chan struct{}), start: time.Now()}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// freePort returns a loopback port free at the time of the call.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (p *controllerProc) pid() int { return p.cmd.Process.Pid }

// exited returns an error once the process has exited, nil while it runs.
func (p *controllerProc) exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("the controller (pid %d) exited: %v", p.pid(), p.err)
	default:
		return nil
	}
}

// stats reads the running process's memory and CPU figures.
func (p *controllerProc) stats() (procStats, error) {
	if err := p.exited(); err != nil {
		return procStats{}, err
	}
	return readProcStats(p.pid())
}

// scrape returns the controller's /metrics.
func (p *controllerProc) scrape(ctx context.Context) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.metricsURL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reading the controller's metrics: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("reading the controller's metrics: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("reading the controller's metrics: %s", resp.Status)
	}
	return body, nil
}

// waitServing waits until the controller serves its metrics.
func (p *controllerProc) waitServing(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if err := p.exited(); err != nil {
			return err
		}
		if _, err := p.scrape(ctx); err == nil {
			return nil
		} else if time.Now().After(deadline) {
			return fmt.Errorf("the controller does not serve its metrics after %s: %w", timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pollInterval):
		}
	}
}

// kill records the process's figures, then stops it with sig (SIGKILL: at once;
// SIGTERM: a graceful stop, SIGKILL after 30 s) and waits until it is gone.
func (p *controllerProc) kill(sig syscall.Signal) error {
	if st, err := p.stats(); err == nil {
		p.last = st
	}
	if p.exited() != nil {
		return nil
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("signalling the controller: %w", err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("the controller did not stop within 30s of %s", sig)
	}
}

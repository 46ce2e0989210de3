package bench

import (
	"context"
	"fmt"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/app-controller/app-controller/test/harness"
)

// controllerProc is bin/app-controller run as a separate process (harness.Process) with
// its default flags but --kubeconfig, and --metrics-bind-address for the harness to read
// its work queue.
type controllerProc struct {
	*harness.Process
	metricsURL string
	start      time.Time
	// last holds the process's figures read just before it was stopped.
	last procStats
}

// startController starts the controller with its stderr and stdout appended to logPath,
// adding extraFlags to its command line.
func startController(bin, kubeconfig, logPath string, extraFlags []string) (*controllerProc, error) {
	addr, err := harness.FreeAddr()
	if err != nil {
		return nil, err
	}
	args := append([]string{"--kubeconfig=" + kubeconfig, "--metrics-bind-address=" + addr}, extraFlags...)
	start := time.Now()
	p, err := harness.Start(bin, args, logPath)
	if err != nil {
		return nil, err
	}
	return &controllerProc{Process: p, metricsURL: "http://" + addr + "/metrics", start: start}, nil
}

// stats reads the running process's memory and CPU figures.
func (p *controllerProc) stats() (procStats, error) {
	if err := p.Exited(); err != nil {
		return procStats{}, err
	}
	return readProcStats(p.Pid())
}

// scrape returns the controller's /metrics.
func (p *controllerProc) scrape(ctx context.Context) (map[string]*dto.MetricFamily, error) {
	families, err := harness.Scrape(ctx, p.metricsURL)
	if err != nil {
		return nil, fmt.Errorf("reading the controller's metrics: %w", err)
	}
	return families, nil
}

// waitServing waits until the controller serves its metrics.
func (p *controllerProc) waitServing(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if err := p.Exited(); err != nil {
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
	return p.Stop(sig, 30*time.Second)
}

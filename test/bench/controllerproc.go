package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
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
	// cgroup holds the process when it runs under a memory limit; cgroupPeakMB and
	// oomKills are read from it once the process stopped.
	cgroup       *memoryCgroup
	cgroupPeakMB float64
	oomKills     int
}

// startController starts the controller with its stderr and stdout appended to logPath,
// adding extraFlags to its command line and extraEnv (NAME=VALUE) to its environment.
// With memoryLimit (bytes, 0: none) it runs as under the chart's limit (memlimit.go).
func startController(bin, kubeconfig, logPath string, extraFlags, extraEnv []string, memoryLimit int64) (*controllerProc, error) {
	addr, err := harness.FreeAddr()
	if err != nil {
		return nil, err
	}
	args := append([]string{"--kubeconfig=" + kubeconfig, "--metrics-bind-address=" + addr}, extraFlags...)
	env := slices.Clone(extraEnv)
	var cgroup *memoryCgroup
	if memoryLimit > 0 {
		env = append(env, "MEMORY_LIMIT="+strconv.FormatInt(memoryLimit, 10))
		controllerCgroups++
		if cgroup, err = newMemoryCgroup(fmt.Sprintf("appbench-controller-%d-%d", os.Getpid(), controllerCgroups), memoryLimit); err != nil {
			return nil, err
		}
		bin, args = cgroup.command(bin, args)
	}
	start := time.Now()
	p, err := harness.StartEnv(bin, args, env, logPath)
	if err != nil {
		if cgroup != nil {
			cgroup.remove()
		}
		return nil, err
	}
	return &controllerProc{Process: p, metricsURL: "http://" + addr + "/metrics", start: start, cgroup: cgroup}, nil
}

// controllerCgroups numbers the controllers' memory cgroups.
var controllerCgroups int

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
	err := p.Stop(sig, 30*time.Second)
	if p.cgroup != nil {
		if peak, kills, cgErr := p.cgroup.peak(); cgErr == nil {
			p.cgroupPeakMB, p.oomKills = peak, kills
		}
		p.cgroup.remove()
		p.cgroup = nil
	}
	return err
}

// scenarioController starts a controller process of a scenario's own (its log
// app-controller-round<round>-<scenario>.log), waits until it serves, and watches the
// Apps of ns. stop kills the process and ends the watch.
func (e *env) scenarioController(ctx context.Context, round int, scenario, ns string) (proc *controllerProc, watch *appWatch, stop func(), err error) {
	logPath := filepath.Join(e.logDir, fmt.Sprintf("app-controller-round%d-%s.log", round, scenario))
	if proc, err = startController(e.cfg.Controller, e.controllerKubeconfig, logPath, e.cfg.ControllerFlags, e.cfg.ControllerEnv, e.cfg.ControllerMemoryLimit); err != nil {
		return nil, nil, nil, err
	}
	kill := func() { _ = proc.kill(syscall.SIGKILL) }
	if err := proc.waitServing(ctx, time.Minute); err != nil {
		kill()
		return nil, nil, nil, err
	}
	if watch, err = watchApps(ctx, e.admin, ns); err != nil {
		kill()
		return nil, nil, nil, err
	}
	return proc, watch, func() { watch.stop(); kill() }, nil
}

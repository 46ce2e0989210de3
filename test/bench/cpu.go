package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
)

// On 2 cores the whole control plane shares the CPU with the controller: when the
// machine is busy the whole time, a round is as fast as its CPU per App lets it be. The
// bench reads the CPU time of every process it started (the control plane's components,
// the controller, the harness itself, whose clients create the Apps and run the floor
// loops) before and after the fastest floor loop and the product's convergence, and the
// machine's busy share over the same windows from /proc/stat.

// harnessProcess names the bench's own process in the CPU figures.
const harnessProcess = "harness"

// cpuSample is the CPU time so far (utime+stime, seconds) of each process, by name, and
// the machine's busy and total CPU time (/proc/stat, seconds of all cores).
type cpuSample struct {
	procs       map[string]float64
	busy, total float64
}

// sampleCPU reads the CPU time of each named process (one that has exited is left out)
// and of the machine.
func sampleCPU(pids map[string]int) (cpuSample, error) {
	s := cpuSample{procs: make(map[string]float64, len(pids))}
	for name, pid := range pids {
		cpu, err := readCPUSeconds(pid)
		if errors.Is(err, fs.ErrNotExist) {
			continue // exited
		}
		if err != nil {
			return s, fmt.Errorf("reading the CPU time of %s: %w", name, err)
		}
		s.procs[name] = cpu
	}
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return s, fmt.Errorf("reading the machine's CPU time: %w", err)
	}
	if s.busy, s.total, err = parseMachineStat(data); err != nil {
		return s, err
	}
	return s, nil
}

// parseMachineStat returns the busy and total CPU seconds of all cores from the "cpu"
// line of /proc/stat: user nice system idle iowait irq softirq steal (guest time is
// already counted in user). Idle and iowait are not busy.
func parseMachineStat(data []byte) (busy, total float64, err error) {
	line, _, _ := strings.Cut(string(data), "\n")
	fields := strings.Fields(line)
	if len(fields) < 9 || fields[0] != "cpu" {
		return 0, 0, fmt.Errorf("unexpected first line of /proc/stat %q", line)
	}
	for i, f := range fields[1:9] {
		ticks, err := strconv.ParseFloat(f, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("parsing /proc/stat %q: %w", line, err)
		}
		total += ticks / clockTicks
		if i != 3 && i != 4 { // idle, iowait
			busy += ticks / clockTicks
		}
	}
	return busy, total, nil
}

// CPUUse is the CPU a window of a round took.
type CPUUse struct {
	// MsPerApp: each process's CPU milliseconds per App, and their "total".
	MsPerApp map[string]float64 `json:"ms_per_app"`
	// MachineBusy: the share of the machine's CPU time (every core) that was busy,
	// whoever used it.
	MachineBusy float64 `json:"machine_busy"`
}

// cpuUse is what happened between from and to, per App of n.
func cpuUse(from, to cpuSample, n int) CPUUse {
	u := CPUUse{MsPerApp: make(map[string]float64, len(to.procs)+1)}
	var total float64
	for name, after := range to.procs {
		before, ok := from.procs[name]
		if !ok {
			continue // started within the window: not comparable
		}
		ms := (after - before) * 1000 / float64(n)
		u.MsPerApp[name] = round2(ms)
		total += ms
	}
	u.MsPerApp["total"] = round2(total)
	if dt := to.total - from.total; dt > 0 {
		u.MachineBusy = round2((to.busy - from.busy) / dt)
	}
	return u
}

// String is "total T ms (busy B%): name ms, ..." with the largest first.
func (u CPUUse) String() string {
	names := make([]string, 0, len(u.MsPerApp))
	for name := range u.MsPerApp {
		if name != "total" {
			names = append(names, name)
		}
	}
	slices.SortFunc(names, func(a, b string) int {
		return cmp.Or(cmp.Compare(u.MsPerApp[b], u.MsPerApp[a]), strings.Compare(a, b)) // largest first
	})
	parts := make([]string, 0, len(names))
	for _, name := range names {
		parts = append(parts, fmt.Sprintf("%s %.1f", name, u.MsPerApp[name]))
	}
	return fmt.Sprintf("%.1f ms per App, machine %.0f%% busy [%s]", u.MsPerApp["total"], u.MachineBusy*100, strings.Join(parts, ", "))
}

// sameWorkProcesses do the same work per App in a floor loop and in the product's
// convergence: the scheduler binds one pod per replica, kwok runs it. Their CPU per App
// tells what the same work cost in each window, whatever the controller does.
var sameWorkProcesses = []string{"kube-scheduler", "kwok"}

// sameWorkCPURatio is the CPU per App of sameWorkProcesses in the product's convergence
// over theirs in the fastest floor loop, or 0 if either window lacks one of them. Near 1,
// the machine ran both windows at the same speed; away from it, the same work cost more
// (or less) CPU in one of them (another tenant of the host, its clock, the contention of
// that window), and the ratio of the windows' times carries that too.
func sameWorkCPURatio(floor, product CPUUse) float64 {
	var f, p float64
	for _, name := range sameWorkProcesses {
		fm, fok := floor.MsPerApp[name]
		pm, pok := product.MsPerApp[name]
		if !fok || !pok {
			return 0
		}
		f, p = f+fm, p+pm
	}
	if f == 0 {
		return 0
	}
	return round2(p / f)
}

// processes names the processes whose CPU the bench reads: the control plane's
// components, the harness, and the given controller pid (0: none).
func (e *env) processes(controllerPid int) map[string]int {
	pids := e.cluster.PIDs()
	pids[harnessProcess] = os.Getpid()
	if controllerPid != 0 {
		pids["app-controller"] = controllerPid
	}
	return pids
}

// apiserverProfileSeconds is the length of the API server's CPU profiles (Breakdown):
// the bulk of a floor loop and of the product's convergence at N=1000.
const apiserverProfileSeconds = 30

// profileAPIServer starts a CPU profile of kube-apiserver (its /debug/pprof, as the
// admin; Options.Profiling) of apiserverProfileSeconds, saved to path; the returned
// function waits for it. A failed profile is reported, not fatal: it only explains.
func (e *env) profileAPIServer(ctx context.Context, path string) (wait func() string) {
	done := make(chan string, 1)
	go func() {
		data, err := e.admin.kube.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
			Param("seconds", strconv.Itoa(apiserverProfileSeconds)).DoRaw(ctx)
		if err == nil {
			err = os.WriteFile(path, data, 0o644)
		}
		if err != nil {
			e.printf("the API server's CPU profile %s: %v\n", path, err)
			done <- ""
			return
		}
		done <- path
	}()
	return func() string { return <-done }
}

package bench

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// With Config.ControllerMemoryLimit the controller runs as the chart runs it under a
// memory limit: MEMORY_LIMIT in its environment (the downward API's limits.memory, from
// which it sets the Go runtime's soft limit to 90%), and in a memory cgroup of its own
// with that hard limit, so that the kernel kills it (OOM) if it outgrows it, as the
// kubelet's cgroup would. The round then reports the cgroup's peak and OOM kills.

// memoryCgroup is the controller's memory cgroup (v1 or v2), made for one process.
type memoryCgroup struct {
	dir string
	v2  bool
}

// newMemoryCgroup makes a memory cgroup under the harness's own, limited to limit bytes.
func newMemoryCgroup(name string, limit int64) (*memoryCgroup, error) {
	parent, v2, err := ownMemoryCgroup()
	if err != nil {
		return nil, err
	}
	cg := &memoryCgroup{dir: filepath.Join(parent, name), v2: v2}
	if err := os.Mkdir(cg.dir, 0o755); err != nil {
		return nil, fmt.Errorf("making the controller's memory cgroup: %w", err)
	}
	limitFile := "memory.limit_in_bytes"
	if v2 {
		limitFile = "memory.max"
	}
	if err := os.WriteFile(filepath.Join(cg.dir, limitFile), []byte(strconv.FormatInt(limit, 10)), 0o644); err != nil {
		cg.remove()
		return nil, fmt.Errorf("limiting the controller's memory cgroup: %w", err)
	}
	return cg, nil
}

// command returns the command line that runs bin with args inside the cgroup from its
// first instruction: a shell that moves itself in, then execs bin (same pid).
func (cg *memoryCgroup) command(bin string, args []string) (string, []string) {
	script := `echo $$ > "` + filepath.Join(cg.dir, "cgroup.procs") + `" && exec "$0" "$@"`
	return "/bin/sh", append([]string{"-c", script, bin}, args...)
}

// ownMemoryCgroup returns the directory of this process's memory cgroup and whether it
// is cgroup v2.
func ownMemoryCgroup() (string, bool, error) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return "", false, err
	}
	defer func() { _ = f.Close() }()
	var unified string
	s := bufio.NewScanner(f)
	for s.Scan() {
		parts := strings.SplitN(s.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == "memory" {
				return filepath.Join("/sys/fs/cgroup/memory", parts[2]), false, nil
			}
		}
		if parts[0] == "0" && parts[1] == "" {
			unified = parts[2]
		}
	}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return filepath.Join("/sys/fs/cgroup", unified), true, nil
	}
	return "", false, fmt.Errorf("no memory cgroup in /proc/self/cgroup")
}

// peak returns the highest memory the cgroup was charged (MiB), and its OOM kills.
func (cg *memoryCgroup) peak() (float64, int, error) {
	peakFile, eventsFile, oomKey := "memory.max_usage_in_bytes", "memory.oom_control", "oom_kill"
	if cg.v2 {
		peakFile, eventsFile = "memory.peak", "memory.events"
	}
	data, err := os.ReadFile(filepath.Join(cg.dir, peakFile))
	if err != nil {
		return 0, 0, fmt.Errorf("reading the controller cgroup's peak: %w", err)
	}
	peak, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("reading the controller cgroup's peak %q: %w", data, err)
	}
	kills := 0
	if events, err := os.ReadFile(filepath.Join(cg.dir, eventsFile)); err == nil {
		for _, line := range strings.Split(string(events), "\n") {
			if k, v, ok := strings.Cut(line, " "); ok && k == oomKey {
				kills, _ = strconv.Atoi(strings.TrimSpace(v))
			}
		}
	}
	return float64(peak) / (1 << 20), kills, nil
}

// remove deletes the cgroup (its processes must have exited).
func (cg *memoryCgroup) remove() {
	_ = os.Remove(cg.dir)
}

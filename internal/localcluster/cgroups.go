package localcluster

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroupTree is the real node's cgroup, one directory per cgroup v1 hierarchy (or one in
// the unified cgroup v2 hierarchy). Everything the node runs lives under it: the node's
// daemons in <root>/node (started there by nodeCommand, so containerd's shims inherit it)
// and the pods, which the kubelet puts under <root>/kubepods (its cgroupRoot). Stopping the
// node kills every process in the tree and removes it, so nothing survives a cluster-down.
type cgroupTree struct {
	name string   // "/lcnode-N", the kubelet's cgroupRoot
	dirs []string // the tree's root in each hierarchy
	// procsDir is the tree's root in the hierarchy whose cgroup.procs files are read to
	// find its processes: memory's (every process of a pod is in it), else the first.
	procsDir string
	v2       bool
}

// daemonsCgroup is the child of the tree that holds the node's daemons.
const daemonsCgroup = "node"

// newCgroupTree creates the cgroup name (such as /lcnode-1) in every hierarchy, and its
// child for the daemons. In cgroup v1 a new cpuset cgroup has no CPUs or memory nodes:
// they are copied from the parent. A cpuWeight other than 0 sets its CPU weight (weigh).
func newCgroupTree(name string, cpuWeight int) (*cgroupTree, error) {
	mounts, v2, err := cgroupMounts()
	if err != nil {
		return nil, err
	}
	t := &cgroupTree{name: name, v2: v2}
	for _, m := range mounts {
		dir := filepath.Join(m.dir, name)
		for _, d := range []string{dir, filepath.Join(dir, daemonsCgroup)} {
			if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
				return nil, errors.Join(fmt.Errorf("creating the cgroup %s: %w", d, err), t.remove())
			}
			if !slices.Contains(t.dirs, dir) {
				t.dirs = append(t.dirs, dir)
				if m.memory || t.procsDir == "" {
					t.procsDir = dir
				}
			}
			if m.cpuset {
				for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
					value, err := os.ReadFile(filepath.Join(filepath.Dir(d), f))
					if err == nil {
						err = os.WriteFile(filepath.Join(d, f), value, 0o644)
					}
					if err != nil {
						return nil, errors.Join(fmt.Errorf("setting %s of %s: %w", f, d, err), t.remove())
					}
				}
			}
		}
	}
	if len(t.dirs) == 0 {
		return nil, errors.New("no cgroup hierarchy is mounted under /sys/fs/cgroup")
	}
	if v2 {
		// cgroup v2: the controllers the kubelet uses must be enabled below the tree's
		// root (the daemons live in a leaf, so the root holds no process).
		if err := enableControllers(t.dirs[0]); err != nil {
			return nil, errors.Join(err, t.remove())
		}
	}
	if cpuWeight != 0 {
		if err := t.weigh(mounts, cpuWeight); err != nil {
			return nil, errors.Join(err, t.remove())
		}
	}
	return t, nil
}

// cpuWeightFile returns the file of the tree's CPU weight and the value that weighs as
// one process: cpu.weight (100) in the unified hierarchy, cpu.shares (1024) in v1's cpu
// one; "" when neither is mounted.
func (t *cgroupTree) cpuWeightFile(mounts []cgroupMount) (string, int) {
	for _, m := range mounts {
		switch {
		case t.v2:
			return filepath.Join(m.dir, t.name, "cpu.weight"), 100
		case m.cpu:
			return filepath.Join(m.dir, t.name, "cpu.shares"), 1024
		}
	}
	return "", 0
}

// weigh sets the tree's CPU weight to that of n of the machine's processes (see
// Options.NodeCPUWeight), where a cpu controller is there (in cgroup v2, delegated).
func (t *cgroupTree) weigh(mounts []cgroupMount, n int) error {
	path, one := t.cpuWeightFile(mounts)
	if path == "" {
		return nil
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) && t.v2 {
		return nil // no cpu controller delegated here
	}
	value := one * n
	if t.v2 {
		value = min(value, 10000) // cpu.weight's maximum
	}
	if err := os.WriteFile(path, []byte(strconv.Itoa(value)), 0o644); err != nil {
		return fmt.Errorf("setting the node's CPU weight: %w", err)
	}
	return nil
}

// enableControllers enables, in dir's cgroup.subtree_control, every controller of dir's
// cgroup.controllers (cgroup v2).
func enableControllers(dir string) error {
	available, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return fmt.Errorf("reading the controllers of %s: %w", dir, err)
	}
	var enable []string
	for _, c := range strings.Fields(string(available)) {
		enable = append(enable, "+"+c)
	}
	if len(enable) == 0 {
		return nil
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(strings.Join(enable, " ")), 0o644); err != nil {
		return fmt.Errorf("enabling the controllers %v in %s: %w", enable, dir, err)
	}
	return nil
}

// procsFiles are the cgroup.procs files of the daemons' cgroup, one per hierarchy: a
// process whose pid is written to each of them lives there.
func (t *cgroupTree) procsFiles() []string {
	files := make([]string, len(t.dirs))
	for i, dir := range t.dirs {
		files[i] = filepath.Join(dir, daemonsCgroup, "cgroup.procs")
	}
	return files
}

// pids returns every process in the tree.
func (t *cgroupTree) pids() []int {
	if t.procsDir == "" {
		return nil
	}
	var pids []int
	_ = filepath.WalkDir(t.procsDir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		for _, field := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(field); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids
}

// kill sends SIGKILL to every process in the tree until none is left. Every one of them
// was started by this cluster's node (its daemons, their shims and the pods' processes):
// the tree is created empty and only nodeCommand puts processes in it.
func (t *cgroupTree) kill(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		pids := t.pids()
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v still in the cgroup %s after SIGKILL", pids, t.name)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// remove removes the tree's directories, deepest first, in every hierarchy. It fails on a
// cgroup that still holds a process.
func (t *cgroupTree) remove() error {
	var errs []error
	for _, root := range t.dirs {
		var dirs []string
		_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := os.Remove(dirs[i]); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("removing the cgroup %s: %w", dirs[i], err))
			}
		}
	}
	return errors.Join(errs...)
}

// cgroupMount is one cgroup hierarchy's mount point.
type cgroupMount struct {
	dir    string
	cpuset bool // the v1 cpuset hierarchy
	cpu    bool // the v1 cpu hierarchy
	memory bool // the v1 memory hierarchy, or the unified one
}

// cgroupMounts lists the cgroup hierarchies a node's processes live in: the v1
// hierarchies and, on a hybrid machine, the controller-less unified one (runc puts
// containers there too); or the unified one alone when /sys/fs/cgroup itself is cgroup2.
func cgroupMounts() ([]cgroupMount, bool, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs("/sys/fs/cgroup", &st); err != nil {
		return nil, false, fmt.Errorf("reading /sys/fs/cgroup: %w", err)
	}
	const cgroup2Magic = 0x63677270
	if st.Type == cgroup2Magic {
		return []cgroupMount{{dir: "/sys/fs/cgroup", memory: true}}, true, nil
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, false, fmt.Errorf("reading the mounts: %w", err)
	}
	defer f.Close()
	var mounts []cgroupMount
	seen := map[string]bool{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		// ID parent major:minor root mountpoint options ... - fstype source superoptions
		fields := strings.Fields(s.Text())
		sep := slices.Index(fields, "-")
		if sep < 0 || len(fields) < sep+4 || (fields[sep+1] != "cgroup" && fields[sep+1] != "cgroup2") {
			continue
		}
		// The unified hierarchy of a hybrid machine has no controllers, but runc puts
		// each container in it too: the tree has a directory there as well.
		dir := fields[4]
		if seen[dir] {
			continue
		}
		seen[dir] = true
		opts := strings.Split(fields[sep+3], ",")
		mounts = append(mounts, cgroupMount{dir: dir, cpuset: slices.Contains(opts, "cpuset"), cpu: slices.Contains(opts, "cpu"), memory: slices.Contains(opts, "memory")})
	}
	if err := s.Err(); err != nil {
		return nil, false, fmt.Errorf("reading the mounts: %w", err)
	}
	return mounts, false, nil
}

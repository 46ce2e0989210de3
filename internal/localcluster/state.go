package localcluster

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Files and directories inside the state directory of a background control plane (see
// Up). The cluster's own state (Options.StateDir) is its subdirectory cluster/.
const (
	pidFile        = "localcluster.pid" // pid of the serve process
	pidsFile       = "pids"             // "<component> <pid>" lines
	logFile        = "localcluster.log" // output of the serve process
	readyFile      = "ready"            // written by serve once the control plane is ready
	kubeconfigFile = "kubeconfig"       // copy of the admin kubeconfig (also its name in cluster/)
	registryFile   = "registry"         // HOST:PORT of the real node's image registry
	clusterDir     = "cluster"          // the cluster's own state (certificates, etcd, logs)
)

// ourEntries are the entries of a state directory that Down removes; all but the last
// (the log) are also cleared before a new serve starts.
var ourEntries = []string{readyFile, kubeconfigFile, registryFile, pidsFile, pidFile, clusterDir, logFile}

// leftoverGrace is the SIGTERM grace of a component left running by a serve process
// that died: none, nothing is left to stop the components in order.
const leftoverGrace time.Duration = 0

// stateDir is the state directory of a background control plane.
type stateDir string

// path returns the path of an entry of the state directory.
func (d stateDir) path(name string) string { return filepath.Join(string(d), name) }

// has reports whether the entry name exists.
func (d stateDir) has(name string) bool {
	_, err := os.Stat(d.path(name))
	return err == nil
}

// servePID returns the pid recorded in the pid file if that process is alive and is a
// localcluster serve.
func (d stateDir) servePID() (int, bool) {
	pid, err := readPIDFile(d.path(pidFile))
	if err != nil {
		return 0, false
	}
	return pid, isServe(pid)
}

// clear stops the components listed in the pids file that are still alive (only those
// whose /proc/<pid>/cmdline still names that component's binary) and removes the files
// of a previous run. With removeAll it also removes the log and the state directory
// itself (if nothing else is in it). It tells out what it does.
func (d stateDir) clear(out io.Writer, removeAll bool) error {
	pids := readPIDs(d.path(pidsFile))
	names := make([]string, 0, len(pids))
	for name := range pids {
		names = append(names, name)
	}
	sort.Strings(names)
	var errs []error
	for _, name := range names {
		pid := pids[name]
		if !isComponent(pid, name) {
			continue
		}
		fmt.Fprintf(out, "killing left-over %s (pid %d)\n", name, pid)
		if err := stopPID(name, pid, func(pid int) bool { return isComponent(pid, name) }, leftoverGrace, nil); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("stopping left-over components: %w", err)
	}
	if err := cleanupLeftoverNode(out, filepath.Join(d.path(clusterDir), nodeDir)); err != nil {
		return err
	}
	entries := ourEntries
	if !removeAll {
		entries = entries[:len(entries)-1] // keep the log
	}
	for _, e := range entries {
		if err := os.RemoveAll(d.path(e)); err != nil {
			return fmt.Errorf("removing %s: %w", e, err)
		}
	}
	if removeAll {
		if err := os.Remove(string(d)); err != nil && !errors.Is(err, os.ErrNotExist) {
			fmt.Fprintf(out, "left %s in place: it holds files that localcluster did not create\n", d)
		}
	}
	return nil
}

// writePIDFile writes pid to path.
func writePIDFile(path string, pid int) error {
	return writeFileAtomic(path, fmt.Appendf(nil, "%d\n", pid))
}

// readPIDFile returns the pid written in the file at path.
func readPIDFile(path string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("reading the pid file: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("pid file %s holds %q, not a process id", path, bytes.TrimSpace(data))
	}
	return pid, nil
}

// writePIDs writes one "<name> <pid>" line per process, sorted by name.
func writePIDs(path string, pids map[string]int) error {
	names := make([]string, 0, len(pids))
	for name := range pids {
		names = append(names, name)
	}
	sort.Strings(names)
	var b bytes.Buffer
	for _, name := range names {
		fmt.Fprintf(&b, "%s %d\n", name, pids[name])
	}
	return writeFileAtomic(path, b.Bytes())
}

// readPIDs parses a file written by writePIDs; a missing file or malformed lines give no
// pids.
func readPIDs(path string) map[string]int {
	pids := map[string]int{}
	data, err := os.ReadFile(path)
	if err != nil {
		return pids
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) != 2 {
			continue
		}
		if pid, err := strconv.Atoi(fields[1]); err == nil && pid > 0 {
			pids[fields[0]] = pid
		}
	}
	return pids
}

// writeFileAtomic writes data to path through a temporary file and a rename, so that a
// reader sees either nothing or all of it.
func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// lastRunOffset returns the offset in the serve log at path where the output of the
// latest serve process starts (at its "=== " header line), or 0.
func lastRunOffset(path string) int64 {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return int64(bytes.LastIndex(data, []byte("\n=== ")) + 1) // 0 if there is no later header
}

// logHeader returns the line that starts the output of one serve process in the log.
func logHeader(now time.Time) string {
	return fmt.Sprintf("=== %s localcluster serve\n", now.Format(time.RFC3339))
}

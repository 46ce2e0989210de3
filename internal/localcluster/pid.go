package localcluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// This file finds processes by pid (the serve process of an earlier `up`, components
// it left behind) and tells whether they are still ours, from /proc.

// cmdline returns the arguments of a running process, or nil.
func cmdline(pid int) []string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(data) == 0 {
		return nil
	}
	return strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
}

// isZombie reports whether pid has exited but not been reaped yet.
func isZombie(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	return statIsZombie(string(data))
}

// statIsZombie reports whether a /proc/<pid>/stat line has the state Z. The state
// follows the command name, which is in parentheses and may hold spaces and ')'.
func statIsZombie(stat string) bool {
	i := strings.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}

// liveCmdline returns the arguments of pid if it is alive (not a zombie), or nil.
func liveCmdline(pid int) []string {
	args := cmdline(pid)
	if len(args) == 0 || isZombie(pid) {
		return nil
	}
	return args
}

// isServeCmdline reports whether args are those of a `localcluster serve` process (or
// of a test binary of this package standing in for one).
func isServeCmdline(args []string) bool {
	return len(args) >= 2 && strings.Contains(filepath.Base(args[0]), "localcluster") && args[1] == "serve"
}

// isServe reports whether pid is a live `localcluster serve` process.
func isServe(pid int) bool { return isServeCmdline(liveCmdline(pid)) }

// isComponent reports whether pid is a live process of the component name: its first
// argument is the path of that component's binary.
func isComponent(pid int, name string) bool {
	args := liveCmdline(pid)
	return len(args) > 0 && filepath.Base(args[0]) == name
}

// pollGone returns a gone function for terminate that polls pid every 100ms: the
// process is gone once signal 0 no longer reaches it or it is a zombie (exited, waiting
// for a parent that is not us to reap it).
func pollGone(proc *os.Process) func(time.Duration) bool {
	return func(timeout time.Duration) bool {
		deadline := time.Now().Add(timeout)
		for {
			err := proc.Signal(syscall.Signal(0))
			if errors.Is(err, os.ErrProcessDone) || errors.Is(err, syscall.ESRCH) || isZombie(proc.Pid) {
				return true
			}
			if !time.Now().Before(deadline) {
				return false
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// stopPID stops the process pid, which this program did not start (so it cannot wait
// for it), with terminate. The check is(pid) runs once a handle on the process is held:
// a pid that no longer names our process (it exited and the pid was reused) is left
// alone.
func stopPID(name string, pid int, is func(pid int) bool, grace time.Duration, beforeKill func()) error {
	proc, err := os.FindProcess(pid)
	if err != nil {
		return fmt.Errorf("finding %s (pid %d): %w", name, pid, err)
	}
	defer proc.Release()
	// Checked after FindProcess: where the handle is a pidfd, the process checked is the
	// one that will be signalled.
	if !is(pid) {
		return nil
	}
	return terminate(name, proc, pollGone(proc), grace, beforeKill)
}

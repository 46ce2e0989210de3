package localcluster

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// process is one child process of the cluster, its output going to a log file.
type process struct {
	name    string
	logPath string
	cmd     *exec.Cmd

	done    chan struct{} // closed once the process has exited and been reaped
	waitErr error         // the result of cmd.Wait, set before done is closed

	stopOnce sync.Once
	stopErr  error
}

// startProcess starts path with args, appending its stdout and stderr to logPath. extraEnv
// is added to this process's environment. The child gets its own process group (so a
// terminal's Ctrl-C reaches only the parent, which then stops it in order) and is killed
// by the kernel if the thread that started it dies.
func startProcess(name, path string, args, extraEnv []string, logPath string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the log of %s: %w", name, err)
	}
	fmt.Fprintf(logFile, "=== %s %s %s\n", time.Now().Format(time.RFC3339), path, strings.Join(args, " "))

	cmd := exec.Command(path, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Env = append(os.Environ(), extraEnv...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting %s (%s): %w", name, path, err)
	}
	p := &process{name: name, logPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		_ = logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// pid returns the process id.
func (p *process) pid() int { return p.cmd.Process.Pid }

// exited reports whether the process has exited.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// exitError describes how the process ended; call it only after exited returns true.
func (p *process) exitError() error {
	if p.waitErr == nil {
		return fmt.Errorf("%s exited with status 0", p.name)
	}
	return fmt.Errorf("%s exited: %w", p.name, p.waitErr)
}

// stop stops the process with terminate (SIGTERM, up to grace, SIGKILL). It signals
// only this process, through its handle, and is idempotent.
func (p *process) stop(grace time.Duration) error {
	p.stopOnce.Do(func() {
		p.stopErr = terminate(p.name, p.cmd.Process, p.waitExit, grace, nil)
	})
	return p.stopErr
}

// waitExit waits up to timeout for the process to have exited and been reaped, and
// reports whether it has.
func (p *process) waitExit(timeout time.Duration) bool {
	select {
	case <-p.done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// killWait is how long terminate waits for a process to be gone after SIGKILL.
const killWait = 10 * time.Second

// terminate is the one way this package stops a process, be it a component it started
// or the serve process of an earlier `up` found by its pid: SIGTERM, up to grace for the
// process to exit, then (announced by beforeKill, if not nil) SIGKILL and up to killWait
// for it to be gone. A zero grace sends SIGKILL at once. gone waits up to a duration for
// the process to be gone and reports whether it is. The signals go through proc, which
// (holding a pidfd where the kernel has them) cannot reach another process that reused
// the pid. A process that is already gone is no error; terminate returns once gone says so.
func terminate(name string, proc *os.Process, gone func(time.Duration) bool, grace time.Duration, beforeKill func()) error {
	if grace > 0 {
		if err := proc.Signal(syscall.SIGTERM); err != nil {
			if errors.Is(err, os.ErrProcessDone) {
				return waitGone(name, proc, gone)
			}
			return fmt.Errorf("sending SIGTERM to %s (pid %d): %w", name, proc.Pid, err)
		}
	}
	if gone(grace) {
		return nil
	}
	if beforeKill != nil {
		beforeKill()
	}
	if err := proc.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("sending SIGKILL to %s (pid %d): %w", name, proc.Pid, err)
	}
	return waitGone(name, proc, gone)
}

// waitGone waits up to killWait for a process that was killed, or that the os package
// already reports done, to be gone. Done is not yet gone: os.Process learns of the exit
// from the Wait that reaps it, a moment before the caller's own bookkeeping (gone) does.
func waitGone(name string, proc *os.Process, gone func(time.Duration) bool) error {
	if !gone(killWait) {
		return fmt.Errorf("%s (pid %d) still not gone %s after SIGKILL or its exit", name, proc.Pid, killWait)
	}
	return nil
}

// logTail returns the last lines of the process's log.
func (p *process) logTail() string { return tailFile(p.logPath, 30) }

// tailFile returns up to the last n lines of the file at path (reading at most its last
// 64 KiB), or a note saying why it could not be read.
func tailFile(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	defer f.Close()
	const maxBytes = 64 << 10
	if info, err := f.Stat(); err == nil && info.Size() > maxBytes {
		if _, err := f.Seek(-maxBytes, io.SeekEnd); err != nil {
			return fmt.Sprintf("(cannot read %s: %v)", path, err)
		}
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

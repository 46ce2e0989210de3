package harness

import (
	"bufio"
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

// Process is a program run as a child process, its stdout and stderr appended to a log
// file and kept in memory, line by line, for the caller to search. It runs in a process
// group of its own (a terminal's signals reach only the harness, which stops it) and is
// killed if the harness dies.
type Process struct {
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	err     error

	mu    sync.Mutex
	lines []string
}

// Start starts bin with args, its output appended to logPath.
func Start(bin string, args []string, logPath string) (*Process, error) {
	return StartEnv(bin, args, nil, logPath)
}

// StartEnv is Start with env ("KEY=value") added to the harness's environment.
func StartEnv(bin string, args, env []string, logPath string) (*Process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the log of %s: %w", bin, err)
	}
	cmd := exec.Command(bin, args...)
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	cmd.Stderr = cmd.Stdout // one pipe, lines in the order written
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	p := &Process{cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.copyLog(out, logFile)
		logFile.Close()
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// copyLog writes each line of out to the log file and keeps it.
func (p *Process) copyLog(out io.Reader, logFile io.Writer) {
	s := bufio.NewScanner(out)
	s.Buffer(make([]byte, 64<<10), 1<<20)
	for s.Scan() {
		line := s.Text()
		fmt.Fprintln(logFile, line)
		p.mu.Lock()
		p.lines = append(p.lines, line)
		p.mu.Unlock()
	}
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// LogPath is the file the process's output is appended to.
func (p *Process) LogPath() string { return p.logPath }

// Done is closed once the process has exited and its output is read.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited returns an error saying how the process ended once it has exited, nil while
// it runs.
func (p *Process) Exited() error {
	select {
	case <-p.done:
		if p.err == nil {
			return fmt.Errorf("%s (pid %d) exited with status 0", p.cmd.Path, p.Pid())
		}
		return fmt.Errorf("%s (pid %d) exited: %w", p.cmd.Path, p.Pid(), p.err)
	default:
		return nil
	}
}

// ExitCode returns the exit code of a process that has exited (0 if it was not an exit
// with a code).
func (p *Process) ExitCode() int {
	<-p.done
	var exit *exec.ExitError
	if errors.As(p.err, &exit) {
		return exit.ExitCode()
	}
	return 0
}

// Signal sends sig to the process.
func (p *Process) Signal(sig syscall.Signal) error {
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("sending %v to pid %d: %w", sig, p.Pid(), err)
	}
	return nil
}

// Stop sends sig (SIGKILL: at once; SIGTERM: a graceful stop) and waits until the
// process is gone; after grace it is killed, and Stop says so. A stopped process (SIGSTOP)
// is continued first, so that it can act on sig.
func (p *Process) Stop(sig syscall.Signal, grace time.Duration) error {
	if p.Exited() != nil {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	if err := p.Signal(sig); err != nil {
		return err
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("pid %d did not stop within %s of %v", p.Pid(), grace, sig)
	}
}

// Lines returns the output lines that contain s.
func (p *Process) Lines(s string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, l := range p.lines {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}

// Tail returns the last n output lines.
func (p *Process) Tail(n int) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	from := max(0, len(p.lines)-n)
	return strings.Join(p.lines[from:], "\n")
}

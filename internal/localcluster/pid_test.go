package localcluster

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"
)

func TestStatIsZombie(t *testing.T) {
	tests := []struct {
		stat string
		want bool
	}{
		{"123 (sleep) S 1 123 123 0 -1", false},
		{"123 (sleep) Z 1 123 123 0 -1", true},
		{"123 (a (b) Z c) R 1 2", false}, // the state follows the last ')'
		{"123 (a (b) R c) Z 1 2", true},
		{"123 (x)", false},
		{"", false},
	}
	for _, tt := range tests {
		t.Run(tt.stat, func(t *testing.T) {
			if got := statIsZombie(tt.stat); got != tt.want {
				t.Errorf("statIsZombie(%q) = %v, want %v", tt.stat, got, tt.want)
			}
		})
	}
}

func TestIsServeCmdline(t *testing.T) {
	tests := []struct {
		args []string
		want bool
	}{
		{[]string{"/repo/bin/localcluster", "serve", "--state-dir", "/s"}, true},
		{[]string{"localcluster", "serve"}, true},
		{[]string{"/tmp/go-build1/b001/localcluster.test", "serve"}, true},
		{[]string{"/repo/bin/localcluster", "up"}, false},
		{[]string{"/repo/bin/localcluster"}, false},
		{[]string{"/usr/bin/sleep", "serve"}, false},
		{[]string{"/opt/localcluster/bin/sleep", "serve"}, false}, // only the base name counts
		{nil, false},
	}
	for _, tt := range tests {
		if got := isServeCmdline(tt.args); got != tt.want {
			t.Errorf("isServeCmdline(%q) = %v, want %v", tt.args, got, tt.want)
		}
	}
}

func TestCmdlineOfThisProcess(t *testing.T) {
	if got := cmdline(os.Getpid()); !slices.Equal(got, os.Args) {
		t.Errorf("cmdline(self) = %q, want %q", got, os.Args)
	}
	if got := cmdline(-1); got != nil {
		t.Errorf("cmdline(-1) = %q, want nil", got)
	}
}

// startChild starts /bin/sh -c script as a child of the test, waits until it printed
// "started" and, if reap, reaps it in the background (done is closed then); otherwise
// the test reaps it at cleanup, so that it stays a zombie once it exits.
func startChild(t *testing.T, script string, reap bool) (cmd *exec.Cmd, done chan struct{}) {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "child.log")
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	cmd = exec.Command("/bin/sh", "-c", script)
	cmd.Stdout = log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done = make(chan struct{})
	if reap {
		go func() { _ = cmd.Wait(); close(done) }()
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if !reap {
			_ = cmd.Wait()
		}
		<-done
	})
	if !reap {
		close(done)
	}
	waitForLog(t, logPath, "started")
	return cmd, done
}

func TestIsComponent(t *testing.T) {
	cmd, _ := startChild(t, "echo started; exec sleep 60", true)
	pid := cmd.Process.Pid
	waitFor(t, "sleep to replace sh", func() bool { return isComponent(pid, "sleep") })
	if isComponent(pid, "etcd") {
		t.Error("a sleep process is taken for etcd")
	}
	if isServe(pid) {
		t.Error("a sleep process is taken for localcluster serve")
	}

	zombie, _ := startChild(t, "echo started", false)
	waitFor(t, "the child to be a zombie", func() bool { return isZombie(zombie.Process.Pid) })
	if isComponent(zombie.Process.Pid, "sh") {
		t.Error("a zombie is taken for a live process")
	}
}

func TestStopPID(t *testing.T) {
	const (
		exitsOnTerm  = "echo started; exec sleep 60"
		ignoresTerm  = "trap '' TERM; echo started; while :; do sleep 0.1; done"
		exitsAtOnce  = "echo started"
		ours         = true
		reaped       = true
		unreaped     = false
		killExpected = true
	)
	tests := []struct {
		name     string
		script   string
		reap     bool // reaped by the test (like a component); else left a zombie (like serve)
		ours     bool // what the is function says
		grace    time.Duration
		wantKill bool // beforeKill called
		maxTaken time.Duration
	}{
		{"exits on SIGTERM", exitsOnTerm, reaped, ours, 5 * time.Second, false, 4 * time.Second},
		{"exits on SIGTERM, left a zombie", exitsOnTerm, unreaped, ours, 5 * time.Second, false, 4 * time.Second},
		{"ignores SIGTERM: SIGKILL after grace", ignoresTerm, reaped, ours, 300 * time.Millisecond, killExpected, 4 * time.Second},
		{"zero grace: SIGKILL at once", ignoresTerm, unreaped, ours, 0, killExpected, 2 * time.Second},
		{"already gone", exitsAtOnce, reaped, ours, time.Second, false, time.Second},
		{"not ours: left alone", exitsOnTerm, reaped, !ours, time.Second, false, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd, done := startChild(t, tt.script, tt.reap)
			pid := cmd.Process.Pid
			if tt.script == exitsAtOnce {
				<-done
			}
			killed := false
			start := time.Now()
			err := stopPID("child", pid, func(int) bool { return tt.ours }, tt.grace, func() { killed = true })
			if err != nil {
				t.Fatalf("stopPID: %v", err)
			}
			if taken := time.Since(start); taken > tt.maxTaken {
				t.Errorf("stopPID took %s", taken)
			}
			if killed != tt.wantKill {
				t.Errorf("SIGKILL announced = %v, want %v", killed, tt.wantKill)
			}
			if !tt.ours {
				if err := syscall.Kill(pid, 0); err != nil || isZombie(pid) {
					t.Fatalf("a process that is not ours was stopped (%v)", err)
				}
				return
			}
			if tt.reap {
				select {
				case <-done:
				case <-time.After(time.Second):
					t.Fatal("process still running after stopPID")
				}
			} else if !isZombie(pid) {
				t.Fatal("process not exited after stopPID")
			}
		})
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

package localcluster

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestProcessStop(t *testing.T) {
	tests := []struct {
		name     string
		script   string
		grace    time.Duration
		minTaken time.Duration
		maxTaken time.Duration
	}{
		{"exits on SIGTERM", "echo started; exec sleep 60", 5 * time.Second, 0, 4 * time.Second},
		{"ignores SIGTERM, killed after grace", "trap '' TERM; echo started; while :; do sleep 0.1; done", 300 * time.Millisecond, 300 * time.Millisecond, 4 * time.Second},
		{"already exited", "echo started", time.Second, 0, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logPath := filepath.Join(t.TempDir(), "sh.log")
			p, err := startProcess("sh", "/bin/sh", []string{"-c", tt.script}, []string{"LOCALCLUSTER_TEST=1"}, logPath)
			if err != nil {
				t.Fatal(err)
			}
			// At a line start: the header line that startProcess writes holds the script.
			waitForLog(t, logPath, "\nstarted")
			start := time.Now()
			if err := p.stop(tt.grace); err != nil {
				t.Fatalf("stop: %v", err)
			}
			if taken := time.Since(start); taken < tt.minTaken || taken > tt.maxTaken {
				t.Errorf("stop took %s, want %s to %s", taken, tt.minTaken, tt.maxTaken)
			}
			if !p.exited() {
				t.Fatal("process still running after stop")
			}
			if err := syscall.Kill(p.pid(), 0); err == nil {
				t.Errorf("pid %d still exists after stop", p.pid())
			}
			if err := p.stop(tt.grace); err != nil {
				t.Errorf("second stop: %v", err)
			}
		})
	}
}

func TestProcessGetsOwnProcessGroup(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "sleep.log")
	p, err := startProcess("sleep", "/bin/sleep", []string{"60"}, nil, logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.stop(time.Second); err != nil {
			t.Error(err)
		}
	})
	pgid, err := syscall.Getpgid(p.pid())
	if err != nil {
		t.Fatal(err)
	}
	if pgid != p.pid() {
		t.Errorf("child process group = %d, want its own (%d)", pgid, p.pid())
	}
}

func TestStartProcessMissingBinary(t *testing.T) {
	_, err := startProcess("nope", filepath.Join(t.TempDir(), "nope"), nil, nil, filepath.Join(t.TempDir(), "nope.log"))
	if err == nil || !strings.Contains(err.Error(), "starting nope") {
		t.Errorf("startProcess of a missing binary: error = %v", err)
	}
}

func TestTailFile(t *testing.T) {
	var lines []string
	for i := range 100 {
		lines = append(lines, strings.Repeat("x", i%7)+"line")
	}
	path := filepath.Join(t.TempDir(), "log")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		n    int
		want string
	}{
		{1, lines[99]},
		{3, strings.Join(lines[97:], "\n")},
		{1000, strings.Join(lines, "\n")},
	}
	for _, tt := range tests {
		if got := tailFile(path, tt.n); got != tt.want {
			t.Errorf("tailFile(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
	if got := tailFile(filepath.Join(t.TempDir(), "missing"), 3); !strings.Contains(got, "cannot read") {
		t.Errorf("tailFile of a missing file = %q", got)
	}
}

func waitForLog(t *testing.T, path, text string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if data, _ := os.ReadFile(path); strings.Contains(string(data), text) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%q not in %s after 5s", text, path)
}

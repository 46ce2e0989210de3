package localcluster

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// With fakeServeEnv set, this test binary run as `<binary> serve --state-dir ...` acts as
// `localcluster serve` (its name, localcluster.test, passes isServe): it runs serve with
// a fake control plane, one sleep process, whose start behaves as the variable says:
// "ok" (at once), "fail", or "wait" (until the file named by releaseEnv exists).
const (
	fakeServeEnv = "LOCALCLUSTER_TEST_FAKE_SERVE"
	releaseEnv   = "LOCALCLUSTER_TEST_RELEASE"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(fakeServeEnv); mode != "" && len(os.Args) > 1 && os.Args[1] == "serve" {
		os.Exit(runFakeServe(mode, os.Args[2:]))
	}
	os.Exit(m.Run())
}

func runFakeServe(mode string, args []string) int {
	opts := DaemonOptions{Out: os.Stdout}
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	fs.StringVar(&opts.BinDir, "bin-dir", "", "")
	fs.StringVar(&opts.KubeBinDir, "kube-bin-dir", "", "")
	fs.StringVar(&opts.StateDir, "state-dir", "", "")
	fs.StringVar(&opts.CRDDir, "crd-dir", "", "")
	fs.StringVar(&opts.GatewayAPIDir, "gateway-api-dir", "", "")
	fs.StringVar(&opts.Node, "node", "", "")
	fs.StringVar(&opts.FeatureGates, "feature-gates", "", "")
	_ = fs.Parse(args)
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if err := serve(ctx, opts, fakeStart(mode)); err != nil {
		fmt.Fprintf(os.Stderr, "fake serve: %v\n", err)
		return 1
	}
	return 0
}

func fakeStart(mode string) startFunc {
	return func(ctx context.Context, opts Options) (servedCluster, error) {
		switch mode {
		case "fail":
			fmt.Fprintln(opts.Out, "fake start failed")
			return nil, errors.New("fake start failed")
		case "wait":
			for {
				if _, err := os.Stat(os.Getenv(releaseEnv)); err == nil {
					break
				}
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-time.After(20 * time.Millisecond):
				}
			}
		}
		if err := os.MkdirAll(filepath.Join(opts.StateDir, "logs"), 0o755); err != nil {
			return nil, err
		}
		p, err := startProcess("sleep", "/bin/sleep", []string{"600"}, nil, filepath.Join(opts.StateDir, "logs", "sleep.log"))
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(opts.StateDir, kubeconfigFile), []byte("fake kubeconfig\n"), 0o600); err != nil {
			return nil, err
		}
		fmt.Fprintln(opts.Out, "fake control plane ready")
		return &fakeCluster{p: p, stateDir: opts.StateDir}, nil
	}
}

// fakeCluster is a control plane of one sleep process.
type fakeCluster struct {
	p        *process
	stateDir string
}

func (c *fakeCluster) PIDs() map[string]int { return map[string]int{"sleep": c.p.pid()} }

func (c *fakeCluster) RegistryAddress() string { return "" }

func (c *fakeCluster) Exited() error {
	if c.p.exited() {
		return c.p.exitError()
	}
	return nil
}

func (c *fakeCluster) Stop() error {
	return errors.Join(c.p.stop(stopGrace), os.RemoveAll(c.stateDir))
}

// daemonOptions returns options with a fake binaries' directory and a state directory
// that does not exist yet, and the buffer receiving the output.
func daemonOptions(t *testing.T, mode string) (DaemonOptions, *bytes.Buffer) {
	t.Helper()
	t.Setenv(fakeServeEnv, mode)
	root := t.TempDir()
	makeBinDir(t, filepath.Join(root, "bin"), false)
	out := &bytes.Buffer{}
	opts := DaemonOptions{BinDir: filepath.Join(root, "bin"), StateDir: filepath.Join(root, "state"), Out: out}
	t.Cleanup(func() { _ = Down(DaemonOptions{StateDir: opts.StateDir}) })
	return opts, out
}

// checkOut fails unless out holds want (the %s in it replaced by the state directory),
// in full if exact, else as a substring; then it empties out.
func checkOut(t *testing.T, out *bytes.Buffer, state string, exact bool, want ...string) {
	t.Helper()
	got := out.String()
	out.Reset()
	for _, w := range want {
		w = strings.ReplaceAll(w, "%s", state)
		if exact && got != w || !strings.Contains(got, w) {
			t.Errorf("output:\n%s\nwant (exact %v):\n%s", got, exact, w)
		}
	}
}

func TestUpAndDown(t *testing.T) {
	opts, out := daemonOptions(t, "ok")
	state := opts.StateDir
	d := stateDir(state)
	ctx := context.Background()

	if err := Up(ctx, opts); err != nil {
		t.Fatalf("up: %v\n%s", err, out)
	}
	pid, ok := d.servePID()
	if !ok {
		t.Fatal("no serve process recorded after up")
	}
	checkOut(t, out, state, false,
		fmt.Sprintf("starting the local control plane (pid %d, log %%s/localcluster.log)\n", pid),
		"fake control plane ready\n",
		"kubeconfig: %s/kubeconfig\nexport KUBECONFIG=%s/kubeconfig\n")
	if data, _ := os.ReadFile(d.path(kubeconfigFile)); string(data) != "fake kubeconfig\n" {
		t.Errorf("kubeconfig = %q", data)
	}
	sleepPID := readPIDs(d.path(pidsFile))["sleep"]
	if !isComponent(sleepPID, "sleep") {
		t.Fatalf("pids file %v does not name the live component", readPIDs(d.path(pidsFile)))
	}

	// up again: already running.
	if err := Up(ctx, opts); err != nil {
		t.Fatalf("second up: %v", err)
	}
	checkOut(t, out, state, true, fmt.Sprintf("local control plane already running (pid %d)\nkubeconfig: %%s/kubeconfig\nexport KUBECONFIG=%%s/kubeconfig\n", pid))

	// A second serve on the same state directory refuses.
	err := serve(ctx, opts, fakeStart("ok"))
	if want := fmt.Sprintf("a local control plane already runs with state in %s (pid %d)", state, pid); err == nil || err.Error() != want {
		t.Errorf("second serve: error = %v, want %q", err, want)
	}

	if err := Down(opts); err != nil {
		t.Fatalf("down: %v", err)
	}
	checkOut(t, out, state, true, fmt.Sprintf("stopping the local control plane (pid %d)\nlocal control plane stopped\n", pid))
	if isServe(pid) || isComponent(sleepPID, "sleep") {
		t.Errorf("serve (pid %d) or its component (pid %d) still running after down", pid, sleepPID)
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Errorf("state directory still there after down (%v)", err)
	}

	// down again: nothing to do.
	if err := Down(opts); err != nil {
		t.Fatalf("second down: %v", err)
	}
	checkOut(t, out, state, true, "no local control plane in %s\n")
}

func TestUpWhenServeFails(t *testing.T) {
	opts, out := daemonOptions(t, "fail")
	err := Up(context.Background(), opts)
	want := "localcluster serve stopped before the control plane was ready (exit status 1); log: " + filepath.Join(opts.StateDir, logFile)
	if err == nil || err.Error() != want {
		t.Fatalf("up: error = %v, want %q", err, want)
	}
	checkOut(t, out, opts.StateDir, false, "fake start failed\n", "fake serve: fake start failed\n")
	if err := Down(opts); err != nil {
		t.Fatal(err)
	}
	checkOut(t, out, opts.StateDir, true, "no local control plane was running in %s; state removed\n")
}

func TestUpInterrupted(t *testing.T) {
	opts, out := daemonOptions(t, "wait")
	t.Setenv(releaseEnv, filepath.Join(t.TempDir(), "never"))
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		waitFor(t, "serve to start", func() bool { _, ok := stateDir(opts.StateDir).servePID(); return ok })
		cancel()
	}()
	if err := Up(ctx, opts); !errors.Is(err, ErrInterrupted) {
		t.Fatalf("up: error = %v, want ErrInterrupted", err)
	}
	// Up waited for its serve process, which reported how it ended.
	checkOut(t, out, opts.StateDir, false, "interrupted: stopping the starting control plane\n", "interrupted before the control plane was ready; stopped\n")
	if _, ok := stateDir(opts.StateDir).servePID(); ok {
		t.Error("serve still recorded as running")
	}
}

func TestUpFollowsStartingServe(t *testing.T) {
	opts, out := daemonOptions(t, "wait")
	release := filepath.Join(t.TempDir(), "release")
	t.Setenv(releaseEnv, release)
	d := stateDir(opts.StateDir)

	// A serve process started by an earlier up, not a child of this Up.
	if err := os.MkdirAll(string(d), 0o755); err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(d.path(logFile))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	fmt.Fprintf(log, "old run\n%s", logHeader(time.Now()))
	cmd := exec.Command(os.Args[0], "serve", "--bin-dir", opts.BinDir, "--state-dir", opts.StateDir)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	waitFor(t, "serve to start", func() bool { _, ok := d.servePID(); return ok })

	go func() {
		time.Sleep(500 * time.Millisecond)
		_ = os.WriteFile(release, nil, 0o600)
	}()
	if err := Up(context.Background(), opts); err != nil {
		t.Fatalf("up: %v", err)
	}
	checkOut(t, out, opts.StateDir, false,
		fmt.Sprintf("local control plane is starting (pid %d); following %%s/localcluster.log\n=== ", cmd.Process.Pid),
		"fake control plane ready\n",
		"kubeconfig: %s/kubeconfig\n")
	if strings.Contains(out.String(), "old run") {
		t.Error("up copied the output of an earlier run")
	}
	if err := Down(opts); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		t.Fatal("serve still running after down")
	}
}

func TestDownLeftovers(t *testing.T) {
	tests := []struct {
		name      string
		pidFile   bool   // the pid file holds the pid of a sleep (not a serve) process
		component string // the name under which the pids file records the sleep process
		wantAlive bool
		killed    bool // down says it killed the sleep process
	}{
		{name: "component left by a dead serve is killed", component: "sleep", killed: true},
		{name: "pid file naming another process", pidFile: true, wantAlive: true},
		{name: "pids file naming another process", component: "kube-apiserver", wantAlive: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd, done := startChild(t, "echo started; exec sleep 60", true)
			pid := cmd.Process.Pid
			waitFor(t, "sleep to replace sh", func() bool { return isComponent(pid, "sleep") })
			d := stateDir(filepath.Join(t.TempDir(), "state"))
			if err := os.MkdirAll(d.path(clusterDir), 0o755); err != nil {
				t.Fatal(err)
			}
			if tt.pidFile {
				if err := writePIDFile(d.path(pidFile), pid); err != nil {
					t.Fatal(err)
				}
			}
			if tt.component != "" {
				if err := writePIDs(d.path(pidsFile), map[string]int{tt.component: pid}); err != nil {
					t.Fatal(err)
				}
			}
			var out bytes.Buffer
			if err := Down(DaemonOptions{StateDir: string(d), Out: &out}); err != nil {
				t.Fatal(err)
			}
			want := fmt.Sprintf("no local control plane was running in %s; state removed\n", d)
			if tt.killed {
				want = fmt.Sprintf("killing left-over sleep (pid %d)\n", pid) + want
			}
			if out.String() != want {
				t.Errorf("output = %q, want %q", out.String(), want)
			}
			select {
			case <-done:
				if tt.wantAlive {
					t.Error("down stopped a process that is not ours")
				}
			case <-time.After(300 * time.Millisecond):
				if !tt.wantAlive {
					t.Error("left-over component still running after down")
				}
			}
			if _, err := os.Stat(string(d)); !os.IsNotExist(err) {
				t.Errorf("state directory still there after down (%v)", err)
			}
		})
	}
}

func TestDaemonOptionErrors(t *testing.T) {
	missingBins := t.TempDir()
	tests := []struct {
		name    string
		run     func(DaemonOptions) error
		opts    DaemonOptions
		wantErr string
	}{
		{"up without state directory", func(o DaemonOptions) error { return Up(context.Background(), o) }, DaemonOptions{BinDir: missingBins}, "the state directory is required"},
		{"serve without state directory", func(o DaemonOptions) error { return Serve(context.Background(), o) }, DaemonOptions{}, "the state directory is required"},
		{"down without state directory", Down, DaemonOptions{}, "the state directory is required"},
		{"up without binaries", func(o DaemonOptions) error { return Up(context.Background(), o) }, DaemonOptions{BinDir: missingBins, StateDir: "s"}, "control plane binaries missing from " + missingBins},
		{"serve without binaries", func(o DaemonOptions) error { return Serve(context.Background(), o) }, DaemonOptions{BinDir: missingBins, StateDir: "s"}, "control plane binaries missing from " + missingBins},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.run(tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error = %v, want one with %q", err, tt.wantErr)
			}
		})
	}
}

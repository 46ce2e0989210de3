package localcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// This file runs a control plane in the background for the localcluster command: Up
// starts `<this executable> serve ...` detached, which calls Serve; Down stops it by the
// pid that Serve recorded. Their state directory holds (see state.go) the pid file, the
// serve log, the component pids, the ready file, a copy of the admin kubeconfig and the
// cluster's own state in cluster/.

// DaemonOptions configure Up, Serve and Down.
type DaemonOptions struct {
	// BinDir holds the control plane binaries (see Options.BinDir); empty means
	// BinDirFromEnv. Down does not use it.
	BinDir string
	// KubeBinDir, if set, holds the kube-apiserver, kube-controller-manager and
	// kube-scheduler of another Kubernetes version (see Options.KubeBinDir).
	KubeBinDir string
	// StateDir holds the state of the background control plane; required. The admin
	// kubeconfig is <StateDir>/kubeconfig.
	StateDir string
	// CRDDir, if set, holds CustomResourceDefinitions to install (see Options.CRDDir).
	CRDDir string
	// GatewayAPIDir, if set, holds the Gateway API's standard CRDs to install (see
	// Options.GatewayAPIDir).
	GatewayAPIDir string
	// Node is the kind of node, NodeKwok (default) or NodeReal (see Options.Node).
	Node string
	// FeatureGates are kube-apiserver's feature gates, NAME=BOOL (see Options.FeatureGates).
	FeatureGates string
	// Out receives the progress lines for humans; nil discards them.
	Out io.Writer
}

// ErrInterrupted is returned by Up when its context is cancelled (Ctrl-C) while the
// control plane starts: Up has stopped the starting control plane and said so on Out.
var ErrInterrupted = errors.New("interrupted while the control plane was starting")

const (
	upTimeout     = 5 * time.Minute  // how long Up waits for serve to report ready
	downTimeout   = 60 * time.Second // how long Down waits for serve to stop before SIGKILL
	followEvery   = 200 * time.Millisecond
	exitCheckTick = 2 * time.Second // how often Serve checks that no component exited
	serveName     = "localcluster serve"
)

// complete makes the directories absolute and, if withBinDir, finds and checks the
// binaries' directory.
func (o *DaemonOptions) complete(withBinDir bool) error {
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.StateDir == "" {
		return errors.New("the state directory is required")
	}
	var err error
	if o.StateDir, err = filepath.Abs(o.StateDir); err != nil {
		return fmt.Errorf("locating the state directory: %w", err)
	}
	if !withBinDir {
		return nil
	}
	for _, dir := range []*string{&o.CRDDir, &o.GatewayAPIDir, &o.KubeBinDir} {
		if *dir == "" {
			continue
		}
		if *dir, err = filepath.Abs(*dir); err != nil {
			return fmt.Errorf("locating %s: %w", *dir, err)
		}
	}
	if o.BinDir == "" {
		o.BinDir, err = BinDirFromEnv()
		return err
	}
	if o.BinDir, err = filepath.Abs(o.BinDir); err != nil {
		return fmt.Errorf("locating the control plane binaries: %w", err)
	}
	return CheckBinDir(o.BinDir)
}

// Up starts the control plane in the background, unless it already runs, and copies the
// output of its serve process to Out until it is ready; it then prints the kubeconfig's
// path. The background process is this executable run as
// `<executable> serve --bin-dir ... --state-dir ... --crd-dir ...`, in a session of its
// own (the terminal's signals and hang-up do not reach it): the executable must be a
// localcluster command whose serve subcommand calls Serve. If the control plane is
// already starting, Up follows it. Cancelling ctx stops the starting control plane
// (ErrInterrupted).
func Up(ctx context.Context, opts DaemonOptions) error {
	if err := opts.complete(true); err != nil {
		return err
	}
	out, d := opts.Out, stateDir(opts.StateDir)
	if pid, ok := d.servePID(); ok {
		if d.has(readyFile) {
			fmt.Fprintf(out, "local control plane already running (pid %d)\n", pid)
			printKubeconfig(out, d.path(kubeconfigFile))
			return nil
		}
		fmt.Fprintf(out, "local control plane is starting (pid %d); following %s\n", pid, d.path(logFile))
		proc, err := os.FindProcess(pid)
		if err != nil {
			return fmt.Errorf("finding %s (pid %d): %w", serveName, pid, err)
		}
		defer proc.Release()
		return follow(ctx, out, d, proc, nil, lastRunOffset(d.path(logFile)))
	}
	// Left-overs of a serve process that died: clear them first.
	if err := d.clear(out, false); err != nil {
		return err
	}
	if err := os.MkdirAll(string(d), 0o755); err != nil {
		return fmt.Errorf("creating the state directory: %w", err)
	}

	logPath := d.path(logFile)
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("opening %s: %w", logPath, err)
	}
	defer log.Close()
	offset, err := log.Seek(0, io.SeekEnd)
	if err != nil {
		return fmt.Errorf("opening %s: %w", logPath, err)
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding this executable: %w", err)
	}
	fmt.Fprint(log, logHeader(time.Now()))
	cmd := exec.Command(self, "serve", "--bin-dir", opts.BinDir, "--kube-bin-dir", opts.KubeBinDir, "--state-dir", string(d),
		"--crd-dir", opts.CRDDir, "--gateway-api-dir", opts.GatewayAPIDir, "--node", opts.Node, "--feature-gates", opts.FeatureGates)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Dir = string(d)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", serveName, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	fmt.Fprintf(out, "starting the local control plane (pid %d, log %s)\n", cmd.Process.Pid, logPath)
	return follow(ctx, out, d, cmd.Process, exited, offset)
}

// follow copies the serve log from offset to out until the ready file appears, the serve
// process exits (exited, if it is our child, else its pid no longer being a serve
// process), or upTimeout passes. Cancelling ctx sends SIGTERM to the serve process (which
// then stops the components it started) and waits for it if it is our child.
func follow(ctx context.Context, out io.Writer, d stateDir, serve *os.Process, exited <-chan error, offset int64) error {
	logPath := d.path(logFile)
	copyNew := func() {
		f, err := os.Open(logPath)
		if err != nil {
			return
		}
		defer f.Close()
		if _, err := f.Seek(offset, io.SeekStart); err != nil {
			return
		}
		n, _ := io.Copy(out, f)
		offset += n
	}
	deadline := time.NewTimer(upTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(followEvery)
	defer tick.Stop()
	for {
		select {
		case err := <-exited:
			copyNew()
			how := "exited"
			if err != nil {
				how = err.Error()
			}
			return fmt.Errorf("%s stopped before the control plane was ready (%s); log: %s", serveName, how, logPath)
		case <-ctx.Done():
			fmt.Fprintln(out, "interrupted: stopping the starting control plane")
			_ = serve.Signal(syscall.SIGTERM)
			if exited != nil {
				<-exited //nolint:errcheck // its exit status after our SIGTERM tells nothing
			}
			copyNew()
			return ErrInterrupted
		case <-deadline.C:
			copyNew()
			return fmt.Errorf("control plane not ready after %s; it is still starting (pid %d): see %s, stop it with 'localcluster down'", upTimeout, serve.Pid, logPath)
		case <-tick.C:
			copyNew()
			if d.has(readyFile) {
				printKubeconfig(out, d.path(kubeconfigFile))
				return nil
			}
			if exited == nil && !isServe(serve.Pid) {
				return fmt.Errorf("%s (pid %d) exited before the control plane was ready; log: %s", serveName, serve.Pid, logPath)
			}
		}
	}
}

func printKubeconfig(out io.Writer, path string) {
	fmt.Fprintf(out, "kubeconfig: %s\n", path)
	fmt.Fprintf(out, "export KUBECONFIG=%s\n", path)
}

// servedCluster is what Serve needs of a running control plane: *Cluster, or a fake in
// tests.
type servedCluster interface {
	PIDs() map[string]int
	RegistryAddress() string
	Exited() error
	Stop() error
}

// startFunc starts a control plane; its admin kubeconfig is <opts.StateDir>/kubeconfig.
type startFunc func(ctx context.Context, opts Options) (servedCluster, error)

// Serve runs the control plane in the foreground until ctx is cancelled or a component
// exits, then stops it. It records its pid, the components' pids, a copy of the admin
// kubeconfig and, last, the ready file in the state directory, and removes them as it
// stops. It refuses to run if another serve process owns the state directory.
func Serve(ctx context.Context, opts DaemonOptions) error {
	return serve(ctx, opts, func(ctx context.Context, opts Options) (servedCluster, error) {
		c, err := Start(ctx, opts)
		if err != nil {
			return nil, err
		}
		return c, nil
	})
}

// serve is Serve with the control plane started by start.
func serve(ctx context.Context, opts DaemonOptions, start startFunc) error {
	if err := opts.complete(true); err != nil {
		return err
	}
	out, d := opts.Out, stateDir(opts.StateDir)
	if pid, ok := d.servePID(); ok && pid != os.Getpid() {
		return fmt.Errorf("a local control plane already runs with state in %s (pid %d)", d, pid)
	}
	if err := d.clear(out, false); err != nil {
		return err
	}
	if err := os.MkdirAll(string(d), 0o755); err != nil {
		return fmt.Errorf("creating the state directory: %w", err)
	}
	if err := writePIDFile(d.path(pidFile), os.Getpid()); err != nil {
		return err
	}
	defer func() { _ = os.Remove(d.path(pidFile)) }() // gone with its process; a stale one is recognized (pid.go)

	cluster, err := start(ctx, Options{
		BinDir:        opts.BinDir,
		KubeBinDir:    opts.KubeBinDir,
		StateDir:      d.path(clusterDir),
		Out:           out,
		CRDDir:        opts.CRDDir,
		GatewayAPIDir: opts.GatewayAPIDir,
		Node:          opts.Node,
		FeatureGates:  opts.FeatureGates,
	})
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintln(out, "interrupted before the control plane was ready; stopped")
			return nil
		}
		return err
	}
	stop := func() error {
		_ = os.Remove(d.path(readyFile))
		_ = os.Remove(d.path(kubeconfigFile))
		_ = os.Remove(d.path(registryFile))
		err := cluster.Stop()
		_ = os.Remove(d.path(pidsFile))
		return err
	}
	if err := publish(d, cluster); err != nil {
		return errors.Join(err, stop())
	}
	fmt.Fprintf(out, "local control plane running; stop it with 'localcluster down --state-dir %s'\n", d)

	tick := time.NewTicker(exitCheckTick)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintln(out, "stopping the local control plane")
			return stop()
		case <-tick.C:
			if err := cluster.Exited(); err != nil {
				fmt.Fprintln(out, "a component exited; stopping the local control plane")
				return errors.Join(err, stop())
			}
		}
	}
}

// publish writes the component pids, the kubeconfig and, last, the ready file.
func publish(d stateDir, cluster servedCluster) error {
	if err := writePIDs(d.path(pidsFile), cluster.PIDs()); err != nil {
		return err
	}
	kubeconfig, err := os.ReadFile(filepath.Join(d.path(clusterDir), kubeconfigFile))
	if err != nil {
		return fmt.Errorf("reading the kubeconfig: %w", err)
	}
	if err := writeFileAtomic(d.path(kubeconfigFile), kubeconfig); err != nil {
		return err
	}
	if registry := cluster.RegistryAddress(); registry != "" {
		if err := writeFileAtomic(d.path(registryFile), []byte(registry+"\n")); err != nil {
			return err
		}
	}
	return writeFileAtomic(d.path(readyFile), []byte(d.path(kubeconfigFile)+"\n"))
}

// Down stops the serve process of the state directory, if one runs (SIGTERM, and
// SIGKILL after downTimeout), kills components a dead serve process left behind, and
// removes the state directory. It signals only processes whose pid the state directory
// records and whose command line (/proc/<pid>/cmdline) is still theirs.
func Down(opts DaemonOptions) error {
	if err := opts.complete(false); err != nil {
		return err
	}
	out, d := opts.Out, stateDir(opts.StateDir)
	if _, err := os.Stat(string(d)); errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(out, "no local control plane in %s\n", d)
		return nil
	}
	stopped := false
	if pid, ok := d.servePID(); ok {
		fmt.Fprintf(out, "stopping the local control plane (pid %d)\n", pid)
		err := stopPID(serveName, pid, isServe, downTimeout, func() {
			fmt.Fprintf(out, "%s (pid %d) still running after %s; killing it\n", serveName, pid, downTimeout)
		})
		if err != nil {
			return err
		}
		stopped = true
	}
	if err := d.clear(out, true); err != nil {
		return err
	}
	if stopped {
		fmt.Fprintln(out, "local control plane stopped")
	} else {
		fmt.Fprintf(out, "no local control plane was running in %s; state removed\n", d)
	}
	return nil
}

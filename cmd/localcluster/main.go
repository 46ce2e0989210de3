// Command localcluster runs a local Kubernetes control plane (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and kwok) in the background for development.
//
//	localcluster up    --bin-dir bin --state-dir .local   start it, wait until ready
//	localcluster down  --state-dir .local                  stop it and remove the state
//	localcluster serve --bin-dir bin --state-dir .local   run it in the foreground
//
// `up` starts `serve` as a detached process and follows its log until the control plane
// is ready; `down` stops that process. The admin kubeconfig is <state-dir>/kubeconfig.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/app-controller/app-controller/internal/localcluster"
)

// Files and directories inside the state directory.
const (
	pidFile        = "localcluster.pid" // pid of the serve process
	pidsFile       = "pids"             // "<component> <pid>" lines
	logFile        = "localcluster.log" // output of the serve process
	readyFile      = "ready"            // written by serve once the control plane is ready
	kubeconfigFile = "kubeconfig"       // copy of the admin kubeconfig
	clusterDir     = "cluster"          // the cluster's own state (certificates, etcd, logs)
)

// ourEntries are the entries of a state directory that down removes.
var ourEntries = []string{readyFile, kubeconfigFile, pidsFile, pidFile, clusterDir, logFile}

const (
	upTimeout   = 5 * time.Minute  // how long up waits for serve to report ready
	downTimeout = 60 * time.Second // how long down waits for serve to stop
)

const usage = `localcluster runs a local Kubernetes control plane: etcd, kube-apiserver,
kube-controller-manager, kube-scheduler and kwok (simulated nodes and pods), all on
127.0.0.1 with ports chosen at run time.

Usage:
  localcluster up    --bin-dir DIR --state-dir DIR [--crd-dir DIR]   start it in the background, wait until ready
  localcluster down  --state-dir DIR                                 stop it and remove the state directory
  localcluster serve --bin-dir DIR --state-dir DIR [--crd-dir DIR]   run it in the foreground until SIGINT/SIGTERM

--crd-dir installs the CustomResourceDefinitions of DIR before kube-controller-manager
starts, so that its garbage collector knows them at once.

The binaries in --bin-dir are built by 'make tools'. The admin kubeconfig is written to
<state-dir>/kubeconfig; component logs are in <state-dir>/cluster/logs/, the output of the
background process in <state-dir>/localcluster.log.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "up":
		err = runUp(args)
	case "serve":
		err = runServe(args)
	case "down":
		err = runDown(args)
	case "-h", "-help", "--help", "help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "localcluster: unknown command %q\n\n%s", cmd, usage)
		os.Exit(2)
	}
	if err != nil {
		if !errors.Is(err, errReported) {
			fmt.Fprintf(os.Stderr, "localcluster %s: %v\n", os.Args[1], err)
		}
		os.Exit(1)
	}
}

// crdDir is the --crd-dir of up and serve.
var crdDir string

// errReported is returned when the failure has already been printed.
var errReported = errors.New("failure already reported")

// parseFlags parses the flags of a command; withBinDir adds --bin-dir. Both directories
// are returned as absolute paths.
func parseFlags(cmd string, args []string, withBinDir bool) (binDir, stateDir string, err error) {
	fs := flag.NewFlagSet("localcluster "+cmd, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage of localcluster %s:\n", cmd)
		fs.PrintDefaults()
	}
	if withBinDir {
		fs.StringVar(&binDir, "bin-dir", "", "directory with the control plane binaries and kwok-stages/ (built by 'make tools'); default: $"+localcluster.BinDirEnv+" or <repo>/bin")
		fs.StringVar(&crdDir, "crd-dir", "", "directory of CustomResourceDefinition YAML files to install before kube-controller-manager starts (optional)")
	}
	fs.StringVar(&stateDir, "state-dir", "", "directory for the cluster's state, logs and kubeconfig (required)")
	if err := fs.Parse(args); err != nil {
		return "", "", err
	}
	if fs.NArg() > 0 {
		return "", "", fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if stateDir == "" {
		fs.Usage()
		return "", "", errors.New("--state-dir is required")
	}
	if stateDir, err = filepath.Abs(stateDir); err != nil {
		return "", "", err
	}
	if withBinDir && crdDir != "" {
		if crdDir, err = filepath.Abs(crdDir); err != nil {
			return "", "", err
		}
	}
	if withBinDir {
		if binDir == "" {
			binDir, err = localcluster.BinDirFromEnv()
		} else {
			binDir, err = filepath.Abs(binDir)
			if err == nil {
				err = localcluster.CheckBinDir(binDir)
			}
		}
		if err != nil {
			return "", "", err
		}
	}
	return binDir, stateDir, nil
}

// runUp starts serve in the background (unless it already runs) and follows its log
// until the control plane is ready.
func runUp(args []string) error {
	binDir, stateDir, err := parseFlags("up", args, true)
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(stateDir, kubeconfigFile)

	if pid, ok := servePID(stateDir); ok {
		if fileExists(filepath.Join(stateDir, readyFile)) {
			fmt.Printf("local control plane already running (pid %d)\n", pid)
			printKubeconfig(kubeconfig)
			return nil
		}
		fmt.Printf("local control plane is starting (pid %d); following %s\n", pid, filepath.Join(stateDir, logFile))
		return follow(stateDir, pid, nil, lastRunOffset(filepath.Join(stateDir, logFile)))
	}
	// Left-overs of a serve process that died: clear them first.
	if err := cleanup(stateDir, false); err != nil {
		return err
	}
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		return fmt.Errorf("creating the state directory: %w", err)
	}

	logPath := filepath.Join(stateDir, logFile)
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
	fmt.Fprintf(log, "=== %s localcluster serve\n", time.Now().Format(time.RFC3339))
	cmd := exec.Command(self, "serve", "--bin-dir", binDir, "--state-dir", stateDir, "--crd-dir", crdDir)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Dir = stateDir
	// A session of its own: the terminal's signals and hang-up do not reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting localcluster serve: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	fmt.Printf("starting the local control plane (pid %d, log %s)\n", cmd.Process.Pid, logPath)
	return follow(stateDir, cmd.Process.Pid, exited, offset)
}

// follow copies the serve log from offset to stdout until the ready file appears, the
// serve process exits (exited, or its pid disappearing when it is not our child), or
// upTimeout passes. Ctrl-C stops the starting control plane.
func follow(stateDir string, pid int, exited <-chan error, offset int64) error {
	logPath := filepath.Join(stateDir, logFile)
	interrupt := make(chan os.Signal, 1)
	signal.Notify(interrupt, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(interrupt)

	copyNew := func() {
		f, err := os.Open(logPath)
		if err != nil {
			return
		}
		defer f.Close()
		if _, err := f.Seek(offset, io.SeekStart); err != nil {
			return
		}
		n, _ := io.Copy(os.Stdout, f)
		offset += n
	}
	deadline := time.After(upTimeout)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-exited:
			copyNew()
			how := "exited"
			if err != nil {
				how = err.Error()
			}
			return fmt.Errorf("localcluster serve stopped before the control plane was ready (%s); log: %s", how, logPath)
		case <-interrupt:
			fmt.Println("interrupted: stopping the starting control plane")
			_ = syscall.Kill(pid, syscall.SIGTERM)
			if exited != nil {
				<-exited
			}
			copyNew()
			return errReported
		case <-deadline:
			copyNew()
			return fmt.Errorf("control plane not ready after %s; it is still starting (pid %d): see %s, stop it with 'localcluster down'", upTimeout, pid, logPath)
		case <-tick.C:
			copyNew()
			if fileExists(filepath.Join(stateDir, readyFile)) {
				printKubeconfig(filepath.Join(stateDir, kubeconfigFile))
				return nil
			}
			if exited == nil && !isServe(pid) {
				return fmt.Errorf("localcluster serve (pid %d) exited before the control plane was ready; log: %s", pid, logPath)
			}
		}
	}
}

// lastRunOffset returns the offset in the serve log where the output of the latest serve
// process starts (at its "=== " header line), or 0.
func lastRunOffset(path string) int64 {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return int64(bytes.LastIndex(data, []byte("\n=== ")) + 1) // 0 if there is no later header
}

func printKubeconfig(path string) {
	fmt.Printf("kubeconfig: %s\n", path)
	fmt.Printf("export KUBECONFIG=%s\n", path)
}

// runServe starts the control plane in the foreground and stops it on SIGINT or SIGTERM.
func runServe(args []string) error {
	binDir, stateDir, err := parseFlags("serve", args, true)
	if err != nil {
		return err
	}
	if pid, ok := servePID(stateDir); ok && pid != os.Getpid() {
		return fmt.Errorf("a local control plane already runs with state in %s (pid %d)", stateDir, pid)
	}
	if err := cleanup(stateDir, false); err != nil {
		return err
	}
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		return fmt.Errorf("creating the state directory: %w", err)
	}
	if err := writeFileAtomic(filepath.Join(stateDir, pidFile), fmt.Appendf(nil, "%d\n", os.Getpid())); err != nil {
		return err
	}
	defer os.Remove(filepath.Join(stateDir, pidFile))

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	cluster, err := localcluster.Start(ctx, localcluster.Options{
		BinDir:   binDir,
		StateDir: filepath.Join(stateDir, clusterDir),
		Out:      os.Stdout,
		CRDDir:   crdDir,
	})
	if err != nil {
		if ctx.Err() != nil {
			fmt.Println("interrupted before the control plane was ready; stopped")
			return nil
		}
		return err
	}
	stop := func() error {
		_ = os.Remove(filepath.Join(stateDir, readyFile))
		_ = os.Remove(filepath.Join(stateDir, kubeconfigFile))
		err := cluster.Stop()
		_ = os.Remove(filepath.Join(stateDir, pidsFile))
		return err
	}
	if err := publish(stateDir, cluster); err != nil {
		return errors.Join(err, stop())
	}
	fmt.Printf("local control plane running; stop it with 'localcluster down --state-dir %s'\n", stateDir)

	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			fmt.Println("stopping the local control plane")
			return stop()
		case <-tick.C:
			if err := cluster.Exited(); err != nil {
				fmt.Println("a component exited; stopping the local control plane")
				return errors.Join(err, stop())
			}
		}
	}
}

// publish writes the component pids, the kubeconfig and, last, the ready file.
func publish(stateDir string, cluster *localcluster.Cluster) error {
	pids := cluster.PIDs()
	names := make([]string, 0, len(pids))
	for name := range pids {
		names = append(names, name)
	}
	sort.Strings(names)
	var b bytes.Buffer
	for _, name := range names {
		fmt.Fprintf(&b, "%s %d\n", name, pids[name])
	}
	if err := writeFileAtomic(filepath.Join(stateDir, pidsFile), b.Bytes()); err != nil {
		return err
	}
	kubeconfig, err := os.ReadFile(cluster.Kubeconfig)
	if err != nil {
		return fmt.Errorf("reading the kubeconfig: %w", err)
	}
	if err := writeFileAtomic(filepath.Join(stateDir, kubeconfigFile), kubeconfig); err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(stateDir, readyFile), []byte(filepath.Join(stateDir, kubeconfigFile)+"\n"))
}

// runDown stops the serve process and any component left, and removes the state.
func runDown(args []string) error {
	_, stateDir, err := parseFlags("down", args, false)
	if err != nil {
		return err
	}
	if _, err := os.Stat(stateDir); errors.Is(err, os.ErrNotExist) {
		fmt.Printf("no local control plane in %s\n", stateDir)
		return nil
	}
	stopped := false
	if pid, ok := servePID(stateDir); ok {
		fmt.Printf("stopping the local control plane (pid %d)\n", pid)
		if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("signalling localcluster serve (pid %d): %w", pid, err)
		}
		if !waitGone(pid, downTimeout) {
			fmt.Printf("localcluster serve (pid %d) still running after %s; killing it\n", pid, downTimeout)
			_ = syscall.Kill(pid, syscall.SIGKILL)
			waitGone(pid, 5*time.Second)
		}
		stopped = true
	}
	if err := cleanup(stateDir, true); err != nil {
		return err
	}
	if stopped {
		fmt.Println("local control plane stopped")
	} else {
		fmt.Printf("no local control plane was running in %s; state removed\n", stateDir)
	}
	return nil
}

// cleanup kills component processes listed in the pids file that are still alive (only
// if /proc/<pid>/cmdline still names that component's binary) and removes the files of a
// previous run. With removeAll it also removes the log and the state directory itself
// (if nothing else is in it).
func cleanup(stateDir string, removeAll bool) error {
	for name, pid := range readPIDs(filepath.Join(stateDir, pidsFile)) {
		if commandName(pid) == name {
			fmt.Printf("killing left-over %s (pid %d)\n", name, pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
			waitGone(pid, 5*time.Second)
		}
	}
	entries := ourEntries
	if !removeAll {
		entries = entries[:len(entries)-1] // keep the log
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(stateDir, e)); err != nil {
			return fmt.Errorf("removing %s: %w", e, err)
		}
	}
	if removeAll {
		if err := os.Remove(stateDir); err != nil && !errors.Is(err, os.ErrNotExist) {
			fmt.Printf("left %s in place: it holds files that localcluster did not create\n", stateDir)
		}
	}
	return nil
}

// servePID returns the pid recorded in the pid file if that process is alive and is a
// localcluster serve.
func servePID(stateDir string) (int, bool) {
	data, err := os.ReadFile(filepath.Join(stateDir, pidFile))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return 0, false
	}
	return pid, isServe(pid)
}

// isServe reports whether pid is a live "localcluster serve" process.
func isServe(pid int) bool {
	args := cmdline(pid)
	return len(args) >= 2 && strings.Contains(filepath.Base(args[0]), "localcluster") && args[1] == "serve" && !isZombie(pid)
}

// readPIDs parses the pids file; a missing or malformed file gives no pids.
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

// cmdline returns the arguments of a running process, or nil.
func cmdline(pid int) []string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(data) == 0 {
		return nil
	}
	return strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
}

// commandName returns the base name of a live process's executable argument, or "".
func commandName(pid int) string {
	args := cmdline(pid)
	if len(args) == 0 || isZombie(pid) {
		return ""
	}
	return filepath.Base(args[0])
}

// isZombie reports whether pid has exited but not been reaped yet.
func isZombie(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses and may hold spaces.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}

// waitGone waits until pid no longer exists (or is a zombie); it reports whether it did.
func waitGone(pid int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) || isZombie(pid) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// writeFileAtomic writes data to path through a temporary file and a rename.
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

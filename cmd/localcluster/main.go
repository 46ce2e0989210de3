// Command localcluster runs a local Kubernetes control plane (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and kwok) in the background for development.
//
//	localcluster up    --bin-dir bin --state-dir .local   start it, wait until ready
//	localcluster down  --state-dir .local                  stop it and remove the state
//	localcluster serve --bin-dir bin --state-dir .local   run it in the foreground
//
// `up` starts `serve` as a detached process and follows its log until the control plane
// is ready; `down` stops that process. The admin kubeconfig is <state-dir>/kubeconfig.
// The work is done by package internal/localcluster (Up, Serve, Down).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/app-controller/app-controller/internal/localcluster"
)

const usage = `localcluster runs a local Kubernetes control plane: etcd, kube-apiserver,
kube-controller-manager, kube-scheduler and kwok (simulated nodes and pods), all on
127.0.0.1 with ports chosen at run time.

Usage:
  localcluster up    --bin-dir DIR --state-dir DIR [--crd-dir DIR] [--node kwok|real]   start it in the background, wait until ready
  localcluster down  --state-dir DIR                                                   stop it and remove the state directory
  localcluster serve --bin-dir DIR --state-dir DIR [--crd-dir DIR] [--node kwok|real]   run it in the foreground until SIGINT/SIGTERM
  localcluster can-run-real-node                                                       exit 1, saying why, if this machine cannot run --node real

--crd-dir installs the CustomResourceDefinitions of DIR before kube-controller-manager
starts, so that its garbage collector knows them at once.

--kube-bin-dir DIR runs the kube-apiserver, kube-controller-manager and kube-scheduler of
DIR instead of --bin-dir's: another Kubernetes version's (make test-compat builds them
into bin/compat/MINOR; make cluster-up KUBE=MINOR uses them).

--node real starts, in place of the kwok node, one node that runs pods for real:
containerd, runc and the CNI plugins of this machine, the kubelet and kube-proxy, in a
network namespace of its own, and an image registry whose HOST:PORT is written to
<state-dir>/registry (it holds agnhost:2.66.1; push your own images there).

The binaries in --bin-dir are built by 'make tools'. The admin kubeconfig is written to
<state-dir>/kubeconfig; component logs are in <state-dir>/cluster/logs/, the output of the
background process in <state-dir>/localcluster.log.
`

// cmdDown is the command that stops the control plane: it runs to its end, Ctrl-C or
// not, and takes neither --bin-dir nor the options of up.
const cmdDown = "down"

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	cmd, args := os.Args[1], os.Args[2:]
	var run func(context.Context, localcluster.DaemonOptions) error
	switch cmd {
	case "up":
		run = localcluster.Up
	case "serve":
		run = localcluster.Serve
	case cmdDown:
		run = func(_ context.Context, opts localcluster.DaemonOptions) error { return localcluster.Down(opts) }
	case "can-run-real-node":
		// For make: one line saying why not, and exit status 1.
		if err := localcluster.CanRunRealNode(); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		return
	case "-h", "-help", "--help", "help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "localcluster: unknown command %q\n\n%s", cmd, usage)
		os.Exit(2)
	}
	opts, err := parseFlags(cmd, args)
	if err == nil {
		err = runCommand(cmd, run, opts)
	}
	if err != nil {
		if !errors.Is(err, localcluster.ErrInterrupted) { // already reported by up
			fmt.Fprintf(os.Stderr, "localcluster %s: %v\n", cmd, err)
		}
		os.Exit(1)
	}
}

// runCommand runs cmd: up and serve until they end or Ctrl-C (SIGINT, SIGTERM) stops
// them in order; down to its end.
func runCommand(cmd string, run func(context.Context, localcluster.DaemonOptions) error, opts localcluster.DaemonOptions) error {
	ctx := context.Background()
	if cmd != cmdDown {
		var stop context.CancelFunc
		ctx, stop = signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
		defer stop()
	}
	return run(ctx, opts)
}

// parseFlags parses the flags of cmd into its options; up and serve also take --bin-dir
// and --crd-dir.
func parseFlags(cmd string, args []string) (localcluster.DaemonOptions, error) {
	opts := localcluster.DaemonOptions{Out: os.Stdout}
	fs := flag.NewFlagSet("localcluster "+cmd, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage of localcluster %s:\n", cmd)
		fs.PrintDefaults()
	}
	if cmd != cmdDown {
		fs.StringVar(&opts.BinDir, "bin-dir", "", "directory with the control plane binaries and kwok-stages/ (built by 'make tools'); default: $"+localcluster.BinDirEnv+" or <repo>/bin")
		fs.StringVar(&opts.KubeBinDir, "kube-bin-dir", "", "directory of the kube-apiserver, kube-controller-manager and kube-scheduler to run instead of --bin-dir's: another Kubernetes version's, such as bin/compat/1.34 (optional)")
		fs.StringVar(&opts.CRDDir, "crd-dir", "", "directory of CustomResourceDefinition YAML files to install before kube-controller-manager starts (optional)")
		fs.StringVar(&opts.GatewayAPIDir, "gateway-api-dir", "", "directory of the Gateway API's standard CRDs; its CRDs are installed with --crd-dir's (optional)")
		fs.StringVar(&opts.FeatureGates, "feature-gates", "", "kube-apiserver's --feature-gates, comma-separated NAME=BOOL, e.g. ShardedListAndWatch=true (optional)")
		fs.StringVar(&opts.Node, "node", localcluster.NodeKwok, "kind of node: kwok (simulated pods) or real (containerd and a kubelet that run pods for real; root only, needs 'make node-tools')")
	}
	gatewayAPI := false
	if cmd == "up" {
		fs.BoolVar(&gatewayAPI, "gateway-api", false, "install the Gateway API CRDs of the version go.mod requires (found with the go command, from the working directory's module) unless --gateway-api-dir names them")
	}
	fs.StringVar(&opts.StateDir, "state-dir", "", "directory for the cluster's state, logs and kubeconfig (required)")
	if err := fs.Parse(args); err != nil {
		return opts, err
	}
	if gatewayAPI && opts.GatewayAPIDir == "" {
		dir, err := localcluster.GatewayAPICRDDir(context.Background())
		if err != nil {
			return opts, err
		}
		opts.GatewayAPIDir = dir
	}
	if fs.NArg() > 0 {
		return opts, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if opts.StateDir == "" {
		fs.Usage()
		return opts, errors.New("--state-dir is required")
	}
	return opts, nil
}

package soak

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/app-controller/app-controller/internal/localcluster"
)

// Config configures Run.
type Config struct {
	// Duration is how long the churn and the faults go on; the final checks follow.
	Duration time.Duration
	// Node is the kind of node: localcluster.NodeKwok (the controller as processes) or
	// localcluster.NodeReal (the chart on a real node).
	Node string
	// Apps is the number of Apps the churn keeps (created and deleted at the same pace),
	// spread over Namespaces namespaces.
	Apps       int
	Namespaces int
	// Rate scales the mix: 1 is DefaultMix, the operations of every minute.
	Rate float64
	// Faults are the kinds of fault injected, in turn, every FaultInterval from
	// FirstFault on (nil: DefaultFaults of the node).
	Faults        []string
	FaultInterval time.Duration
	FirstFault    time.Duration
	// ConvergeBound is how long an App may take to converge after a change, or after
	// the end of a fault that overlapped it.
	ConvergeBound time.Duration
	// SampleInterval is the period of the /metrics samples.
	SampleInterval time.Duration
	// Warmup is the start of each leader left out of the slopes: after a process
	// starts to lead, its caches fill, and so do the bounded ones (the Event
	// correlator's 256 Events, the write cache's entries of a minute) and its heap's
	// high-water mark, over minutes.
	Warmup time.Duration
	// Seed seeds the churn's choices (0: the time).
	Seed int64
	// UpgradeFrom, on a real node, is a revision of Repo (e.g. HEAD~1) whose release
	// (`make release` of a checkout of it) the fleet is installed from; the fault
	// FaultHelmUpgrade, put in the middle of Faults if they lack it, upgrades it to the
	// chart and image of this tree (Chart, ImageLayout). "": no upgrade.
	UpgradeFrom string
	// Repo is the repository UpgradeFrom is a revision of.
	Repo string

	// BinDir holds the control plane's binaries (make tools), kubectl and, for a real
	// node, helm and imagebuild.
	BinDir string
	// Controller is the controller binary the processes run (NodeKwok).
	Controller string
	// Chart is the chart's directory and ImageLayout the OCI layout of `make image`,
	// pushed to the cluster's registry (NodeReal).
	Chart, ImageLayout string
	// CRDDir holds the CRDs installed with the control plane.
	CRDDir string
	// WorkDir receives the cluster's state and every log; kept.
	WorkDir string
	// ReportPath receives the JSON report.
	ReportPath string
	// Cluster, if set, is a running control plane to use instead of starting one (the
	// smoke test's); it must write an audit log of every user (Options.AuditLog).
	Cluster *localcluster.Cluster

	// Out receives progress lines.
	Out io.Writer
}

// Fault kinds.
const (
	FaultLeaderA      = "leader-kill-a"
	FaultLeaderB      = "leader-kill-b"
	FaultAPIServer    = "apiserver-restart"
	FaultEtcd         = "etcd-pause"
	FaultWatchCut     = "watch-cut"
	FaultKubelet      = "kubelet-restart"
	FaultContainerd   = "containerd-restart"
	FaultNodePressure = "node-pressure"
	// FaultMetricsServer: the real node's metrics-server stopped for metricsServerDown.
	FaultMetricsServer = "metrics-server-gone"
	// FaultHelmUpgrade: both releases upgraded from UpgradeFrom's release to this tree's
	// chart and image (helm upgrade --wait); once in a run.
	FaultHelmUpgrade = "helm-upgrade"
)

const (
	defaultSampleEvery  = 10 * time.Second
	defaultWarmup       = 5 * time.Minute
	defaultBound        = 2 * time.Minute
	defaultFaultEvery   = 3*time.Minute + 30*time.Second
	defaultFirstFault   = 2 * time.Minute
	defaultNamespaces   = 3
	kwokAppsDefault     = 300
	realNodeAppsDefault = 30
	realNodeRateDefault = 0.25
)

// DefaultFaults returns the faults injected on a node of kind node, in this order: a
// leader killed in a phase of a rollout between two of the others.
func DefaultFaults(node string) []string {
	faults := []string{FaultLeaderA, FaultRolloutKillPause, FaultAPIServer, FaultRolloutKillStep, FaultEtcd, FaultRolloutKillPromoting,
		FaultWatchCut, FaultRolloutKillAborting, FaultLeaderB}
	if node == localcluster.NodeReal {
		faults = []string{FaultLeaderA, FaultRolloutKillPause, FaultAPIServer, FaultKubelet, FaultRolloutKillStep, FaultEtcd, FaultContainerd,
			FaultRolloutKillPromoting, FaultWatchCut, FaultGatewayRestart, FaultNodePressure, FaultRolloutKillAborting, FaultMetricsServer, FaultLeaderB}
	}
	return faults
}

// DefaultApps is the number of Apps of a run on a node of kind node, and DefaultRate
// the scale of its churn (DefaultMix). On the real node they are what one node of 2 cores
// carries: its kubelet runs at most 110 pods (maxPods), the controllers' four, Traefik
// and Prometheus among them, and since the canaries run two replicas (and a third pod
// at a step) and the autoscaled Apps two or three, ten Apps of the mix run about 15
// pods at rest and more while they roll. Measured on 2 cores (docs/soak.md): 40 Apps at
// rate 1 asked for 125 pods, the kubelet refused them (Too many pods) at a load of 55
// with half the CPU in the kernel starting containers; 30 Apps at rate 0.5 (15-18
// operations a minute) ran at a load of 9-63, mean 28.7 and 42-45 in its first minutes
// a day later: about 20 pods created and 20 deleted a minute, whose runc, shim and CNI
// processes took most of the 2 cores, and converged slower than the 2-minute bound.
func DefaultApps(node string) int {
	if node == localcluster.NodeReal {
		return realNodeAppsDefault
	}
	return kwokAppsDefault
}

// DefaultRate is the scale of the churn of a run on a node of kind node (DefaultApps).
func DefaultRate(node string) float64 {
	if node == localcluster.NodeReal {
		return realNodeRateDefault
	}
	return 1
}

// nodeFS is the size of the real node's nodefs when the node-pressure fault is to be
// made (localcluster.Options.NodeFS), 0 otherwise.
func (cfg *Config) nodeFS() int64 {
	if slices.Contains(cfg.Faults, FaultNodePressure) {
		return nodeFS
	}
	return 0
}

// completeFaults puts the helm upgrade in the middle of the faults when UpgradeFrom asks
// for it, and checks that each fault exists and can be made on the node.
func (cfg *Config) completeFaults() error {
	if cfg.UpgradeFrom != "" && !slices.Contains(cfg.Faults, FaultHelmUpgrade) {
		cfg.Faults = slices.Insert(slices.Clone(cfg.Faults), len(cfg.Faults)/2, FaultHelmUpgrade)
	}
	for _, f := range cfg.Faults {
		if !slices.Contains(DefaultFaults(localcluster.NodeReal), f) && f != FaultHelmUpgrade {
			return fmt.Errorf("soak: unknown fault %q", f)
		}
		if cfg.Node != localcluster.NodeReal && (f == FaultKubelet || f == FaultContainerd || f == FaultNodePressure || f == FaultMetricsServer || f == FaultHelmUpgrade || f == FaultGatewayRestart) {
			return fmt.Errorf("soak: fault %q needs a real node", f)
		}
		if f == FaultHelmUpgrade && (cfg.UpgradeFrom == "" || cfg.Repo == "") {
			return fmt.Errorf("soak: fault %q needs UpgradeFrom and Repo (-upgrade-from)", f)
		}
	}
	return nil
}

// complete fills in the defaults and checks cfg.
func (cfg *Config) complete() error {
	if cfg.Node == "" {
		cfg.Node = localcluster.NodeKwok
	}
	if cfg.Node != localcluster.NodeKwok && cfg.Node != localcluster.NodeReal {
		return fmt.Errorf("soak: unknown node kind %q (want %s or %s)", cfg.Node, localcluster.NodeKwok, localcluster.NodeReal)
	}
	if cfg.Apps == 0 {
		cfg.Apps = DefaultApps(cfg.Node)
	}
	if cfg.Namespaces == 0 {
		cfg.Namespaces = defaultNamespaces
	}
	if cfg.Rate == 0 {
		cfg.Rate = DefaultRate(cfg.Node)
	}
	if cfg.Faults == nil {
		cfg.Faults = DefaultFaults(cfg.Node)
	}
	if err := cfg.completeFaults(); err != nil {
		return err
	}
	defaults := []struct {
		d   *time.Duration
		def time.Duration
	}{
		{&cfg.FaultInterval, defaultFaultEvery},
		{&cfg.FirstFault, defaultFirstFault},
		{&cfg.ConvergeBound, defaultBound},
		{&cfg.SampleInterval, defaultSampleEvery},
		{&cfg.Warmup, defaultWarmup},
	}
	for _, d := range defaults {
		if *d.d == 0 {
			*d.d = d.def
		}
	}
	if cfg.Seed == 0 {
		cfg.Seed = time.Now().UnixNano()
	}
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	switch {
	case cfg.Duration <= 0:
		return errors.New("soak: Duration must be positive")
	case cfg.Apps < 2*cfg.Namespaces:
		return fmt.Errorf("soak: %d Apps are too few for %d namespaces", cfg.Apps, cfg.Namespaces)
	case cfg.WorkDir == "" || cfg.ReportPath == "":
		return errors.New("soak: WorkDir and ReportPath are required")
	case cfg.Node == localcluster.NodeKwok && cfg.Controller == "":
		return errors.New("soak: Controller is required on kwok")
	case cfg.Node == localcluster.NodeReal && (cfg.Chart == "" || cfg.ImageLayout == ""):
		return errors.New("soak: Chart and ImageLayout are required on a real node")
	}
	return nil
}

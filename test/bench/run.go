package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/app-controller/app-controller/internal/localcluster"
	"github.com/app-controller/app-controller/pkg/controllermanager"
	"github.com/app-controller/app-controller/test/harness"
)

// Config configures Run.
type Config struct {
	// Apps is the number of Apps of every phase; Replicas the replicas of each.
	Apps     int
	Replicas int32
	// Rounds is how many times the whole sequence (floor loops, then the product's
	// scenarios) runs on the same control plane.
	Rounds int
	// Concurrencies are the interleaved floor loops' concurrencies (runFloor);
	// BatchedConcurrencies the batched floor loops' (runBatchedFloor). The floor of a
	// round is the fastest loop of either kind.
	Concurrencies        []int
	BatchedConcurrencies []int
	// CreateClients is the number of parallel clients that create the product's Apps.
	CreateClients int
	// Scenarios after converge: any of "idle", "restart", "churn", "canary" (canary.go),
	// and, not by default, "autoscaled" (autoscaled.go) and "peer" (peer.go).
	Scenarios []string
	// BinDir holds the control plane's binaries; Controller is bin/app-controller.
	BinDir, Controller string
	// ControllerFlags are added to the controller's command line, after --kubeconfig and
	// --metrics-bind-address; empty (the default, and what the targets are measured
	// with) runs it with its default flags. For studies such as --workers.
	ControllerFlags []string
	// ControllerEnv (NAME=VALUE) is added to the controller's environment: client-go's
	// feature gates (KUBE_FEATURE_ClientsAllowCBOR=true) for a study of the CBOR wire
	// format, with APIServerFeatureGates CBORServingAndStorage=true.
	ControllerEnv []string
	// APIServerFeatureGates is kube-apiserver's --feature-gates (NAME=BOOL,...); empty:
	// its defaults.
	APIServerFeatureGates string
	// ControllerMemoryLimit (bytes, 0: none) runs the controller as the chart does under
	// a memory limit: MEMORY_LIMIT set, in a memory cgroup with that hard limit.
	ControllerMemoryLimit int64
	// CRDDir holds the CRDs installed at start.
	CRDDir string
	// PeerController is Argo Rollouts' controller and PeerCRDDir the directory of its
	// CRDs (its module's manifests/crds, *-crd.yaml installed with the peer scenario),
	// for the peer scenario.
	PeerController, PeerCRDDir string
	// PeerFlagSets are the peer scenario's sets of flags, "defaults" and "scale" (each
	// controller's flags for scale: peer.go); empty: both.
	PeerFlagSets []string
	// WorkDir receives the cluster's state and logs and the controller's logs; it is
	// removed after a successful run unless KeepState is set.
	WorkDir   string
	KeepState bool
	// SkipWarmUp skips the unmeasured warm-up loop before the first round.
	SkipWarmUp bool
	// BaselineWait is how long the controller runs on the empty cluster before its RSS
	// at N=0 is read; Settle how long writes still count after a scenario's last App is
	// Ready, or after the restarted controller's queue is drained. Zero: 10 s and 5 s.
	BaselineWait, Settle time.Duration
	// Breakdown also audits the control plane's components and the harness's own
	// writes, and adds to each round who writes what per App and the product's timeline
	// (Breakdown). Off by default: auditing every write costs the apiserver a little.
	Breakdown bool
	// ResultPath, if set, receives the JSON result, rewritten after each round.
	ResultPath string
	// Out receives the progress lines and the table.
	Out io.Writer
}

// DefaultScenarios are the scenarios after converge.
var DefaultScenarios = []string{"idle", "restart", "churn", "canary"}

// DefaultConcurrencies are the interleaved floor loops' concurrencies.
var DefaultConcurrencies = []int{5, 10, 20, 40}

// DefaultBatchedConcurrencies are the batched floor loops' concurrencies.
var DefaultBatchedConcurrencies = []int{5, 20}

// env is what the phases share.
type env struct {
	cfg     Config
	cluster *localcluster.Cluster
	admin   clients
	floor   clients
	// controllerKubeconfig is the kubeconfig of the controller's own user.
	controllerKubeconfig string
	audit                *audit
	// peerKubeconfig is the kubeconfig of Argo Rollouts' own user (the peer scenario).
	peerKubeconfig string
	logDir         string
	out            io.Writer
}

// audit is the cluster's audit log, renamed for the phases' readability.
type audit = auditLog

// convergeTimeout bounds every wait for N Apps: 2 minutes plus 200 ms per App.
func (e *env) convergeTimeout() time.Duration {
	return 2*time.Minute + time.Duration(e.cfg.Apps)*200*time.Millisecond
}

func (e *env) printf(format string, args ...any) {
	fmt.Fprintf(e.out, "%s "+format, append([]any{time.Now().UTC().Format("15:04:05")}, args...)...)
}

// Run starts a control plane, runs cfg.Rounds rounds of the floor loops and the
// product's scenarios, prints the table and returns the result. A round in which an App
// does not converge is an error, after the stuck Apps are described.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	// No floor loop is a study of the product alone (memory under a limit): no ratio.
	if cfg.Apps < 1 || cfg.Replicas < 1 || cfg.Rounds < 1 || cfg.CreateClients < 1 {
		return nil, errors.New("bench: Apps, Replicas, Rounds and CreateClients must be positive")
	}
	if cfg.BaselineWait == 0 {
		cfg.BaselineWait = defaultBaselineWait
	}
	if cfg.Settle == 0 {
		cfg.Settle = defaultSettle
	}
	out := cfg.Out
	if out == nil {
		out = io.Discard
	}
	e := &env{cfg: cfg, out: out, logDir: filepath.Join(cfg.WorkDir, "controller-logs")}
	if entries, err := os.ReadDir(cfg.WorkDir); err == nil && len(entries) > 0 {
		return nil, fmt.Errorf("bench: the work directory %s is not empty (left from an earlier run?): remove it", cfg.WorkDir)
	}
	if err := os.MkdirAll(e.logDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the work directory: %w", err)
	}
	e.printf("starting a control plane with room for %d pods\n", cfg.Apps*int(cfg.Replicas))
	cluster, err := localcluster.Start(ctx, localcluster.Options{
		BinDir:       cfg.BinDir,
		StateDir:     filepath.Join(cfg.WorkDir, "cluster"),
		CRDDir:       cfg.CRDDir,
		PodCapacity:  cfg.Apps*int(cfg.Replicas) + 100,
		FeatureGates: cfg.APIServerFeatureGates,
		AuditUsers:   auditUsers(cfg.Breakdown, slices.Contains(cfg.Scenarios, scenarioPeer)),
		Profiling:    cfg.Breakdown,
		// No metrics API here: autoscalers that cannot read one would turn the Apps
		// not Ready after a minute (autoscaled.go).
		NoAutoscalerController: slices.Contains(cfg.Scenarios, scenarioAutoscaled),
		// Kept: a failed run's logs explain it; a successful run removes WorkDir.
		KeepState: true,
		Out:       harness.PrefixWriter{W: out, Prefix: "  cluster: "},
	})
	if err != nil {
		return nil, err
	}
	e.cluster = cluster
	defer func() {
		if err := cluster.Stop(); err != nil {
			e.printf("%v\n", err)
		}
	}()
	e.audit = newAuditLog(cluster.AuditLogPath)
	if err := e.makeClients(); err != nil {
		return nil, err
	}
	if slices.Contains(cfg.Scenarios, scenarioPeer) {
		if err := e.setUpPeer(ctx); err != nil {
			return nil, err
		}
	}

	res := &Result{Apps: cfg.Apps, Replicas: int(cfg.Replicas), Cores: runtime.NumCPU(), WriteCounting: writeCounting, Scenarios: cfg.Scenarios, ControllerFlags: append([]string{}, cfg.ControllerFlags...),
		ControllerMemoryLimitBytes: cfg.ControllerMemoryLimit}
	if res.Versions, err = e.versions(ctx); err != nil {
		return nil, err
	}
	for round := 1; round <= cfg.Rounds; round++ {
		r, err := e.round(ctx, round)
		if err != nil {
			return nil, fmt.Errorf("round %d: %w", round, err)
		}
		res.Rounds = append(res.Rounds, r)
		fmt.Fprintln(out)
		fmt.Fprint(out, r.table(cfg.Apps, int(cfg.Replicas), cfg.Scenarios, cfg.ControllerFlags))
		res.summarize()
		if cfg.ResultPath != "" {
			if err := res.WriteJSON(cfg.ResultPath); err != nil {
				return nil, err
			}
			e.printf("wrote %s (%d round(s))\n", cfg.ResultPath, len(res.Rounds))
		}
	}
	res.summarize()
	// A breakdown's heap profiles and audit log are kept to be read.
	if !cfg.KeepState && !cfg.Breakdown {
		defer func() { _ = os.RemoveAll(cfg.WorkDir) }() // a leftover is removed by the next run
	}
	return res, nil
}

// auditUsers are the users whose writes the apiserver's audit log records: the
// controller's and the floor's, with the peer scenario Argo Rollouts', and with breakdown
// the admin identity that the harness and the control plane's components share.
func auditUsers(breakdown, peer bool) []string {
	users := []string{controllerUser, floorUser}
	if peer {
		users = append(users, peerUser)
	}
	if breakdown {
		users = append(users, localcluster.AdminUser)
	}
	return users
}

// writeCounting says how writes are counted, in the table and the JSON.
const writeCounting = "apiserver audit log (Metadata level, non-read verbs), per client-certificate user: " +
	controllerUser + " (the controller) and " + floorUser + " (the floor loops)"

// makeClients makes the admin's, the floor's and the controller's identities.
func (e *env) makeClients() error {
	var err error
	if e.admin, err = newClients(e.cluster.Config, true); err != nil {
		return err
	}
	floorCfg, err := e.cluster.UserConfig(floorUser, benchGroup)
	if err != nil {
		return err
	}
	if e.floor, err = newClients(floorCfg, true); err != nil {
		return err
	}
	controllerCfg, err := e.cluster.UserConfig(controllerUser, benchGroup)
	if err != nil {
		return err
	}
	e.controllerKubeconfig = filepath.Join(e.cfg.WorkDir, "controller.kubeconfig")
	return localcluster.WriteKubeconfig(e.controllerKubeconfig, controllerCfg)
}

// versions are the Go, Kubernetes and controller versions of the run.
func (e *env) versions(ctx context.Context) (Versions, error) {
	v := Versions{Go: runtime.Version()}
	sv, err := e.admin.kube.Discovery().ServerVersion()
	if err != nil {
		return v, fmt.Errorf("reading the server version: %w", err)
	}
	v.Kube = sv.GitVersion
	if strings.HasPrefix(v.Kube, "v0.0.0") {
		// Built from the module without version stamping: the pinned module says which.
		if pinned := pinnedKubernetes(e.cfg.CRDDir); pinned != "" {
			v.Kube = pinned + " (" + v.Kube + ")"
		}
	}
	cmd := exec.CommandContext(ctx, e.cfg.Controller, "--version")
	outText, err := cmd.Output()
	if err != nil {
		return v, fmt.Errorf("running %s --version: %w", e.cfg.Controller, err)
	}
	v.Controller = strings.TrimSpace(string(outText))
	return v, nil
}

// pinnedKubernetes returns the k8s.io/kubernetes version hack/tools/go.mod pins, found
// from the repository's config/crd/bases directory, or "".
func pinnedKubernetes(crdDir string) string {
	data, err := os.ReadFile(filepath.Join(crdDir, "..", "..", "..", "hack", "tools", "go.mod"))
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "k8s.io/kubernetes" {
			return f[1]
		}
	}
	return ""
}

// round runs the floor loops, then the product's scenarios, each on an emptied cluster.
func (e *env) round(ctx context.Context, round int) (RoundResult, error) {
	r := RoundResult{Round: round}
	r.FloorByConcurrency = map[string]float64{}
	// One Deployment through the whole pipeline before anything is measured.
	if round == 1 && !e.cfg.SkipWarmUp {
		if err := e.warmUp(ctx); err != nil {
			return r, err
		}
	}
	r.BatchedFloorByConcurrency = map[string]float64{}
	loops := []struct {
		kind          string
		concurrencies []int
		run           func(context.Context, *env, string, int) (floorRun, error)
		byConcurrency map[string]float64
		fastest       *float64
	}{
		{floorInterleaved, e.cfg.Concurrencies, runFloor, r.FloorByConcurrency, &r.InterleavedFloorSeconds},
		{floorBatched, e.cfg.BatchedConcurrencies, runBatchedFloor, r.BatchedFloorByConcurrency, &r.BatchedFloorSeconds},
	}
	for _, loop := range loops {
		for _, c := range loop.concurrencies {
			if err := e.empty(ctx); err != nil {
				return r, err
			}
			e.printf("round %d: floor, %s, concurrency %d, %d Apps\n", round, loop.kind, c, e.cfg.Apps)
			name := fmt.Sprintf("bench-floor-%d-%s-c%d", round, loop.kind, c)
			before, err := sampleCPU(e.processes(0))
			if err != nil {
				return r, err
			}
			profile := func() string { return "" }
			if e.cfg.Breakdown {
				profile = e.profileAPIServer(ctx, filepath.Join(e.logDir, name+"-apiserver-cpu.pb.gz"))
			}
			f, err := loop.run(ctx, e, name, c)
			if err != nil {
				return r, err
			}
			after, err := sampleCPU(e.processes(0))
			if err != nil {
				return r, err
			}
			f.cpu = cpuUse(before, after, e.cfg.Apps)
			f.apiserverProfile = profile()
			e.printf("round %d: floor, %s, concurrency %d: %.2fs, %.2f writes per App\n", round, loop.kind, c, f.seconds, float64(f.writes.total())/float64(e.cfg.Apps))
			loop.byConcurrency[fmt.Sprint(c)] = round2(f.seconds)
			if *loop.fastest == 0 || round2(f.seconds) < *loop.fastest {
				*loop.fastest = round2(f.seconds)
			}
			if r.FloorConcurrency == 0 || f.seconds < r.floorSeconds {
				r.floorSeconds, r.FloorConcurrency, r.floorWrites, r.FloorLoop = f.seconds, c, f.writes, loop.kind
				r.floorFrom, r.floorTo, r.FloorCPU, r.floorProfile = f.from, f.to, f.cpu, f.apiserverProfile
			}
		}
	}
	r.FloorSeconds = round2(r.floorSeconds)
	r.FloorWritesPerApp = perApp(r.floorWrites, e.cfg.Apps)
	if err := e.empty(ctx); err != nil {
		return r, err
	}
	if err := e.product(ctx, &r); err != nil {
		return r, err
	}
	if slices.Contains(e.cfg.Scenarios, scenarioAutoscaled) {
		if err := e.empty(ctx); err != nil {
			return r, err
		}
		if err := e.autoscaled(ctx, &r); err != nil {
			return r, err
		}
	}
	if slices.Contains(e.cfg.Scenarios, scenarioPeer) {
		peer, err := e.peer(ctx, round)
		if err != nil {
			r.Converged = false
			return r, err
		}
		r.Peer = peer
	}
	if round == e.cfg.Rounds {
		return r, nil // the control plane stops next
	}
	return r, e.empty(ctx)
}

// warmUp runs a few Apps' children through the floor loop once, unmeasured.
func (e *env) warmUp(ctx context.Context) error {
	e.printf("warm-up\n")
	saved := e.cfg.Apps
	e.cfg.Apps = 5
	defer func() { e.cfg.Apps = saved }()
	_, err := runFloor(ctx, e, "bench-warmup", 5)
	return err
}

// empty deletes the harness's namespaces and waits until they are gone.
func (e *env) empty(ctx context.Context) error {
	d, err := emptyCluster(ctx, e.admin.kube, emptyStall)
	if err != nil {
		return err
	}
	if d > time.Second {
		e.printf("cluster emptied in %.1fs\n", d.Seconds())
	}
	return nil
}

// idlePeriod is how long the idle scenario watches: two resync periods and 10 s.
var idlePeriod = 2*controllermanager.DefaultResyncPeriod + 10*time.Second

// perApp divides write counts by n: the total, Events apart, and per kind.
func perApp(c writeCounts, n int) WriteBreakdown {
	w := WriteBreakdown{
		Total:          round2(float64(c.total()) / float64(n)),
		Events:         round2(float64(c.events()) / float64(n)),
		ByVerbResource: map[string]float64{},
	}
	w.ExcludingEvents = round2(w.Total - w.Events)
	kinds := make([]string, 0, len(c))
	for k := range c {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		w.ByVerbResource[k] = round2(float64(c[k]) / float64(n))
	}
	return w
}

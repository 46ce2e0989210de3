// Command appbench runs the App controller's benchmark harness (package
// test/bench): its own local control plane, the floor loops and the product's
// scenarios. `make bench` runs it; see docs/performance.md.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/app-controller/app-controller/pkg/signals"
	"github.com/app-controller/app-controller/test/bench"
)

func main() {
	cfg := bench.Config{Out: os.Stdout}
	var replicas int
	var concurrencies, batched, scenarios, out string
	var controllerFlags, controllerEnv multiFlag
	flag.IntVar(&cfg.Apps, "apps", 1000, "number of Apps of every phase")
	flag.IntVar(&replicas, "replicas", 1, "replicas of each App")
	flag.IntVar(&cfg.Rounds, "rounds", 1, "rounds of the whole sequence on the same control plane")
	flag.IntVar(&cfg.CreateClients, "create-clients", 5, "parallel clients creating the product's Apps")
	flag.StringVar(&concurrencies, "concurrencies", "5,10,20,40", "concurrencies of the interleaved floor loops (empty: none)")
	flag.StringVar(&batched, "batched-concurrencies", "5,20", "concurrencies of the batched floor loops (empty: none)")
	flag.StringVar(&scenarios, "scenarios", strings.Join(bench.DefaultScenarios, ","), "scenarios after converge (idle, restart, churn, canary; not by default: autoscaled, peer; empty: none)")
	flag.StringVar(&cfg.BinDir, "bin-dir", "bin", "directory of the control plane's binaries")
	flag.StringVar(&cfg.Controller, "controller", "bin/app-controller", "the controller binary")
	flag.Var(&controllerFlags, "controller-flag", "a flag added to the controller's defaults, e.g. --workers=10 (repeatable; the targets are measured without)")
	var memoryLimit string
	flag.StringVar(&memoryLimit, "controller-memory-limit", "", "run the controller under this memory limit (a quantity, e.g. 512Mi, the chart's default): MEMORY_LIMIT set and a memory cgroup with that hard limit (root)")
	flag.Var(&controllerEnv, "controller-env", "NAME=VALUE added to the controller's environment, e.g. KUBE_FEATURE_ClientsAllowCBOR=true (repeatable; the targets are measured without)")
	flag.StringVar(&cfg.APIServerFeatureGates, "apiserver-feature-gates", "", "kube-apiserver's --feature-gates, e.g. CBORServingAndStorage=true (the targets are measured with its defaults)")
	flag.StringVar(&cfg.CRDDir, "crd-dir", "config/crd/bases", "CRDs to install")
	flag.StringVar(&cfg.PeerController, "peer-controller", "bin/rollouts-controller", "Argo Rollouts' controller, for the peer scenario")
	flag.StringVar(&cfg.PeerCRDDir, "peer-crd-dir", "", "Argo Rollouts' CRDs (its module's manifests/crds), for the peer scenario")
	var peerSets string
	flag.StringVar(&peerSets, "peer-flags", strings.Join(bench.DefaultPeerFlagSets, ","), "the peer scenario's sets of flags: defaults, scale (each controller's flags for scale), or both")
	flag.StringVar(&cfg.WorkDir, "work-dir", ".local/bench", "state and logs of the run (must not exist or be empty)")
	flag.BoolVar(&cfg.KeepState, "keep-state", false, "keep the work directory after a successful run (always kept with -breakdown: the heap profiles and the audit log)")
	flag.BoolVar(&cfg.Breakdown, "breakdown", false, "also audit the control plane's components and report who writes what per App and the product's timeline")
	flag.StringVar(&out, "out", ".local/bench-result.json", "where to write the JSON result (empty: nowhere)")
	flag.Parse()
	cfg.Replicas = int32(replicas)
	if memoryLimit != "" {
		q, err := resource.ParseQuantity(memoryLimit)
		if err != nil {
			fmt.Fprintf(os.Stderr, "-controller-memory-limit %q: %v\n", memoryLimit, err)
			os.Exit(2)
		}
		cfg.ControllerMemoryLimit = q.Value()
	}
	cfg.ControllerFlags = controllerFlags
	cfg.ControllerEnv = controllerEnv
	cfg.PeerFlagSets = strings.Split(peerSets, ",")
	cfg.Concurrencies = concurrencyList(concurrencies)
	cfg.BatchedConcurrencies = concurrencyList(batched)
	if scenarios != "" {
		cfg.Scenarios = strings.Split(scenarios, ",")
	}
	for _, p := range []*string{&cfg.BinDir, &cfg.Controller, &cfg.CRDDir, &cfg.WorkDir, &cfg.PeerController, &cfg.PeerCRDDir} {
		if *p == "" {
			continue
		}
		abs, err := filepath.Abs(*p)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		*p = abs
	}

	cfg.ResultPath = out
	ctx := signals.SetupSignalContext()
	res, err := bench.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "appbench: %v\n(state and logs kept in %s)\n", err, cfg.WorkDir)
		os.Exit(1)
	}
	if !res.AllConverged {
		os.Exit(1)
	}
}

// concurrencyList parses a comma-separated list of positive concurrencies; "" is none.
func concurrencyList(list string) []int {
	var out []int
	for _, c := range strings.Split(list, ",") {
		if strings.TrimSpace(c) == "" {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(c))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "appbench: bad concurrency %q\n", c)
			os.Exit(2)
		}
		out = append(out, n)
	}
	return out
}

// multiFlag is a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string { return strings.Join(*m, " ") }

func (m *multiFlag) Set(v string) error {
	*m = append(*m, v)
	return nil
}

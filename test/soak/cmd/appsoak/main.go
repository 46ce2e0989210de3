// Command appsoak runs the App controller's soak test (package test/soak): its own
// local control plane, the controller in two shards of two instances, a steady churn
// of Apps and faults at intervals, then the invariants and a JSON report. `make soak`
// runs it; see docs/soak.md.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/app-controller/app-controller/internal/localcluster"
	"github.com/app-controller/app-controller/pkg/signals"
	"github.com/app-controller/app-controller/test/soak"
)

func main() {
	cfg := soak.Config{Out: os.Stdout}
	var faults string
	flag.DurationVar(&cfg.Duration, "duration", 0, "how long the churn and the faults go on (required), e.g. 30m")
	flag.StringVar(&cfg.Node, "node", localcluster.NodeKwok, "kwok (the controller as processes) or real (the chart on a real node; root)")
	flag.IntVar(&cfg.Apps, "apps", 0, fmt.Sprintf("Apps the churn keeps (0: %d on kwok, %d on a real node)", soak.DefaultApps(localcluster.NodeKwok), soak.DefaultApps(localcluster.NodeReal)))
	flag.IntVar(&cfg.Namespaces, "namespaces", 0, "namespaces the Apps are spread over (0: 3)")
	flag.Float64Var(&cfg.Rate, "rate", 0, fmt.Sprintf("scale of the mix of operations per minute (1: soak.DefaultMix; 0: %g on kwok, %g on a real node)",
		soak.DefaultRate(localcluster.NodeKwok), soak.DefaultRate(localcluster.NodeReal)))
	flag.StringVar(&faults, "faults", "", "comma-separated faults injected in turn (empty: the node's defaults; none: no fault)")
	flag.DurationVar(&cfg.FaultInterval, "fault-interval", 0, "time between faults (0: 3m30s)")
	flag.DurationVar(&cfg.FirstFault, "first-fault", 0, "time of the first fault (0: 2m)")
	flag.DurationVar(&cfg.ConvergeBound, "converge-bound", 0, "how long an App may take to converge after a change or a fault (0: 2m)")
	flag.Int64Var(&cfg.Seed, "seed", 0, "seed of the churn's choices (0: the time)")
	flag.StringVar(&cfg.UpgradeFrom, "upgrade-from", "", "real node: install the release of this revision of the repository (make release of a git worktree of it, e.g. HEAD~1) and upgrade it to this tree's chart and image mid-run (the helm-upgrade fault)")
	flag.StringVar(&cfg.Repo, "repo", ".", "the repository -upgrade-from names a revision of")
	flag.StringVar(&cfg.BinDir, "bin-dir", "bin", "directory of the control plane's binaries, kubectl, helm, imagebuild")
	flag.StringVar(&cfg.Controller, "controller", "bin/app-controller", "the controller binary (kwok)")
	flag.StringVar(&cfg.Chart, "chart", "charts/app-controller", "the chart (real node)")
	flag.StringVar(&cfg.ImageLayout, "image-layout", "bin/image/oci", "the controller image's OCI layout, from make image (real node)")
	flag.StringVar(&cfg.CRDDir, "crd-dir", "config/crd/bases", "CRDs to install (kwok)")
	flag.StringVar(&cfg.WorkDir, "work-dir", ".local/soak/run", "state and logs of the run (must not exist or be empty)")
	flag.StringVar(&cfg.ReportPath, "out", ".local/soak/report.json", "where to write the JSON report")
	flag.Parse()
	switch faults {
	case "":
	case "none":
		cfg.Faults = []string{}
	default:
		cfg.Faults = strings.Split(faults, ",")
	}
	for _, p := range []*string{&cfg.BinDir, &cfg.Controller, &cfg.Chart, &cfg.ImageLayout, &cfg.CRDDir, &cfg.WorkDir, &cfg.ReportPath, &cfg.Repo} {
		abs, err := filepath.Abs(*p)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		*p = abs
	}
	if entries, err := os.ReadDir(cfg.WorkDir); err == nil && len(entries) > 0 {
		fmt.Fprintf(os.Stderr, "appsoak: the work directory %s is not empty (left from an earlier run?): remove it\n", cfg.WorkDir)
		os.Exit(2)
	}
	ctx := signals.SetupSignalContext()
	report, err := soak.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "appsoak: %v\n(state and logs kept in %s)\n", err, cfg.WorkDir)
		os.Exit(1)
	}
	if !report.Passed {
		fmt.Fprintf(os.Stderr, "appsoak: the soak failed (report %s, logs in %s)\n", cfg.ReportPath, cfg.WorkDir)
		os.Exit(1)
	}
}

package bench

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/app-controller/app-controller/test/integration/framework"
)

// benchmarks lists the benchmarks of this package; TestMain starts a control plane only
// when -bench selects one of them.
var benchmarks = []string{"BenchmarkConvergence"}

var (
	appsFlag     = flag.Int("bench.apps", envInt("APP_CONTROLLER_BENCH_APPS", 100), "number of Apps of BenchmarkConvergence ($APP_CONTROLLER_BENCH_APPS)")
	replicasFlag = flag.Int("bench.replicas", envInt("APP_CONTROLLER_BENCH_REPLICAS", 1), "replicas of each App's Deployment ($APP_CONTROLLER_BENCH_REPLICAS)")
	roundsFlag   = flag.Int("bench.rounds", envInt("APP_CONTROLLER_BENCH_ROUNDS", 2), "rounds of floor and app phases per iteration, in alternating order ($APP_CONTROLLER_BENCH_ROUNDS)")
)

// TestMain starts the control plane through framework.Main, which runs m.Run (tests and
// benchmarks alike) and stops it. Without -bench there is nothing to run here, so no
// control plane is started: `make unit` (go test ./...) stays fast and needs no binaries.
func TestMain(m *testing.M) {
	flag.Parse()
	if !benchmarkSelected(flag.Lookup("test.bench").Value.String()) {
		os.Exit(m.Run())
	}
	framework.Main(m)
}

// benchmarkSelected tells whether the -bench pattern selects a benchmark of this package
// (its top-level part; the testing package reports an invalid pattern itself).
func benchmarkSelected(pattern string) bool {
	if pattern == "" {
		return false
	}
	top, _, _ := strings.Cut(pattern, "/")
	re, err := regexp.Compile(top)
	if err != nil {
		return true
	}
	for _, name := range benchmarks {
		if re.MatchString(name) {
			return true
		}
	}
	return false
}

func envInt(name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		fmt.Fprintf(os.Stderr, "bench: $%s=%q is not a positive integer; using %d\n", name, v, def)
		return def
	}
	return n
}

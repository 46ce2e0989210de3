package controllermanager

import (
	"runtime/debug"
	"testing"

	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2/ktesting"
)

func TestSetMemoryLimit(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })

	t.Setenv("GOMEMLIMIT", "")
	t.Setenv(MemoryLimitEnv, "536870912") // 512Mi
	if err := SetMemoryLimit(logger); err != nil {
		t.Fatal(err)
	}
	if got, want := debug.SetMemoryLimit(-1), int64(483183820); got != want {
		t.Errorf("soft limit %d, want %d (90%% of 512Mi)", got, want)
	}
	if v, err := testutil.GetGaugeMetricValue(memoryLimit); err != nil || v != 536870912 {
		t.Errorf("app_controller_memory_limit_bytes = %v, %v", v, err)
	}

	t.Setenv(MemoryLimitEnv, "lots")
	if err := SetMemoryLimit(logger); err == nil {
		t.Errorf("MEMORY_LIMIT=lots accepted")
	}
}

func TestSetGCPercent(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	before := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(before) })

	t.Setenv("GOGC", "")
	SetGCPercent(logger)
	if got := debug.SetGCPercent(100); got != gcPercent {
		t.Errorf("GOGC unset: the collector's target is %d, want %d", got, gcPercent)
	}

	t.Setenv("GOGC", "100")
	SetGCPercent(logger)
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC=100: the collector's target is %d, want it left at 100", got)
	}
}

package controllermanager

import (
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"strconv"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
)

// MemoryLimitEnv names the environment variable that holds the container's memory limit
// in bytes, set from the downward API (resourceFieldRef limits.memory) by config/manager
// and the chart.
const MemoryLimitEnv = "MEMORY_LIMIT"

// memoryLimitShare is the share of the container's memory limit given to the Go runtime
// as its soft limit (GOMEMLIMIT): the rest is for what the runtime does not count
// (thread stacks, the binary's text, cgroup page cache), so that the garbage collector
// works harder before the kernel kills the process, not after.
const memoryLimitShare = 0.9

// gcPercent is the garbage collector's target (the runtime's GOGC) unless GOGC is set:
// the heap may grow by half its live size between collections instead of Go's default,
// as much again. What the controller keeps alive is mostly its informers' objects, so
// the heap's headroom is most of its resident memory above the live heap: at 1000 Apps
// of 1 replica, 42 MiB of resident memory per 1000 Apps instead of 54, for 7% more of
// the controller's own CPU while they converge (docs/performance.md, Memory).
const gcPercent = 50

var memoryLimit = metrics.NewGauge(&metrics.GaugeOpts{
	Namespace:      "app_controller",
	Name:           "memory_limit_bytes",
	Help:           "The container's memory limit (" + MemoryLimitEnv + "), which the AppControllerMemoryNearLimit alert compares the resident memory with; 0 when not known.",
	StabilityLevel: metrics.ALPHA,
})

func init() { legacyregistry.MustRegister(memoryLimit) }

// SetGCPercent gives the garbage collector its target, gcPercent, unless GOGC is set, in
// which case the runtime has already read it and it is left as it is.
func SetGCPercent(logger klog.Logger) {
	if value := os.Getenv("GOGC"); value != "" {
		logger.Info("GOGC is set: the garbage collector's target is left as it is", "GOGC", value)
		return
	}
	debug.SetGCPercent(gcPercent)
	logger.V(2).Info("Set the garbage collector's target", "gcPercent", gcPercent)
}

// SetMemoryLimit reads the container's memory limit from MEMORY_LIMIT, exports it as
// app_controller_memory_limit_bytes and, unless GOMEMLIMIT is set, gives the Go runtime
// memoryLimitShare of it as its soft limit. Without MEMORY_LIMIT it does nothing.
func SetMemoryLimit(logger klog.Logger) error {
	value := os.Getenv(MemoryLimitEnv)
	if value == "" {
		return nil
	}
	limit, err := strconv.ParseInt(value, 10, 64)
	if err != nil || limit <= 0 {
		return fmt.Errorf("%s=%q: want the memory limit in bytes", MemoryLimitEnv, value)
	}
	memoryLimit.Set(float64(limit))
	if os.Getenv("GOMEMLIMIT") != "" {
		logger.Info("GOMEMLIMIT is set: the Go runtime's soft memory limit is left as it is", "memoryLimit", limit)
		return nil
	}
	soft := int64(math.Floor(float64(limit) * memoryLimitShare))
	debug.SetMemoryLimit(soft)
	logger.Info("Set the Go runtime's soft memory limit", "memoryLimit", limit, "softLimit", soft)
	return nil
}

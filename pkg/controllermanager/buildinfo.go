package controllermanager

import (
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/app-controller/app-controller/pkg/version"
)

// The build of the process on /metrics, as kubernetes_build_info does for Kubernetes
// components: a constant 1 labelled with what `app-controller --version` prints.
func init() {
	registerBuildInfo(legacyregistry.MustRegister, version.Get())
}

// registerBuildInfo registers the gauge app_controller_build_info{version,commit,
// go_version} with register and sets it to 1 for info.
func registerBuildInfo(register func(...metrics.Registerable), info version.Info) {
	buildInfo := newBuildInfo()
	register(buildInfo)
	buildInfo.WithLabelValues(info.Version, info.Commit, info.GoVersion).Set(1)
}

// newBuildInfo returns the gauge app_controller_build_info, unregistered.
func newBuildInfo() *metrics.GaugeVec {
	return metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace:      "app_controller",
		Name:           "build_info",
		Help:           "A metric with a constant '1' value labeled by the version, git commit and Go version app-controller was built from.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"version", "commit", "go_version"})
}

// Metrics returns the metrics the controller manager itself registers, and the
// collectors it computes at scrape time, for the reference page docs/reference/metrics.md
// (hack/refdocs).
func Metrics() ([]metrics.Registerable, []metrics.StableCollector) {
	return []metrics.Registerable{newBuildInfo(), memoryLimit}, []metrics.StableCollector{&storeCollector{}}
}

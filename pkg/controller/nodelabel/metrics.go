package nodelabel

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// configValid is app_controller_node_label_config_valid: 1 when the --node-label-config
// file was loaded, 0 when it could not be read or is invalid (the node labeler is then
// disabled and the other controllers run). Absent when the labeler has no file or is
// disabled with --controllers, so that an alert on == 0 fires only on a bad file.
var (
	configValid = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace:      "app_controller",
		Name:           "node_label_config_valid",
		Help:           "Whether the node labeler's --node-label-config file was loaded (1) or could not be read or is invalid (0), which disables the node labeler",
		StabilityLevel: metrics.ALPHA,
	})
	registerConfigValid sync.Once
)

// Metrics returns the node labeler's metrics, as registered on /metrics; the reference
// page docs/reference/metrics.md is generated from them (hack/refdocs).
func Metrics() []metrics.Registerable { return []metrics.Registerable{configValid} }

// RecordConfigValid sets app_controller_node_label_config_valid, registering it in the
// legacy registry (served on /metrics) the first time.
func RecordConfigValid(valid bool) {
	registerConfigValid.Do(func() { legacyregistry.MustRegister(Metrics()...) })
	if valid {
		configValid.Set(1)
	} else {
		configValid.Set(0)
	}
}

package analysis

import (
	"fmt"
	"time"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// Target is what a check measures: the names the App knows of its canary and its
// stable version. They are also the variables of a query check's template.
type Target struct {
	// Namespace and App name the App.
	Namespace, App string
	// CanaryService and StableService are the Services the App's HTTPRoute splits the
	// traffic between (the App's Service name + "-canary", + "-stable").
	CanaryService, StableService string
	// CanaryDeployment and StableDeployment run the canary and the stable pods.
	CanaryDeployment, StableDeployment string
	// Gateway: the App's route is an HTTPRoute, so the built-in checks read the
	// Gateway's metrics unless the check asks for the pods'.
	Gateway bool
	// Revision is the canary's revision and Step the rollout's step (the webhook's body).
	Revision string
	Step     int32
}

// queryVars are the variables of a query check's template.
type queryVars struct {
	Namespace, App                     string
	CanaryService, StableService       string
	CanaryDeployment, StableDeployment string
	// Interval is the check's interval as a PromQL duration ("60s").
	Interval string
	// Args are the arguments of a template's query (AnalysisTemplate.spec.args).
	Args map[string]string
}

// Source returns where check c's built-in measurement reads: its source, else the
// Gateway when the App's route is an HTTPRoute, else the pods.
func (t Target) Source(c *appv1.AnalysisCheck) appv1.AnalysisSource {
	if c.Source != "" {
		return c.Source
	}
	if t.Gateway {
		return appv1.AnalysisSourceGateway
	}
	return appv1.AnalysisSourcePods
}

// Interval returns check c's interval: 1m unset, never under the API's floor.
func Interval(c *appv1.AnalysisCheck) time.Duration {
	d := time.Minute
	if c.Interval != nil {
		d = c.Interval.Duration
	}
	return max(d, 10*time.Second)
}

// promDuration writes d as a PromQL duration in whole seconds ("60s").
func promDuration(d time.Duration) string {
	return fmt.Sprintf("%ds", int64(d/time.Second))
}

// humanDuration writes d as users read it in a message ("1m", "30s", "1m30s").
func humanDuration(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d >= time.Hour && d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d >= time.Minute && d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return d.String()
}

// IsMetric reports whether check c queries Prometheus (every check but a webhook).
func IsMetric(c *appv1.AnalysisCheck) bool { return c.Webhook == nil }

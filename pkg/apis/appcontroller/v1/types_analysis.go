package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Canary analysis: checks that judge a canary by what its users get (docs/progressive-delivery.md).
// A step {analysis: {checks: [...]}} passes on evidence instead of time; canary.analysis
// runs checks in the background from a step to the promotion. A check is a built-in
// (successRate, latency: no query to write), a PromQL query, a template's query
// (templateRef: an AnalysisTemplate or ClusterAnalysisTemplate, types_analysistemplate.go),
// or a webhook gate.

// AnalysisIntervalFloor is the shortest interval of a check: the controller makes one
// query per check per interval per App, and Prometheus scrapes every 15 s by default.
const AnalysisIntervalFloor = "10s"

// AnalysisStep is a step of a canary rollout that passes when every check passes its
// count, and aborts the rollout when a check fails more than its failureLimit.
type AnalysisStep struct {
	// Checks, each with its own interval and count. The step ends once every one has
	// passed count times.
	// +required
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	Checks []AnalysisCheck `json:"checks"`
}

// BackgroundAnalysis runs checks from a step until the promotion: a failure aborts the
// rollout whatever step it is at; passes move nothing (the steps do).
type BackgroundAnalysis struct {
	// StartingStep is the index of the step the checks start at (0: the first).
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=31
	StartingStep int32 `json:"startingStep,omitempty"`

	// Checks run at their interval from startingStep on. Their count is ignored: they
	// run until the promotion; only failures count.
	// +required
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	Checks []AnalysisCheck `json:"checks"`
}

// AnalysisSource is where the built-in checks read the requests of the canary and the
// stable pods.
// +kubebuilder:validation:Enum=Gateway;Pods
type AnalysisSource string

const (
	// AnalysisSourceGateway reads the Gateway's metrics of the App's HTTPRoute backends,
	// the canary and stable Services: Traefik's traefik_service_requests_total and
	// traefik_service_request_duration_seconds_bucket.
	AnalysisSourceGateway AnalysisSource = "Gateway"
	// AnalysisSourcePods reads the pods' own http_requests_total{code} and
	// http_request_duration_seconds_bucket, selected by namespace and the pod names of
	// the canary and stable Deployments (as Flagger does).
	AnalysisSourcePods AnalysisSource = "Pods"
)

// AnalysisCheck is one check: exactly one of successRate, latency, query, templateRef and
// webhook.
//
// +kubebuilder:validation:XValidation:rule="[has(self.successRate), has(self.latency), has(self.query), has(self.templateRef), has(self.webhook)].filter(x, x).size() == 1",message="each check sets exactly one of successRate, latency, query, templateRef and webhook"
// +kubebuilder:validation:XValidation:rule="!has(self.source) || has(self.successRate) || has(self.latency)",message="source applies to the built-in checks successRate and latency only",fieldPath=".source"
// +kubebuilder:validation:XValidation:rule="!has(self.minRequests) || has(self.successRate) || has(self.latency)",message="minRequests applies to the built-in checks successRate and latency only",fieldPath=".minRequests"
type AnalysisCheck struct {
	// Name of the check, unique in its list: status, Events and the abort message name it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// SuccessRate: the canary's share of requests not answered 5xx, in percent, over the
	// interval.
	// +optional
	SuccessRate *SuccessRateCheck `json:"successRate,omitempty"`

	// Latency: a percentile of the canary's request duration, in milliseconds, over the
	// interval.
	// +optional
	Latency *LatencyCheck `json:"latency,omitempty"`

	// Query: a PromQL query of your own, with the App's variables, and the ranges its
	// value passes or fails in.
	// +optional
	Query *QueryCheck `json:"query,omitempty"`

	// TemplateRef: the query of an AnalysisTemplate of the App's namespace or of a
	// ClusterAnalysisTemplate, with the values of its arguments. The API cannot know
	// whether the template exists: a check whose template is missing holds its step,
	// says so (reason AnalysisTemplateNotFound) and aborts the rollout at the progress
	// deadline.
	// +optional
	TemplateRef *AnalysisTemplateRef `json:"templateRef,omitempty"`

	// Webhook: an HTTP call (a load or acceptance test, a manual gate) that passes on a
	// 2xx answer.
	// +optional
	Webhook *WebhookCheck `json:"webhook,omitempty"`

	// Source of the built-in checks: Gateway (the metrics of the Gateway that serves the
	// App's HTTPRoute) or Pods (the pods' own). Unset: Gateway when the App's route is
	// an HTTPRoute, else Pods.
	// +optional
	Source AnalysisSource `json:"source,omitempty"`

	// Interval between two measurements, and the window a built-in check measures over;
	// at least 10s, at most 1h. Defaults to 1m.
	// +optional
	// +kubebuilder:default="1m"
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+(ms|s|m|h))+$') && duration(self) >= duration('10s') && duration(self) <= duration('1h')",message="interval must be from 10s to 1h in whole units (10s, 1m, 2m30s): the controller makes one query per check per interval per App"
	Interval *metav1.Duration `json:"interval,omitempty"`

	// Count is how many passing measurements end an analysis step (ignored in
	// canary.analysis, which runs until the promotion). Defaults to 1.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	Count *int32 `json:"count,omitempty"`

	// FailureLimit is how many failed measurements the check tolerates: one more aborts
	// the rollout. Defaults to 0: the first failure aborts.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	FailureLimit int32 `json:"failureLimit,omitempty"`

	// MinRequests is how many requests the canary (and the stable, for a relative
	// threshold) must have answered over the interval for a built-in check to judge it:
	// fewer is inconclusive, neither a pass nor a failure. An analysis that stays
	// inconclusive aborts at the progress deadline (progressDeadlineSeconds), saying so.
	// Unset: 10 (no schema default: it applies to the built-in checks only).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	MinRequests *int32 `json:"minRequests,omitempty"`
}

// SuccessRateCheck is the canary's success rate: the percent of its requests not
// answered 5xx. At least one of min and stableMargin.
//
// +kubebuilder:validation:XValidation:rule="has(self.min) || has(self.stableMargin)",message="successRate sets min, stableMargin or both"
type SuccessRateCheck struct {
	// Min is the lowest success rate that passes, in percent, from 0 to 100 ("99",
	// "99.9").
	// +optional
	// +kubebuilder:validation:Pattern=`^[0-9]{1,3}(\.[0-9]{1,3})?$`
	// +kubebuilder:validation:XValidation:rule="double(self) <= 100.0",message="successRate.min is a percent: from 0 to 100"
	Min *string `json:"min,omitempty"`

	// StableMargin is a relative threshold: the canary's success rate passes when it is
	// at most this many points below the stable's over the same window ("1": stable at
	// 95%, canary at 94% or more passes). A whole-system incident lowers both and aborts
	// nothing; a canary worse than the stable is caught however loose min is.
	// +optional
	// +kubebuilder:validation:Pattern=`^[0-9]{1,3}(\.[0-9]{1,3})?$`
	// +kubebuilder:validation:XValidation:rule="double(self) <= 100.0",message="successRate.stableMargin is in percent points: from 0 to 100"
	StableMargin *string `json:"stableMargin,omitempty"`
}

// LatencyCheck is a percentile of the canary's request duration. At least one of maxMs
// and stableFactor.
//
// +kubebuilder:validation:XValidation:rule="has(self.maxMs) || has(self.stableFactor)",message="latency sets maxMs, stableFactor or both"
type LatencyCheck struct {
	// Percentile of the request durations, from 50 to 99. Defaults to 99.
	// +optional
	// +kubebuilder:default=99
	// +kubebuilder:validation:Minimum=50
	// +kubebuilder:validation:Maximum=99
	Percentile *int32 `json:"percentile,omitempty"`

	// MaxMs is the highest percentile that passes, in milliseconds.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=600000
	MaxMs *int32 `json:"maxMs,omitempty"`

	// StableFactor is a relative threshold: the canary's percentile passes when it is at
	// most this many times the stable's over the same window ("1.5"), from 1 to 100.
	// +optional
	// +kubebuilder:validation:Pattern=`^[0-9]{1,3}(\.[0-9]{1,3})?$`
	// +kubebuilder:validation:XValidation:rule="double(self) >= 1.0 && double(self) <= 100.0",message="latency.stableFactor is a factor of the stable's latency: from 1 to 100"
	StableFactor *string `json:"stableFactor,omitempty"`
}

// QueryCheck is a PromQL query whose value (a scalar, or a vector of one sample) is
// judged by ranges. The query is a template: {{.Namespace}}, {{.App}},
// {{.CanaryService}}, {{.StableService}}, {{.CanaryDeployment}},
// {{.StableDeployment}}, {{.Interval}} (a PromQL duration such as 1m) are replaced by
// the App's. At least one of successCondition and failureCondition.
//
// +kubebuilder:validation:XValidation:rule="has(self.successCondition) || has(self.failureCondition)",message="query sets successCondition, failureCondition or both"
type QueryCheck struct {
	// PromQL is the query, with the App's variables.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	PromQL string `json:"promql"`

	// SuccessCondition: the value passes when it is in this range; out of it, it fails
	// (unless failureCondition is set: then out of both is inconclusive).
	// +optional
	SuccessCondition *ValueRange `json:"successCondition,omitempty"`

	// FailureCondition: the value fails when it is in this range; unset, any value out
	// of successCondition fails.
	// +optional
	FailureCondition *ValueRange `json:"failureCondition,omitempty"`
}

// ValueRange is a closed range of a query's value: min, max or both.
//
// +kubebuilder:validation:XValidation:rule="has(self.min) || has(self.max)",message="a range sets min, max or both"
// +kubebuilder:validation:XValidation:rule="!has(self.min) || !has(self.max) || double(self.min) <= double(self.max)",message="a range's min must not be above its max"
type ValueRange struct {
	// Min, a decimal number ("0.99", "-1", "1e3" is not accepted: "1000").
	// +optional
	// +kubebuilder:validation:Pattern=`^-?[0-9]{1,15}(\.[0-9]{1,9})?$`
	Min *string `json:"min,omitempty"`
	// Max, a decimal number.
	// +optional
	// +kubebuilder:validation:Pattern=`^-?[0-9]{1,15}(\.[0-9]{1,9})?$`
	Max *string `json:"max,omitempty"`
}

// WebhookCheck calls a URL: a 2xx answer passes, any other answer or no answer fails
// (after its retries). The body is a JSON object naming the App, its namespace, the
// canary's revision and the step.
type WebhookCheck struct {
	// URL to POST to, http or https.
	// +required
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && (self.startsWith('http://') || self.startsWith('https://'))",message="webhook.url must be an http or https URL"
	URL string `json:"url"`

	// TimeoutSeconds bounds one call, from 1 to 60. Defaults to 10.
	// +optional
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=60
	TimeoutSeconds *int32 `json:"timeoutSeconds,omitempty"`

	// Retries is how many more calls a measurement makes after a call that did not
	// answer 2xx, from 0 to 5. Defaults to 2.
	// +optional
	// +kubebuilder:default=2
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=5
	Retries *int32 `json:"retries,omitempty"`
}

// AnalysisPhase is the result of a check's measurement.
// +kubebuilder:validation:Enum=Passed;Failed;Inconclusive;Error
type AnalysisPhase string

const (
	// AnalysisPassed: the value is within the threshold.
	AnalysisPassed AnalysisPhase = "Passed"
	// AnalysisFailed: the value is beyond the threshold.
	AnalysisFailed AnalysisPhase = "Failed"
	// AnalysisInconclusive: no data, or too few requests to judge.
	AnalysisInconclusive AnalysisPhase = "Inconclusive"
	// AnalysisError: the measurement could not be made (Prometheus unreachable, a
	// query it refused); it counts as inconclusive.
	AnalysisError AnalysisPhase = "Error"
)

// CheckStatus is the state of one check of the current analysis: its counts (so that a
// restarted controller goes on from them) and its last measurement.
type CheckStatus struct {
	// Name of the check.
	Name string `json:"name"`
	// Template the check's query came from ("AnalysisTemplate/error-rate",
	// "ClusterAnalysisTemplate/p95"); empty for a check of its own.
	// +optional
	Template string `json:"template,omitempty"`
	// Reason says why a check was not measured: AnalysisTemplateNotFound (its template
	// does not exist) or AnalysisTemplateInvalid (its arguments do not fit the
	// template); empty when it was.
	// +optional
	Reason string `json:"reason,omitempty"`
	// Step is the index of the analysis step the check belongs to; -1 for
	// canary.analysis.
	Step int32 `json:"step"`
	// Phase is the result of the last measurement.
	// +optional
	Phase AnalysisPhase `json:"phase,omitempty"`
	// Value measured, as users read it ("89.6%", "812ms", "0.42", "HTTP 500").
	// +optional
	Value string `json:"value,omitempty"`
	// Threshold it was judged against (">= 99%", "<= 500ms", "<= stable 120ms x 1.5").
	// +optional
	Threshold string `json:"threshold,omitempty"`
	// Message says the measurement in one line: "success rate 89.6% < 99% over 1m (canary web-canary)".
	// +optional
	Message string `json:"message,omitempty"`
	// MeasuredAt is when the last measurement was made; the next is due an interval later.
	// +optional
	MeasuredAt *metav1.Time `json:"measuredAt,omitempty"`
	// Passed, Failed and Inconclusive count the measurements of the check in this step
	// (errors count as inconclusive).
	// +optional
	Passed int32 `json:"passed,omitempty"`
	// +optional
	Failed int32 `json:"failed,omitempty"`
	// +optional
	Inconclusive int32 `json:"inconclusive,omitempty"`
}

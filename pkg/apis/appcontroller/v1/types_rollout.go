package v1

import (
	"encoding/json"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Rollout is how a change of the App's pods reaches them. Unset, every change of the pod
// template rolls all the pods at once through the Deployment's own strategy. With a
// canary, a change of the pod template (image, env, a referenced ConfigMap or Secret, a
// restart) runs first in a canary Deployment (the Deployment's name + "-canary") that
// takes a growing share of the traffic, step by step; a canary pod that fails aborts
// the rollout and sends all traffic back to the stable pods; after the last step the
// new template becomes the stable Deployment's. The share is a weight on the App's
// HTTPRoute when its route is one (route.parentRefs), else a share of the replicas
// behind the App's Service (10 replicas at 20%: 2 canary pods, 8 stable).
// `kubectl app status` shows where a rollout is; `kubectl app promote`, `abort`,
// `pause` and `resume` act on it. With blueGreen instead, the new template runs in full
// beside the old one and the App's Service switches to it at once. Exactly one of canary
// and blueGreen. docs/progressive-delivery.md tells the whole story.
//
// Example: 25% of the traffic for five minutes, then 50% until promoted, then all.
//
//	rollout:
//	  canary:
//	    steps:
//	    - setWeight: 25
//	    - pause: {duration: 5m}
//	    - setWeight: 50
//	    - pause: {}
//
// +kubebuilder:validation:XValidation:rule="has(self.canary) != has(self.blueGreen)",message="rollout: set exactly one of canary and blueGreen"
type Rollout struct {
	// Canary rolls a new pod template out in steps beside the stable one.
	// +optional
	Canary *CanaryStrategy `json:"canary,omitempty"`

	// BlueGreen runs a new pod template in full beside the active one, behind a preview
	// Service, and switches all the traffic to it at once (types_bluegreen.go).
	// +optional
	BlueGreen *BlueGreenStrategy `json:"blueGreen,omitempty"`

	// VersionedConfig gives each version of the pods its own immutable copy of every
	// ConfigMap and Secret they reference, named NAME-HASH after the data, owned by the
	// App: a config change rolls out through the steps while the stable pods keep
	// reading the old copy, an abort leaves them untouched, and a rollback brings the
	// config back with the code. Copies no kept revision needs are deleted with the
	// revisions. Requires configChangePolicy Rollout (the default).
	// docs/progressive-delivery.md, "Config that belongs to a version".
	// +optional
	VersionedConfig bool `json:"versionedConfig,omitempty"`
}

// CanaryStrategy is the steps of a canary rollout and its thresholds.
//
// +kubebuilder:validation:XValidation:rule="!has(self.analysis) || !has(self.analysis.startingStep) || self.analysis.startingStep < size(self.steps)",message="rollout.canary.analysis.startingStep must be the index of one of the steps",fieldPath=".analysis.startingStep"
type CanaryStrategy struct {
	// Steps, in order, each setting the canary's weight or pausing. The weights must
	// not go down. After the last step the rollout is promoted: the stable Deployment
	// gets the new template.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:XValidation:rule="self.filter(s, has(s.setWeight)).map(s, s.setWeight).isSorted()",message="rollout.canary.steps: the setWeight values must not go down: a canary only gains traffic until it is promoted (kubectl app abort sends all of it back)"
	Steps []CanaryStep `json:"steps"`

	// ScaleDownDelaySeconds is how long the canary Deployment stays after a promotion
	// once no traffic goes to it, for requests in flight and Gateways that apply routes
	// late; then it is deleted. Defaults to 30.
	// +optional
	// +kubebuilder:default=30
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=3600
	ScaleDownDelaySeconds *int32 `json:"scaleDownDelaySeconds,omitempty"`

	// AbortScaleDownDelaySeconds is how long the canary pods stay after an abort once
	// no traffic goes to them through the HTTPRoute, to look at them; then they are
	// scaled to 0. Without an HTTPRoute the canary pods take traffic as long as they
	// run, so an abort scales them to 0 at once. Defaults to 30.
	// +optional
	// +kubebuilder:default=30
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=86400
	AbortScaleDownDelaySeconds *int32 `json:"abortScaleDownDelaySeconds,omitempty"`

	// ProgressDeadlineSeconds is how long a setWeight step may take to bring its canary
	// pods up and its weight into effect before the rollout aborts (reason
	// ProgressDeadlineExceeded). Pauses do not count. Defaults to 600.
	// +optional
	// +kubebuilder:default=600
	// +kubebuilder:validation:Minimum=10
	// +kubebuilder:validation:Maximum=86400
	ProgressDeadlineSeconds *int32 `json:"progressDeadlineSeconds,omitempty"`

	// ReadyDeadlineSeconds is how long a canary pod may be not ready, counted from its
	// creation, before the rollout aborts with what keeps it from being ready
	// (ContainerNotReady, Unschedulable). A canary pod whose image cannot be pulled,
	// whose container cannot be created, exits or is OOMKilled aborts the rollout at
	// once. Defaults to 120.
	// +optional
	// +kubebuilder:default=120
	// +kubebuilder:validation:Minimum=10
	// +kubebuilder:validation:Maximum=3600
	ReadyDeadlineSeconds *int32 `json:"readyDeadlineSeconds,omitempty"`

	// RollbackWindow is how many of the most recent stable pod templates a change may
	// go back to at once, without the steps (a `kubectl app rollback`, a revert in Git):
	// they ran as stable before. A change back to the current stable template during a
	// rollout always ends it at once. 0 turns the window off. Defaults to 3.
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10
	RollbackWindow *int32 `json:"rollbackWindow,omitempty"`

	// Analysis runs checks in the background from a step (startingStep) until the
	// promotion: a check that fails beyond its failureLimit aborts the rollout at any
	// step (reason AnalysisFailed). Analysis steps ({analysis: {checks}}) are the other
	// way: they hold the rollout until their checks pass.
	// +optional
	Analysis *BackgroundAnalysis `json:"analysis,omitempty"`
}

// CanaryStep is one step of a canary rollout: exactly one of setWeight, pause,
// analysis, setHeaderRoute and setMirrorRoute.
//
// +kubebuilder:validation:XValidation:rule="[has(self.setWeight), has(self.pause), has(self.analysis), has(self.setHeaderRoute), has(self.setMirrorRoute)].filter(x, x).size() == 1",message="rollout.canary.steps: each step sets exactly one of setWeight, pause, analysis, setHeaderRoute and setMirrorRoute"
type CanaryStep struct {
	// SetWeight is the percent of the traffic the canary takes from this step on, from
	// 0 to 100: through the App's HTTPRoute, its weight (the canary first runs enough
	// pods, the weight's share of the stable's, rounded up); without one, the canary's
	// share of the App's replicas, rounded up for the canary and for the stable
	// (which keeps at least one pod), so that 1 replica at 20% runs one pod of each. The step ends when the canary's pods
	// are available and the weight is in effect.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	SetWeight *int32 `json:"setWeight,omitempty"`

	// Pause holds the rollout at the current weight: for duration, or, with no
	// duration, until `kubectl app promote`.
	// +optional
	Pause *CanaryPause `json:"pause,omitempty"`

	// Analysis holds the rollout at the current weight until every check has passed its
	// count; a check that fails beyond its failureLimit aborts the rollout (reason
	// AnalysisFailed), and one that stays inconclusive (too little traffic) aborts it at
	// progressDeadlineSeconds.
	// +optional
	Analysis *AnalysisStep `json:"analysis,omitempty"`

	// SetHeaderRoute sends the requests that match a header or a cookie to the canary
	// from this step on, the others by weight (types_routing.go). HTTPRoute only.
	// +optional
	SetHeaderRoute *HeaderRoute `json:"setHeaderRoute,omitempty"`

	// SetMirrorRoute copies a percentage of the requests to the canary from this step
	// on, its answers dropped (types_routing.go). HTTPRoute only.
	// +optional
	SetMirrorRoute *MirrorRoute `json:"setMirrorRoute,omitempty"`
}

// String describes the step as users read it: "setWeight 25", "pause 5m0s", "pause
// until promoted".
func (s CanaryStep) String() string {
	switch {
	case s.SetWeight != nil:
		return fmt.Sprintf("setWeight %d", *s.SetWeight)
	case s.Pause != nil && s.Pause.Duration != nil:
		return "pause " + s.Pause.Duration.Duration.String()
	case s.Analysis != nil:
		names := make([]string, len(s.Analysis.Checks))
		for i, c := range s.Analysis.Checks {
			names[i] = c.Name
		}
		return "analysis " + strings.Join(names, ", ")
	case s.SetHeaderRoute != nil:
		return "setHeaderRoute: " + s.SetHeaderRoute.String()
	case s.SetMirrorRoute != nil:
		return "setMirrorRoute: " + s.SetMirrorRoute.String()
	}
	return "pause until promoted"
}

// CanaryPause is a pause of a canary rollout.
type CanaryPause struct {
	// Duration of the pause, from 1s to 24h in whole units ("30s", "5m", "1h30m"). Unset, the
	// rollout waits for `kubectl app promote` (or abort, or a change of the App).
	// +optional
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+(ns|us|ms|s|m|h))+$') && duration(self) >= duration('1s') && duration(self) <= duration('24h')",message="rollout.canary.steps[].pause.duration must be from 1s to 24h in whole units (30s, 5m, 1h30m): for a pause until kubectl app promote, leave duration out"
	Duration *metav1.Duration `json:"duration,omitempty"`
}

// RolloutPhase is where an App's canary rollout is.
// +kubebuilder:validation:Enum=Healthy;Progressing;Paused;Aborted
type RolloutPhase string

const (
	// RolloutHealthy: no rollout runs; the stable Deployment runs the App's pod
	// template.
	RolloutHealthy RolloutPhase = "Healthy"
	// RolloutProgressing: the canary runs the new pod template and the steps advance,
	// or the rollout is being promoted (currentStepIndex is the number of steps).
	RolloutProgressing RolloutPhase = "Progressing"
	// RolloutPaused: at a pause step, or paused by `kubectl app pause`.
	RolloutPaused RolloutPhase = "Paused"
	// RolloutAborted: a canary pod failed, the progress deadline passed, or `kubectl app
	// abort` asked: all traffic is back on the stable pods, and the App waits for a new
	// change or `kubectl app promote` (which retries).
	RolloutAborted RolloutPhase = "Aborted"
)

// RolloutStatus is the state of an App's canary rollout. It is what the controller goes
// on from (a restarted controller resumes at the same step, with the same weights), and
// it is not in Git: re-applying the App's manifest neither undoes a promotion nor
// restarts an aborted rollout.
type RolloutStatus struct {
	// Phase: Healthy, Progressing, Paused or Aborted.
	// +optional
	Phase RolloutPhase `json:"phase,omitempty"`

	// Message says in one line where the rollout is and what it waits for.
	// +optional
	Message string `json:"message,omitempty"`

	// CurrentStepIndex is the index of the step the rollout is at; the number of steps
	// while it is being promoted.
	// +optional
	CurrentStepIndex int32 `json:"currentStepIndex,omitempty"`

	// StepStartedAt is when the current step started (a pause's duration counts from
	// it, and so does the progress deadline of a setWeight step).
	// +optional
	StepStartedAt *metav1.Time `json:"stepStartedAt,omitempty"`

	// CanaryWeight is the canary's share of the traffic, in percent, that the current
	// step asks for: the weight of the last setWeight step reached.
	// +optional
	CanaryWeight int32 `json:"canaryWeight,omitempty"`

	// Stable is the version of the pods that serve when no rollout runs.
	// +optional
	Stable *RolloutVersion `json:"stable,omitempty"`

	// Canary is the version the rollout brings; unset when none runs.
	// +optional
	Canary *RolloutVersion `json:"canary,omitempty"`

	// PausedByRequest is true from `kubectl app pause` until `kubectl app resume` or
	// `promote`.
	// +optional
	PausedByRequest bool `json:"pausedByRequest,omitempty"`

	// AbortReason is why the rollout was aborted: a reason of the App's pods
	// (ImagePullFailed, CrashLoopBackOff, ...), ProgressDeadlineExceeded, AbortRequested,
	// AnalysisFailed (a check of the canary failed), AnalysisInconclusive or
	// PrometheusNotConfigured.
	// +optional
	AbortReason string `json:"abortReason,omitempty"`

	// AbortMessage says why the rollout was aborted, naming the canary pod and its
	// container (it is kept when the canary pods are gone).
	// +optional
	AbortMessage string `json:"abortMessage,omitempty"`

	// CanaryScaleDownAt is when the canary Deployment goes: after a promotion, its
	// scale-down delay; after an abort (through an HTTPRoute), its abort scale-down
	// delay.
	// +optional
	CanaryScaleDownAt *metav1.Time `json:"canaryScaleDownAt,omitempty"`

	// RecentStable are the pod template hashes of the versions that were stable before
	// the current one, newest first (spec.rollout.canary.rollbackWindow of them): a
	// change back to one of them goes at once.
	// +optional
	// +listType=atomic
	RecentStable []string `json:"recentStable,omitempty"`

	// Analysis is the state of the checks that run at the current step (an analysis
	// step's, and canary.analysis's from its startingStep): counts and last
	// measurements. It restarts with each step, and is kept after an abort.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Analysis []CheckStatus `json:"analysis,omitempty"`

	// LastRequest is the id of the last `kubectl app` request (the
	// appcontroller.k8s.io/rollout-request annotation) the controller handled: a request
	// is handled once, and one re-applied from an old manifest does nothing.
	// +optional
	LastRequest string `json:"lastRequest,omitempty"`
}

// RolloutVersion is a version of an App's pods: the revision of the spec its pod
// template comes from, and what else went into the template.
type RolloutVersion struct {
	// Revision is the ControllerRevision of the App's spec whose pod template this is.
	// +optional
	Revision string `json:"revision,omitempty"`
	// PodTemplateHash identifies the pod template the controller built (the
	// revision's, with ConfigHash and RestartedAt).
	// +optional
	PodTemplateHash string `json:"podTemplateHash,omitempty"`
	// ConfigHash is the hash of the ConfigMaps and Secrets the pods were rolled for
	// (appcontroller.k8s.io/config-hash).
	// +optional
	ConfigHash string `json:"configHash,omitempty"`
	// RestartedAt is the App's kubectl.kubernetes.io/restartedAt annotation the pods
	// were rolled for.
	// +optional
	RestartedAt string `json:"restartedAt,omitempty"`
	// ReplicaSetHash is the pod-template-hash label of the stable pods while a rollout
	// runs: the stable Service of an HTTPRoute's split selects them by it.
	// +optional
	ReplicaSetHash string `json:"replicaSetHash,omitempty"`
}

// RolloutAction is what a `kubectl app` rollout request asks for.
type RolloutAction string

const (
	// RolloutActionPromote ends the current step (a pause, or a setWeight still
	// waiting for its pods); on an aborted rollout it starts the steps again.
	RolloutActionPromote RolloutAction = "promote"
	// RolloutActionPromoteFull skips the remaining steps: the rollout is promoted.
	RolloutActionPromoteFull RolloutAction = "promoteFull"
	// RolloutActionAbort aborts the rollout: all traffic back to the stable pods.
	RolloutActionAbort RolloutAction = "abort"
	// RolloutActionPause holds the rollout where it is until resume or promote.
	RolloutActionPause RolloutAction = "pause"
	// RolloutActionResume ends a pause asked for by RolloutActionPause.
	RolloutActionResume RolloutAction = "resume"
)

// RolloutRequest is the value of the appcontroller.k8s.io/rollout-request annotation
// that `kubectl app promote|abort|pause|resume` writes on an App, as JSON. It names the
// rollout it acts on, so that a stale request (the rollout moved on, or a new one
// started) or one re-applied from an old manifest does nothing; the controller records
// the id of the last request it handled in status.rollout.lastRequest.
//
// +k8s:deepcopy-gen=false
type RolloutRequest struct {
	// Action is what is asked.
	Action RolloutAction `json:"action"`
	// Canary is the pod template hash of the rollout's canary (status.rollout.canary).
	Canary string `json:"canary"`
	// Step is the step a promote ends (status.rollout.currentStepIndex); ignored by the
	// other actions.
	Step int32 `json:"step"`
	// ID tells requests apart: the time it was made, RFC 3339 with nanoseconds.
	ID string `json:"id"`
}

// ParseRolloutRequest decodes the value of RolloutRequestAnnotation.
func ParseRolloutRequest(value string) (RolloutRequest, error) {
	var r RolloutRequest
	if err := json.Unmarshal([]byte(value), &r); err != nil {
		return RolloutRequest{}, fmt.Errorf("decoding the %s annotation: %w", RolloutRequestAnnotation, err)
	}
	switch r.Action {
	case RolloutActionPromote, RolloutActionPromoteFull, RolloutActionAbort, RolloutActionPause, RolloutActionResume:
	default:
		return RolloutRequest{}, fmt.Errorf("the %s annotation asks for %q: not one of promote, promoteFull, abort, pause, resume", RolloutRequestAnnotation, r.Action)
	}
	if r.ID == "" || r.Canary == "" {
		return RolloutRequest{}, fmt.Errorf("the %s annotation names no id or no canary", RolloutRequestAnnotation)
	}
	return r, nil
}

// String returns r as the value of RolloutRequestAnnotation.
func (r RolloutRequest) String() string {
	data, err := json.Marshal(r)
	if err != nil {
		panic(fmt.Sprintf("encoding a rollout request: %v", err)) // a struct of strings and an int
	}
	return string(data)
}

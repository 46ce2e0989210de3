package v1

// BlueGreenStrategy brings a change of the App's pods all at once: the new version runs
// in full (the App's replicas) in the preview Deployment (the Deployment's name +
// "-canary", the child a canary strategy runs its canary in), beside the active version,
// reachable through the preview Service (the Service's name + "-preview"); the App's
// Service, and so its route, keeps selecting the active pods until the switch, which
// moves all the traffic at once (the App's Service's selector) by `kubectl app promote`
// or after autoPromotionSeconds. The old pods are kept scaleDownDelaySeconds after the
// switch: `kubectl app abort` (or a change back, or a failing new pod) switches back
// within it, without starting a pod. A new pod that fails before the switch aborts the
// rollout, as a canary pod does, and so does a failing check of prePromotionAnalysis,
// which the switch waits for. With previewHosts, the preview is also reachable
// through the App's Gateway under those hosts before the switch (an HTTPRoute NAME-preview
// beside the App's). docs/progressive-delivery.md tells the whole story.
//
// Example: the switch by hand, the old pods kept a minute after it, the preview under
// preview.example.com on the App's Gateway until then.
//
//	rollout:
//	  blueGreen:
//	    scaleDownDelaySeconds: 60
//	    previewHosts: [preview.example.com]
type BlueGreenStrategy struct {
	// AutoPromotionSeconds is how long the switch waits once every preview pod is
	// available; then it switches on its own. Unset, the rollout waits for `kubectl app
	// promote` (Argo Rollouts' autoPromotionEnabled: false). 0 switches as soon as the
	// preview is available.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=86400
	AutoPromotionSeconds *int32 `json:"autoPromotionSeconds,omitempty"`

	// ScaleDownDelaySeconds is how long the old pods keep running after the switch,
	// taking no traffic: within it `kubectl app abort` switches back at once. Then the
	// App's Deployment rolls to the new version (its old pods go) and, once it runs it,
	// the preview Deployment goes. Defaults to 30.
	// +optional
	// +kubebuilder:default=30
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=86400
	ScaleDownDelaySeconds *int32 `json:"scaleDownDelaySeconds,omitempty"`

	// AbortScaleDownDelaySeconds is how long the preview pods stay after an abort,
	// taking no traffic (for requests in flight when it happened after the switch, and
	// to look at them); then they are scaled to 0. Defaults to 30.
	// +optional
	// +kubebuilder:default=30
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=86400
	AbortScaleDownDelaySeconds *int32 `json:"abortScaleDownDelaySeconds,omitempty"`

	// ProgressDeadlineSeconds is how long the preview may take to have all its pods
	// available before the rollout aborts (reason ProgressDeadlineExceeded). Defaults
	// to 600.
	// +optional
	// +kubebuilder:default=600
	// +kubebuilder:validation:Minimum=10
	// +kubebuilder:validation:Maximum=86400
	ProgressDeadlineSeconds *int32 `json:"progressDeadlineSeconds,omitempty"`

	// ReadyDeadlineSeconds is how long a preview pod may be not ready, counted from its
	// creation, before the rollout aborts; a preview pod whose image cannot be pulled,
	// whose container cannot be created, exits or is OOMKilled aborts it at once.
	// Defaults to 120.
	// +optional
	// +kubebuilder:default=120
	// +kubebuilder:validation:Minimum=10
	// +kubebuilder:validation:Maximum=3600
	ReadyDeadlineSeconds *int32 `json:"readyDeadlineSeconds,omitempty"`

	// RollbackWindow is how many of the most recent active pod templates a change may
	// go back to at once, without a preview (a `kubectl app rollback`, a revert in Git).
	// 0 turns the window off. Defaults to 3.
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10
	RollbackWindow *int32 `json:"rollbackWindow,omitempty"`

	// PreviewHosts are hosts under which the App's Gateway sends requests to the
	// preview while the rollout runs: an HTTPRoute named as the App + "-preview", owned
	// by it, attached to the route's parentRefs, with the route's paths and these hosts,
	// to the preview Service. It exists while the preview Service does and the preview
	// has pods: from the rollout's start to the end of its promotion, or until the
	// preview is scaled to 0 after an abort. It needs an HTTPRoute (route.parentRefs)
	// and hosts that route.hosts does not have; a host held by another namespace keeps
	// the preview's HTTPRoute from being written (RouteAccepted=False, reason
	// HostConflict), never the App's.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	PreviewHosts []Hostname `json:"previewHosts,omitempty"`

	// PrePromotionAnalysis runs checks against the preview before the switch (Argo
	// Rollouts' prePromotionAnalysis), the canary's checks (successRate and latency read
	// the preview's pods, or, with source Gateway, the Gateway's requests to the preview
	// Service, which previewHosts sends it), from the moment the preview is available.
	// The switch, by autoPromotionSeconds or by `kubectl app promote`, waits until every
	// check has passed its count (a promote before then is refused; `promote --full`
	// switches without them); a check that fails beyond its failureLimit aborts the
	// rollout before the switch (reason AnalysisFailed), and one that stays inconclusive
	// aborts it at progressDeadlineSeconds (AnalysisInconclusive). The stage's index
	// stays the switch's (status.rollout.currentStepIndex 1).
	// +optional
	PrePromotionAnalysis *AnalysisStep `json:"prePromotionAnalysis,omitempty"`
}

// PreviewSuffix is added to the name of the App's Service to name the preview Service
// of a blue-green rollout, which selects the new version's pods before the switch.
// It is also added to the App's name to name the HTTPRoute of the preview's hosts
// (BlueGreenStrategy.PreviewHosts).
const PreviewSuffix = "-preview"

package rollout

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// A blue-green rollout (spec.rollout.blueGreen) is run by the canary's machine over four
// fixed stages, the steps of the CanaryStrategy that BlueGreenStages returns, so that
// requests, aborts, fast rollbacks, a restarted controller and the promotion's last
// stage behave as a canary's do; the plan (NewBlueGreenPlan) and the messages are its
// own. The new version runs in the canary Deployment (the preview), in full; the App's
// Service, the active one, selects the stable pods until the switch and the preview's
// after it, and the preview Service selects the preview's pods throughout (and the
// HTTPRoute of the preview's hosts sends to it while the preview has pods).
//
//	stage 0 (Progressing)  the preview scales to the App's replicas: done once they are available
//	stage 1 (Paused)       the preview is available: until kubectl app promote, or autoPromotionSeconds,
//	                       and the checks of prePromotionAnalysis, if any, passed (a failed one aborts)
//	stage 2 (Progressing)  the switch: done once the App's Service selects the preview's pods
//	stage 3 (Progressing)  the old pods kept scaleDownDelaySeconds: kubectl app abort switches back
//	promotion              the App's Deployment rolls to the new version, then the preview goes
const (
	StagePreview   int32 = 0
	StageSwitch    int32 = 1
	StageSwitched  int32 = 2
	StageScaleDown int32 = 3
	blueGreenSteps int32 = 4
)

// BlueGreenStages returns the strategy the canary's machine runs a blue-green rollout
// by: its four stages as steps (a setWeight 0 that ends when the preview is up, a pause
// of autoPromotionSeconds or until promoted, with the checks of prePromotionAnalysis as
// its analysis, a setWeight 100 that ends when the switch is in effect, a pause of
// scaleDownDelaySeconds), and its deadlines and windows. The checks before the switch
// are part of the switch's stage, not a stage of their own: the stages' indices (which
// the status, kubectl app status and the dashboard read) are the same with or without
// them.
func BlueGreenStages(bg *appv1.BlueGreenStrategy) *appv1.CanaryStrategy {
	gate := &appv1.CanaryPause{}
	if bg.AutoPromotionSeconds != nil {
		gate.Duration = &metav1.Duration{Duration: time.Duration(*bg.AutoPromotionSeconds) * time.Second}
	}
	delay := time.Duration(ptr.Deref(bg.ScaleDownDelaySeconds, 30)) * time.Second
	return &appv1.CanaryStrategy{
		Steps: []appv1.CanaryStep{
			{SetWeight: ptr.To[int32](0)},
			{Pause: gate, Analysis: bg.PrePromotionAnalysis},
			{SetWeight: ptr.To[int32](100)},
			{Pause: &appv1.CanaryPause{Duration: &metav1.Duration{Duration: delay}}},
		},
		// The preview goes scaleDownDelaySeconds after the App's Deployment runs the new
		// version (requests in flight on it when the Service selects both again).
		ScaleDownDelaySeconds:      ptr.To(ptr.Deref(bg.ScaleDownDelaySeconds, 30)),
		AbortScaleDownDelaySeconds: ptr.To(ptr.Deref(bg.AbortScaleDownDelaySeconds, 30)),
		ProgressDeadlineSeconds:    ptr.To(ptr.Deref(bg.ProgressDeadlineSeconds, 600)),
		ReadyDeadlineSeconds:       ptr.To(ptr.Deref(bg.ReadyDeadlineSeconds, 120)),
		RollbackWindow:             ptr.To(ptr.Deref(bg.RollbackWindow, 3)),
	}
}

// Strategy returns the steps the machine runs for spec (a canary's own, or a blue-green
// rollout's stages) and the blue-green strategy (nil for a canary); nil, nil for none.
func Strategy(spec *appv1.Rollout) (*appv1.CanaryStrategy, *appv1.BlueGreenStrategy) {
	switch {
	case spec == nil:
		return nil, nil
	case spec.BlueGreen != nil:
		return BlueGreenStages(spec.BlueGreen), spec.BlueGreen
	}
	return spec.Canary, nil
}

// NextBlueGreen is Next for a blue-green rollout of strategy bg. o.Weighted is ignored:
// the switch moves no weight (the promotion starts at its point of no return).
func NextBlueGreen(bg *appv1.BlueGreenStrategy, cur *appv1.RolloutStatus, o *Observation) (*appv1.RolloutStatus, []Note) {
	weighted := o.Weighted
	o.Weighted = false
	defer func() { o.Weighted = weighted }()
	return next(&machine{s: BlueGreenStages(bg), bg: bg, o: o}, cur)
}

// Active is what the App's Service (the active one) selects during a blue-green
// rollout.
type Active string

const (
	// ActiveAll: the App's pods, as without a rollout.
	ActiveAll Active = ""
	// ActiveStable: the stable pods alone, by their pod-template-hash (Plan.StableHash).
	ActiveStable Active = "stable"
	// ActivePreview: the preview's pods alone, by the track label.
	ActivePreview Active = "preview"
)

// NewBlueGreenPlan is NewPlan for a blue-green rollout of strategy bg (l.Gateway is
// ignored: the HTTPRoute keeps sending to the App's Service, whose selector switches).
func NewBlueGreenPlan(bg *appv1.BlueGreenStrategy, r *appv1.RolloutStatus, l Live, now time.Time) Plan {
	p := Plan{StableHash: r.Stable.ReplicaSetHash}
	scaleDownDue := r.CanaryScaleDownAt == nil || !now.Before(r.CanaryScaleDownAt.Time)
	switch {
	case r.Canary == nil:
		// No rollout: a promoted preview stays for its delay (it runs the stable
		// version: the App's Service selects it too); any other goes at once.
		p.KeepCanary = !scaleDownDue
		p.StepDone = true
	case r.Phase == appv1.RolloutAborted:
		// Switched back: the preview pods stay for the abort's delay, taking no traffic
		// but the preview's hosts' (to look at them); then the preview's route goes.
		p.Active, p.PreviewService = ActiveStable, true
		p.CanaryReplicas = ptr.To[int32](0)
		if !scaleDownDue {
			p.CanaryReplicas, p.KeepCanary, p.PreviewRoute = nil, true, true
		}
	case r.CurrentStepIndex >= blueGreenSteps:
		// The promotion: the App's Deployment rolls to the new version while the preview
		// serves; the Service selects both again once it runs it (Healthy).
		p.Active, p.PreviewService, p.PreviewRoute = ActivePreview, true, true
		p.CanaryReplicas = ptr.To(l.CanaryReplicas)
		p.StableMustRun = true
	default:
		p.CanaryReplicas, p.PreviewService, p.PreviewRoute = ptr.To(l.N), true, true
		p.Active = ActiveStable
		// The switch, never to a preview that is not available (a promote --full before
		// it was), and never back once made.
		if r.CurrentStepIndex >= StageSwitched && (l.canaryReady(l.N) || l.ActiveOnPreview) {
			p.Active = ActivePreview
		}
		p.StepDone = l.canaryReady(l.N)
		if r.CurrentStepIndex == StageSwitched {
			p.StepDone = p.StepDone && l.ActiveOnPreview
		}
	}
	return p
}

// stageName names blue-green stage k for messages and Events.
func stageName(k int32) string {
	switch k {
	case StagePreview:
		return "preview"
	case StageSwitch:
		return "switch"
	case StageSwitched:
		return "switched"
	case StageScaleDown:
		return "scale-down delay"
	}
	return "promotion"
}

// blueGreenMessage says where blue-green rollout r is, for status.rollout.message.
func (m *machine) blueGreenMessage() string {
	r := m.next
	at := fmt.Sprintf("Blue-green rollout to revision %s", r.Canary.Revision)
	switch k := r.CurrentStepIndex; {
	case r.Phase == appv1.RolloutAborted:
		return m.abortedMessage()
	case k >= blueGreenSteps:
		return fmt.Sprintf("Promoting revision %s: it takes all the traffic; the App's Deployment rolls to it", r.Canary.Revision)
	case r.PausedByRequest:
		return fmt.Sprintf("%s (%s): paused by kubectl app pause until kubectl app resume or promote", at, stageName(k))
	case k == StagePreview:
		return fmt.Sprintf("%s: waiting for the preview's pods; revision %s is active", at, r.Stable.Revision)
	case k == StageSwitch && len(m.holding()) > 0:
		return fmt.Sprintf("%s: the preview is available; the switch from revision %s waits for its checks: %s", at, r.Stable.Revision,
			strings.TrimPrefix(holdingMessage(m.holding()), "waiting for its checks: "))
	case k == StageSwitch && m.bg.AutoPromotionSeconds == nil:
		return fmt.Sprintf("%s: the preview is available; kubectl app promote switches the traffic to it from revision %s", at, r.Stable.Revision)
	case k == StageSwitch:
		return fmt.Sprintf("%s: the preview is available; the traffic switches to it from revision %s at %s", at, r.Stable.Revision,
			r.StepStartedAt.Add(time.Duration(*m.bg.AutoPromotionSeconds)*time.Second).UTC().Format(time.RFC3339))
	case k == StageSwitched:
		return fmt.Sprintf("%s: switching the traffic to it", at)
	}
	return fmt.Sprintf("Revision %s is active; the pods of revision %s are kept until %s for kubectl app abort", r.Canary.Revision, r.Stable.Revision,
		r.StepStartedAt.Add(time.Duration(ptr.Deref(m.bg.ScaleDownDelaySeconds, 30))*time.Second).UTC().Format(time.RFC3339))
}

// holding returns the checks of the observation that hold the current stage: neither
// passed nor failed.
func (m *machine) holding() []CheckResult {
	_, holding := judge(m.o.Checks)
	return holding
}

// checksBeforeSwitch reports whether a blue-green rollout's switch waits for checks of
// prePromotionAnalysis that have not all passed, and which.
func (m *machine) checksBeforeSwitch() (string, bool) {
	if m.bg == nil || m.next.CurrentStepIndex != StageSwitch {
		return "", false
	}
	if m.s.Steps[StageSwitch].Analysis != nil && len(m.o.Checks) == 0 {
		return "not measured yet", true // never without their results
	}
	holding := m.holding()
	if len(holding) == 0 {
		return "", false
	}
	return strings.TrimPrefix(holdingMessage(holding), "waiting for its checks: "), true
}

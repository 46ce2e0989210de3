// Package rollout is the engine of a canary rollout (spec.rollout.canary,
// docs/progressive-delivery.md), which brings a change of an App's pod template through
// a canary Deployment, step by step. It is pure: no client, no cache, no clock but the
// observation's. The App controller (pkg/controller/app) observes the children, calls
// it, records the state it returns in status.rollout before any child is written for
// it (so that a restarted controller resumes at the same step with the same weights),
// and shapes the children as the plan says.
//
//   - machine.go, the state machine: Next, the state that follows the recorded one
//     (appv1.RolloutStatus) under the strategy (appv1.CanaryStrategy), given an
//     Observation; and the Notes of the transition (the Events and metrics it tells).
//   - checks.go, where the canary's analysis plugs in: the CheckResults of an
//     Observation, a Failed one aborting, a Running or Inconclusive one holding a step.
//   - plan.go, what the children are in a state: NewPlan, from the state and what is
//     Live, the replicas of the stable and canary Deployments and the HTTPRoute's
//     weights; Due, when a state changes by the clock alone.
package rollout

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// Observation is what a sync observed, for the state machine.
type Observation struct {
	// Now is the time of the observation: the machine's only clock.
	Now time.Time
	// Desired is the version the App's spec asks for now; Initial the version the stable
	// Deployment runs when the App has no rollout state yet (the strategy was just added,
	// or the App is new: then Desired).
	Desired, Initial appv1.RolloutVersion
	// StableSettled: the stable Deployment's pods are all of one template, whose
	// pod-template-hash is StableHash; false while it rolls, when it does not exist, or
	// while the deployment controller has not observed its last spec change (a scale
	// too). Without a canary, a new version goes to an unsettled stable Deployment
	// directly; during a canary the recorded stable pods stay the stable side.
	StableSettled bool
	StableHash    string
	// StepDone: the children are where the current step (or promotion stage) wants them
	// (Plan.StepDone).
	StepDone bool
	// Weighted: the App's route is an HTTPRoute, whose weights the promotion's first
	// stage moves to the canary; without it that stage has nothing to wait for, and a
	// promotion starts at its point of no return.
	Weighted bool
	// Failure is why the canary's pods fail ("" Reason: they do not).
	Failure Abort
	// Checks are the results of the canary's checks at the current step (checks.go): a
	// Failed one aborts the rollout like a failing pod; a step ends only once every one
	// Passed. None: the steps end by their weight or duration alone.
	Checks []CheckResult
	// Analysis is the state of the checks at the current step (their counts and last
	// measurements, pkg/analysis) after this sync's measurements; the machine records
	// it in status.rollout.analysis while the rollout stays at the step. nil: no check
	// runs at the step (the recorded state stays as it is).
	Analysis []appv1.CheckStatus
	// Request is the App's rollout request; nil when there is none. RequestID
	// identifies it, also one that could not be read (RequestErr).
	Request    *appv1.RolloutRequest
	RequestID  string
	RequestErr error
}

// Abort is why a rollout aborts: the reason status.rollout.abortReason records, and
// what the message says.
type Abort struct {
	Reason, Message string
}

// Metric names the counter a rollout's transition adds to.
type Metric string

const (
	MetricStarted  Metric = "started"
	MetricPromoted Metric = "promoted"
	MetricAborted  Metric = "aborted"
)

// Note is something a transition tells: an Event, and the metric it counts.
type Note struct {
	EventType, Reason, Message string
	// Metric is the counter it adds to (AbortReason its label for an abort), "" for
	// none; Step is the kind of step that ended ("setWeight", "pause", "promotion"),
	// which took Seconds.
	Metric      Metric
	AbortReason string
	Step        string
	Seconds     float64
}

// Next returns the rollout state that follows cur (nil: none yet) under strategy, given
// what the sync observed, and what the transition tells. It returns cur itself (the
// same pointer) when nothing changes, so that the caller writes nothing.
func Next(strategy *appv1.CanaryStrategy, cur *appv1.RolloutStatus, o *Observation) (*appv1.RolloutStatus, []Note) {
	return next(&machine{s: strategy, o: o}, cur)
}

// next runs machine m from state cur (Next, NextBlueGreen).
func next(m *machine, cur *appv1.RolloutStatus) (*appv1.RolloutStatus, []Note) {
	o := m.o
	if cur == nil {
		initial := o.Initial
		m.next = &appv1.RolloutStatus{Phase: appv1.RolloutHealthy, Stable: &initial}
	} else {
		m.next = cur.DeepCopy()
	}
	m.request()
	m.follow()
	m.advance()
	m.next.Message = m.message()
	if cur != nil && Equal(cur, m.next) {
		return cur, nil
	}
	return m.next, m.notes
}

// machine computes one transition.
type machine struct {
	s *appv1.CanaryStrategy
	// bg is the blue-green strategy whose stages s is (bluegreen.go); nil for a canary.
	bg    *appv1.BlueGreenStrategy
	o     *Observation
	next  *appv1.RolloutStatus
	notes []Note
	// moved: the transition already moved the rollout (a request, a new version): what
	// the sync observed was of the state before, so advance waits for the next sync.
	moved bool
}

func (m *machine) steps() int32 { return int32(len(m.s.Steps)) }

// promoting reports whether the rollout is past its last step.
func (m *machine) promoting() bool {
	return m.next.Canary != nil && m.next.CurrentStepIndex >= m.steps()
}

// running reports whether a canary runs its steps (not promoting, not aborted).
func (m *machine) running() bool {
	p := m.next.Phase
	return m.next.Canary != nil && !m.promoting() && (p == appv1.RolloutProgressing || p == appv1.RolloutPaused)
}

// note records an Event and its metric.
func (m *machine) note(n Note) { m.notes = append(m.notes, n) }

// request applies the App's rollout request, once: a request whose id was handled is
// ignored; one that names another rollout or step, or asks for what does not apply, is
// recorded as handled with a Warning Event.
func (m *machine) request() {
	o, r := m.o, m.next
	if o.RequestID == "" || o.RequestID == r.LastRequest {
		return
	}
	r.LastRequest = o.RequestID
	ignore := func(why string) {
		m.note(Note{EventType: corev1.EventTypeWarning, Reason: appv1.EventReasonRolloutRequestIgnored, Message: why})
	}
	if o.RequestErr != nil {
		ignore(o.RequestErr.Error())
		return
	}
	req := o.Request
	what := fmt.Sprintf("kubectl app %s (request %s)", req.Action, req.ID)
	switch {
	case r.Canary == nil:
		ignore(what + " ignored: no rollout runs")
		return
	case req.Canary != r.Canary.PodTemplateHash:
		ignore(fmt.Sprintf("%s ignored: it names the rollout of pod template %s, the current one is %s", what, req.Canary, r.Canary.PodTemplateHash))
		return
	}
	aborted := r.Phase == appv1.RolloutAborted
	switch req.Action {
	case appv1.RolloutActionPromote:
		switch {
		case aborted:
			m.note(Note{EventType: corev1.EventTypeNormal, Reason: appv1.EventReasonRolloutStarted,
				Message: fmt.Sprintf("kubectl app promote: the aborted rollout to revision %s starts its steps again", r.Canary.Revision), Metric: MetricStarted})
			m.toStep(0)
		case m.promoting():
			ignore(what + " ignored: the rollout is already being promoted")
		case req.Step != r.CurrentStepIndex:
			ignore(fmt.Sprintf("%s ignored: it ends step %d, the rollout is at step %d", what, req.Step+1, r.CurrentStepIndex+1))
		default:
			if checks, wait := m.checksBeforeSwitch(); wait {
				// Blue-green: the checks before the switch gate it, by hand too.
				ignore(fmt.Sprintf("%s ignored: the switch waits for the checks of prePromotionAnalysis (%s); promote again once they passed, "+
					"or kubectl app promote --full switches without them", what, checks))
				return
			}
			m.stepEnded("by kubectl app promote")
		}
	case appv1.RolloutActionPromoteFull:
		if m.promoting() {
			ignore(what + " ignored: the rollout is already being promoted")
			return
		}
		m.note(Note{EventType: corev1.EventTypeNormal, Reason: appv1.EventReasonRolloutStep,
			Message: fmt.Sprintf("kubectl app promote --full: the remaining steps of the rollout to revision %s are skipped", r.Canary.Revision)})
		r.PausedByRequest = false
		if m.bg != nil && r.CurrentStepIndex < StageSwitched && !aborted {
			// Blue-green: the switch now (once the preview is available), then the delay
			// the old pods are kept for is skipped by a second promote --full.
			m.toStep(StageSwitched)
			return
		}
		m.toStep(m.steps())
	case appv1.RolloutActionAbort:
		switch {
		case aborted:
			ignore(what + " ignored: the rollout is already aborted")
		case m.promoting():
			ignore(what + " ignored: the rollout is being promoted; kubectl app rollback goes back")
		default:
			m.abort(Abort{Reason: appv1.ReasonAbortRequested, Message: "aborted by kubectl app abort"})
		}
	case appv1.RolloutActionPause:
		switch {
		case !m.running():
			ignore(what + " ignored: the rollout is not running its steps")
		case r.PausedByRequest:
			ignore(what + " ignored: the rollout is already paused")
		default:
			r.PausedByRequest = true
			r.Phase = appv1.RolloutPaused
			m.note(Note{EventType: corev1.EventTypeNormal, Reason: appv1.EventReasonRolloutPaused,
				Message: fmt.Sprintf("kubectl app pause: the rollout holds at step %d of %d", r.CurrentStepIndex+1, m.steps())})
		}
	case appv1.RolloutActionResume:
		if !r.PausedByRequest {
			ignore(what + " ignored: the rollout is not paused by kubectl app pause")
			return
		}
		m.note(Note{EventType: corev1.EventTypeNormal, Reason: appv1.EventReasonRolloutResumed,
			Message: fmt.Sprintf("kubectl app resume: the rollout goes on from step %d of %d", r.CurrentStepIndex+1, m.steps())})
		r.PausedByRequest = false
		m.toStep(r.CurrentStepIndex)
	}
}

// follow makes the rollout follow the App's desired version: a new one starts a rollout
// (or restarts the steps toward it), one back to the stable version, or to a recent
// stable one (rollbackWindow), or a change while the stable Deployment itself rolls,
// goes to the stable Deployment at once.
func (m *machine) follow() {
	r, o := m.next, m.o
	want := o.Desired
	switch {
	case r.Canary != nil && want.PodTemplateHash == r.Canary.PodTemplateHash:
		// The rollout already brings it (a change of the spec that is not the pod
		// template, or a newer revision of the same template).
		if r.Canary.Revision != want.Revision {
			r.Canary.Revision = want.Revision
		}
		return
	case want.PodTemplateHash == r.Stable.PodTemplateHash:
		if r.Stable.Revision != want.Revision {
			r.Stable.Revision = want.Revision
		}
		if r.Canary != nil {
			m.end(fmt.Sprintf("The App went back to its stable pod template (revision %s): the rollout to revision %s ended at once",
				want.Revision, r.Canary.Revision), false)
		}
		return
	case r.Canary != nil && r.Stable.PodTemplateHash == r.Canary.PodTemplateHash:
		// Past the point of no return of a promotion: the stable Deployment already
		// rolls to the canary's template. The change goes to it directly.
		m.direct(want, "a change during the promotion of the previous one, while the stable Deployment rolls")
		return
	case slices.Contains(r.RecentStable, want.PodTemplateHash):
		m.direct(want, "a change back to a pod template that was stable recently (rollbackWindow)")
		return
	case !o.StableSettled && r.Canary == nil:
		m.direct(want, "the stable Deployment is rolling (its pods run two templates): there is no one stable version to keep")
		return
	}
	// While a canary runs (or stands aborted), the stable Deployment keeps the template
	// it had when the rollout started, whose pods' hash the state recorded: the rollout
	// only scales it, and a scale the deployment controller has not observed yet
	// (StableSettled false) does not make it roll. A newer change then restarts the
	// steps from the recorded stable pods; it must never reach them directly.
	// A new rollout, or the steps again toward the newest.
	restarted := r.Canary != nil
	r.Canary = &want
	if o.StableSettled {
		r.Stable.ReplicaSetHash = o.StableHash
	}
	r.AbortReason, r.AbortMessage, r.PausedByRequest = "", "", false
	msg := fmt.Sprintf("Rollout to revision %s (pod template %s) started: %d steps from revision %s", want.Revision, want.PodTemplateHash, m.steps(), r.Stable.Revision)
	if m.bg != nil {
		msg = fmt.Sprintf("Blue-green rollout to revision %s (pod template %s) started: its preview runs beside revision %s, which stays active until the switch",
			want.Revision, want.PodTemplateHash, r.Stable.Revision)
	}
	if restarted {
		msg = fmt.Sprintf("A newer change (revision %s, pod template %s) restarts the rollout's %d steps", want.Revision, want.PodTemplateHash, m.steps())
	}
	m.note(Note{EventType: corev1.EventTypeNormal, Reason: appv1.EventReasonRolloutStarted, Message: msg, Metric: MetricStarted})
	m.toStep(0)
}

// direct makes want the stable version at once, without steps, ending a rollout that
// runs.
func (m *machine) direct(want appv1.RolloutVersion, why string) {
	r := m.next
	m.pushRecent(r.Stable.PodTemplateHash)
	r.RecentStable = slices.DeleteFunc(r.RecentStable, func(h string) bool { return h == want.PodTemplateHash })
	if len(r.RecentStable) == 0 {
		r.RecentStable = nil
	}
	r.Stable = &want
	m.note(Note{EventType: corev1.EventTypeNormal, Reason: appv1.EventReasonRolloutRolledBack,
		Message: fmt.Sprintf("Revision %s (pod template %s) goes to the stable Deployment at once: %s", want.Revision, want.PodTemplateHash, why)})
	if r.Canary != nil {
		m.end("", false)
	}
}

// end ends the rollout: Healthy, no canary. promoted keeps the canary Deployment for
// scaleDownDelaySeconds; otherwise it goes at once.
func (m *machine) end(msg string, promoted bool) {
	r := m.next
	m.moved = true
	r.Phase, r.Canary, r.CurrentStepIndex, r.CanaryWeight = appv1.RolloutHealthy, nil, 0, 0
	r.StepStartedAt, r.PausedByRequest, r.AbortReason, r.AbortMessage = nil, false, "", ""
	r.Analysis = nil
	at := m.o.Now
	if promoted {
		at = at.Add(time.Duration(ptr.Deref(m.s.ScaleDownDelaySeconds, 0)) * time.Second)
	}
	r.CanaryScaleDownAt = &metav1.Time{Time: at}
	if msg != "" {
		m.note(Note{EventType: corev1.EventTypeNormal, Reason: appv1.EventReasonRolloutRolledBack, Message: msg})
	}
}

// abort aborts the rollout for cause.
func (m *machine) abort(cause Abort) {
	r := m.next
	m.moved = true
	r.Phase, r.PausedByRequest, r.AbortReason, r.AbortMessage = appv1.RolloutAborted, false, cause.Reason, cause.Message
	r.CanaryScaleDownAt = &metav1.Time{Time: m.o.Now.Add(time.Duration(ptr.Deref(m.s.AbortScaleDownDelaySeconds, 0)) * time.Second)}
	m.note(Note{EventType: corev1.EventTypeWarning, Reason: appv1.ReasonRolloutAborted, Message: m.abortedMessage(),
		Metric: MetricAborted, AbortReason: cause.Reason})
}

// abortedMessage says why the rollout was aborted, and what serves.
func (m *machine) abortedMessage() string {
	r := m.next
	if m.bg != nil {
		when := "before the switch"
		if r.CurrentStepIndex >= StageSwitched {
			when = "after the switch, within its scale-down delay"
		}
		return fmt.Sprintf("Blue-green rollout to revision %s aborted %s: %s; all traffic is on the stable pods (revision %s)",
			r.Canary.Revision, when, r.AbortMessage, r.Stable.Revision)
	}
	return fmt.Sprintf("Rollout to revision %s aborted at step %d of %d: %s; all traffic is on the stable pods (revision %s)",
		r.Canary.Revision, min(r.CurrentStepIndex, m.steps()-1)+1, m.steps(), r.AbortMessage, r.Stable.Revision)
}

// toStep starts step k (the number of steps: the promotion).
func (m *machine) toStep(k int32) {
	r := m.next
	m.moved = true
	r.CurrentStepIndex = k
	r.StepStartedAt = &metav1.Time{Time: m.o.Now}
	r.CanaryWeight = WeightAt(m.s, k)
	r.AbortReason, r.AbortMessage = "", ""
	// The checks of the step that ended go; canary.analysis's go on counting through
	// the rollout, from its first step (a start, or a restart after an abort) afresh.
	r.Analysis = slices.DeleteFunc(slices.Clone(r.Analysis), func(c appv1.CheckStatus) bool { return k == 0 || c.Step != backgroundStep })
	if len(r.Analysis) == 0 {
		r.Analysis = nil
	}
	switch {
	case k >= m.steps():
		r.Phase, r.CanaryWeight = appv1.RolloutProgressing, 100
		if !m.o.Weighted {
			m.stableTakesCanary()
		}
	case r.PausedByRequest || m.s.Steps[k].Pause != nil && (m.bg == nil || k == StageSwitch):
		// A blue-green rollout waits at its switch; its scale-down delay is a pause of
		// the machine's, not of the rollout's.
		r.Phase = appv1.RolloutPaused
	default:
		r.Phase = appv1.RolloutProgressing
	}
}

// stepEnded ends the current step (how: what ended it) and starts the next.
func (m *machine) stepEnded(how string) {
	r := m.next
	k := r.CurrentStepIndex
	kind := "setWeight"
	switch {
	case m.s.Steps[k].Pause != nil:
		kind = "pause"
	case m.s.Steps[k].Analysis != nil:
		kind = "analysis"
	case m.s.Steps[k].SetHeaderRoute != nil:
		kind = "setHeaderRoute"
	case m.s.Steps[k].SetMirrorRoute != nil:
		kind = "setMirrorRoute"
	}
	var took float64
	if r.StepStartedAt != nil {
		took = m.o.Now.Sub(r.StepStartedAt.Time).Seconds()
	}
	msg := fmt.Sprintf("Step %d of %d (%s) of the rollout to revision %s ended %s", k+1, m.steps(), m.s.Steps[k].String(), r.Canary.Revision, how)
	if m.bg != nil {
		msg = fmt.Sprintf("Stage %q of the blue-green rollout to revision %s ended %s", stageName(k), r.Canary.Revision, how)
	}
	m.note(Note{EventType: corev1.EventTypeNormal, Reason: appv1.EventReasonRolloutStep, Message: msg, Step: kind, Seconds: took})
	r.PausedByRequest = false
	m.toStep(k + 1)
}

// advance moves a running rollout on: an abort when a canary pod or a check failed or a
// setWeight step passed its progress deadline; the next step when the current one is
// done (a pause's duration passed) and its checks passed; the stages of the promotion.
func (m *machine) advance() {
	r, o := m.next, m.o
	if m.moved || r.Canary == nil || r.Phase == appv1.RolloutAborted {
		return
	}
	if !m.promoting() {
		if o.Analysis != nil {
			r.Analysis = slices.Clone(o.Analysis)
		}
		failedCheck, holding := judge(o.Checks)
		switch {
		case o.Failure.Reason != "":
			m.abort(o.Failure)
			return
		case failedCheck != nil:
			m.abort(checksAbort(failedCheck))
			return
		}
		step := m.s.Steps[r.CurrentStepIndex]
		since := o.Now.Sub(r.StepStartedAt.Time)
		if (step.SetWeight != nil || routingStep(step)) && !o.StepDone && since >= time.Duration(ptr.Deref(m.s.ProgressDeadlineSeconds, 600))*time.Second {
			m.abort(Abort{Reason: appv1.ReasonProgressDeadlineExceeded, Message: fmt.Sprintf(
				"step %d (%s) did not complete within progressDeadlineSeconds (%ds): the canary's pods were not available, or the weight not in effect",
				r.CurrentStepIndex+1, step.String(), ptr.Deref(m.s.ProgressDeadlineSeconds, 600))})
			return
		}
		// An inconclusive check holds an analysis step, and, at a step of any kind, a
		// check whose template is missing (the only way a background check holds one):
		// both end at the progress deadline.
		if since >= time.Duration(ptr.Deref(m.s.ProgressDeadlineSeconds, 600))*time.Second {
			if c := inconclusive(holding); c != nil {
				m.abort(Abort{Reason: appv1.ReasonAnalysisInconclusive, Message: fmt.Sprintf(
					"step %d (%s) stayed inconclusive for progressDeadlineSeconds (%ds): %s", r.CurrentStepIndex+1, step.String(),
					ptr.Deref(m.s.ProgressDeadlineSeconds, 600), c.String())})
				return
			}
		}
		if r.PausedByRequest || len(holding) > 0 {
			return
		}
		// One step a sync: o.StepDone was the ended step's; the next step's children
		// come first.
		m.endStepIfDone(step, since)
		return
	}
	if !o.StepDone {
		return
	}
	if r.Stable.PodTemplateHash != r.Canary.PodTemplateHash {
		// The canary carries the traffic it must.
		m.stableTakesCanary()
		return
	}
	// The stable Deployment runs the new template: promoted.
	var took float64
	if r.StepStartedAt != nil {
		took = o.Now.Sub(r.StepStartedAt.Time).Seconds()
	}
	m.note(Note{EventType: corev1.EventTypeNormal, Reason: appv1.EventReasonRolloutPromoted,
		Message: fmt.Sprintf("Revision %s (pod template %s) is promoted: the stable Deployment runs it", r.Canary.Revision, r.Canary.PodTemplateHash),
		Metric:  MetricPromoted, Step: "promotion", Seconds: took})
	m.end("", true)
}

// endStepIfDone ends step, which started since ago and whose checks passed (or has
// none), when it is done: an analysis step by its checks, a setWeight or routing step
// once its children are in effect, a pause after its duration (a blue-green switch's,
// autoPromotionSeconds, after its checks too).
func (m *machine) endStepIfDone(step appv1.CanaryStep, since time.Duration) {
	o := m.o
	elapsed := step.Pause != nil && step.Pause.Duration != nil && since >= step.Pause.Duration.Duration
	switch {
	case step.Analysis != nil && step.Pause == nil && len(o.Checks) > 0:
		m.stepEnded(passedMessage(o.Checks))
	case step.SetWeight != nil && o.StepDone:
		m.stepEnded("with its weight in effect")
	case routingStep(step) && o.StepDone:
		m.stepEnded("with its route in effect")
	case elapsed && step.Analysis != nil:
		// Blue-green's switch by autoPromotionSeconds: never without its checks' results.
		if len(o.Checks) > 0 {
			m.stepEnded("after its duration, " + passedMessage(o.Checks))
		}
	case elapsed:
		m.stepEnded("after its duration")
	}
}

// stableTakesCanary is a promotion's point of no return: the stable Deployment gets the
// canary's template, and the stable version it ran becomes a recent one.
func (m *machine) stableTakesCanary() {
	r := m.next
	if r.Stable.PodTemplateHash == r.Canary.PodTemplateHash {
		return
	}
	m.pushRecent(r.Stable.PodTemplateHash)
	stable := *r.Canary
	r.Stable = &stable
}

// pushRecent records hash as recently stable (at most rollbackWindow of them).
func (m *machine) pushRecent(hash string) {
	r := m.next
	window := int(ptr.Deref(m.s.RollbackWindow, 3))
	recent := slices.DeleteFunc(slices.Clone(r.RecentStable), func(h string) bool { return h == hash })
	recent = append([]string{hash}, recent...)
	if len(recent) > window {
		recent = recent[:window]
	}
	if len(recent) == 0 {
		recent = nil
	}
	r.RecentStable = recent
}

// message says where the rollout is, for status.rollout.message and the conditions.
func (m *machine) message() string {
	r := m.next
	if r.Canary == nil {
		return fmt.Sprintf("Revision %s is stable", r.Stable.Revision)
	}
	if m.bg != nil {
		return m.blueGreenMessage()
	}
	n := m.steps()
	switch {
	case r.Phase == appv1.RolloutAborted:
		return m.abortedMessage()
	case m.promoting() && r.Stable.PodTemplateHash == r.Canary.PodTemplateHash:
		return fmt.Sprintf("Promoting revision %s: the stable Deployment rolls to it", r.Canary.Revision)
	case m.promoting():
		return fmt.Sprintf("Promoting revision %s: the canary takes all the traffic before the stable Deployment rolls to it", r.Canary.Revision)
	}
	k := r.CurrentStepIndex
	step := m.s.Steps[k]
	at := fmt.Sprintf("Rollout to revision %s, step %d of %d (%s), canary at %d%%", r.Canary.Revision, k+1, n, step.String(), r.CanaryWeight)
	if d := RoutingDescription(m.s, k); d != "" {
		at += " and " + d
	}
	_, holding := judge(m.o.Checks)
	switch {
	case r.PausedByRequest:
		return at + ": paused by kubectl app pause until kubectl app resume or promote"
	case step.Pause != nil && step.Pause.Duration == nil:
		return at + ": paused until kubectl app promote"
	case len(holding) > 0:
		return at + ": " + holdingMessage(holding)
	case step.Pause != nil:
		return at + fmt.Sprintf(": paused until %s", r.StepStartedAt.Add(step.Pause.Duration.Duration).UTC().Format(time.RFC3339))
	case step.Analysis != nil:
		return at + ": running its checks"
	}
	if routingStep(step) {
		return at + ": waiting for the canary's pods and the route"
	}
	return at + ": waiting for the canary's pods and the weight"
}

// WeightAt returns the canary's weight at step k: the weight of the last setWeight
// step at or before it; 100 past the last step.
func WeightAt(s *appv1.CanaryStrategy, k int32) int32 {
	if k >= int32(len(s.Steps)) {
		return 100
	}
	var w int32
	for _, step := range s.Steps[:k+1] {
		if step.SetWeight != nil {
			w = *step.SetWeight
		}
	}
	return w
}

// Equal reports whether two rollout states are the same (times compared to the
// second, as the API stores them).
func Equal(a, b *appv1.RolloutStatus) bool {
	return a.Phase == b.Phase && a.Message == b.Message && a.CurrentStepIndex == b.CurrentStepIndex &&
		sameTime(a.StepStartedAt, b.StepStartedAt) && a.CanaryWeight == b.CanaryWeight &&
		ptr.Equal(a.Stable, b.Stable) && ptr.Equal(a.Canary, b.Canary) && a.PausedByRequest == b.PausedByRequest &&
		a.AbortReason == b.AbortReason && a.AbortMessage == b.AbortMessage && sameTime(a.CanaryScaleDownAt, b.CanaryScaleDownAt) &&
		slices.Equal(a.RecentStable, b.RecentStable) && a.LastRequest == b.LastRequest &&
		slices.EqualFunc(a.Analysis, b.Analysis, sameCheck)
}

// sameCheck reports whether two checks' states are the same (times to the second).
func sameCheck(a, b appv1.CheckStatus) bool {
	ta, tb := a.MeasuredAt, b.MeasuredAt
	a.MeasuredAt, b.MeasuredAt = nil, nil
	return a == b && sameTime(ta, tb)
}

// sameTime reports whether two optional times are the same to the second.
func sameTime(a, b *metav1.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Unix() == b.Unix()
}

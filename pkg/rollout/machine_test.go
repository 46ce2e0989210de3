package rollout

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller/appfixture"
)

// testNow is the tests' clock.
var testNow = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// TestNext checks the transitions of the state machine, one at a time.
func TestNext(t *testing.T) {
	v1 := appv1.RolloutVersion{Revision: "web-1", PodTemplateHash: "h1"}
	v2 := appv1.RolloutVersion{Revision: "web-2", PodTemplateHash: "h2"}
	v3 := appv1.RolloutVersion{Revision: "web-3", PodTemplateHash: "h3"}
	start := metav1.NewTime(testNow.Add(-time.Minute))
	healthy := &appv1.RolloutStatus{Phase: appv1.RolloutHealthy, Stable: &v1}
	at := func(phase appv1.RolloutPhase, step int32) *appv1.RolloutStatus {
		return &appv1.RolloutStatus{Phase: phase, CurrentStepIndex: step, StepStartedAt: &start, CanaryWeight: WeightAt(appfixture.CanaryStrategy(), step),
			Stable: &appv1.RolloutVersion{Revision: "web-1", PodTemplateHash: "h1", ReplicaSetHash: "rs1"}, Canary: &v2}
	}
	req := func(action appv1.RolloutAction, canary string, step int32) *Observation {
		r := appv1.RolloutRequest{Action: action, Canary: canary, Step: step, ID: "req-1"}
		return &Observation{Desired: v2, Request: &r, RequestID: r.ID, StableSettled: true, StableHash: "rs1"}
	}
	tests := []struct {
		name string
		cur  *appv1.RolloutStatus
		o    *Observation
		// want: phase, step, stable and canary template hashes ("-": none); same: no change.
		want        string
		same        bool
		wantReasons []string
	}{
		{name: "the strategy added: Healthy on what the Deployment runs", cur: nil,
			o: &Observation{Desired: v1, Initial: v1, StableSettled: true}, want: "Healthy 0 h1 -"},
		{name: "the strategy added with a new template: a rollout from what the Deployment runs", cur: nil,
			o: &Observation{Desired: v2, Initial: v1, StableSettled: true, StableHash: "rs1"}, want: "Progressing 0 h1 h2",
			wantReasons: []string{appv1.EventReasonRolloutStarted}},
		{name: "nothing changed", cur: healthy, o: &Observation{Desired: v1, StableSettled: true}, same: true},
		{name: "a new template starts a rollout", cur: healthy, o: &Observation{Desired: v2, StableSettled: true, StableHash: "rs1"},
			want: "Progressing 0 h1 h2", wantReasons: []string{appv1.EventReasonRolloutStarted}},
		{name: "a new template while the stable Deployment rolls goes to it at once", cur: healthy, o: &Observation{Desired: v2},
			want: "Healthy 0 h2 -", wantReasons: []string{appv1.EventReasonRolloutRolledBack}},
		{name: "a step not done waits", cur: at(appv1.RolloutProgressing, 0), o: &Observation{Desired: v2, StableSettled: true}, same: true},
		{name: "a setWeight step done: the next step", cur: at(appv1.RolloutProgressing, 0), o: &Observation{Desired: v2, StableSettled: true, StepDone: true},
			want: "Paused 1 h1 h2", wantReasons: []string{appv1.EventReasonRolloutStep}},
		{name: "a pause until promoted waits, whatever the time", cur: at(appv1.RolloutPaused, 1), o: &Observation{Desired: v2, StableSettled: true, StepDone: true}, same: true},
		{name: "a newer template restarts the steps", cur: at(appv1.RolloutPaused, 1), o: &Observation{Desired: v3, StableSettled: true, StableHash: "rs1"},
			want: "Progressing 0 h1 h3", wantReasons: []string{appv1.EventReasonRolloutStarted}},
		{name: "a newer template while the stable Deployment's scale is not observed yet restarts the steps", cur: at(appv1.RolloutPaused, 1),
			o: &Observation{Desired: v3}, want: "Progressing 0 h1 h3", wantReasons: []string{appv1.EventReasonRolloutStarted}},
		{name: "back to the stable template: the rollout ends at once", cur: at(appv1.RolloutPaused, 1), o: &Observation{Desired: v1, StableSettled: true},
			want: "Healthy 0 h1 -", wantReasons: []string{appv1.EventReasonRolloutRolledBack}},
		{name: "a failing canary pod aborts", cur: at(appv1.RolloutProgressing, 0),
			o:    &Observation{Desired: v2, StableSettled: true, Failure: Abort{Reason: appv1.ReasonImagePullFailed, Message: "cannot pull"}},
			want: "Aborted 0 h1 h2", wantReasons: []string{appv1.ReasonRolloutAborted}},
		{name: "a failing canary pod aborts a paused rollout too", cur: at(appv1.RolloutPaused, 1),
			o:    &Observation{Desired: v2, StableSettled: true, Failure: Abort{Reason: appv1.ReasonCrashLoopBackOff, Message: "exits"}},
			want: "Aborted 1 h1 h2", wantReasons: []string{appv1.ReasonRolloutAborted}},
		{name: "aborted: a re-apply (nothing new) changes nothing", cur: func() *appv1.RolloutStatus {
			r := at(appv1.RolloutAborted, 0)
			r.AbortReason, r.AbortMessage = appv1.ReasonImagePullFailed, "cannot pull"
			r.Message = "Rollout to revision web-2 aborted at step 1 of 3: cannot pull; all traffic is on the stable pods (revision web-1)"
			return r
		}(), o: &Observation{Desired: v2, StableSettled: true}, same: true},
		{name: "promote ends a pause", cur: at(appv1.RolloutPaused, 1), o: req(appv1.RolloutActionPromote, "h2", 1),
			want: "Progressing 2 h1 h2", wantReasons: []string{appv1.EventReasonRolloutStep}},
		{name: "promote of another step is ignored", cur: at(appv1.RolloutPaused, 1), o: req(appv1.RolloutActionPromote, "h2", 0),
			want: "Paused 1 h1 h2", wantReasons: []string{appv1.EventReasonRolloutRequestIgnored}},
		{name: "a request of another rollout is ignored", cur: at(appv1.RolloutPaused, 1), o: req(appv1.RolloutActionAbort, "h9", 1),
			want: "Paused 1 h1 h2", wantReasons: []string{appv1.EventReasonRolloutRequestIgnored}},
		{name: "promote --full through an HTTPRoute: the canary takes the traffic first", cur: at(appv1.RolloutProgressing, 0),
			o: func() *Observation {
				o := req(appv1.RolloutActionPromoteFull, "h2", 0)
				o.Weighted = true
				return o
			}(), want: "Progressing 3 h1 h2", wantReasons: []string{appv1.EventReasonRolloutStep}},
		{name: "promote --full without one: the stable takes the canary's template at once", cur: at(appv1.RolloutProgressing, 0),
			o: req(appv1.RolloutActionPromoteFull, "h2", 0), want: "Progressing 3 h2 h2", wantReasons: []string{appv1.EventReasonRolloutStep}},
		{name: "the last step done without an HTTPRoute: the stable takes the canary's template", cur: at(appv1.RolloutProgressing, 2),
			o: &Observation{Desired: v2, StableSettled: true, StepDone: true}, want: "Progressing 3 h2 h2",
			wantReasons: []string{appv1.EventReasonRolloutStep}},
		{name: "abort", cur: at(appv1.RolloutPaused, 1), o: req(appv1.RolloutActionAbort, "h2", 1),
			want: "Aborted 1 h1 h2", wantReasons: []string{appv1.ReasonRolloutAborted}},
		{name: "pause", cur: at(appv1.RolloutProgressing, 0), o: req(appv1.RolloutActionPause, "h2", 0),
			want: "Paused 0 h1 h2", wantReasons: []string{appv1.EventReasonRolloutPaused}},
		// The soak found resume leaving pausedByRequest set: the rollout stayed Paused, and
		// every resume was accepted again.
		{name: "resume: a setWeight step goes on", cur: func() *appv1.RolloutStatus {
			r := at(appv1.RolloutPaused, 0)
			r.PausedByRequest = true
			return r
		}(), o: req(appv1.RolloutActionResume, "h2", 0), want: "Progressing 0 h1 h2", wantReasons: []string{appv1.EventReasonRolloutResumed}},
		{name: "resume at a pause step: it waits for promote again, not for resume", cur: func() *appv1.RolloutStatus {
			r := at(appv1.RolloutPaused, 1)
			r.PausedByRequest = true
			return r
		}(), o: req(appv1.RolloutActionResume, "h2", 1), want: "Paused 1 h1 h2", wantReasons: []string{appv1.EventReasonRolloutResumed}},
		{name: "promote retries an aborted rollout", cur: at(appv1.RolloutAborted, 1), o: req(appv1.RolloutActionPromote, "h2", 1),
			want: "Progressing 0 h1 h2", wantReasons: []string{appv1.EventReasonRolloutStarted}},
		{name: "a request handled once", cur: func() *appv1.RolloutStatus {
			r := at(appv1.RolloutPaused, 1)
			r.LastRequest = "req-1"
			r.Message = "Rollout to revision web-2, step 2 of 3 (pause until promoted), canary at 25%: paused until kubectl app promote"
			return r
		}(), o: req(appv1.RolloutActionPromote, "h2", 1), same: true},
		{name: "promotion, first stage done: the stable takes the canary's template", cur: at(appv1.RolloutProgressing, 3),
			o: &Observation{Desired: v2, StableSettled: true, StepDone: true, Weighted: true}, want: "Progressing 3 h2 h2"},
		{name: "promotion, last stage done: promoted", cur: func() *appv1.RolloutStatus {
			r := at(appv1.RolloutProgressing, 3)
			r.Stable = &v2
			return r
		}(), o: &Observation{Desired: v2, StableSettled: true, StepDone: true}, want: "Healthy 0 h2 -",
			wantReasons: []string{appv1.EventReasonRolloutPromoted}},
		{name: "a change during the promotion's last stage goes to the stable at once", cur: func() *appv1.RolloutStatus {
			r := at(appv1.RolloutProgressing, 3)
			r.Stable = &v2
			return r
		}(), o: &Observation{Desired: v3, StableSettled: true}, want: "Healthy 0 h3 -",
			wantReasons: []string{appv1.EventReasonRolloutRolledBack}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.o.Now = testNow
			if tt.same {
				// As the controller wrote it: with its message.
				tt.cur.Message = (&machine{s: appfixture.CanaryStrategy(), o: tt.o, next: tt.cur}).message()
			}
			next, notes := Next(appfixture.CanaryStrategy(), tt.cur, tt.o)
			if tt.same {
				if next != tt.cur || len(notes) != 0 {
					t.Errorf("changed: %+v, notes %+v", next, notes)
				}
				return
			}
			canary := "-"
			if next.Canary != nil {
				canary = next.Canary.PodTemplateHash
			}
			if got := fmt.Sprintf("%s %d %s %s", next.Phase, next.CurrentStepIndex, next.Stable.PodTemplateHash, canary); got != tt.want {
				t.Errorf("next = %s, want %s (message %q)", got, tt.want, next.Message)
			}
			if tt.o.Request != nil && tt.o.Request.Action == appv1.RolloutActionResume && next.PausedByRequest {
				t.Errorf("still paused by request after a resume: %+v", next)
			}
			var reasons []string
			for _, n := range notes {
				reasons = append(reasons, n.Reason)
			}
			if !slices.Equal(reasons, tt.wantReasons) {
				t.Errorf("notes %q, want %q: %+v", reasons, tt.wantReasons, notes)
			}
			// A second run on what it wrote, with nothing new, changes nothing.
			o := *tt.o
			o.Failure, o.StepDone = Abort{}, false
			if again, notes := Next(appfixture.CanaryStrategy(), next, &o); again != next || len(notes) != 0 {
				t.Errorf("not stable: then %+v, notes %+v", again, notes)
			}
		})
	}
}

// TestChecks checks the decisions on the canary's checks: a Failed one aborts, with
// AnalysisFailed and what it measured; a Running or Inconclusive one holds a step that
// is otherwise done, and the message says which; all Passed, the step ends; a request
// still acts on a held step.
func TestChecks(t *testing.T) {
	v1 := appv1.RolloutVersion{Revision: "web-1", PodTemplateHash: "h1", ReplicaSetHash: "rs1"}
	v2 := appv1.RolloutVersion{Revision: "web-2", PodTemplateHash: "h2"}
	start := metav1.NewTime(testNow.Add(-time.Minute))
	measured := testNow.Add(-10 * time.Second)
	s := appfixture.CanaryStrategy()
	s.Steps[1].Pause.Duration = &metav1.Duration{Duration: 30 * time.Second}
	at := func(phase appv1.RolloutPhase, step int32) *appv1.RolloutStatus {
		v1, v2 := v1, v2
		return &appv1.RolloutStatus{Phase: phase, CurrentStepIndex: step, StepStartedAt: &start, CanaryWeight: WeightAt(s, step), Stable: &v1, Canary: &v2}
	}
	check := func(name string, phase CheckPhase) CheckResult {
		return CheckResult{Name: name, Phase: phase, Value: "0.042", Threshold: "<= 0.01", MeasuredAt: measured}
	}
	passed, running, inconclusive, failed := check("success-rate", CheckPassed), check("latency", CheckRunning),
		check("errors", CheckInconclusive), check("error-rate", CheckFailed)
	tests := []struct {
		name   string
		cur    *appv1.RolloutStatus
		stepOK bool
		checks []CheckResult
		req    appv1.RolloutAction
		// want: phase and step; abort: the abort's reason and message; message: a part
		// of status.rollout.message.
		want, abort, message string
	}{
		{name: "a failed check aborts a step not done", cur: at(appv1.RolloutProgressing, 0), checks: []CheckResult{passed, failed},
			want: "Aborted 0", abort: `AnalysisFailed: check "error-rate" failed: 0.042, threshold <= 0.01 (measured at 2026-11-22T09:59:50Z)`},
		{name: "a failed check aborts a pause", cur: at(appv1.RolloutPaused, 1), checks: []CheckResult{running, failed},
			want: "Aborted 1", abort: `AnalysisFailed: check "error-rate" failed`},
		{name: "a failed check wins over a done step", cur: at(appv1.RolloutProgressing, 0), stepOK: true, checks: []CheckResult{failed},
			want: "Aborted 0", abort: "AnalysisFailed"},
		{name: "a running check holds a done setWeight step", cur: at(appv1.RolloutProgressing, 0), stepOK: true, checks: []CheckResult{passed, running},
			want: "Progressing 0", message: `waiting for its checks: "latency" running`},
		{name: "an inconclusive check holds a pause past its duration", cur: at(appv1.RolloutPaused, 1), checks: []CheckResult{inconclusive},
			want: "Paused 1", message: `waiting for its checks: "errors" inconclusive`},
		{name: "every check passed: the step ends", cur: at(appv1.RolloutProgressing, 0), stepOK: true, checks: []CheckResult{passed, passed},
			want: "Paused 1"},
		{name: "passed checks do not end a step not done", cur: at(appv1.RolloutProgressing, 0), checks: []CheckResult{passed},
			want: "Progressing 0", message: "waiting for the canary's pods and the weight"},
		{name: "kubectl app promote ends a step its checks hold", cur: at(appv1.RolloutPaused, 1), checks: []CheckResult{inconclusive},
			req: appv1.RolloutActionPromote, want: "Progressing 2"},
		{name: "checks are not consulted during the promotion", cur: at(appv1.RolloutProgressing, 3), stepOK: true, checks: []CheckResult{failed},
			want: "Progressing 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := &Observation{Now: testNow, Desired: v2, StableSettled: true, StableHash: "rs1", StepDone: tt.stepOK, Weighted: true, Checks: tt.checks}
			if tt.req != "" {
				r := appv1.RolloutRequest{Action: tt.req, Canary: "h2", Step: tt.cur.CurrentStepIndex, ID: "req-1"}
				o.Request, o.RequestID = &r, r.ID
			}
			next, _ := Next(s, tt.cur, o)
			if got := fmt.Sprintf("%s %d", next.Phase, next.CurrentStepIndex); got != tt.want {
				t.Errorf("next = %s, want %s (message %q)", got, tt.want, next.Message)
			}
			if abort := next.AbortReason + ": " + next.AbortMessage; tt.abort != "" && !strings.HasPrefix(abort, tt.abort) {
				t.Errorf("abort %q, want %q...", abort, tt.abort)
			}
			if !strings.Contains(next.Message, tt.message) {
				t.Errorf("message %q, want it to say %q", next.Message, tt.message)
			}
		})
	}
}

// TestNextNewerChangeWhileStableScales: a newer change during a canary, or after its
// abort, while the deployment controller has not observed the stable Deployment's
// scale yet, restarts the steps with the stable pods recorded at the rollout's start: it
// never goes to the stable Deployment directly.
func TestNextNewerChangeWhileStableScales(t *testing.T) {
	v2 := appv1.RolloutVersion{Revision: "web-2", PodTemplateHash: "h2"}
	v3 := appv1.RolloutVersion{Revision: "web-3", PodTemplateHash: "h3"}
	for _, phase := range []appv1.RolloutPhase{appv1.RolloutPaused, appv1.RolloutAborted} {
		cur := &appv1.RolloutStatus{Phase: phase, CurrentStepIndex: 1, CanaryWeight: 25,
			Stable: &appv1.RolloutVersion{Revision: "web-1", PodTemplateHash: "h1", ReplicaSetHash: "rs1"}, Canary: &v2}
		next, notes := Next(appfixture.CanaryStrategy(), cur, &Observation{Now: testNow, Desired: v3})
		if next.Canary == nil || next.Canary.PodTemplateHash != "h3" || next.Stable.PodTemplateHash != "h1" || next.Stable.ReplicaSetHash != "rs1" ||
			next.Phase != appv1.RolloutProgressing || next.CurrentStepIndex != 0 {
			t.Errorf("%s: next %+v (stable %+v, canary %+v); want the steps again toward h3 from the stable h1 of rs1", phase, next, next.Stable, next.Canary)
		}
		if len(notes) != 1 || notes[0].Reason != appv1.EventReasonRolloutStarted {
			t.Errorf("%s: notes %+v; want one %s", phase, notes, appv1.EventReasonRolloutStarted)
		}
	}
}

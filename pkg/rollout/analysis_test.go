package rollout

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// TestAnalysisStep checks an analysis step: it ends once its checks passed, holds while
// one runs or is inconclusive, aborts with AnalysisInconclusive when one stays
// inconclusive past the progress deadline, and records the checks' state; the next
// step drops it but keeps canary.analysis's, and a new start drops both.
func TestAnalysisStep(t *testing.T) {
	v1 := appv1.RolloutVersion{Revision: "web-1", PodTemplateHash: "h1", ReplicaSetHash: "rs1"}
	v2 := appv1.RolloutVersion{Revision: "web-2", PodTemplateHash: "h2"}
	s := &appv1.CanaryStrategy{
		ProgressDeadlineSeconds: ptr.To[int32](600),
		Steps: []appv1.CanaryStep{
			{SetWeight: ptr.To[int32](10)},
			{Analysis: &appv1.AnalysisStep{Checks: []appv1.AnalysisCheck{{Name: "sr", SuccessRate: &appv1.SuccessRateCheck{Min: ptr.To("99")}}}}},
			{SetWeight: ptr.To[int32](50)},
		},
		Analysis: &appv1.BackgroundAnalysis{Checks: []appv1.AnalysisCheck{{Name: "bg", Latency: &appv1.LatencyCheck{MaxMs: ptr.To[int32](500)}}}},
	}
	measured := metav1.NewTime(testNow.Add(-10 * time.Second))
	recorded := []appv1.CheckStatus{
		{Name: "sr", Step: 1, Phase: appv1.AnalysisPassed, Passed: 1, MeasuredAt: &measured},
		{Name: "bg", Step: -1, Phase: appv1.AnalysisPassed, Passed: 4, MeasuredAt: &measured},
	}
	at := func(step int32, since time.Duration, analysis []appv1.CheckStatus) *appv1.RolloutStatus {
		v1, v2 := v1, v2
		start := metav1.NewTime(testNow.Add(-since))
		return &appv1.RolloutStatus{Phase: appv1.RolloutProgressing, CurrentStepIndex: step, StepStartedAt: &start, CanaryWeight: WeightAt(s, step),
			Stable: &v1, Canary: &v2, Analysis: analysis}
	}
	result := func(name string, phase CheckPhase) CheckResult {
		return CheckResult{Name: name, Phase: phase, Value: "3 requests", Threshold: ">= 10 requests", Message: "too little traffic to judge"}
	}
	tests := []struct {
		name     string
		cur      *appv1.RolloutStatus
		checks   []CheckResult
		analysis []appv1.CheckStatus
		// want: phase and step; abort its reason; message a part of status.rollout.message;
		// kept: the names of the checks whose state is recorded.
		want, abort, message, kept string
	}{
		{name: "passed checks end the step", cur: at(1, time.Minute, nil), checks: []CheckResult{result("sr", CheckPassed), result("bg", CheckPassed)},
			analysis: recorded, want: "Progressing 2", message: "waiting for the canary's pods", kept: "bg"},
		{name: "a running check holds it and its state is recorded", cur: at(1, time.Minute, nil), checks: []CheckResult{result("sr", CheckRunning), result("bg", CheckPassed)},
			analysis: recorded, want: "Progressing 1", message: `waiting for its checks: "sr" running`, kept: "sr,bg"},
		{name: "inconclusive before the deadline waits", cur: at(1, 599*time.Second, nil), checks: []CheckResult{result("sr", CheckInconclusive)},
			want: "Progressing 1", message: `"sr" inconclusive`},
		{name: "inconclusive at the deadline aborts", cur: at(1, 600*time.Second, recorded), checks: []CheckResult{result("sr", CheckInconclusive)},
			want: "Aborted 1", abort: appv1.ReasonAnalysisInconclusive, message: "stayed inconclusive for progressDeadlineSeconds (600s)", kept: "sr,bg"},
		{name: "a running check at the deadline does not abort", cur: at(1, time.Hour, nil), checks: []CheckResult{result("sr", CheckRunning)},
			want: "Progressing 1"},
		{name: "a failed background check aborts a setWeight step", cur: at(0, time.Second, nil), checks: []CheckResult{result("bg", CheckFailed)},
			want: "Aborted 0", abort: appv1.ReasonAnalysisFailed},
		{name: "no checks: an analysis step holds", cur: at(1, time.Minute, nil), want: "Progressing 1"},
		// A background check whose template is missing (the only inconclusive one a
		// step of another kind sees) holds it, and aborts it at the deadline.
		{name: "an inconclusive background check holds a setWeight step", cur: at(2, 599*time.Second, nil), checks: []CheckResult{result("bg", CheckInconclusive)},
			want: "Progressing 2", message: `"bg" inconclusive`},
		{name: "an inconclusive background check aborts a setWeight step at the deadline", cur: at(2, 600*time.Second, nil), checks: []CheckResult{result("bg", CheckInconclusive)},
			want: "Aborted 2", abort: appv1.ReasonAnalysisInconclusive, message: "step 3 (setWeight 50) stayed inconclusive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := &Observation{Now: testNow, Desired: v2, StableSettled: true, StableHash: "rs1", StepDone: true, Weighted: true, Checks: tt.checks, Analysis: tt.analysis}
			next, _ := Next(s, tt.cur, o)
			if got := fmt.Sprintf("%s %d", next.Phase, next.CurrentStepIndex); got != tt.want {
				t.Errorf("next = %s, want %s (message %q)", got, tt.want, next.Message)
			}
			if next.AbortReason != tt.abort {
				t.Errorf("abort reason %q (%s), want %q", next.AbortReason, next.AbortMessage, tt.abort)
			}
			if !strings.Contains(next.Message, tt.message) {
				t.Errorf("message %q, want it to say %q", next.Message, tt.message)
			}
			var kept []string
			for _, c := range next.Analysis {
				kept = append(kept, c.Name)
			}
			if strings.Join(kept, ",") != tt.kept {
				t.Errorf("status.rollout.analysis has %v, want %s", kept, tt.kept)
			}
		})
	}
	// The step's Event says what its checks measured (the next step drops their states):
	// those measured, with their values and thresholds.
	passed := []CheckResult{{Name: "sr", Phase: CheckPassed, Value: "99.5%", Threshold: ">= 99%"}, {Name: "bg", Phase: CheckPassed}}
	_, notes := Next(s, at(1, time.Minute, nil), &Observation{Now: testNow, Desired: v2, StableSettled: true, StableHash: "rs1", StepDone: true, Weighted: true, Checks: passed})
	if len(notes) != 1 || notes[0].Reason != appv1.EventReasonRolloutStep ||
		!strings.HasSuffix(notes[0].Message, "ended with its checks passed: sr 99.5% (>= 99%)") {
		t.Errorf("notes %+v, want the step's Event naming the checks' values", notes)
	}
	// A recorded state that did not change is no change: the caller writes nothing.
	same := []appv1.CheckStatus{recorded[0], recorded[1]}
	o := &Observation{Now: testNow, Desired: v2, StableSettled: true, StableHash: "rs1", Weighted: true,
		Checks: []CheckResult{result("sr", CheckRunning)}, Analysis: same}
	cur, _ := Next(s, at(1, time.Minute, recorded), o)
	if next, _ := Next(s, cur, o); next != cur {
		t.Errorf("the same analysis state is a change: %+v", next.Analysis)
	}
	// A restart after an abort (kubectl app promote) counts afresh.
	aborted := at(1, time.Minute, recorded)
	aborted.Phase, aborted.AbortReason = appv1.RolloutAborted, appv1.ReasonAnalysisFailed
	r := appv1.RolloutRequest{Action: appv1.RolloutActionPromote, Canary: "h2", ID: "req-1"}
	next, _ := Next(s, aborted, &Observation{Now: testNow, Desired: v2, StableSettled: true, StableHash: "rs1", Weighted: true, Request: &r, RequestID: r.ID})
	if next.CurrentStepIndex != 0 || next.Analysis != nil {
		t.Errorf("promote after an abort: step %d, analysis %+v; want step 0, none", next.CurrentStepIndex, next.Analysis)
	}
	if d := Due(s, at(1, time.Minute, nil), testNow); d != 541*time.Second {
		t.Errorf("Due at an analysis step = %v, want its progress deadline (541s)", d)
	}
}

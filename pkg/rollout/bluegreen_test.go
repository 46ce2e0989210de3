package rollout

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// TestBlueGreen walks blue-green rollouts through their stages, one transition a sync:
// each line is what the sync observes (at a time after the start), the state it leads
// to (phase, stage, stable and preview template hashes), the Events, and a part of the
// message. A line marked same changes nothing. The checks of prePromotionAnalysis run at
// the switch's stage (its index stays 1): they hold it, by hand or by the clock, and a
// failed one aborts before the switch.
func TestBlueGreen(t *testing.T) {
	v1 := appv1.RolloutVersion{Revision: "web-1", PodTemplateHash: "h1"}
	v2 := appv1.RolloutVersion{Revision: "web-2", PodTemplateHash: "h2"}
	type step struct {
		at   time.Duration
		o    Observation
		req  appv1.RolloutAction
		same bool
		// want: phase, stage, stable and preview hashes ("-": none).
		want    string
		reasons []string
		message string
	}
	start := step{o: Observation{Desired: v2, StableSettled: true, StableHash: "rs1"}, want: "Progressing 0 h1 h2",
		reasons: []string{appv1.EventReasonRolloutStarted}, message: "waiting for the preview's pods; revision web-1 is active"}
	up := step{at: 20 * time.Second, o: Observation{Desired: v2, StableSettled: true, StepDone: true}, want: "Paused 1 h1 h2",
		reasons: []string{appv1.EventReasonRolloutStep}, message: "kubectl app promote switches the traffic to it from revision web-1"}
	manual := &appv1.BlueGreenStrategy{ScaleDownDelaySeconds: ptr.To[int32](60)}
	// checked is a strategy with a check before the switch, switched after auto seconds
	// (nil: by hand); the checks' results as the App controller reports them.
	checked := func(auto *int32) *appv1.BlueGreenStrategy {
		return &appv1.BlueGreenStrategy{AutoPromotionSeconds: auto, PrePromotionAnalysis: &appv1.AnalysisStep{Checks: []appv1.AnalysisCheck{
			{Name: "smoke", Query: &appv1.QueryCheck{PromQL: "x", FailureCondition: &appv1.ValueRange{Min: ptr.To("0.01")}}}}}}
	}
	running := CheckResult{Name: "smoke", Phase: CheckRunning}
	passed := CheckResult{Name: "smoke", Phase: CheckPassed, Value: "0", Threshold: "<= 0.01"}
	failed := CheckResult{Name: "smoke", Phase: CheckFailed, Value: "0.5", Threshold: "<= 0.01"}
	unsure := CheckResult{Name: "smoke", Phase: CheckInconclusive, Message: "no data"}
	upChecked := step{at: 20 * time.Second, o: Observation{Desired: v2, StableSettled: true, StepDone: true}, want: "Paused 1 h1 h2",
		reasons: []string{appv1.EventReasonRolloutStep}}
	tests := []struct {
		name  string
		bg    *appv1.BlueGreenStrategy
		steps []step
	}{
		{name: "promoted by hand, the old pods kept their delay", bg: manual, steps: []step{
			start,
			{at: 10 * time.Second, o: Observation{Desired: v2, StableSettled: true}, same: true},
			up,
			{at: time.Hour, o: Observation{Desired: v2, StableSettled: true, StepDone: true}, same: true},
			{at: time.Hour, req: appv1.RolloutActionPromote, want: "Progressing 2 h1 h2", reasons: []string{appv1.EventReasonRolloutStep},
				message: "switching the traffic to it"},
			{at: time.Hour + time.Second, o: Observation{Desired: v2, StableSettled: true}, same: true},
			{at: time.Hour + 2*time.Second, o: Observation{Desired: v2, StableSettled: true, StepDone: true}, want: "Progressing 3 h1 h2",
				reasons: []string{appv1.EventReasonRolloutStep}, message: "Revision web-2 is active; the pods of revision web-1 are kept until 2026-11-22T11:01:02Z"},
			{at: time.Hour + 61*time.Second, o: Observation{Desired: v2, StableSettled: true, StepDone: true}, same: true},
			{at: time.Hour + 62*time.Second, o: Observation{Desired: v2, StableSettled: true, StepDone: true}, want: "Progressing 4 h2 h2",
				reasons: []string{appv1.EventReasonRolloutStep}, message: "Promoting revision web-2"},
			{at: time.Hour + 70*time.Second, o: Observation{Desired: v2, StableSettled: true}, same: true},
			{at: time.Hour + 80*time.Second, o: Observation{Desired: v2, StableSettled: true, StepDone: true}, want: "Healthy 0 h2 -",
				reasons: []string{appv1.EventReasonRolloutPromoted}, message: "Revision web-2 is stable"},
		}},
		{name: "auto-promotion after its seconds", bg: &appv1.BlueGreenStrategy{AutoPromotionSeconds: ptr.To[int32](30)}, steps: []step{
			start,
			{at: 20 * time.Second, o: Observation{Desired: v2, StableSettled: true, StepDone: true}, want: "Paused 1 h1 h2",
				reasons: []string{appv1.EventReasonRolloutStep}, message: "the traffic switches to it from revision web-1 at 2026-11-22T10:00:50Z"},
			{at: 49 * time.Second, o: Observation{Desired: v2, StableSettled: true, StepDone: true}, same: true},
			{at: 50 * time.Second, o: Observation{Desired: v2, StableSettled: true, StepDone: true}, want: "Progressing 2 h1 h2",
				reasons: []string{appv1.EventReasonRolloutStep}},
		}},
		{name: "a failing preview pod aborts before the switch", bg: manual, steps: []step{
			start,
			{at: 5 * time.Second, o: Observation{Desired: v2, StableSettled: true, Failure: Abort{Reason: appv1.ReasonCrashLoopBackOff, Message: "exits"}},
				want: "Aborted 0 h1 h2", reasons: []string{appv1.ReasonRolloutAborted},
				message: "Blue-green rollout to revision web-2 aborted before the switch: exits; all traffic is on the stable pods (revision web-1)"},
			{at: time.Minute, o: Observation{Desired: v2, StableSettled: true}, same: true},
			{at: 2 * time.Minute, req: appv1.RolloutActionPromote, want: "Progressing 0 h1 h2", reasons: []string{appv1.EventReasonRolloutStarted}},
		}},
		{name: "kubectl app abort within the scale-down delay switches back", bg: manual, steps: []step{
			start, up,
			{at: time.Minute, req: appv1.RolloutActionPromote, want: "Progressing 2 h1 h2", reasons: []string{appv1.EventReasonRolloutStep}},
			{at: time.Minute + time.Second, o: Observation{Desired: v2, StableSettled: true, StepDone: true}, want: "Progressing 3 h1 h2",
				reasons: []string{appv1.EventReasonRolloutStep}},
			{at: time.Minute + 10*time.Second, req: appv1.RolloutActionAbort, want: "Aborted 3 h1 h2", reasons: []string{appv1.ReasonRolloutAborted},
				message: "aborted after the switch, within its scale-down delay: aborted by kubectl app abort"},
		}},
		{name: "a change back within the scale-down delay ends the rollout at once", bg: manual, steps: []step{
			start, up,
			{at: time.Minute, req: appv1.RolloutActionPromote, want: "Progressing 2 h1 h2", reasons: []string{appv1.EventReasonRolloutStep}},
			{at: time.Minute + time.Second, o: Observation{Desired: v2, StableSettled: true, StepDone: true}, want: "Progressing 3 h1 h2",
				reasons: []string{appv1.EventReasonRolloutStep}},
			{at: time.Minute + 10*time.Second, o: Observation{Desired: v1, StableSettled: true}, want: "Healthy 0 h1 -",
				reasons: []string{appv1.EventReasonRolloutRolledBack}},
		}},
		{name: "promote --full before the preview is up: the switch, then the promotion", bg: manual, steps: []step{
			start,
			{at: time.Second, req: appv1.RolloutActionPromoteFull, want: "Progressing 2 h1 h2", reasons: []string{appv1.EventReasonRolloutStep}},
			{at: 2 * time.Second, req: appv1.RolloutActionPromoteFull, want: "Progressing 4 h2 h2", reasons: []string{appv1.EventReasonRolloutStep}},
			{at: 3 * time.Second, req: appv1.RolloutActionAbort, want: "Progressing 4 h2 h2", reasons: []string{appv1.EventReasonRolloutRequestIgnored}},
		}},
		{name: "the preview not up by its progress deadline aborts", bg: manual, steps: []step{
			start,
			{at: 599 * time.Second, o: Observation{Desired: v2, StableSettled: true}, same: true},
			{at: 600 * time.Second, o: Observation{Desired: v2, StableSettled: true}, want: "Aborted 0 h1 h2",
				reasons: []string{appv1.ReasonRolloutAborted}, message: "did not complete within progressDeadlineSeconds (600s)"},
		}},
		{name: "checks before the switch: a promote while one runs is refused, a failed one aborts with the active untouched", bg: checked(nil), steps: []step{
			start, upChecked,
			{at: time.Minute, o: Observation{Desired: v2, StableSettled: true, StepDone: true, Checks: []CheckResult{running}}, want: "Paused 1 h1 h2",
				message: `the switch from revision web-1 waits for its checks: "smoke" running`},
			{at: time.Minute, o: Observation{Desired: v2, StableSettled: true, StepDone: true, Checks: []CheckResult{running}}, same: true},
			{at: time.Minute, req: appv1.RolloutActionPromote, o: Observation{Checks: []CheckResult{running}}, want: "Paused 1 h1 h2",
				reasons: []string{appv1.EventReasonRolloutRequestIgnored}, message: `the switch from revision web-1 waits for its checks: "smoke" running`},
			{at: 2 * time.Minute, o: Observation{Desired: v2, StableSettled: true, StepDone: true, Checks: []CheckResult{failed}}, want: "Aborted 1 h1 h2",
				reasons: []string{appv1.ReasonRolloutAborted},
				message: `Blue-green rollout to revision web-2 aborted before the switch: check "smoke" failed: 0.5, threshold <= 0.01; all traffic is on the stable pods (revision web-1)`},
		}},
		{name: "checks before the switch: passed, kubectl app promote switches", bg: checked(nil), steps: []step{
			start, upChecked,
			{at: 2 * time.Minute, o: Observation{Desired: v2, StableSettled: true, StepDone: true, Checks: []CheckResult{passed}}, want: "Paused 1 h1 h2",
				message: "kubectl app promote switches the traffic to it"},
			{at: 2 * time.Minute, req: appv1.RolloutActionPromote, o: Observation{Checks: []CheckResult{passed}}, want: "Progressing 2 h1 h2",
				reasons: []string{appv1.EventReasonRolloutStep}, message: "switching the traffic to it"},
		}},
		{name: "checks before the switch: autoPromotionSeconds waits for them", bg: checked(ptr.To[int32](30)), steps: []step{
			start, upChecked,
			{at: time.Minute, o: Observation{Desired: v2, StableSettled: true, StepDone: true, Checks: []CheckResult{running}}, want: "Paused 1 h1 h2",
				message: `waits for its checks: "smoke" running`},
			{at: 90 * time.Second, o: Observation{Desired: v2, StableSettled: true, StepDone: true, Checks: []CheckResult{running}}, same: true},
			{at: 2 * time.Minute, o: Observation{Desired: v2, StableSettled: true, StepDone: true, Checks: []CheckResult{passed}}, want: "Progressing 2 h1 h2",
				reasons: []string{appv1.EventReasonRolloutStep}},
		}},
		{name: "checks before the switch: inconclusive until the progress deadline aborts", bg: checked(ptr.To[int32](0)), steps: []step{
			start, upChecked,
			{at: time.Minute, o: Observation{Desired: v2, StableSettled: true, StepDone: true, Checks: []CheckResult{unsure}}, want: "Paused 1 h1 h2",
				message: `waits for its checks: "smoke" inconclusive`},
			{at: 619 * time.Second, o: Observation{Desired: v2, StableSettled: true, StepDone: true, Checks: []CheckResult{unsure}}, same: true},
			{at: 620 * time.Second, o: Observation{Desired: v2, StableSettled: true, StepDone: true, Checks: []CheckResult{unsure}}, want: "Aborted 1 h1 h2",
				reasons: []string{appv1.ReasonRolloutAborted}, message: "stayed inconclusive for progressDeadlineSeconds (600s)"},
		}},
		{name: "checks before the switch: no results (none reported) hold the switch, by the clock and by hand", bg: checked(ptr.To[int32](0)), steps: []step{
			start, upChecked,
			{at: time.Hour, o: Observation{Desired: v2, StableSettled: true, StepDone: true}, same: true},
			{at: time.Hour, req: appv1.RolloutActionPromote, want: "Paused 1 h1 h2", reasons: []string{appv1.EventReasonRolloutRequestIgnored}},
		}},
		{name: "checks before the switch: promote --full switches without them", bg: checked(nil), steps: []step{
			start, upChecked,
			{at: time.Minute, req: appv1.RolloutActionPromoteFull, o: Observation{Checks: []CheckResult{running}}, want: "Progressing 2 h1 h2",
				reasons: []string{appv1.EventReasonRolloutStep}},
		}},
		{name: "kubectl app pause holds the switch, resume lets it go", bg: &appv1.BlueGreenStrategy{AutoPromotionSeconds: ptr.To[int32](0)}, steps: []step{
			start,
			{at: time.Second, req: appv1.RolloutActionPause, want: "Paused 0 h1 h2", reasons: []string{appv1.EventReasonRolloutPaused}},
			{at: time.Minute, o: Observation{Desired: v2, StableSettled: true, StepDone: true}, same: true},
			{at: time.Minute, req: appv1.RolloutActionResume, want: "Progressing 0 h1 h2", reasons: []string{appv1.EventReasonRolloutResumed}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cur := &appv1.RolloutStatus{Phase: appv1.RolloutHealthy, Stable: &v1}
			for i, s := range tt.steps {
				o := s.o
				o.Now = testNow.Add(s.at)
				if s.req != "" {
					o.Desired, o.StableSettled, o.StepDone = v2, true, o.StepDone || len(o.Checks) > 0
					step := int32(0)
					if cur.Canary != nil {
						step = cur.CurrentStepIndex
					}
					r := appv1.RolloutRequest{Action: s.req, Canary: "h2", Step: step, ID: fmt.Sprintf("req-%d", i)}
					o.Request, o.RequestID = &r, r.ID
				}
				next, notes := NextBlueGreen(tt.bg, cur, &o)
				if s.same {
					if next != cur || len(notes) != 0 {
						t.Fatalf("line %d: changed to %s %d (%q), notes %+v", i, next.Phase, next.CurrentStepIndex, next.Message, notes)
					}
					continue
				}
				preview := "-"
				if next.Canary != nil {
					preview = next.Canary.PodTemplateHash
				}
				if got := fmt.Sprintf("%s %d %s %s", next.Phase, next.CurrentStepIndex, next.Stable.PodTemplateHash, preview); got != s.want {
					t.Fatalf("line %d: next = %s, want %s (message %q)", i, got, s.want, next.Message)
				}
				var reasons []string
				for _, n := range notes {
					reasons = append(reasons, n.Reason)
				}
				if !slices.Equal(reasons, s.reasons) {
					t.Errorf("line %d: notes %q, want %q: %+v", i, reasons, s.reasons, notes)
				}
				if !strings.Contains(next.Message, s.message) {
					t.Errorf("line %d: message %q, want it to say %q", i, next.Message, s.message)
				}
				// Written as the API stores it: times to the second.
				cur = roundTimes(next)
			}
		})
	}
}

// roundTimes returns r with its times to the second, as the API server stores them.
func roundTimes(r *appv1.RolloutStatus) *appv1.RolloutStatus {
	r = r.DeepCopy()
	for _, t := range []**metav1.Time{&r.StepStartedAt, &r.CanaryScaleDownAt} {
		if *t != nil {
			*t = &metav1.Time{Time: (*t).Truncate(time.Second)}
		}
	}
	return r
}

// TestBlueGreenPlan checks what the children are at each stage: the preview at the
// App's replicas from the start, the App's Service on the stable pods until the switch
// (which waits for the preview's pods) and on the preview's after it, the preview kept
// after an abort for its delay; the preview's route while the preview has pods.
func TestBlueGreenPlan(t *testing.T) {
	bg := &appv1.BlueGreenStrategy{}
	v1 := &appv1.RolloutVersion{PodTemplateHash: "h1", ReplicaSetHash: "rs1"}
	v2 := &appv1.RolloutVersion{PodTemplateHash: "h2"}
	later := metav1.NewTime(testNow.Add(time.Minute))
	state := func(phase appv1.RolloutPhase, stage int32, stable *appv1.RolloutVersion) *appv1.RolloutStatus {
		return &appv1.RolloutStatus{Phase: phase, CurrentStepIndex: stage, Stable: stable, Canary: v2}
	}
	up := Live{N: 4, StableReplicas: 4, CanaryExists: true, CanaryReplicas: 4, CanaryAvailable: 4, CanaryWeight: -1}
	tests := []struct {
		name string
		r    *appv1.RolloutStatus
		l    Live
		// want: preview replicas ("-": none, "keep": left as it is), active, preview
		// Service, preview route, stepDone, stableMustRun.
		want string
	}{
		{"the preview starts: the App's replicas, the Service on the stable pods", state(appv1.RolloutProgressing, StagePreview, v1),
			Live{N: 4, StableReplicas: 4, CanaryWeight: -1}, "4 stable true true false false"},
		{"the preview up", state(appv1.RolloutProgressing, StagePreview, v1), up, "4 stable true true true false"},
		{"waiting for the switch", state(appv1.RolloutPaused, StageSwitch, v1), up, "4 stable true true true false"},
		{"the switch", state(appv1.RolloutProgressing, StageSwitched, v1), up, "4 preview true true false false"},
		{"the switch in effect", state(appv1.RolloutProgressing, StageSwitched, v1), func() Live { l := up; l.ActiveOnPreview = true; return l }(),
			"4 preview true true true false"},
		{"the switch waits for a preview not available", state(appv1.RolloutProgressing, StageSwitched, v1),
			Live{N: 4, StableReplicas: 4, CanaryExists: true, CanaryReplicas: 4, CanaryAvailable: 3}, "4 stable true true false false"},
		{"the old pods kept", state(appv1.RolloutProgressing, StageScaleDown, v1), func() Live { l := up; l.ActiveOnPreview = true; return l }(),
			"4 preview true true true false"},
		{"the promotion: the stable rolls while the preview serves", state(appv1.RolloutProgressing, 4, v2), up, "4 preview true true false true"},
		{"aborted, within the abort's delay: the preview kept, no traffic", func() *appv1.RolloutStatus {
			r := state(appv1.RolloutAborted, StageScaleDown, v1)
			r.CanaryScaleDownAt = &later
			return r
		}(), up, "keep stable true true false false"},
		{"aborted, the delay passed: the preview to 0, its route gone", state(appv1.RolloutAborted, StageScaleDown, v1), up, "0 stable true false false false"},
		{"promoted: the preview kept its delay, the Service on all the pods", &appv1.RolloutStatus{Phase: appv1.RolloutHealthy, Stable: v2, CanaryScaleDownAt: &later},
			up, "keep  false false true false"},
		{"at rest", &appv1.RolloutStatus{Phase: appv1.RolloutHealthy, Stable: v2}, Live{N: 4, StableReplicas: 4}, "-  false false true false"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewBlueGreenPlan(bg, tt.r, tt.l, testNow)
			preview := "-"
			switch {
			case p.KeepCanary:
				preview = "keep"
			case p.CanaryReplicas != nil:
				preview = fmt.Sprint(*p.CanaryReplicas)
			}
			if got := fmt.Sprintf("%s %s %t %t %t %t", preview, p.Active, p.PreviewService, p.PreviewRoute, p.StepDone, p.StableMustRun); got != tt.want {
				t.Errorf("plan = %q, want %q", got, tt.want)
			}
			if p.Split != nil {
				t.Errorf("a blue-green plan splits no route: %+v", p.Split)
			}
		})
	}
}

// TestBlueGreenDue checks when a blue-green state changes by the clock alone: the
// auto-promotion, the end of the scale-down delay, the preview's progress deadline.
func TestBlueGreenDue(t *testing.T) {
	bg := &appv1.BlueGreenStrategy{AutoPromotionSeconds: ptr.To[int32](30), ScaleDownDelaySeconds: ptr.To[int32](60)}
	s := BlueGreenStages(bg)
	startedAt := metav1.NewTime(testNow)
	for _, tt := range []struct {
		stage int32
		want  time.Duration
	}{{StagePreview, 601 * time.Second}, {StageSwitch, 31 * time.Second}, {StageScaleDown, 61 * time.Second}} {
		r := &appv1.RolloutStatus{Phase: appv1.RolloutProgressing, CurrentStepIndex: tt.stage, StepStartedAt: &startedAt,
			Stable: &appv1.RolloutVersion{PodTemplateHash: "h1"}, Canary: &appv1.RolloutVersion{PodTemplateHash: "h2"}}
		if got := Due(s, r, testNow); got != tt.want {
			t.Errorf("stage %d: due in %s, want %s", tt.stage, got, tt.want)
		}
	}
}

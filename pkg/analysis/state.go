package analysis

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// BackgroundStep is CheckStatus.Step of a check of canary.analysis.
const BackgroundStep int32 = -1

// Active is a check that runs at a step of a rollout: an analysis step's (Step is its
// index) or canary.analysis's (Step is BackgroundStep).
type Active struct {
	Check *appv1.AnalysisCheck
	Step  int32
}

// ActiveChecks returns the checks that run at step k of s (none past the last step: a
// promotion measures nothing).
func ActiveChecks(s *appv1.CanaryStrategy, k int32) []Active {
	if s == nil || k < 0 || k >= int32(len(s.Steps)) {
		return nil
	}
	var out []Active
	if a := s.Steps[k].Analysis; a != nil {
		for i := range a.Checks {
			out = append(out, Active{Check: &a.Checks[i], Step: k})
		}
	}
	if b := s.Analysis; b != nil && k >= b.StartingStep {
		for i := range b.Checks {
			out = append(out, Active{Check: &b.Checks[i], Step: BackgroundStep})
		}
	}
	return out
}

// NeedsPrometheus reports whether any check of s queries Prometheus.
func NeedsPrometheus(s *appv1.CanaryStrategy) []string {
	if s == nil {
		return nil
	}
	var names []string
	for k := range s.Steps {
		for _, a := range ActiveChecks(s, int32(k)) {
			if a.Step != BackgroundStep && IsMetric(a.Check) {
				names = append(names, a.Check.Name)
			}
		}
	}
	if s.Analysis != nil {
		for i := range s.Analysis.Checks {
			if IsMetric(&s.Analysis.Checks[i]) {
				names = append(names, s.Analysis.Checks[i].Name)
			}
		}
	}
	return names
}

// Statuses returns the state of the active checks, carried over from cur where a check
// of the same name and step has one, new otherwise; a check no longer active is dropped
// (the analysis step ended), but the statuses of a step that just ended stay in cur
// until the next step's list replaces them.
func Statuses(active []Active, cur []appv1.CheckStatus) []appv1.CheckStatus {
	if len(active) == 0 {
		return nil
	}
	out := make([]appv1.CheckStatus, 0, len(active))
	for _, a := range active {
		st := appv1.CheckStatus{Name: a.Check.Name, Step: a.Step}
		for _, c := range cur {
			if c.Name == a.Check.Name && c.Step == a.Step {
				st = c
				break
			}
		}
		out = append(out, st)
	}
	return out
}

// Due reports whether check c, whose state is st, is due for a measurement at now, its
// step having started at started: its first measurement once FirstDue, then an interval
// after the last.
func Due(c *appv1.AnalysisCheck, st *appv1.CheckStatus, started, now time.Time) bool {
	return !now.Before(dueAt(c, st, started))
}

// FirstDue is when check c, whose step started at started, makes its first measurement:
// a metric check an interval after started, so that the window it measures holds the
// requests of its step only (at its weight; measured at once, it would judge the
// previous step's, or a canary that had no traffic yet); a webhook at once.
func FirstDue(c *appv1.AnalysisCheck, started time.Time) time.Time {
	if !IsMetric(c) || started.IsZero() {
		return started
	}
	return started.Add(Interval(c))
}

// dueAt is when check c, whose state is st, is due: FirstDue, or an interval after its
// last measurement.
func dueAt(c *appv1.AnalysisCheck, st *appv1.CheckStatus, started time.Time) time.Time {
	if st.MeasuredAt == nil {
		return FirstDue(c, started)
	}
	return st.MeasuredAt.Add(Interval(c))
}

// NextDue returns when the next of the active checks is due, their step having started
// at started (zero: none).
func NextDue(active []Active, sts []appv1.CheckStatus, started time.Time) time.Time {
	var next time.Time
	for i, a := range active {
		if i >= len(sts) {
			break
		}
		if sts[i].Reason != "" {
			continue // unresolved: measured once its template resolves (a template's event)
		}
		at := dueAt(a.Check, &sts[i], started)
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	return next
}

// Record returns st with measurement m made at now: its result, and its counts.
func Record(st appv1.CheckStatus, m Measurement, now time.Time) appv1.CheckStatus {
	st.Phase, st.Value, st.Threshold, st.Message = m.Phase, m.Value, m.Threshold, m.Message
	st.Reason = ""
	st.MeasuredAt = &metav1.Time{Time: now.Truncate(time.Second)}
	switch m.Phase {
	case appv1.AnalysisPassed:
		st.Passed++
	case appv1.AnalysisFailed:
		st.Failed++
	default:
		st.Inconclusive++
	}
	return st
}

// Unresolved returns st of a check whose template ref cannot be used (e): no
// measurement; its counts stay, and MeasuredAt goes, so that the check is measured as
// soon as its template resolves.
func Unresolved(st appv1.CheckStatus, ref *appv1.AnalysisTemplateRef, e *TemplateError) appv1.CheckStatus {
	st.Template = ref.String()
	st.Phase, st.Reason, st.Message = appv1.AnalysisError, e.Reason, e.Message
	st.Value, st.Threshold, st.MeasuredAt = "", "", nil
	return st
}

// Resolved returns st, a check whose template was missing or did not fit (Unresolved),
// once its template resolves: as a check not measured yet, keeping its counts, so that
// it is due (NextDue) and measured as any other.
func Resolved(st appv1.CheckStatus) appv1.CheckStatus {
	if st.Reason != "" {
		st.Phase, st.Reason, st.Message = "", "", ""
	}
	return st
}

// FirstUnresolved returns the first of sts whose template cannot be used; nil: none.
func FirstUnresolved(sts []appv1.CheckStatus) *appv1.CheckStatus {
	for i := range sts {
		if sts[i].Reason != "" {
			return &sts[i]
		}
	}
	return nil
}

// Verdict is what the state of the active checks says.
type Verdict struct {
	// Passed: every check of the analysis step passed its count (false at a step that
	// is not an analysis step).
	Passed bool
	// Failed is the first check that failed beyond its failureLimit; nil: none.
	Failed *appv1.CheckStatus
	// Waiting is the first check of the analysis step whose last measurement was
	// inconclusive (or none was made yet); nil: none.
	Waiting *appv1.CheckStatus
}

// Judge returns the verdict of the active checks, sts their states in the same order.
func Judge(active []Active, sts []appv1.CheckStatus) Verdict {
	var v Verdict
	stepChecks := 0
	passed := 0
	for i, a := range active {
		if i >= len(sts) {
			break
		}
		st := &sts[i]
		if st.Failed > a.Check.FailureLimit && v.Failed == nil {
			v.Failed = st
		}
		if a.Step == BackgroundStep {
			continue
		}
		stepChecks++
		if st.Passed >= ptr.Deref(a.Check.Count, 1) {
			passed++
			continue
		}
		if v.Waiting == nil && (st.MeasuredAt == nil || st.Phase == appv1.AnalysisInconclusive || st.Phase == appv1.AnalysisError) {
			v.Waiting = st
		}
	}
	v.Passed = stepChecks > 0 && passed == stepChecks && v.Failed == nil
	return v
}

// FailedMessage is the abort message of a check that failed beyond its limit: it names
// the check, the value and the threshold.
func FailedMessage(st *appv1.CheckStatus, c *appv1.AnalysisCheck) string {
	msg := st.Message
	if msg == "" {
		msg = fmt.Sprintf("value %s, threshold %s", st.Value, st.Threshold)
	}
	limit := ""
	if c != nil && c.FailureLimit > 0 {
		limit = fmt.Sprintf(" (%d failures, failureLimit %d)", st.Failed, c.FailureLimit)
	}
	return fmt.Sprintf("analysis check %s failed: %s%s", st.Name, msg, limit)
}

// InconclusiveMessage is the abort message of an analysis step whose check st stayed
// inconclusive until the progress deadline of seconds.
func InconclusiveMessage(st *appv1.CheckStatus, seconds int32) string {
	why := st.Message
	if why == "" {
		why = "no measurement was made"
	}
	return fmt.Sprintf("analysis check %s stayed inconclusive for progressDeadlineSeconds (%ds): %s", st.Name, seconds, strings.TrimSuffix(why, "."))
}

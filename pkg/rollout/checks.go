package rollout

import (
	"fmt"
	"strings"
	"time"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// Where the canary's analysis plugs into the state machine: its checks' results, part
// of the Observation. The machine computes none (pkg/rollout holds no client); a sync
// passes the results of the checks that apply to the current step, and the machine
// decides on them: a Failed check aborts the rollout (ReasonAnalysisFailed), as a failing
// canary pod does; a step ends only once every check Passed, so a Running or an
// Inconclusive one holds it (kubectl app promote still ends it; abort still aborts).

// backgroundStep is appv1.CheckStatus.Step of a check of canary.analysis (as
// pkg/analysis.BackgroundStep).
const backgroundStep int32 = -1

// CheckPhase is where a check of the canary stands.
type CheckPhase string

const (
	// CheckPassed: the measurement is within its threshold.
	CheckPassed CheckPhase = "Passed"
	// CheckFailed: the measurement is beyond its threshold: the rollout aborts.
	CheckFailed CheckPhase = "Failed"
	// CheckInconclusive: no verdict can be drawn (no data, or between the thresholds of
	// success and failure): the step holds until a person promotes or aborts.
	CheckInconclusive CheckPhase = "Inconclusive"
	// CheckRunning: not measured enough yet: the step holds.
	CheckRunning CheckPhase = "Running"
)

// CheckResult is the result of one check of the canary at the current step.
type CheckResult struct {
	// Name names the check, as the App's spec does.
	Name  string
	Phase CheckPhase
	// Value is what was measured and Threshold what it is held against, as the
	// analysis prints them ("0.042", "<= 0.01"); "" when not measured.
	Value, Threshold string
	// Message says more (the query's error, why it is inconclusive); may be "".
	Message string
	// MeasuredAt is when Value was measured; zero when not measured.
	MeasuredAt time.Time
}

// String says what the check found, for an Event or a message.
func (c CheckResult) String() string {
	s := fmt.Sprintf("check %q %s", c.Name, strings.ToLower(string(c.Phase)))
	if c.Value != "" {
		s += fmt.Sprintf(": %s", c.Value)
		if c.Threshold != "" {
			s += fmt.Sprintf(", threshold %s", c.Threshold)
		}
	}
	if !c.MeasuredAt.IsZero() {
		s += fmt.Sprintf(" (measured at %s)", c.MeasuredAt.UTC().Format(time.RFC3339))
	}
	if c.Message != "" {
		s += ": " + c.Message
	}
	return s
}

// judge returns the first Failed check of checks (nil: none), and those that hold the
// step: neither Passed nor Failed (an unknown phase holds too).
func judge(checks []CheckResult) (failed *CheckResult, holding []CheckResult) {
	for i, c := range checks {
		switch c.Phase {
		case CheckPassed:
		case CheckFailed:
			if failed == nil {
				failed = &checks[i]
			}
		default:
			holding = append(holding, c)
		}
	}
	return failed, holding
}

// checksAbort is the abort of a rollout for a failed check.
func checksAbort(c *CheckResult) Abort {
	return Abort{Reason: appv1.ReasonAnalysisFailed, Message: c.String()}
}

// holdingMessage says which checks hold the step.
func holdingMessage(holding []CheckResult) string {
	names := make([]string, 0, len(holding))
	for _, c := range holding {
		names = append(names, fmt.Sprintf("%q %s", c.Name, strings.ToLower(string(c.Phase))))
	}
	return "waiting for its checks: " + strings.Join(names, ", ")
}

// passedMessage says how an analysis step ended, with what its checks measured last
// ("with its checks passed: success-rate 100% (>= 99%), latency 4.9ms (<= 200ms)"): the
// next step drops their states from the status, so the step's Event (and its
// notification) keeps them.
func passedMessage(checks []CheckResult) string {
	var parts []string
	for _, c := range checks {
		if c.Value == "" {
			continue
		}
		p := c.Name + " " + c.Value
		if c.Threshold != "" {
			p += " (" + c.Threshold + ")"
		}
		parts = append(parts, p)
	}
	if len(parts) == 0 {
		return "with its checks passed"
	}
	return "with its checks passed: " + strings.Join(parts, ", ")
}

// inconclusive returns the first of holding that is Inconclusive (no data, too few
// requests, an error of the measurement), nil: none.
func inconclusive(holding []CheckResult) *CheckResult {
	for i := range holding {
		if holding[i].Phase == CheckInconclusive {
			return &holding[i]
		}
	}
	return nil
}

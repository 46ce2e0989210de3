package plugin

import (
	"fmt"
	"strings"
	"time"
	"unicode"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/podhealth"
)

// Health is the one-word health of a line of the tree.
type Health string

// Health words of objects, from kstatus.
const (
	// HealthReady: kstatus Current, the object is what its spec asks for.
	HealthReady Health = "Ready"
	// HealthProgressing: kstatus InProgress or Terminating, the object is on its way.
	HealthProgressing Health = "Progressing"
	// HealthFailed: kstatus Failed, the object will not get there without someone acting.
	HealthFailed Health = "Failed"
	// HealthUnknown: kstatus could not tell, or the object could not be read.
	HealthUnknown Health = "Unknown"
)

// Health words of placeholders: children the App asks for but does not control.
const (
	// HealthConflict: the child's name is held by an object the App does not control.
	HealthConflict Health = "Conflict"
	// HealthMissing: no object has the child's name.
	HealthMissing Health = "Missing"
)

// healthOf returns the health word of u and kstatus's message about it.
func healthOf(u *unstructured.Unstructured) (Health, string) {
	res, err := kstatus.Compute(u)
	if err != nil {
		return HealthUnknown, fmt.Sprintf("computing the status: %v", err)
	}
	switch res.Status {
	case kstatus.CurrentStatus:
		return HealthReady, res.Message
	case kstatus.InProgressStatus:
		return HealthProgressing, res.Message
	case kstatus.TerminatingStatus:
		return HealthProgressing, "Terminating: " + res.Message
	case kstatus.FailedStatus:
		return HealthFailed, res.Message
	default:
		return HealthUnknown, res.Message
	}
}

// podHealth returns the health of a pod: kstatus's (health, message), except when the
// pod's status shows what keeps it from being ready (podhealth, as the App controller
// reads it): then that problem, the reason first, Failed when it made the App Stalled.
func podHealth(u *unstructured.Unstructured, health Health, message string) (Health, string) {
	pod := &corev1.Pod{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, pod); err != nil {
		return health, message
	}
	now := time.Now()
	problem, _ := podhealth.Inspect(pod, now)
	if problem == nil {
		return health, message
	}
	if problem.Stalled(now) {
		health = HealthFailed
	} else if health == HealthReady {
		health = HealthProgressing
	}
	return health, problem.Reason + ": " + problem.Message
}

// appHealth returns the health word of an App, from kstatus, and the reason and message
// of its Ready condition. kstatus's own message is used instead when the Ready condition
// is absent or describes an older generation of the App.
func appHealth(app *unstructured.Unstructured) (Health, string) {
	health, message := healthOf(app)
	ready, ok := findCondition(app, appv1.ConditionReady)
	if !ok || ready.observedGeneration < app.GetGeneration() {
		return health, message
	}
	if ready.message == "" {
		return health, ready.reason
	}
	return health, ready.reason + ": " + ready.message
}

// condition is the part of a metav1.Condition the plugin shows.
type condition struct {
	status, reason, message string
	observedGeneration      int64
}

// findCondition returns the condition of type conditionType in u's status.conditions.
func findCondition(u *unstructured.Unstructured, conditionType string) (condition, bool) {
	conditions, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conditions {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != conditionType {
			continue
		}
		str := func(k string) string { s, _ := m[k].(string); return s }
		gen, _, _ := unstructured.NestedInt64(m, "observedGeneration")
		return condition{status: str("status"), reason: str("reason"), message: str("message"), observedGeneration: gen}, true
	}
	return condition{}, false
}

// maxMessage bounds the length, in runes, of a message in the tree.
const maxMessage = 200

// oneLine makes s fit on one line of a table: control characters (tabs and newlines
// included, and the ESC of terminal escape sequences) become spaces, runs of spaces
// collapse, and it is cut to maxMessage runes.
func oneLine(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > maxMessage {
		s = string(r[:maxMessage-1]) + "…"
	}
	return s
}

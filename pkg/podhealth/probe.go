package podhealth

import (
	"strings"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The kubelet reports a probe's output only in an Event on the pod (reason Unhealthy,
// message "Readiness probe failed: <output>", the container in the involved object's
// field path), never in the pod's status. The App controller watches those Events alone,
// with ProbeEventSelector, trimmed by TrimProbeEvent, to add the output to the
// ContainerNotReady message.

// ProbeEventSelector is the field selector of the kubelet's Events about a probe that
// did not pass: reason Unhealthy, about a pod.
const ProbeEventSelector = "involvedObject.kind=Pod,reason=Unhealthy"

// maxProbeOutput bounds the probe output a message carries: the first line, cut at this
// many bytes. An exec probe may print anything.
const maxProbeOutput = 256

// TrimProbeEvent is an informer transform that keeps of an Event only what ProbeOutput
// reads: its identity, the pod and container it is about, its message cut to
// maxProbeOutput and when it was last seen. It leaves other objects (a tombstone) as
// they are and may run twice on the same Event.
func TrimProbeEvent(obj interface{}) (interface{}, error) {
	e, ok := obj.(*corev1.Event)
	if !ok {
		return obj, nil
	}
	return &corev1.Event{
		TypeMeta: e.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:            e.Name,
			Namespace:       e.Namespace,
			UID:             e.UID,
			ResourceVersion: e.ResourceVersion,
		},
		InvolvedObject: corev1.ObjectReference{
			Kind:      e.InvolvedObject.Kind,
			Namespace: e.InvolvedObject.Namespace,
			Name:      e.InvolvedObject.Name,
			UID:       e.InvolvedObject.UID,
			FieldPath: e.InvolvedObject.FieldPath,
		},
		Reason:        e.Reason,
		Message:       cut(firstLine(e.Message), len("Readiness probe errored: ")+maxProbeOutput),
		LastTimestamp: metav1.NewTime(lastSeen(e)),
	}, nil
}

// ProbeOutput returns the output of the probe that keeps p's container from being
// ready, from the newest of events (the kubelet's Unhealthy Events about p's pod) that
// is about that container and probe and was seen since the container started; "" if
// none is, or p is not a probe that does not pass.
func ProbeOutput(p *Problem, events []*corev1.Event) string {
	if p == nil || p.probe == "" {
		return ""
	}
	var (
		newest time.Time
		output string
	)
	since := p.runningSince.Truncate(time.Second)
	for _, e := range events {
		if e == nil || e.InvolvedObject.Name != p.Pod || e.InvolvedObject.FieldPath != p.fieldPath {
			continue
		}
		out, ok := probeOutput(e.Message, p.probe)
		seen := lastSeen(e)
		if !ok || seen.Before(since) || (output != "" && !seen.After(newest)) {
			continue
		}
		newest, output = seen, out
	}
	return output
}

// WithProbeOutput returns a copy of p whose message ends with the probe's output, or p
// itself if output is "".
func (p *Problem) WithProbeOutput(output string) *Problem {
	if p == nil || output == "" {
		return p
	}
	q := *p
	q.Message += ": " + output
	return &q
}

// probeOutput returns the output in an Unhealthy Event's message about probe
// ("Readiness", "Startup"): the kubelet writes "<probe> probe failed: <output>", or
// "<probe> probe errored: <error>" when it could not run the probe.
func probeOutput(message, probe string) (string, bool) {
	for _, prefix := range []string{probe + " probe failed: ", probe + " probe errored: "} {
		if out, ok := strings.CutPrefix(message, prefix); ok {
			out = strings.TrimSpace(out)
			return cut(out, maxProbeOutput), out != ""
		}
	}
	return "", false
}

// lastSeen is when an Event was last seen, in whichever field its reporter set.
func lastSeen(e *corev1.Event) time.Time {
	t := e.LastTimestamp.Time
	if e.Series != nil && e.Series.LastObservedTime.After(t) {
		t = e.Series.LastObservedTime.Time
	}
	if e.EventTime.After(t) {
		t = e.EventTime.Time
	}
	if e.FirstTimestamp.After(t) {
		t = e.FirstTimestamp.Time
	}
	return t
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}

// cut returns s cut to at most n bytes, on a rune boundary, with "..." when cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "..."
}

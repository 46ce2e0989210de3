package podhealth

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// loadProbeEvents reads testdata/unhealthy-events.yaml: the kubelet's Unhealthy Events
// as `kubectl get events --field-selector involvedObject.kind=Pod,reason=Unhealthy -o
// yaml` printed them on the real node, for a pod "readiness" whose containers'
// readiness probes fail by HTTP (nothing listens: app-deploy-container), by exec
// (exec-probe) and for a pod "status503" whose HTTP probe gets a 503 — made Events
// about pod and trimmed as the Event informer keeps them, each last seen at seen.
func loadProbeEvents(t *testing.T, pod string, seen time.Time) map[string]*corev1.Event {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "unhealthy-events.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	list := &corev1.EventList{}
	if err := yaml.UnmarshalStrict(data, list); err != nil {
		t.Fatal(err)
	}
	events := map[string]*corev1.Event{}
	for i := range list.Items {
		e := list.Items[i].DeepCopy()
		e.InvolvedObject.Name = pod
		shift := seen.Sub(e.LastTimestamp.Time)
		e.FirstTimestamp = metav1.NewTime(e.FirstTimestamp.Add(shift))
		e.LastTimestamp = metav1.NewTime(e.LastTimestamp.Add(shift))
		obj, err := TrimProbeEvent(e)
		if err != nil {
			t.Fatal(err)
		}
		trimmed := obj.(*corev1.Event)
		name := strings.TrimSuffix(strings.TrimPrefix(e.InvolvedObject.FieldPath, "spec.containers{"), "}")
		events[name] = trimmed
	}
	return events
}

// TestProbeOutput: the message of a readiness probe that does not pass ends with the
// output the kubelet reported in its newest Event about that container since it
// started, and with nothing else.
func TestProbeOutput(t *testing.T) {
	pod := loadPod(t, "readiness")
	now := pod.CreationTimestamp.Add(NotReadyGrace + 10*time.Second)
	p, _ := Inspect(pod, now)
	if p == nil || p.Reason != appv1.ReasonContainerNotReady {
		t.Fatalf("Inspect = %+v, want ContainerNotReady", p)
	}
	started := pod.Status.ContainerStatuses[0].State.Running.StartedAt.Time
	events := loadProbeEvents(t, pod.Name, started.Add(5*time.Second))
	own := events["app-deploy-container"]
	own.InvolvedObject.FieldPath = "spec.containers{" + p.Container + "}"
	const refused = `Get "http://10.244.0.2:9999/healthz": dial tcp 10.244.0.2:9999: connect: connection refused`

	tests := []struct {
		name   string
		events []*corev1.Event
		want   string
	}{
		{"none", nil, ""},
		{"its container's", []*corev1.Event{own, events["exec-probe"], events["status-probe"]}, refused},
		{"another container's only", []*corev1.Event{events["exec-probe"]}, ""},
		{"another pod's", []*corev1.Event{withPod(own, "other")}, ""},
		{"before the container started", []*corev1.Event{seenAt(own, started.Add(-time.Minute))}, ""},
		{"the newest", []*corev1.Event{own, seenAt(withMessage(own, "Readiness probe failed: HTTP probe failed with statuscode: 503"), started.Add(9*time.Second))}, "HTTP probe failed with statuscode: 503"},
		{"the newest, listed first", []*corev1.Event{seenAt(withMessage(own, "Readiness probe failed: HTTP probe failed with statuscode: 503"), started.Add(9*time.Second)), own}, "HTTP probe failed with statuscode: 503"},
		{"an exec probe's first line", []*corev1.Event{withMessage(own, events["exec-probe"].Message)}, "REFUSED"},
		{"a liveness probe's", []*corev1.Event{withMessage(own, "Liveness probe failed: "+refused)}, ""},
		{"a probe that errored", []*corev1.Event{withMessage(own, "Readiness probe errored: rpc error: code = Unknown")}, "rpc error: code = Unknown"},
		{"output cut", []*corev1.Event{withMessage(own, "Readiness probe failed: "+strings.Repeat("é", 300))}, strings.Repeat("é", maxProbeOutput/2) + "..."},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ProbeOutput(p, tc.events); got != tc.want {
				t.Errorf("ProbeOutput = %q, want %q", got, tc.want)
			}
		})
	}

	got := p.WithProbeOutput(refused)
	want := `Pod "readiness-67f88964f6-p55wb" container "app-deploy-container" is running but its readiness probe has not passed since it started: ` + refused
	if got.Message != want {
		t.Errorf("WithProbeOutput message\n%s\nwant\n%s", got.Message, want)
	}
	if p.WithProbeOutput("") != p || !strings.HasSuffix(p.Message, "since it started") {
		t.Errorf("WithProbeOutput changed the problem it was given: %q", p.Message)
	}
	// Other problems carry no probe output.
	for _, file := range []string{"crashloopbackoff-1", "imagepullbackoff", "unschedulable"} {
		other := loadPod(t, file)
		op, _ := Inspect(other, other.CreationTimestamp.Add(time.Minute))
		if out := ProbeOutput(op, []*corev1.Event{withPod(own, other.Name)}); out != "" {
			t.Errorf("%s: ProbeOutput = %q, want none", file, out)
		}
	}
}

// TestTrimProbeEvent: the Event cache keeps the identity, the pod and container, the
// message's first line and when it was last seen; nothing else.
func TestTrimProbeEvent(t *testing.T) {
	events := loadProbeEvents(t, "readiness", time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
	e := events["exec-probe"]
	if e.Message != "Readiness probe failed: REFUSED" || e.InvolvedObject.FieldPath != "spec.containers{exec-probe}" || e.Name == "" || e.ResourceVersion == "" {
		t.Errorf("trimmed Event %+v", e)
	}
	if e.Source.Component != "" || e.ReportingController != "" || e.Count != 0 || !e.FirstTimestamp.IsZero() || e.Type != "" {
		t.Errorf("trimmed Event keeps more than it needs: %+v", e)
	}
	if obj, _ := TrimProbeEvent("not an event"); obj != "not an event" {
		t.Errorf("TrimProbeEvent changed a non-Event: %v", obj)
	}
}

func withPod(e *corev1.Event, pod string) *corev1.Event {
	e = e.DeepCopy()
	e.InvolvedObject.Name = pod
	return e
}

func withMessage(e *corev1.Event, message string) *corev1.Event {
	e = e.DeepCopy()
	e.Message = message
	return e
}

func seenAt(e *corev1.Event, t time.Time) *corev1.Event {
	e = e.DeepCopy()
	e.LastTimestamp = metav1.NewTime(t)
	return e
}

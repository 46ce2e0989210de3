// Package podhealth tells, from a pod's status alone, the problem a user must fix for
// the pod to become ready: an image that cannot be pulled, a container that cannot be
// created, keeps exiting or is OOMKilled, a readiness probe that does not pass, a pod the
// scheduler cannot place. The App controller names it in the App's Ready condition and
// the kubectl plugin beside each pod, so both say the same thing. It reads only the
// fields that the App controller's pod cache keeps (see TrimPod): never the pod's spec.
package podhealth

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// Thresholds of Stalled and of a probe that does not pass: see docs/reference/api.md "Pod
// problems" for why these values.
const (
	// NotReadyGrace is how long a running container may stay not ready (its readiness or
	// startup probe not passing yet) before it is reported as a problem: a container that
	// starts slowly is not one.
	NotReadyGrace = 20 * time.Second
	// CrashLoopStalledRestarts is the restart count at which a container that keeps
	// exiting (or is OOMKilled) makes the App Stalled, once CrashLoopStalledAfter has
	// passed: three restarts with the kubelet's backoff (10 s, 20 s, 40 s) take about
	// 70 s and show it is no start-up race.
	CrashLoopStalledRestarts = 3
	// CrashLoopStalledAfter is the least time since the pod started before a container
	// that keeps exiting makes the App Stalled, whatever the kubelet's backoff (a
	// kubelet with a shorter initial backoff restarts three times within seconds): a
	// dependency that comes up within it (a database applied in the same sync) heals
	// the crash loop.
	CrashLoopStalledAfter = time.Minute
	// PullStalledAfter is how long a pod may fail to pull its image or to create its
	// container from its config before the App is Stalled: a registry hiccup, or a
	// ConfigMap applied a moment after the App in the same GitOps sync, heals within it.
	PullStalledAfter = 2 * time.Minute
	// UnschedulableStalledAfter is how long a pod may be unschedulable before the App is
	// Stalled: a cluster autoscaler usually adds a node within it.
	UnschedulableStalledAfter = 5 * time.Minute
)

// Problem is what keeps one pod from being ready.
type Problem struct {
	// Reason is one of the App's pod reasons (appv1.ReasonImagePullFailed, ...).
	Reason string
	// Message names the pod and the container and says what the kubelet or the
	// scheduler reported. It holds no duration or time, so it changes only when the
	// problem does (and, for a container that keeps exiting, at each restart).
	Message string
	// Pod and Container name where the problem is; Container is empty for a pod the
	// scheduler cannot place.
	Pod, Container string
	// Restarts is the container's restart count.
	Restarts int32
	// StalledAt is when the problem makes the App Stalled: it will not go away without
	// someone acting. Zero: never by itself (the progress deadline still may).
	StalledAt time.Time

	// Of a probe that does not pass (ContainerNotReady): which ("Readiness",
	// "Startup"), the container's field path in the kubelet's Events about it, and
	// since when the container runs; see ProbeOutput.
	probe, fieldPath string
	runningSince     time.Time
}

// Stalled reports whether p makes the App Stalled at now.
func (p *Problem) Stalled(now time.Time) bool {
	return p != nil && !p.StalledAt.IsZero() && !now.Before(p.StalledAt)
}

// priority orders the reasons: the first problem to fix comes first.
var priority = []string{
	appv1.ReasonImagePullFailed,
	appv1.ReasonContainerConfigError,
	appv1.ReasonOOMKilled,
	appv1.ReasonCrashLoopBackOff,
	appv1.ReasonUnschedulable,
	appv1.ReasonContainerNotReady,
}

// The kubelet's waiting reasons, by what they mean.
var (
	pullReasons = map[string]bool{
		"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true,
		"ErrImageNeverPull": true, "RegistryUnavailable": true, "ImageInspectError": true,
	}
	// permanentPullReasons cannot heal without a change of the spec.
	permanentPullReasons = map[string]bool{"InvalidImageName": true, "ErrImageNeverPull": true}
	configReasons        = map[string]bool{"CreateContainerConfigError": true, "CreateContainerError": true}
)

// Inspect returns the problem that keeps pod from being ready at now, or nil, and how
// long until its answer may change with no change of the pod (a container reaching
// NotReadyGrace, a problem reaching its Stalled threshold); 0 if never.
func Inspect(pod *corev1.Pod, now time.Time) (*Problem, time.Duration) {
	// A pod that ended for good is no problem of the pods that run: a Deployment's pods
	// restart always, so one Failed was given up by the kubelet (evicted under node
	// pressure, a node shutdown) and its ReplicaSet made another, whose state is what
	// counts. Evicted pods stay until the pod garbage collector's threshold: read as
	// crashing, they kept an App whose new pod ran from Ready.
	if pod == nil || pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return nil, 0
	}
	var (
		found   *Problem
		recheck time.Duration
	)
	consider := func(p *Problem, after time.Duration) {
		if after > 0 && (recheck == 0 || after < recheck) {
			recheck = after
		}
		if p != nil && (found == nil || rank(p.Reason) < rank(found.Reason)) {
			found = p
		}
	}
	if c := podCondition(pod, corev1.PodScheduled); c != nil && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
		p := &Problem{
			Reason:    appv1.ReasonUnschedulable,
			Message:   fmt.Sprintf("Pod %q cannot be scheduled: %s", pod.Name, oneLine(c.Message)),
			Pod:       pod.Name,
			StalledAt: c.LastTransitionTime.Add(UnschedulableStalledAfter),
		}
		consider(p, untilStalled(p, now))
	}
	for i := range pod.Status.InitContainerStatuses {
		consider(inspectContainer(pod, &pod.Status.InitContainerStatuses[i], true, now))
	}
	for i := range pod.Status.ContainerStatuses {
		consider(inspectContainer(pod, &pod.Status.ContainerStatuses[i], false, now))
	}
	return found, recheck
}

// First returns the first problem of pods at now (by reason, then pod name), and the
// soonest time its answer may change with no change of the pods; 0 if never.
func First(pods []*corev1.Pod, now time.Time) (*Problem, time.Duration) {
	var (
		found   *Problem
		recheck time.Duration
	)
	for _, pod := range pods {
		p, after := Inspect(pod, now)
		if after > 0 && (recheck == 0 || after < recheck) {
			recheck = after
		}
		if p == nil {
			continue
		}
		if found == nil || rank(p.Reason) < rank(found.Reason) ||
			(rank(p.Reason) == rank(found.Reason) && p.Pod < found.Pod) {
			found = p
		}
	}
	return found, recheck
}

// inspectContainer returns the problem of one container of pod, and how long until it
// may change by itself.
func inspectContainer(pod *corev1.Pod, cs *corev1.ContainerStatus, init bool, now time.Time) (*Problem, time.Duration) {
	what := "container"
	if init {
		what = "init container"
	}
	where := fmt.Sprintf("Pod %q %s %q", pod.Name, what, cs.Name)
	p := &Problem{Pod: pod.Name, Container: cs.Name, Restarts: cs.RestartCount}
	started := pod.CreationTimestamp.Time
	if pod.Status.StartTime != nil {
		started = pod.Status.StartTime.Time
	}
	switch st := cs.State; {
	case cs.Ready && st.Running != nil && cs.RestartCount > 0 && cs.LastTerminationState.Terminated != nil &&
		now.Before(st.Running.StartedAt.Add(NotReadyGrace)):
		// A container without a readiness probe is ready as soon as it runs: one that
		// just restarted after exiting is still crashing until it has run for a while.
		// Saying so spares the App a Ready reason that flaps at each restart.
		p, stall := exited(p, where, cs.LastTerminationState.Terminated, nil, started, now)
		return p, sooner(stall, st.Running.StartedAt.Add(NotReadyGrace).Sub(now))
	case cs.Ready:
		return nil, 0
	case st.Waiting != nil && pullReasons[st.Waiting.Reason]:
		p.Reason = appv1.ReasonImagePullFailed
		p.Message = fmt.Sprintf("%s cannot pull its image: %s", where, pullError(st.Waiting))
		p.StalledAt = started.Add(PullStalledAfter)
		if permanentPullReasons[st.Waiting.Reason] {
			p.StalledAt = started
		}
		return p, untilStalled(p, now)
	case st.Waiting != nil && configReasons[st.Waiting.Reason]:
		p.Reason = appv1.ReasonContainerConfigError
		p.Message = fmt.Sprintf("%s cannot be created: %s: %s", where, st.Waiting.Reason, oneLine(st.Waiting.Message))
		p.StalledAt = started.Add(PullStalledAfter)
		return p, untilStalled(p, now)
	case st.Waiting != nil && (st.Waiting.Reason == "CrashLoopBackOff" || st.Waiting.Reason == "RunContainerError"):
		return exited(p, where, cs.LastTerminationState.Terminated, st.Waiting, started, now)
	case st.Terminated != nil:
		if init && st.Terminated.ExitCode == 0 {
			return nil, 0 // an init container that completed
		}
		if st.Terminated.ExitCode != 0 || st.Terminated.Reason == "OOMKilled" {
			return exited(p, where, st.Terminated, nil, started, now)
		}
		return nil, 0
	case st.Running != nil:
		return notReady(p, where, cs, st.Running, init, started, now)
	}
	return nil, 0
}

// notReady describes a container that runs but is not ready (running: its state; the
// pod started at started): still crashing if it just restarted after exiting, nothing
// yet within NotReadyGrace of its start, else ContainerNotReady.
func notReady(p *Problem, where string, cs *corev1.ContainerStatus, running *corev1.ContainerStateRunning, init bool, started, now time.Time) (*Problem, time.Duration) {
	runningSince := running.StartedAt.Time
	if runningSince.IsZero() {
		runningSince = started
	}
	notReadyAt := runningSince.Add(NotReadyGrace)
	if now.Before(notReadyAt) {
		// A container that just restarted after exiting is still crashing, not
		// starting: keep saying so rather than flapping for the few seconds it runs.
		if last := cs.LastTerminationState.Terminated; cs.RestartCount > 0 && last != nil {
			p, stall := exited(p, where, last, nil, started, now)
			return p, sooner(stall, notReadyAt.Sub(now))
		}
		return nil, notReadyAt.Sub(now)
	}
	p.Reason = appv1.ReasonContainerNotReady
	p.probe = "Readiness"
	if cs.Started != nil && !*cs.Started {
		p.probe = "Startup"
	}
	p.fieldPath = fmt.Sprintf("spec.containers{%s}", cs.Name)
	if init {
		p.fieldPath = fmt.Sprintf("spec.initContainers{%s}", cs.Name)
	}
	p.runningSince = runningSince
	p.Message = fmt.Sprintf("%s is running but its %s probe has not passed since it started", where, strings.ToLower(p.probe))
	if cs.RestartCount > 0 {
		p.Message += fmt.Sprintf(" (restarts: %d)", cs.RestartCount)
	}
	return p, 0
}

// exited describes a container that exited (last: its last termination, may be nil)
// and is, or will be, restarted (waiting: the kubelet's waiting state, may be nil); the
// pod started at started. It returns how long until the problem makes the App Stalled
// with no change of the pod.
func exited(p *Problem, where string, last *corev1.ContainerStateTerminated, waiting *corev1.ContainerStateWaiting, started, now time.Time) (*Problem, time.Duration) {
	p.Reason = appv1.ReasonCrashLoopBackOff
	var b strings.Builder
	switch {
	case last != nil && last.Reason == "OOMKilled":
		p.Reason = appv1.ReasonOOMKilled
		fmt.Fprintf(&b, "%s was killed for using more memory than its limit (OOMKilled, exit code %d)", where, last.ExitCode)
	case last != nil:
		fmt.Fprintf(&b, "%s keeps exiting: exit code %d", where, last.ExitCode)
		if last.Reason != "" {
			fmt.Fprintf(&b, " (%s)", last.Reason)
		}
	case waiting != nil && waiting.Message != "":
		fmt.Fprintf(&b, "%s cannot start: %s", where, oneLine(waiting.Message))
	default:
		fmt.Fprintf(&b, "%s keeps exiting", where)
	}
	if p.Restarts == 1 {
		b.WriteString(", restarted once")
	} else {
		fmt.Fprintf(&b, ", restarted %d times", p.Restarts)
	}
	if last != nil && strings.TrimSpace(last.Message) != "" {
		fmt.Fprintf(&b, ": %s", oneLine(last.Message))
	}
	p.Message = b.String()
	if p.Restarts >= CrashLoopStalledRestarts {
		p.StalledAt = started.Add(CrashLoopStalledAfter)
	}
	return p, untilStalled(p, now)
}

// pullError is the registry's answer in a waiting state of the pull, the same for
// ErrImagePull and the ImagePullBackOff that follows it (which wraps it), so that the
// message does not flap with the kubelet's back-off.
func pullError(w *corev1.ContainerStateWaiting) string {
	msg := oneLine(w.Message)
	// ImagePullBackOff: `Back-off pulling image "x": ErrImagePull: <error>`.
	if i := strings.Index(msg, ": ErrImagePull: "); i >= 0 && strings.HasPrefix(msg, "Back-off pulling image") {
		msg = msg[i+len(": ErrImagePull: "):]
	} else if strings.HasPrefix(msg, "Back-off pulling image") {
		// An older kubelet says only which image; the registry's answer was in the
		// ErrImagePull before it.
		return w.Reason + ": " + msg
	}
	if permanentPullReasons[w.Reason] {
		return w.Reason + ": " + msg
	}
	return msg
}

// untilStalled is how long until p makes the App Stalled; 0 if it never does by itself
// or already does.
func untilStalled(p *Problem, now time.Time) time.Duration {
	if p.StalledAt.IsZero() || !now.Before(p.StalledAt) {
		return 0
	}
	return p.StalledAt.Sub(now)
}

// sooner returns the sooner of two delays, 0 meaning none.
func sooner(a, b time.Duration) time.Duration {
	if a <= 0 || (b > 0 && b < a) {
		return b
	}
	return a
}

func rank(reason string) int {
	if i := slices.Index(priority, reason); i >= 0 {
		return i
	}
	return len(priority)
}

// podCondition returns pod's condition of type t, or nil.
func podCondition(pod *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == t {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// oneLine joins the lines of a kubelet or scheduler message.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// ReadyContainers counts the ready containers of pod and its containers.
func ReadyContainers(pod *corev1.Pod) (ready, total int) {
	for _, cs := range pod.Status.ContainerStatuses {
		total++
		if cs.Ready {
			ready++
		}
	}
	return ready, total
}

// Restarts sums the restart counts of pod's containers.
func Restarts(pod *corev1.Pod) int32 {
	var n int32
	for _, cs := range pod.Status.ContainerStatuses {
		n += cs.RestartCount
	}
	return n
}

// TrimPod is an informer transform that keeps of a pod only what Inspect and the App
// controller's mapping of pods to Apps read: its identity, labels, creation and deletion
// times, and of its status the phase, reason, message, start time, the PodScheduled
// condition until the pod is scheduled (the only condition Inspect reads: an
// unschedulable pod) and the containers' and init containers' states, readiness and
// restart counts. The spec, annotations, owners, managedFields, the other conditions,
// IPs and the containers' images and IDs are dropped: a third of the heap a whole pod
// takes in the cache (BenchmarkPodCacheFootprint). It leaves other objects (a tombstone)
// as they are and may run twice on the same pod.
func TrimPod(obj interface{}) (interface{}, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	trimmed := &corev1.Pod{
		TypeMeta: pod.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:              pod.Name,
			Namespace:         pod.Namespace,
			UID:               pod.UID,
			ResourceVersion:   pod.ResourceVersion,
			Labels:            pod.Labels,
			CreationTimestamp: pod.CreationTimestamp,
			DeletionTimestamp: pod.DeletionTimestamp,
		},
		Status: corev1.PodStatus{
			Phase:     pod.Status.Phase,
			Reason:    pod.Status.Reason,
			Message:   pod.Status.Message,
			StartTime: pod.Status.StartTime,
		},
	}
	if c := podCondition(pod, corev1.PodScheduled); c != nil && c.Status != corev1.ConditionTrue {
		trimmed.Status.Conditions = []corev1.PodCondition{{
			Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message,
			LastTransitionTime: c.LastTransitionTime,
		}}
	}
	trimmed.Status.InitContainerStatuses = trimContainers(pod.Status.InitContainerStatuses)
	trimmed.Status.ContainerStatuses = trimContainers(pod.Status.ContainerStatuses)
	return trimmed, nil
}

func trimContainers(in []corev1.ContainerStatus) []corev1.ContainerStatus {
	if len(in) == 0 {
		return nil
	}
	out := make([]corev1.ContainerStatus, len(in))
	for i, cs := range in {
		out[i] = corev1.ContainerStatus{
			Name:                 cs.Name,
			Ready:                cs.Ready,
			Started:              cs.Started,
			RestartCount:         cs.RestartCount,
			State:                trimState(cs.State),
			LastTerminationState: trimState(cs.LastTerminationState),
		}
	}
	return out
}

func trimState(s corev1.ContainerState) corev1.ContainerState {
	if t := s.Terminated; t != nil {
		s.Terminated = &corev1.ContainerStateTerminated{
			ExitCode: t.ExitCode, Signal: t.Signal, Reason: t.Reason, Message: t.Message,
			StartedAt: t.StartedAt, FinishedAt: t.FinishedAt,
		}
	}
	return s
}

package app

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	"github.com/app-controller/app-controller/pkg/analysis"
	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
	"github.com/app-controller/app-controller/pkg/podhealth"
	"github.com/app-controller/app-controller/pkg/rollout"
)

// computeStatus returns the status app should have, given the labels that select its
// pods, what syncing its children found (outcomes, in the order of the table; deployment
// is the App's Deployment's) and the first problem of its pods (nil: none): the
// children's status fields, NamesAccepted (their name conflicts), then Progressing,
// Ready, Reconciling and Stalled from the rollout of the App's Deployment and the
// problem of its pods. It is rebuilt from what is observed now; only the transition
// times of conditions whose status did not change are kept. The children's own
// conditions follow (reportChildren).
func computeStatus(app *appv1.App, selector map[string]string, deployment childOutcome, outcomes []childOutcome, problem *podhealth.Problem, now metav1.Time) *appv1.AppStatus {
	status := app.Status.DeepCopy()
	status.ObservedGeneration = app.Generation
	for _, o := range outcomes {
		if o.report != nil {
			o.report(status)
		}
	}
	// The scale subresource reports it: a HorizontalPodAutoscaler finds the pods with it.
	status.Selector = labels.SelectorFromSet(selector).String()
	set := func(conditionType string, s metav1.ConditionStatus, reason, message string) {
		setCondition(status, app, now, conditionType, s, reason, controller.TruncateMessage(message))
	}

	var conflicts []string
	for _, o := range outcomes {
		if o.conflict != "" {
			conflicts = append(conflicts, o.conflict)
		}
	}
	if len(conflicts) > 0 {
		setNameConflict(status, app, strings.Join(conflicts, "; "), now)
		return status
	}
	set(appv1.ConditionNamesAccepted, metav1.ConditionTrue, appv1.ReasonNoNameConflict, "Every child name is held by this App")

	d, _ := deployment.obj.(*appsv1.Deployment)
	r := deploymentRollout(deployment.name, d, autoscalerFloor(app, deployment))
	// notReady sets Ready=False and, unless the App is stalled, Reconciling=True with
	// reason and message; a problem of the pods wins over both: it is what the user must
	// fix, where the Deployment only counts the pods that are not available. A problem
	// that will not go away by itself makes the App Stalled (kstatus: Failed).
	notReady := func(reason, message string, stalled bool) {
		stalledReason, stalledMessage := reason, message
		if problem != nil && !r.replicaFailure {
			reason, message = problem.Reason, problem.Message
			if problem.Stalled(now.Time) && !stalled {
				stalled, stalledReason, stalledMessage = true, reason, message
			}
		}
		set(appv1.ConditionReady, metav1.ConditionFalse, reason, message)
		if stalled {
			set(appv1.ConditionStalled, metav1.ConditionTrue, stalledReason, stalledMessage)
			meta.RemoveStatusCondition(&status.Conditions, appv1.ConditionReconciling)
			return
		}
		set(appv1.ConditionReconciling, metav1.ConditionTrue, reason, message)
		meta.RemoveStatusCondition(&status.Conditions, appv1.ConditionStalled)
	}
	var ready []string
	switch {
	case deployment.name == "":
		set(appv1.ConditionProgressing, metav1.ConditionFalse, appv1.ReasonRolloutComplete, "The App has no Deployment")
	case r.deadlineExceeded:
		set(appv1.ConditionProgressing, metav1.ConditionFalse, appv1.ReasonProgressDeadlineExceeded, r.message)
		notReady(appv1.ReasonProgressDeadlineExceeded, r.message, true)
		return status
	case !r.rolledOut:
		set(appv1.ConditionProgressing, metav1.ConditionTrue, appv1.ReasonRollingOut, r.message)
		notReady(appv1.ReasonRollingOut, r.message, false)
		return status
	case !r.available || problem != nil:
		// Not Ready and not stuck: kstatus (Flux, Argo CD) must read it as InProgress, never
		// Current, so Reconciling says so. A pod problem keeps the App from Ready even when
		// the Deployment counts every replica available: a container without a readiness
		// probe that keeps exiting is ready for the moment it runs after each restart.
		set(appv1.ConditionProgressing, metav1.ConditionFalse, appv1.ReasonRolloutComplete, r.message)
		notReady(appv1.ReasonDeploymentUnavailable, r.message, false)
		return status
	default:
		set(appv1.ConditionProgressing, metav1.ConditionFalse, appv1.ReasonRolloutComplete, r.message)
		ready = append(ready, r.message)
	}
	for _, o := range outcomes {
		if o.readyNote != "" {
			ready = append(ready, o.readyNote)
		}
	}
	meta.RemoveStatusCondition(&status.Conditions, appv1.ConditionReconciling)
	meta.RemoveStatusCondition(&status.Conditions, appv1.ConditionStalled)
	set(appv1.ConditionReady, metav1.ConditionTrue, appv1.ReasonAvailable, strings.Join(ready, "; "))
	return status
}

// setNameConflict reports in status that a child name is held by something else, msg
// saying which: NamesAccepted and Ready False, Stalled True.
func setNameConflict(status *appv1.AppStatus, app *appv1.App, msg string, now metav1.Time) {
	msg = controller.TruncateMessage(msg)
	for _, t := range []string{appv1.ConditionNamesAccepted, appv1.ConditionReady, appv1.ConditionProgressing} {
		setCondition(status, app, now, t, metav1.ConditionFalse, appv1.ReasonNameConflict, msg)
	}
	setCondition(status, app, now, appv1.ConditionStalled, metav1.ConditionTrue, appv1.ReasonNameConflict, msg)
	meta.RemoveStatusCondition(&status.Conditions, appv1.ConditionReconciling)
}

// deploymentProgress is how far the rollout of an App's Deployment is.
type deploymentProgress struct {
	// rolledOut: the deployment controller observed the current spec, every replica is
	// updated and no old replica is left.
	rolledOut bool
	// available: the Deployment is Available with every desired replica available.
	available bool
	// deadlineExceeded: the rollout passed its progress deadline.
	deadlineExceeded bool
	// replicaFailure: pods are refused (a quota, PodSecurity admission); the message says
	// why, and no pod problem replaces it.
	replicaFailure bool
	message        string
}

// autoscalerFloor returns, when a change of the replica count of app's Deployment (the
// outcome deployment) is the autoscaler's and no rollout, the fewest available pods
// that keep the App available meanwhile, autoscaling.minReplicas; else 0. It is the
// autoscaler's when app has spec.autoscaling, its status already said that the rollout
// of its current generation was complete, and this sync did not write the Deployment:
// every rollout of the App's pods starts with a write of the controller, whose answer
// shows the new generation unobserved, so Progressing is True before any scale can hide
// it.
func autoscalerFloor(app *appv1.App, deployment childOutcome) int32 {
	p := meta.FindStatusCondition(app.Status.Conditions, appv1.ConditionProgressing)
	if app.Spec.Autoscaling == nil || deployment.changed || app.Status.ObservedGeneration != app.Generation ||
		p == nil || p.Status != metav1.ConditionFalse || p.Reason != appv1.ReasonRolloutComplete || p.ObservedGeneration != app.Generation {
		return 0
	}
	return autoscalingMin(app.Spec.Autoscaling)
}

// deploymentRollout tells how far the rollout of d is, like `kubectl rollout status`.
// With a scaling floor (autoscalerFloor, 0: none), a Deployment whose pods are all of
// its newest template is rolled out, and available with at least floor pods available
// (or all it wants, if fewer), while its count changes: an autoscaler adding or removing
// pods is not a rollout (kstatus and Argo CD would read the App InProgress at every
// scale, and the Deployment's Available condition is False while a small Deployment
// grows: 25% of 3 pods rounds to none unavailable). A scale-down counts the pods being
// removed until they are gone: 3 pods of which 2 are available, scaled to 2, is no
// rollout, though 2 of its 3 pods are available.
func deploymentRollout(name string, d *appsv1.Deployment, floor int32) deploymentProgress {
	if d == nil {
		return deploymentProgress{message: fmt.Sprintf("Waiting for Deployment %q to be created", name)}
	}
	desired := ptr.Deref(d.Spec.Replicas, 1)
	st := d.Status
	if floor > 0 && st.Replicas == st.UpdatedReplicas && (st.ObservedGeneration < d.Generation || st.AvailableReplicas != desired || st.Replicas != desired) {
		r := deploymentProgress{rolledOut: true, available: st.AvailableReplicas >= min(floor, desired),
			message: fmt.Sprintf("Deployment %q: %d of %d replicas available (the autoscaler scales it)", name, st.AvailableReplicas, desired)}
		if st.Replicas > desired {
			r.message = fmt.Sprintf("Deployment %q: %d of %d replicas available, %d being removed (the autoscaler scales it)",
				name, min(st.AvailableReplicas, desired), desired, st.Replicas-desired)
		}
		if !r.available {
			r.message = fmt.Sprintf("Deployment %q: %d of %d replicas available, fewer than autoscaling.minReplicas", name, st.AvailableReplicas, desired)
		}
		return r
	}
	if st.ObservedGeneration < d.Generation {
		return deploymentProgress{message: fmt.Sprintf("Waiting for the deployment controller to observe generation %d of Deployment %q", d.Generation, name)}
	}
	if c := deploymentCondition(d, appsv1.DeploymentProgressing); c != nil && c.Reason == "ProgressDeadlineExceeded" {
		return deploymentProgress{deadlineExceeded: true, message: fmt.Sprintf("Deployment %q exceeded its progress deadline: %s", name, c.Message)}
	}
	// Pods refused (a quota, PodSecurity admission): the ReplicaSet's reason, which the
	// deployment controller copies into ReplicaFailure, is what the user must act on.
	if c := deploymentCondition(d, appsv1.DeploymentReplicaFailure); c != nil && c.Status == corev1.ConditionTrue && st.AvailableReplicas < desired {
		return deploymentProgress{replicaFailure: true, message: fmt.Sprintf("Deployment %q cannot create pods: %s", name, c.Message)}
	}
	switch {
	case st.UpdatedReplicas < desired:
		return deploymentProgress{message: fmt.Sprintf("Deployment %q: %d of %d replicas updated", name, st.UpdatedReplicas, desired)}
	case st.Replicas > st.UpdatedReplicas:
		return deploymentProgress{message: fmt.Sprintf("Deployment %q: %d old replicas pending termination", name, st.Replicas-st.UpdatedReplicas)}
	case st.AvailableReplicas < st.UpdatedReplicas:
		return deploymentProgress{message: fmt.Sprintf("Deployment %q: %d of %d updated replicas available", name, st.AvailableReplicas, st.UpdatedReplicas)}
	}
	r := deploymentProgress{rolledOut: true, message: fmt.Sprintf("Deployment %q: %d of %d replicas available", name, st.AvailableReplicas, desired)}
	c := deploymentCondition(d, appsv1.DeploymentAvailable)
	r.available = c != nil && c.Status == corev1.ConditionTrue && st.AvailableReplicas >= desired
	if c != nil && c.Status != corev1.ConditionTrue {
		r.message = fmt.Sprintf("Deployment %q is not available: %s", name, c.Message)
	}
	return r
}

// deploymentCondition returns d's condition of type t, or nil.
func deploymentCondition(d *appsv1.Deployment, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range d.Status.Conditions {
		if d.Status.Conditions[i].Type == t {
			return &d.Status.Conditions[i]
		}
	}
	return nil
}

// setCondition sets a condition of status, keeping its transition time when its status
// does not change.
func setCondition(status *appv1.AppStatus, app *appv1.App, now metav1.Time, conditionType string, s metav1.ConditionStatus, reason, message string) {
	// The transition time is the stored condition's when it already had this status,
	// even if this sync set the condition otherwise, or removed it, before settling on
	// s (a route that keeps an otherwise Ready App from Ready): a status write must not
	// move it when nothing changed.
	transition := now
	if old := meta.FindStatusCondition(app.Status.Conditions, conditionType); old != nil && old.Status == s {
		transition = old.LastTransitionTime
	}
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{
		Type:               conditionType,
		Status:             s,
		ObservedGeneration: app.Generation,
		LastTransitionTime: transition,
		Reason:             reason,
		Message:            message,
	})
}

// setContested sets the Contested condition of status from the contested children of
// app (reportContests), or removes it when there are none.
func setContested(status *appv1.AppStatus, app *appv1.App, contests []contest, now metav1.Time) {
	if len(contests) == 0 {
		meta.RemoveStatusCondition(&status.Conditions, appv1.ConditionContested)
		return
	}
	msgs := make([]string, 0, len(contests))
	for _, ct := range contests {
		msgs = append(msgs, ct.message)
	}
	setCondition(status, app, now, appv1.ConditionContested, metav1.ConditionTrue,
		appv1.ReasonCompetingWriter, controller.TruncateMessage(strings.Join(msgs, "; ")))
}

// reportChildren sets the conditions the children report (RouteAccepted, ScalingActive,
// ScalingLimited), in the order of the table, each with a Warning Event when it asks for
// one and is new. A condition that is not True makes an App that would be Ready not
// Ready (childGatesReady), but for an informational Unknown (an autoscaler that has not
// reported yet).
func (c *Controller) reportChildren(app *appv1.App, status *appv1.AppStatus, outcomes []childOutcome, now metav1.Time) {
	for _, o := range outcomes {
		for _, cond := range o.conditions {
			switch {
			case cond.status == "":
				meta.RemoveStatusCondition(&status.Conditions, cond.conditionType)
				continue
			case cond.warn:
				c.warnOnChange(app, cond.conditionType, cond.reason, cond.message)
			}
			msg := controller.TruncateMessage(cond.message)
			setCondition(status, app, now, cond.conditionType, cond.status, cond.reason, msg)
			if cond.status == metav1.ConditionUnknown && cond.informational {
				continue
			}
			childGatesReady(status, app, now, cond.status, cond.reason, msg)
		}
	}
}

// childGatesReady makes an App whose child reports a condition that is not True (s, for
// reason and msg: a route not accepted) not Ready when it would be: Reconciling while
// the answer may still come (Unknown: a Gateway has not answered), Stalled when the
// child is refused (it waits for a change of the App, of a Gateway or of the namespace
// that holds a host).
func childGatesReady(status *appv1.AppStatus, app *appv1.App, now metav1.Time, s metav1.ConditionStatus, reason, msg string) {
	if s == metav1.ConditionTrue || !meta.IsStatusConditionTrue(status.Conditions, appv1.ConditionReady) {
		return
	}
	setCondition(status, app, now, appv1.ConditionReady, metav1.ConditionFalse, reason, msg)
	if s == metav1.ConditionUnknown {
		setCondition(status, app, now, appv1.ConditionReconciling, metav1.ConditionTrue, reason, msg)
		return
	}
	setCondition(status, app, now, appv1.ConditionStalled, metav1.ConditionTrue, reason, msg)
}

// recordEvents emits the Events of a sync of app whose new status is status: the seed's
// ErrResourceExists Warning for each child name held by something else, once per
// conflict rather than on every sync (only when the App's NamesAccepted condition does
// not already report it); ConfigNotFound when Ready newly says that referenced config
// is missing; and Synced when a child was written.
func (c *Controller) recordEvents(app *appv1.App, status *appv1.AppStatus, outcomes []childOutcome) {
	old := meta.FindStatusCondition(app.Status.Conditions, appv1.ConditionNamesAccepted)
	changed := false
	for _, o := range outcomes {
		changed = changed || o.changed
		if o.conflict == "" || old != nil && old.Status == metav1.ConditionFalse && strings.Contains(old.Message, o.conflict) {
			continue
		}
		c.recorder.Eventf(app, corev1.EventTypeWarning, appv1.EventReasonResourceExists, appv1.EventMessageResourceExists, o.name)
	}
	if ready := meta.FindStatusCondition(status.Conditions, appv1.ConditionReady); ready != nil && ready.Reason == appv1.ReasonConfigNotFound {
		c.warnOnChange(app, appv1.ConditionReady, ready.Reason, ready.Message)
	}
	if changed {
		c.recorder.Event(app, corev1.EventTypeNormal, appv1.EventReasonSynced, appv1.EventMessageSynced)
	}
}

// warnOnChange emits a Warning Event with reason and msg about app, unless app's
// condition of conditionType already says them: once per new problem, not at every sync.
func (c *Controller) warnOnChange(app *appv1.App, conditionType, reason, msg string) {
	if old := meta.FindStatusCondition(app.Status.Conditions, conditionType); old != nil && old.Reason == reason && old.Message == controller.TruncateMessage(msg) {
		return
	}
	c.recorder.Event(app, corev1.EventTypeWarning, reason, msg)
}

// setRolloutConditions sets the conditions a rollout of status implies (kstatus:
// InProgress while it runs or is paused, Failed when aborted), unless a name conflict or
// a stalled stable Deployment says more.
func setRolloutConditions(status *appv1.AppStatus, app *appv1.App, now metav1.Time) {
	r := status.Rollout
	if r == nil || r.Canary == nil || meta.IsStatusConditionFalse(status.Conditions, appv1.ConditionNamesAccepted) {
		return
	}
	msg := controller.TruncateMessage(r.Message)
	set := func(t string, s metav1.ConditionStatus, reason string) {
		setCondition(status, app, now, t, s, reason, msg)
	}
	if r.Phase == appv1.RolloutAborted {
		set(appv1.ConditionReady, metav1.ConditionFalse, appv1.ReasonRolloutAborted)
		set(appv1.ConditionProgressing, metav1.ConditionFalse, appv1.ReasonRolloutAborted)
		set(appv1.ConditionStalled, metav1.ConditionTrue, appv1.ReasonRolloutAborted)
		meta.RemoveStatusCondition(&status.Conditions, appv1.ConditionReconciling)
		return
	}
	if c := meta.FindStatusCondition(status.Conditions, appv1.ConditionStalled); c != nil && c.Reason == appv1.ReasonRolloutAborted {
		meta.RemoveStatusCondition(&status.Conditions, appv1.ConditionStalled) // an abort of before
	}
	if meta.IsStatusConditionTrue(status.Conditions, appv1.ConditionStalled) {
		return // the stable Deployment's problem comes first
	}
	reason := appv1.ReasonRolloutProgressing
	switch {
	case analysis.FirstUnresolved(r.Analysis) != nil:
		// A check's template is missing or does not fit: the user must act (the Warning
		// Event was emitted as the check found it, rolloutanalysis.go).
		st := analysis.FirstUnresolved(r.Analysis)
		reason, msg = st.Reason, controller.TruncateMessage(r.Message+"; "+st.Message)
	case r.Phase == appv1.RolloutPaused:
		reason = appv1.ReasonRolloutPaused
	case promoting(app, r):
		reason = appv1.ReasonRolloutPromoting
	}
	set(appv1.ConditionReady, metav1.ConditionFalse, reason)
	set(appv1.ConditionProgressing, metav1.ConditionTrue, reason)
	set(appv1.ConditionReconciling, metav1.ConditionTrue, reason)
}

// promoting reports whether rollout state r of app is past its last step (a canary's)
// or stage (a blue-green rollout's): being promoted.
func promoting(app *appv1.App, r *appv1.RolloutStatus) bool {
	s, _ := rollout.Strategy(app.Spec.Rollout)
	return s != nil && r.CurrentStepIndex >= int32(len(s.Steps))
}

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

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
	"github.com/app-controller/app-controller/pkg/podhealth"
)

// computeStatus returns the status app should have, given the labels that select its
// pods, what reconciling its children found (the conflicts of other children than the
// Deployment and the Service in otherConflicts) and the first problem of its pods (nil:
// none). It is rebuilt from what is observed now; only the transition times of
// conditions whose status did not change are kept.
func computeStatus(app *appv1.App, selector map[string]string, deployment childResult[*appsv1.Deployment], service childResult[*corev1.Service], problem *podhealth.Problem, now metav1.Time, otherConflicts ...string) *appv1.AppStatus {
	status := app.Status.DeepCopy()
	status.ObservedGeneration = app.Generation
	status.DeploymentStatus = nil
	if deployment.obj != nil {
		status.DeploymentStatus = deployment.obj.Status.DeepCopy()
		// The old pods still stopping after a rollout are not the App's: their count
		// would cost a status write after every rollout that is over.
		status.DeploymentStatus.TerminatingReplicas = nil
	}
	status.ServiceStatus = nil
	if service.obj != nil {
		status.ServiceStatus = service.obj.Status.DeepCopy()
	}
	// The scale subresource reports it: a HorizontalPodAutoscaler finds the pods with it.
	status.Selector = labels.SelectorFromSet(selector).String()
	set := func(conditionType string, s metav1.ConditionStatus, reason, message string) {
		setCondition(status, app, now, conditionType, s, reason, controller.TruncateMessage(message))
	}

	var conflicts []string
	for _, c := range append([]string{deployment.conflict, service.conflict}, otherConflicts...) {
		if c != "" {
			conflicts = append(conflicts, c)
		}
	}
	if len(conflicts) > 0 {
		setNameConflict(status, app, strings.Join(conflicts, "; "), now)
		return status
	}
	set(appv1.ConditionNamesAccepted, metav1.ConditionTrue, appv1.ReasonNoNameConflict, "Every child name is held by this App")

	r := deploymentRollout(deployment.name, deployment.obj)
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
	if service.name != "" && service.obj != nil {
		ready = append(ready, fmt.Sprintf("Service %q selects the App's pods", service.name))
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

// rollout is the state of an App's Deployment rollout.
type rollout struct {
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

// deploymentRollout tells how far the rollout of d is, like `kubectl rollout status`.
func deploymentRollout(name string, d *appsv1.Deployment) rollout {
	if d == nil {
		return rollout{message: fmt.Sprintf("Waiting for Deployment %q to be created", name)}
	}
	desired := ptr.Deref(d.Spec.Replicas, 1)
	st := d.Status
	if st.ObservedGeneration < d.Generation {
		return rollout{message: fmt.Sprintf("Waiting for the deployment controller to observe generation %d of Deployment %q", d.Generation, name)}
	}
	if c := deploymentCondition(d, appsv1.DeploymentProgressing); c != nil && c.Reason == "ProgressDeadlineExceeded" {
		return rollout{deadlineExceeded: true, message: fmt.Sprintf("Deployment %q exceeded its progress deadline: %s", name, c.Message)}
	}
	// Pods refused (a quota, PodSecurity admission): the ReplicaSet's reason, which the
	// deployment controller copies into ReplicaFailure, is what the user must act on.
	if c := deploymentCondition(d, appsv1.DeploymentReplicaFailure); c != nil && c.Status == corev1.ConditionTrue && st.AvailableReplicas < desired {
		return rollout{replicaFailure: true, message: fmt.Sprintf("Deployment %q cannot create pods: %s", name, c.Message)}
	}
	switch {
	case st.UpdatedReplicas < desired:
		return rollout{message: fmt.Sprintf("Deployment %q: %d of %d replicas updated", name, st.UpdatedReplicas, desired)}
	case st.Replicas > st.UpdatedReplicas:
		return rollout{message: fmt.Sprintf("Deployment %q: %d old replicas pending termination", name, st.Replicas-st.UpdatedReplicas)}
	case st.AvailableReplicas < st.UpdatedReplicas:
		return rollout{message: fmt.Sprintf("Deployment %q: %d of %d updated replicas available", name, st.AvailableReplicas, st.UpdatedReplicas)}
	}
	r := rollout{rolledOut: true, message: fmt.Sprintf("Deployment %q: %d of %d replicas available", name, st.AvailableReplicas, desired)}
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

// recordConflicts emits the seed's ErrResourceExists Warning for each child name held by
// something else, once per conflict rather than on every sync: only when the conflict is
// not already reported in the App's NamesAccepted condition.
func (c *Controller) recordConflicts(app *appv1.App, status *appv1.AppStatus, conflicts, names []string) {
	old := meta.FindStatusCondition(app.Status.Conditions, appv1.ConditionNamesAccepted)
	for i, conflict := range conflicts {
		if conflict == "" {
			continue
		}
		if old != nil && old.Status == metav1.ConditionFalse && strings.Contains(old.Message, conflict) {
			continue
		}
		c.recorder.Eventf(app, corev1.EventTypeWarning, appv1.EventReasonResourceExists, appv1.EventMessageResourceExists, names[i])
	}
}

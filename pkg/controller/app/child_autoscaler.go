package app

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	autoscalingv2ac "k8s.io/client-go/applyconfigurations/autoscaling/v2"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
)

// An App's HorizontalPodAutoscaler (spec.autoscaling) scales its Deployment with the
// load. It is named as the Deployment and claims the Deployment's name, as the
// PodDisruptionBudget does. The autoscaler owns the Deployment's replica count: the
// Deployment's desired state leaves it out once the autoscaler has taken it
// (deploymentReplicas, child_deployment.go). The App's status carries what the
// autoscaler reports (status.autoscaling, ScalingActive, ScalingLimited); removing
// spec.autoscaling prunes it, with an AutoscalingRemoved Event that says what becomes
// of the replica count.

// autoscalerChild is the App's HorizontalPodAutoscaler.
type autoscalerChild struct {
	*childReconciler[*autoscalingv2.HorizontalPodAutoscaler, *autoscalingv2ac.HorizontalPodAutoscalerApplyConfiguration]
	c *Controller
}

// newAutoscalerChild wires the HorizontalPodAutoscaler informers.
func newAutoscalerChild(c *Controller, inf Informers, _ Options) (appChild, error) {
	k, err := newChildReconciler[*autoscalingv2.HorizontalPodAutoscaler](c, "HorizontalPodAutoscaler", inf.Autoscalers.Informer(),
		inf.UnmanagedAutoscalers.Informer(), c.kubeClient.AutoscalingV2().HorizontalPodAutoscalers, autoscalingv2ac.HorizontalPodAutoscaler)
	return &autoscalerChild{childReconciler: k, c: c}, err
}

// autoscalerName is the name of the HorizontalPodAutoscaler app asks for, its
// Deployment's; "" for none.
func autoscalerName(app *appv1.App) string {
	if t := app.Spec.DeploymentTemplate; t != nil && app.Spec.Autoscaling != nil {
		return t.Name
	}
	return ""
}

func (a *autoscalerChild) claim(app *appv1.App) string {
	return claimKey("Deployment", app.Namespace, autoscalerName(app))
}

// sync writes the HorizontalPodAutoscaler app asks for and reports it: status.autoscaling,
// ScalingActive and ScalingLimited. When spec.autoscaling goes, the autoscaler is pruned
// and an AutoscalingRemoved Event says what becomes of the replica count.
func (a *autoscalerChild) sync(ctx context.Context, app *appv1.App, in *syncInput) (childOutcome, error) {
	desired, err := DesiredAutoscaler(app)
	if err != nil {
		return childOutcome{}, fmt.Errorf("building the HorizontalPodAutoscaler of App %s/%s: %w", app.Namespace, app.Name, err)
	}
	res, err := a.reconcile(ctx, app, autoscalerName(app), desired, a.claim(app))
	if desired == nil && res.changed {
		a.recorder.Event(app, corev1.EventTypeNormal, appv1.EventReasonAutoscalingRemoved, autoscalingRemoved(app, in.live))
	}
	out := res.outcome()
	if err != nil {
		return out, err
	}
	report := autoscalerReport(app, res, a.c.clock.Now())
	out.conditions = report.conditions
	out.recheck = report.recheck
	out.report = func(status *appv1.AppStatus) { status.Autoscaling = report.status }
	return out, nil
}

// autoscalingRemoved says what becomes of the replica count of live, app's Deployment,
// when its autoscaler is deleted: deploymentTemplate.replicas takes it back, or it stays.
func autoscalingRemoved(app *appv1.App, live *appsv1.Deployment) string {
	current := "its count"
	if live != nil {
		current = fmt.Sprint(ptr.Deref(live.Spec.Replicas, 1))
	}
	msg := "Deleted the HorizontalPodAutoscaler of the removed spec.autoscaling: "
	if t := app.Spec.DeploymentTemplate; t != nil && t.Replicas != nil {
		return msg + fmt.Sprintf("replicas %s -> %d (deploymentTemplate.replicas)", current, *t.Replicas)
	}
	return msg + "replicas stay at " + current
}

// DesiredAutoscaler returns the apply configuration of the HorizontalPodAutoscaler that
// app wants, with exactly the fields the controller owns, or nil when app has no
// spec.autoscaling (or no deploymentTemplate, which the API refuses with it).
func DesiredAutoscaler(app *appv1.App) (*autoscalingv2ac.HorizontalPodAutoscalerApplyConfiguration, error) {
	as, t := app.Spec.Autoscaling, app.Spec.DeploymentTemplate
	if as == nil || t == nil {
		return nil, nil
	}
	spec := autoscalingv2ac.HorizontalPodAutoscalerSpec().
		WithScaleTargetRef(autoscalingv2ac.CrossVersionObjectReference().
			WithAPIVersion("apps/v1").WithKind("Deployment").WithName(t.Name)).
		WithMinReplicas(autoscalingMin(as)).
		WithMaxReplicas(as.MaxReplicas)
	for _, m := range []struct {
		resource corev1.ResourceName
		target   *appv1.ResourceTarget
	}{{corev1.ResourceCPU, as.CPU}, {corev1.ResourceMemory, as.Memory}} {
		if m.target == nil {
			continue
		}
		target := autoscalingv2ac.MetricTarget()
		if m.target.AverageUtilization != nil {
			target.WithType(autoscalingv2.UtilizationMetricType).WithAverageUtilization(*m.target.AverageUtilization)
		} else if m.target.AverageValue != nil {
			target.WithType(autoscalingv2.AverageValueMetricType).WithAverageValue(*m.target.AverageValue)
		}
		spec.WithMetrics(autoscalingv2ac.MetricSpec().
			WithType(autoscalingv2.ResourceMetricSourceType).
			WithResource(autoscalingv2ac.ResourceMetricSource().WithName(m.resource).WithTarget(target)))
	}
	if as.Behavior != nil {
		behavior := &autoscalingv2ac.HorizontalPodAutoscalerBehaviorApplyConfiguration{}
		if err := controller.Convert(as.Behavior, behavior); err != nil {
			return nil, fmt.Errorf("converting behavior: %w", err)
		}
		spec.WithBehavior(behavior)
	}
	hpa := autoscalingv2ac.HorizontalPodAutoscaler(t.Name, app.Namespace).
		WithLabels(childLabels(app)).
		WithOwnerReferences(controller.OwnerReference(app, appKind)).
		WithSpec(spec)
	return controller.WithAppliedHash(hpa)
}

// autoscalingMin is the autoscaler's minReplicas: the App's, else 1.
func autoscalingMin(as *appv1.Autoscaling) int32 {
	return ptr.Deref(as.MinReplicas, 1)
}

// autoscalerState is what the App's status says of its autoscaler.
type autoscalerState struct {
	status     *appv1.AutoscalingStatus
	conditions []childCondition
	// recheck is when the verdict changes by itself (the grace of a failing autoscaler
	// ends); 0: never.
	recheck time.Duration
}

// autoscalerReport returns what the App's status says of res, app's autoscaler, at now:
// status.autoscaling, ScalingActive (from the autoscaler's ScalingActive and AbleToScale,
// or MissingResourceRequest from the pod template) and ScalingLimited. Both conditions
// go when the App has no autoscaler, and ScalingLimited whenever maxReplicas does not
// cap it.
func autoscalerReport(app *appv1.App, res childResult[*autoscalingv2.HorizontalPodAutoscaler], now time.Time) autoscalerState {
	gone := []childCondition{{conditionType: appv1.ConditionScalingActive}, {conditionType: appv1.ConditionScalingLimited}}
	hpa := res.obj
	if app.Spec.Autoscaling == nil || res.conflict != "" {
		return autoscalerState{conditions: gone}
	}
	var st autoscalerState
	if hpa != nil {
		st.status = &appv1.AutoscalingStatus{
			Name:            hpa.Name,
			CurrentReplicas: hpa.Status.CurrentReplicas,
			DesiredReplicas: hpa.Status.DesiredReplicas,
			LastScaleTime:   hpa.Status.LastScaleTime,
		}
	}
	active := hpaCondition(hpa, autoscalingv2.ScalingActive)
	var scaling childCondition
	scaling, st.recheck = scalingActive(app, hpa, now)
	limited := childCondition{conditionType: appv1.ConditionScalingLimited}
	if c := hpaCondition(hpa, autoscalingv2.ScalingLimited); c != nil && c.Status == corev1.ConditionTrue && c.Reason == "TooManyReplicas" &&
		active != nil && active.Status == corev1.ConditionTrue {
		limited.status, limited.reason = metav1.ConditionTrue, appv1.ReasonMaxReplicasReached
		limited.message = fmt.Sprintf("HorizontalPodAutoscaler %q wants more pods than autoscaling.maxReplicas, %d: the load is above the target at the maximum",
			hpa.Name, app.Spec.Autoscaling.MaxReplicas)
	}
	st.conditions = []childCondition{scaling, limited}
	return st
}

// scalingActive returns the ScalingActive condition of app, whose autoscaler is hpa (nil:
// not written yet), at now, and when it changes by itself (0: never): a missing request
// first (the autoscaler cannot compute the utilization of a resource a container does
// not request), unless the autoscaler computes it anyway (a LimitRange gave the pods
// the request); then the autoscaler's own verdict, a failure only once it lasted
// AutoscalerGrace.
func scalingActive(app *appv1.App, hpa *autoscalingv2.HorizontalPodAutoscaler, now time.Time) (childCondition, time.Duration) {
	cond := func(s metav1.ConditionStatus, reason, msg string, warn bool) childCondition {
		// Pending is no verdict: it leaves Ready as it is.
		return childCondition{conditionType: appv1.ConditionScalingActive, status: s, reason: reason, message: msg, warn: warn,
			informational: s == metav1.ConditionUnknown}
	}
	active := hpaCondition(hpa, autoscalingv2.ScalingActive)
	if missing := missingRequest(app); missing != "" && (active == nil || active.Status != corev1.ConditionTrue) {
		return cond(metav1.ConditionFalse, appv1.ReasonMissingResourceRequest, missing, true), 0
	}
	if hpa == nil {
		return cond(metav1.ConditionUnknown, appv1.ReasonAutoscalerPending, "Waiting for the HorizontalPodAutoscaler to be created", false), 0
	}
	// The autoscaler cannot read or write the Deployment's scale.
	if able := hpaCondition(hpa, autoscalingv2.AbleToScale); able != nil && able.Status == corev1.ConditionFalse {
		if left := appv1.AutoscalerGrace - now.Sub(able.LastTransitionTime.Time); left > 0 {
			return cond(metav1.ConditionUnknown, appv1.ReasonAutoscalerPending,
				fmt.Sprintf("HorizontalPodAutoscaler %q cannot scale yet: %s: %s", hpa.Name, able.Reason, able.Message), false), left
		}
		return cond(metav1.ConditionFalse, appv1.ReasonAutoscalerUnableToScale,
			fmt.Sprintf("HorizontalPodAutoscaler %q cannot scale the Deployment: %s: %s", hpa.Name, able.Reason, able.Message), true), 0
	}
	switch {
	case active == nil:
		// The autoscaler controller has not looked at it yet (or does not run: the
		// condition stays Unknown and the App as Ready as it is).
		return cond(metav1.ConditionUnknown, appv1.ReasonAutoscalerPending,
			fmt.Sprintf("HorizontalPodAutoscaler %q has not computed a replica count yet", hpa.Name), false), 0
	case active.Status == corev1.ConditionTrue:
		return cond(metav1.ConditionTrue, appv1.ReasonAutoscalerActive,
			fmt.Sprintf("HorizontalPodAutoscaler %q scales the Deployment from %d to %d replicas: %s",
				hpa.Name, autoscalingMin(app.Spec.Autoscaling), app.Spec.Autoscaling.MaxReplicas, active.Message), false), 0
	}
	if left := appv1.AutoscalerGrace - now.Sub(active.LastTransitionTime.Time); left > 0 {
		return cond(metav1.ConditionUnknown, appv1.ReasonAutoscalerPending,
			fmt.Sprintf("HorizontalPodAutoscaler %q cannot compute a replica count yet (new pods have no metrics for their first scrapes): %s: %s",
				hpa.Name, active.Reason, active.Message), false), left
	}
	return cond(metav1.ConditionFalse, appv1.ReasonAutoscalerInactive,
		fmt.Sprintf("HorizontalPodAutoscaler %q does not scale: %s: %s", hpa.Name, active.Reason, active.Message), true), 0
}

// hpaCondition returns hpa's condition of type t, or nil (also when hpa is nil).
func hpaCondition(hpa *autoscalingv2.HorizontalPodAutoscaler, t autoscalingv2.HorizontalPodAutoscalerConditionType) *autoscalingv2.HorizontalPodAutoscalerCondition {
	if hpa == nil {
		return nil
	}
	for i := range hpa.Status.Conditions {
		if hpa.Status.Conditions[i].Type == t {
			return &hpa.Status.Conditions[i]
		}
	}
	return nil
}

// missingRequest says which container of app's pods lacks a request of a resource that
// a utilization target of spec.autoscaling names, or "" when none does. The autoscaler
// sums the requests of the pod's containers and native sidecars (init containers run to
// completion before and do not count); a limit without a request is the request.
func missingRequest(app *appv1.App) string {
	as, t := app.Spec.Autoscaling, app.Spec.DeploymentTemplate
	if as == nil || t == nil {
		return ""
	}
	for _, m := range []struct {
		resource corev1.ResourceName
		target   *appv1.ResourceTarget
	}{{corev1.ResourceCPU, as.CPU}, {corev1.ResourceMemory, as.Memory}} {
		if m.target == nil || m.target.AverageUtilization == nil {
			continue
		}
		field := "autoscaling." + string(m.resource) + ".averageUtilization"
		if !requests(t.Resources, m.resource) {
			return fmt.Sprintf("%s is a percentage of what the containers request, and container %q (deploymentTemplate.resources) requests no %s: set deploymentTemplate.resources.requests.%s, or use averageValue",
				field, appv1.ContainerName, m.resource, m.resource)
		}
		for i := range t.Sidecars {
			if !requests(t.Sidecars[i].Resources, m.resource) {
				return fmt.Sprintf("%s is a percentage of what the containers request, and sidecar %q requests no %s: set sidecars[%d].resources.requests.%s, or use averageValue",
					field, t.Sidecars[i].Name, m.resource, i, m.resource)
			}
		}
	}
	return ""
}

// requests tells whether r requests resource (a limit alone is also the request).
func requests(r *appv1.ResourceRequirements, resource corev1.ResourceName) bool {
	if r == nil {
		return false
	}
	_, req := r.Requests[resource]
	_, limit := r.Limits[resource]
	return req || limit
}

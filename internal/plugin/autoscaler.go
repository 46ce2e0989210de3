package plugin

import (
	"context"
	"fmt"
	"strings"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// autoscalerResource is the resource of autoscaling/v2 HorizontalPodAutoscalers.
var autoscalerResource = autoscalingv2.SchemeGroupVersion.WithResource("horizontalpodautoscalers")

// appAutoscaler returns the HorizontalPodAutoscaler of app's spec.autoscaling when app
// controls it, or nil and why not ("" when app has no spec.autoscaling).
func appAutoscaler(ctx context.Context, c Clients, app *appv1.App) (*autoscalingv2.HorizontalPodAutoscaler, string) {
	t := app.Spec.DeploymentTemplate
	if app.Spec.Autoscaling == nil || t == nil {
		return nil, ""
	}
	u, err := c.Dynamic.Resource(autoscalerResource).Namespace(app.Namespace).Get(ctx, t.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, t.Name + ": does not exist"
	}
	if err != nil {
		return nil, fmt.Sprintf("%s: cannot read it: %v", t.Name, err)
	}
	hpa, err := decodeAutoscaler(u)
	if err != nil {
		return nil, fmt.Sprintf("%s: cannot decode it: %v", t.Name, err)
	}
	if ref := metav1.GetControllerOfNoCopy(hpa); ref == nil || ref.UID != app.UID {
		return nil, t.Name + ": held by an object this App does not control"
	}
	return hpa, ""
}

// decodeAutoscaler decodes a HorizontalPodAutoscaler read by the dynamic client.
func decodeAutoscaler(u *unstructured.Unstructured) (*autoscalingv2.HorizontalPodAutoscaler, error) {
	hpa := &autoscalingv2.HorizontalPodAutoscaler{}
	err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, hpa)
	return hpa, err
}

// autoscalerLine describes a HorizontalPodAutoscaler in one line: "NAME: 3 of 1..3
// replicas, desired 3, cpu 41%/50%", then what keeps it from scaling or caps it.
func autoscalerLine(hpa *autoscalingv2.HorizontalPodAutoscaler) string {
	lowest := int32(1)
	if hpa.Spec.MinReplicas != nil {
		lowest = *hpa.Spec.MinReplicas
	}
	line := fmt.Sprintf("%s: %d of %d..%d replicas, desired %d", hpa.Name, hpa.Status.CurrentReplicas, lowest, hpa.Spec.MaxReplicas, hpa.Status.DesiredReplicas)
	if metrics := autoscalerMetrics(hpa); metrics != "" {
		line += ", " + metrics
	}
	if problem := autoscalerProblem(hpa); problem != "" {
		line += "; " + problem
	} else if c := autoscalerCondition(hpa, autoscalingv2.ScalingLimited); c != nil && c.Status == corev1.ConditionTrue && c.Reason == "TooManyReplicas" {
		line += "; at maxReplicas, the load asks for more"
	}
	return oneLine(line)
}

// autoscalerMetrics lists each resource target with its current value: "cpu 41%/50%,
// memory 120Mi/300Mi" ("?" for a value not measured yet).
func autoscalerMetrics(hpa *autoscalingv2.HorizontalPodAutoscaler) string {
	var out []string
	for _, m := range hpa.Spec.Metrics {
		if m.Type != autoscalingv2.ResourceMetricSourceType || m.Resource == nil {
			continue
		}
		var current *autoscalingv2.MetricValueStatus
		for _, s := range hpa.Status.CurrentMetrics {
			if s.Type == autoscalingv2.ResourceMetricSourceType && s.Resource != nil && s.Resource.Name == m.Resource.Name {
				current = &s.Resource.Current
			}
		}
		target := m.Resource.Target
		switch {
		case target.AverageUtilization != nil:
			value := "?"
			if current != nil && current.AverageUtilization != nil {
				value = fmt.Sprintf("%d%%", *current.AverageUtilization)
			}
			out = append(out, fmt.Sprintf("%s %s/%d%%", m.Resource.Name, value, *target.AverageUtilization))
		case target.AverageValue != nil:
			value := "?"
			if current != nil && current.AverageValue != nil {
				value = current.AverageValue.String()
			}
			out = append(out, fmt.Sprintf("%s %s/%s", m.Resource.Name, value, target.AverageValue.String()))
		}
	}
	return strings.Join(out, ", ")
}

// autoscalerProblem says what keeps hpa from scaling (its AbleToScale or ScalingActive
// False, or no verdict yet), "" when nothing does.
func autoscalerProblem(hpa *autoscalingv2.HorizontalPodAutoscaler) string {
	for _, t := range []autoscalingv2.HorizontalPodAutoscalerConditionType{autoscalingv2.AbleToScale, autoscalingv2.ScalingActive} {
		if c := autoscalerCondition(hpa, t); c != nil && c.Status == corev1.ConditionFalse {
			return fmt.Sprintf("%s False, %s: %s", c.Type, c.Reason, c.Message)
		}
	}
	if autoscalerCondition(hpa, autoscalingv2.ScalingActive) == nil {
		return "no replica count computed yet"
	}
	return ""
}

// autoscalerCondition returns hpa's condition of type t, or nil.
func autoscalerCondition(hpa *autoscalingv2.HorizontalPodAutoscaler, t autoscalingv2.HorizontalPodAutoscalerConditionType) *autoscalingv2.HorizontalPodAutoscalerCondition {
	for i := range hpa.Status.Conditions {
		if hpa.Status.Conditions[i].Type == t {
			return &hpa.Status.Conditions[i]
		}
	}
	return nil
}

// autoscalerHealth is the health of a HorizontalPodAutoscaler in the tree, which kstatus
// reads Current whatever its conditions: Failed when it has been unable to scale for
// appv1.AutoscalerGrace (as the App's ScalingActive says), Progressing until it computes
// a replica count or within the grace, Ready otherwise; the message is autoscalerLine's.
func autoscalerHealth(u *unstructured.Unstructured, now time.Time) (Health, string) {
	hpa, err := decodeAutoscaler(u)
	if err != nil {
		return HealthUnknown, fmt.Sprintf("decoding it: %v", err)
	}
	health := HealthReady
	for _, t := range []autoscalingv2.HorizontalPodAutoscalerConditionType{autoscalingv2.AbleToScale, autoscalingv2.ScalingActive} {
		c := autoscalerCondition(hpa, t)
		switch {
		case c == nil && t == autoscalingv2.ScalingActive:
			health = HealthProgressing
		case c == nil || c.Status != corev1.ConditionFalse:
		case now.Sub(c.LastTransitionTime.Time) < appv1.AutoscalerGrace:
			health = HealthProgressing
		default:
			return HealthFailed, autoscalerLine(hpa)
		}
	}
	return health, autoscalerLine(hpa)
}

package v1

import (
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Autoscaling asks for a HorizontalPodAutoscaler (autoscaling/v2) of the App's
// Deployment: owned by the App, named as the Deployment, scaling it between minReplicas
// and maxReplicas so that its pods' average use of each resource stays at its target.
// The autoscaler then owns the Deployment's replica count: deploymentTemplate.replicas
// is only the size the Deployment starts with, and cannot change while autoscaling is
// on (`kubectl scale app` is refused too). Removing autoscaling deletes the autoscaler
// and gives the count back to deploymentTemplate.replicas, or, when that is unset, leaves
// the Deployment at the count it has. docs/autoscaling.md tells the whole design; the
// controller does not write the autoscaler yet (the API comes first).
//
// +kubebuilder:validation:XValidation:rule="!has(self.minReplicas) || self.minReplicas <= self.maxReplicas",message="autoscaling.minReplicas must not exceed autoscaling.maxReplicas",fieldPath=".minReplicas"
// +kubebuilder:validation:XValidation:rule="has(self.cpu) || has(self.memory)",message="autoscaling needs a target: set cpu, memory or both"
type Autoscaling struct {
	// MinReplicas is the fewest pods the autoscaler keeps. Defaults to 1.
	// +optional
	// +kubebuilder:validation:Minimum=1
	MinReplicas *int32 `json:"minReplicas,omitempty"`

	// MaxReplicas is the most pods the autoscaler scales to; at least minReplicas.
	// +required
	// +kubebuilder:validation:Minimum=1
	MaxReplicas int32 `json:"maxReplicas"`

	// CPU is the target of the pods' average CPU use. A utilization target is a
	// percentage of the CPU each container requests: every container of the pods (the
	// App's, its sidecars) needs a CPU request, or the autoscaler cannot scale (the App
	// says so in a condition, with the reason MissingResourceRequest).
	// +optional
	CPU *ResourceTarget `json:"cpu,omitempty"`

	// Memory is the target of the pods' average memory use, as CPU is of theirs.
	// +optional
	Memory *ResourceTarget `json:"memory,omitempty"`

	// Behavior is the autoscaler's scaling behavior, as in a HorizontalPodAutoscaler:
	// per direction (scaleUp, scaleDown) a stabilization window, the policies that bound
	// each step and which policy wins. Unset, the autoscaler's defaults: scale up at once,
	// by up to 4 pods or 100% every 15 s; scale down after a 300 s window, by up to 100%
	// every 15 s.
	// +optional
	// +kubebuilder:validation:XValidation:rule="(!has(self.scaleUp) || !has(self.scaleUp.stabilizationWindowSeconds) || (self.scaleUp.stabilizationWindowSeconds >= 0 && self.scaleUp.stabilizationWindowSeconds <= 3600)) && (!has(self.scaleDown) || !has(self.scaleDown.stabilizationWindowSeconds) || (self.scaleDown.stabilizationWindowSeconds >= 0 && self.scaleDown.stabilizationWindowSeconds <= 3600))",message="autoscaling.behavior: stabilizationWindowSeconds must be from 0 to 3600"
	// +kubebuilder:validation:XValidation:rule="(!has(self.scaleUp) || !has(self.scaleUp.selectPolicy) || self.scaleUp.selectPolicy in ['Max', 'Min', 'Disabled']) && (!has(self.scaleDown) || !has(self.scaleDown.selectPolicy) || self.scaleDown.selectPolicy in ['Max', 'Min', 'Disabled'])",message="autoscaling.behavior: selectPolicy must be Max, Min or Disabled"
	// +kubebuilder:validation:XValidation:rule="(!has(self.scaleUp) || !has(self.scaleUp.policies) || self.scaleUp.policies.all(p, p.type in ['Pods', 'Percent'] && p.value > 0 && p.periodSeconds > 0 && p.periodSeconds <= 1800)) && (!has(self.scaleDown) || !has(self.scaleDown.policies) || self.scaleDown.policies.all(p, p.type in ['Pods', 'Percent'] && p.value > 0 && p.periodSeconds > 0 && p.periodSeconds <= 1800))",message="autoscaling.behavior: each policy needs type Pods or Percent, a value above 0 and periodSeconds from 1 to 1800"
	Behavior *autoscalingv2.HorizontalPodAutoscalerBehavior `json:"behavior,omitempty"`
}

// ResourceTarget is the target of the pods' average use of a resource: exactly one of
// averageUtilization (a percentage of the containers' requests) and averageValue (an
// amount a pod).
//
// +kubebuilder:validation:XValidation:rule="has(self.averageUtilization) != has(self.averageValue)",message="a target sets exactly one of averageUtilization and averageValue"
type ResourceTarget struct {
	// AverageUtilization is the target average use across the pods, in percent of what
	// their containers request (it may exceed 100).
	// +optional
	// +kubebuilder:validation:Minimum=1
	AverageUtilization *int32 `json:"averageUtilization,omitempty"`

	// AverageValue is the target average use of a pod, as an amount (say 500m of CPU or
	// 256Mi of memory).
	// +optional
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isGreaterThan(quantity('0'))",message="averageValue must be above 0"
	AverageValue *resource.Quantity `json:"averageValue,omitempty"`
}

package api

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/app-controller/app-controller/test/integration/framework"
)

// TestAutoscalingValidation checks spec.autoscaling as the API server validates it: each
// invalid combination is refused with a message that names the field, valid ones are
// accepted strictly, and while autoscaling is on deploymentTemplate.replicas cannot
// change, not through `kubectl scale app` either.
func TestAutoscalingValidation(t *testing.T) {
	ns := framework.Namespace(t)
	dyn := framework.DynamicClient(t)
	const deployment = "deploymentTemplate: {name: web, image: nginx}\n"
	invalid := []refusedSpec{
		{"min above max (CEL)", deployment + `autoscaling: {minReplicas: 5, maxReplicas: 3, cpu: {averageUtilization: 50}}`,
			[]string{"spec.autoscaling.minReplicas", "autoscaling.minReplicas must not exceed autoscaling.maxReplicas"}},
		{"no target (CEL)", deployment + `autoscaling: {maxReplicas: 3}`,
			[]string{"spec.autoscaling", "autoscaling needs a target: set cpu, memory or both"}},
		{"min 0", deployment + `autoscaling: {minReplicas: 0, maxReplicas: 3, cpu: {averageUtilization: 50}}`,
			[]string{"spec.autoscaling.minReplicas", "greater than or equal to 1"}},
		{"no max", deployment + `autoscaling: {cpu: {averageUtilization: 50}}`,
			[]string{"spec.autoscaling.maxReplicas: Required value"}},
		{"max 0", deployment + `autoscaling: {maxReplicas: 0, cpu: {averageUtilization: 50}}`,
			[]string{"spec.autoscaling.maxReplicas", "greater than or equal to 1"}},
		{"a target with both a utilization and a value (CEL)", deployment + `autoscaling: {maxReplicas: 3, cpu: {averageUtilization: 50, averageValue: 100m}}`,
			[]string{"spec.autoscaling.cpu", "a target sets exactly one of averageUtilization and averageValue"}},
		{"an empty target (CEL)", deployment + `autoscaling: {maxReplicas: 3, memory: {}}`,
			[]string{"spec.autoscaling.memory", "a target sets exactly one of averageUtilization and averageValue"}},
		{"utilization 0", deployment + `autoscaling: {maxReplicas: 3, cpu: {averageUtilization: 0}}`,
			[]string{"spec.autoscaling.cpu.averageUtilization", "greater than or equal to 1"}},
		{"average value 0 (CEL)", deployment + `autoscaling: {maxReplicas: 3, memory: {averageValue: "0"}}`,
			[]string{"spec.autoscaling.memory.averageValue", "averageValue must be above 0"}},
		{"average value no quantity", deployment + `autoscaling: {maxReplicas: 3, memory: {averageValue: lots}}`,
			[]string{"spec.autoscaling.memory.averageValue", "should match"}},
		{"without a Deployment (CEL)", `serviceTemplate: {name: web}
autoscaling: {maxReplicas: 3, cpu: {averageUtilization: 50}}`,
			[]string{"spec.autoscaling", "autoscaling requires deploymentTemplate"}},
		{"starting size above max (CEL)", `deploymentTemplate: {name: web, image: nginx, replicas: 4}
autoscaling: {maxReplicas: 3, cpu: {averageUtilization: 50}}`,
			[]string{"spec.deploymentTemplate.replicas", "deploymentTemplate.replicas is the starting size with autoscaling: it must be from autoscaling.minReplicas (default 1) to autoscaling.maxReplicas, or unset"}},
		{"starting size 0 (CEL)", `deploymentTemplate: {name: web, image: nginx, replicas: 0}
autoscaling: {maxReplicas: 3, cpu: {averageUtilization: 50}}`,
			[]string{"spec.deploymentTemplate.replicas", "is the starting size with autoscaling"}},
		{"starting size below min (CEL)", `deploymentTemplate: {name: web, image: nginx, replicas: 1}
autoscaling: {minReplicas: 2, maxReplicas: 3, cpu: {averageUtilization: 50}}`,
			[]string{"spec.deploymentTemplate.replicas", "is the starting size with autoscaling"}},
		{"stabilization window too long (CEL)", deployment + `autoscaling: {maxReplicas: 3, cpu: {averageUtilization: 50}, behavior: {scaleDown: {stabilizationWindowSeconds: 3601}}}`,
			[]string{"spec.autoscaling.behavior", "autoscaling.behavior: stabilizationWindowSeconds must be from 0 to 3600"}},
		{"unknown select policy (CEL)", deployment + `autoscaling: {maxReplicas: 3, cpu: {averageUtilization: 50}, behavior: {scaleUp: {selectPolicy: Fastest}}}`,
			[]string{"spec.autoscaling.behavior", "autoscaling.behavior: selectPolicy must be Max, Min or Disabled"}},
		{"a policy of value 0 (CEL)", deployment + `autoscaling: {maxReplicas: 3, cpu: {averageUtilization: 50}, behavior: {scaleUp: {policies: [{type: Pods, value: 0, periodSeconds: 15}]}}}`,
			[]string{"spec.autoscaling.behavior", "autoscaling.behavior: each policy needs type Pods or Percent, a value above 0 and periodSeconds from 1 to 1800"}},
		{"a policy of an unknown type (CEL)", deployment + `autoscaling: {maxReplicas: 3, cpu: {averageUtilization: 50}, behavior: {scaleDown: {policies: [{type: Replicas, value: 1, periodSeconds: 15}]}}}`,
			[]string{"spec.autoscaling.behavior", "each policy needs type Pods or Percent"}},
		{"a policy period too long (CEL)", deployment + `autoscaling: {maxReplicas: 3, cpu: {averageUtilization: 50}, behavior: {scaleDown: {policies: [{type: Percent, value: 10, periodSeconds: 1801}]}}}`,
			[]string{"spec.autoscaling.behavior", "periodSeconds from 1 to 1800"}},
		{"the HPA v1 field, strict", deployment + `autoscaling: {maxReplicas: 3, targetCPUUtilizationPercentage: 50}`,
			[]string{`unknown field "spec.autoscaling.targetCPUUtilizationPercentage"`}},
	}
	assertRefused(t, dyn, ns, "invalid-autoscaling", invalid)

	valid := []acceptedSpec{
		{"a CPU utilization target", deployment + `autoscaling: {maxReplicas: 3, cpu: {averageUtilization: 50}}`},
		{"every field", `deploymentTemplate: {name: web, image: nginx, replicas: 2, resources: {requests: {cpu: 200m, memory: 64Mi}}}
autoscaling:
  minReplicas: 2
  maxReplicas: 10
  cpu: {averageValue: 150m}
  memory: {averageUtilization: 80}
  behavior:
    scaleUp: {stabilizationWindowSeconds: 0, selectPolicy: Max, policies: [{type: Pods, value: 4, periodSeconds: 15}, {type: Percent, value: 100, periodSeconds: 15}]}
    scaleDown: {stabilizationWindowSeconds: 0, selectPolicy: Min, policies: [{type: Percent, value: 50, periodSeconds: 60}]}`},
		{"scale down disabled", deployment + `autoscaling: {minReplicas: 3, maxReplicas: 3, memory: {averageValue: 256Mi}, behavior: {scaleDown: {selectPolicy: Disabled}}}`},
	}
	assertAccepted(t, dyn, ns, "valid-autoscaling", valid)

	t.Run("replicas while autoscaling is on", func(t *testing.T) {
		const name = "scaled"
		if err := createSpec(t, dyn, ns, name, `deploymentTemplate: {name: web, image: nginx, replicas: 2}
autoscaling: {maxReplicas: 3, cpu: {averageUtilization: 50}}`); err != nil {
			t.Fatal(err)
		}
		refused := "deploymentTemplate.replicas cannot change while autoscaling is on (kubectl scale app included): the HorizontalPodAutoscaler sets the Deployment's replicas. Change autoscaling.minReplicas or maxReplicas, or remove autoscaling in the same change"
		steps := []struct {
			name    string
			args    []string
			refused bool // else accepted
		}{
			{"kubectl scale app", []string{"scale", "app/" + name, "--replicas=3"}, true},
			{"a new replicas", []string{"patch", "app", name, "--type=merge", "-p", `{"spec":{"deploymentTemplate":{"replicas":3}}}`}, true},
			{"replicas unset", []string{"patch", "app", name, "--type=merge", "-p", `{"spec":{"deploymentTemplate":{"replicas":null}}}`}, false},
			{"kubectl scale app of unset replicas", []string{"scale", "app/" + name, "--replicas=2"}, true},
			{"autoscaling off, replicas set in the same change", []string{"patch", "app", name, "--type=merge", "-p", `{"spec":{"autoscaling":null,"deploymentTemplate":{"replicas":5}}}`}, false},
			{"kubectl scale app without autoscaling", []string{"scale", "app/" + name, "--replicas=6"}, false},
			{"autoscaling on below the replicas", []string{"patch", "app", name, "--type=merge", "-p", `{"spec":{"autoscaling":{"maxReplicas":3,"cpu":{"averageUtilization":50}}}}`}, true},
			{"autoscaling on around the replicas", []string{"patch", "app", name, "--type=merge", "-p", `{"spec":{"autoscaling":{"maxReplicas":10,"cpu":{"averageUtilization":50}}}}`}, false},
		}
		for _, step := range steps {
			out, err := framework.TryKubectl(t, append([]string{"-n", ns}, step.args...)...)
			saysWhy := strings.Contains(out, "spec.deploymentTemplate.replicas") &&
				(strings.Contains(out, refused) || strings.Contains(out, "is the starting size with autoscaling"))
			switch {
			case step.refused && err == nil:
				t.Errorf("%s: accepted:\n%s", step.name, out)
			case step.refused && !saysWhy:
				t.Errorf("%s: refused with %q, want the field and why", step.name, out)
			case !step.refused && err != nil:
				t.Errorf("%s: refused: %v\n%s", step.name, err, out)
			}
			t.Logf("%s: kubectl %s: %s", step.name, strings.Join(step.args, " "), strings.TrimSpace(out))
		}
		app, err := appClient(t).AppcontrollerV1().Apps(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r := app.Spec.DeploymentTemplate.Replicas; r == nil || *r != 6 || app.Spec.Autoscaling == nil || app.Spec.Autoscaling.MaxReplicas != 10 {
			t.Errorf("after the steps, replicas %v and autoscaling %+v; want 6 and maxReplicas 10", r, app.Spec.Autoscaling)
		}
	})
}

package api

import (
	"context"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/app-controller/app-controller/test/integration/framework"
)

// TestBlueGreenValidation checks that the API server refuses a bad spec.rollout.blueGreen
// naming the field, accepts the valid shapes (no field dropped) and defaults the rest.
func TestBlueGreenValidation(t *testing.T) {
	ns := framework.Namespace(t)
	dyn := framework.DynamicClient(t)
	bg := func(s string) string { return podsSpec + "rollout: {blueGreen: {" + s + "}}" }
	const gateway = "route: {hosts: [web.example.com], parentRefs: [{name: public}]}\n"
	invalid := []refusedSpec{
		{"canary and blueGreen at once (CEL)", podsSpec + "rollout: {canary: {steps: [{setWeight: 20}]}, blueGreen: {}}",
			[]string{"spec.rollout", "set exactly one of canary and blueGreen"}},
		{"negative autoPromotionSeconds", bg("autoPromotionSeconds: -1"), []string{"spec.rollout.blueGreen.autoPromotionSeconds", "greater than or equal to 0"}},
		{"negative scaleDownDelaySeconds", bg("scaleDownDelaySeconds: -30"), []string{"spec.rollout.blueGreen.scaleDownDelaySeconds", "greater than or equal to 0"}},
		{"negative abortScaleDownDelaySeconds", bg("abortScaleDownDelaySeconds: -1"), []string{"spec.rollout.blueGreen.abortScaleDownDelaySeconds", "greater than or equal to 0"}},
		{"autoPromotionSeconds over a day", bg("autoPromotionSeconds: 86401"), []string{"spec.rollout.blueGreen.autoPromotionSeconds", "less than or equal to 86400"}},
		{"progress deadline too short", bg("progressDeadlineSeconds: 5"), []string{"spec.rollout.blueGreen.progressDeadlineSeconds", "greater than or equal to 10"}},
		{"no deploymentTemplate (CEL)", "serviceTemplate: {name: web}\nrollout: {blueGreen: {}}", []string{"spec.rollout", "rollout requires deploymentTemplate"}},
		{"a Service name too long for its preview's (CEL)", "deploymentTemplate: {name: web, image: nginx}\nserviceTemplate: {name: " + strings.Repeat("s", 56) + "}\nrollout: {blueGreen: {}}",
			[]string{"spec.serviceTemplate.name", "at most 55 characters with rollout.blueGreen"}},
		{"previewHosts without a route (CEL)", bg("previewHosts: [preview.example.com]"),
			[]string{"spec.rollout.blueGreen.previewHosts", "needs an HTTPRoute (route.parentRefs)"}},
		{"previewHosts with an Ingress route (CEL)", podsSpec + "route: {hosts: [web.example.com]}\nrollout: {blueGreen: {previewHosts: [preview.example.com]}}",
			[]string{"spec.rollout.blueGreen.previewHosts", "needs an HTTPRoute (route.parentRefs)"}},
		{"a preview host that the route has (CEL)", podsSpec + gateway + "rollout: {blueGreen: {previewHosts: [preview.example.com, web.example.com]}}",
			[]string{"spec.rollout.blueGreen.previewHosts", "must not repeat a host of route.hosts"}},
		{"a preview host that is no DNS name", podsSpec + gateway + "rollout: {blueGreen: {previewHosts: [Preview_Example]}}",
			[]string{"spec.rollout.blueGreen.previewHosts[0]", "should match"}},
		{"a check before the switch of two kinds (CEL)", bg(`prePromotionAnalysis: {checks: [{name: smoke, successRate: {min: "99"}, webhook: {url: "http://t/run"}}]}`),
			[]string{"spec.rollout.blueGreen.prePromotionAnalysis.checks[0]", "each check sets exactly one of successRate, latency, query, templateRef and webhook"}},
		{"no check before the switch", bg("prePromotionAnalysis: {checks: []}"),
			[]string{"spec.rollout.blueGreen.prePromotionAnalysis.checks", "at least 1 item"}},
		{"an empty previewHosts", podsSpec + gateway + "rollout: {blueGreen: {previewHosts: []}}",
			[]string{"spec.rollout.blueGreen.previewHosts", "at least 1 item"}},
	}
	assertRefused(t, dyn, ns, "invalid-bluegreen", invalid)
	valid := []acceptedSpec{
		{"by hand, the defaults", bg("")},
		{"no replicas: the preview takes the Deployment's count", "deploymentTemplate: {name: web, image: nginx}\nserviceTemplate: {name: web}\nrollout: {blueGreen: {}}"},
		{"every option", bg("autoPromotionSeconds: 0, scaleDownDelaySeconds: 0, abortScaleDownDelaySeconds: 86400, progressDeadlineSeconds: 10, readyDeadlineSeconds: 3600, rollbackWindow: 0")},
		{"a Service name of 55 characters", "deploymentTemplate: {name: web, image: nginx}\nserviceTemplate: {name: " + strings.Repeat("s", 55) + "}\nrollout: {blueGreen: {}}"},
		{"checks before the switch", bg(`autoPromotionSeconds: 0, prePromotionAnalysis: {checks: [{name: smoke, webhook: {url: "http://tests.example/run"}}, {name: success-rate, successRate: {min: "99"}, source: Pods, interval: 30s, count: 2}]}`)},
		{"preview hosts on an HTTPRoute", podsSpec + gateway + "rollout: {blueGreen: {previewHosts: [preview.example.com, \"*.preview.example.com\"]}}"},
	}
	assertAccepted(t, dyn, ns, "valid-bluegreen", valid)

	app, err := appClient(t).AppcontrollerV1().Apps(ns).Get(context.Background(), "valid-bluegreen-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b := app.Spec.Rollout.BlueGreen
	got := fmt.Sprint(b.AutoPromotionSeconds, *b.ScaleDownDelaySeconds, *b.AbortScaleDownDelaySeconds, *b.ProgressDeadlineSeconds, *b.ReadyDeadlineSeconds, *b.RollbackWindow)
	if want := fmt.Sprint((*int32)(nil), 30, 30, 600, 120, 3); got != want {
		t.Errorf("defaults (autoPromotionSeconds, scaleDownDelaySeconds, abortScaleDownDelaySeconds, progressDeadlineSeconds, readyDeadlineSeconds, rollbackWindow) = %v, want %v", got, want)
	}
}

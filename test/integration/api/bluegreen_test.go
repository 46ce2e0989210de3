package api

import (
	"context"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/app-controller/app-controller/test/integration/framework"
)

// TestBlueGreenValidation checks that the API server refuses a bad spec.rollout.blueGreen
// naming the field, accepts the valid shapes (no field dropped) and defaults the rest.
func TestBlueGreenValidation(t *testing.T) {
	ns := framework.Namespace(t)
	dyn, err := dynamic.NewForConfig(framework.Config(t))
	if err != nil {
		t.Fatal(err)
	}
	const pods = "deploymentTemplate: {name: web, image: nginx, replicas: 4}\nserviceTemplate: {name: web}\n"
	bg := func(s string) string { return pods + "rollout: {blueGreen: {" + s + "}}" }
	invalid := []struct {
		name string
		spec string
		want []string
	}{
		{"canary and blueGreen at once (CEL)", pods + "rollout: {canary: {steps: [{setWeight: 20}]}, blueGreen: {}}",
			[]string{"spec.rollout", "set exactly one of canary and blueGreen"}},
		{"negative autoPromotionSeconds", bg("autoPromotionSeconds: -1"), []string{"spec.rollout.blueGreen.autoPromotionSeconds", "greater than or equal to 0"}},
		{"negative scaleDownDelaySeconds", bg("scaleDownDelaySeconds: -30"), []string{"spec.rollout.blueGreen.scaleDownDelaySeconds", "greater than or equal to 0"}},
		{"negative abortScaleDownDelaySeconds", bg("abortScaleDownDelaySeconds: -1"), []string{"spec.rollout.blueGreen.abortScaleDownDelaySeconds", "greater than or equal to 0"}},
		{"autoPromotionSeconds over a day", bg("autoPromotionSeconds: 86401"), []string{"spec.rollout.blueGreen.autoPromotionSeconds", "less than or equal to 86400"}},
		{"progress deadline too short", bg("progressDeadlineSeconds: 5"), []string{"spec.rollout.blueGreen.progressDeadlineSeconds", "greater than or equal to 10"}},
		{"no deploymentTemplate (CEL)", "serviceTemplate: {name: web}\nrollout: {blueGreen: {}}", []string{"spec.rollout", "rollout requires deploymentTemplate"}},
		{"a Service name too long for its preview's (CEL)", "deploymentTemplate: {name: web, image: nginx}\nserviceTemplate: {name: " + strings.Repeat("s", 56) + "}\nrollout: {blueGreen: {}}",
			[]string{"spec.serviceTemplate.name", "at most 55 characters with rollout.blueGreen"}},
	}
	assertRefused(t, dyn, ns, "invalid-bluegreen", invalid)
	valid := []struct{ name, spec string }{
		{"by hand, the defaults", bg("")},
		{"no replicas: the preview takes the Deployment's count", "deploymentTemplate: {name: web, image: nginx}\nserviceTemplate: {name: web}\nrollout: {blueGreen: {}}"},
		{"every option", bg("autoPromotionSeconds: 0, scaleDownDelaySeconds: 0, abortScaleDownDelaySeconds: 86400, progressDeadlineSeconds: 10, readyDeadlineSeconds: 3600, rollbackWindow: 0")},
		{"a Service name of 55 characters", "deploymentTemplate: {name: web, image: nginx}\nserviceTemplate: {name: " + strings.Repeat("s", 55) + "}\nrollout: {blueGreen: {}}"},
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

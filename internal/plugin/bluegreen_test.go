package plugin

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// TestPrintStatusBlueGreen shows a blue-green rollout waiting for its switch (the old
// version active, the new one the preview, with its hosts when it has some, and its
// checks before the switch, which a promote waits for) and after it (the new version active, the
// old one kept), and what a request would do at each.
func TestPrintStatusBlueGreen(t *testing.T) {
	blueGreen := func(phase appv1.RolloutPhase, stage int32, message string) func(*appv1.App) {
		return func(a *appv1.App) {
			a.Spec.Rollout = &appv1.Rollout{BlueGreen: &appv1.BlueGreenStrategy{}}
			r := a.Status.Rollout
			r.Phase, r.CurrentStepIndex, r.Message, r.CanaryWeight = phase, stage, message, 0
		}
	}
	tests := []struct {
		name   string
		mutate func(*appv1.App)
		want   string
		// effects of promote and abort ("error: ..." when refused).
		promote, abort string
	}{
		{name: "waiting for the switch",
			mutate: blueGreen(appv1.RolloutPaused, 1, "the preview is available; kubectl app promote switches the traffic to it"), want: `
Rollout:      Paused, blue-green stage switch: the preview is available; kubectl app promote switches the traffic to it
Stages:       1 preview (done), 2 switch (current), 3 switched, 4 scale-down delay
Active:       revision web-1111111111: Deployment web (image nginx:1): 3 desired, 3 updated, 3 ready
Preview:      revision web-2222222222: Deployment web-canary (image nginx:2): 1 desired, 1 updated, 1 ready (Service web-preview)
`, promote: "the traffic switches to the preview", abort: "the preview goes; the traffic never left the stable pods"},
		{name: "waiting for the switch, the preview on a host of the Gateway",
			mutate: func(a *appv1.App) {
				blueGreen(appv1.RolloutPaused, 1, "the preview is available")(a)
				a.Spec.Route = &appv1.Route{Hosts: []appv1.Hostname{"web.example.com"}, ParentRefs: []appv1.GatewayRef{{Name: "public"}}}
				a.Spec.Rollout.BlueGreen.PreviewHosts = []appv1.Hostname{"preview.example.com", "beta.example.com"}
			}, want: `
Rollout:      Paused, blue-green stage switch: the preview is available
Stages:       1 preview (done), 2 switch (current), 3 switched, 4 scale-down delay
Active:       revision web-1111111111: Deployment web (image nginx:1): 3 desired, 3 updated, 3 ready
Preview:      revision web-2222222222: Deployment web-canary (image nginx:2): 1 desired, 1 updated, 1 ready (Service web-preview, hosts preview.example.com, beta.example.com)
`, promote: "the traffic switches to the preview", abort: "the preview goes; the traffic never left the stable pods"},
		{name: "waiting for the switch, its check before it running",
			mutate: func(a *appv1.App) {
				blueGreen(appv1.RolloutPaused, 1, `the switch waits for its checks: "smoke" running`)(a)
				a.Spec.Rollout.BlueGreen.PrePromotionAnalysis = &appv1.AnalysisStep{Checks: []appv1.AnalysisCheck{{Name: "smoke", Count: ptr.To[int32](2),
					Webhook: &appv1.WebhookCheck{URL: "http://tests.example/run"}}}}
				at := metav1.NewTime(testNow.Add(-time.Minute))
				a.Status.Rollout.Analysis = []appv1.CheckStatus{{Name: "smoke", Step: 1, Phase: appv1.AnalysisPassed, Value: "200", Passed: 1, MeasuredAt: &at}}
			}, want: `
Rollout:      Paused, blue-green stage switch: the switch waits for its checks: "smoke" running
Stages:       1 preview (done), 2 switch (current), 3 switched, 4 scale-down delay
Check:        smoke (before the switch): Passed 200 at 2026-01-01T00:00:00Z; 1 passed, 0 failed, 0 inconclusive
Active:       revision web-1111111111: Deployment web (image nginx:1): 3 desired, 3 updated, 3 ready
Preview:      revision web-2222222222: Deployment web-canary (image nginx:2): 1 desired, 1 updated, 1 ready (Service web-preview)
`, promote: "error: the switch of App ns/web waits for the checks of prePromotionAnalysis (smoke)", abort: "the preview goes; the traffic never left the stable pods"},
		{name: "switched, the old pods kept",
			mutate: blueGreen(appv1.RolloutProgressing, 3, "Revision web-2222222222 is active"), want: `
Rollout:      Progressing, blue-green stage scale-down delay: Revision web-2222222222 is active
Stages:       1 preview (done), 2 switch (done), 3 switched (done), 4 scale-down delay (current)
Active:       revision web-2222222222: Deployment web-canary (image nginx:2): 1 desired, 1 updated, 1 ready (the App's Service selects its pods)
Previous:     revision web-1111111111: Deployment web (image nginx:1): 3 desired, 3 updated, 3 ready (kept for kubectl app abort until the scale-down delay ends)
`, promote: "the old pods are not kept any longer: the App's Deployment rolls to the new version", abort: "the traffic switches back to the old pods, which still run"},
		{name: "being promoted", mutate: blueGreen(appv1.RolloutProgressing, 4, "Promoting revision web-2222222222"), want: `
Rollout:      Progressing, blue-green stage promotion: Promoting revision web-2222222222
Stages:       1 preview (done), 2 switch (done), 3 switched (done), 4 scale-down delay (done)
Active:       revision web-2222222222: Deployment web-canary (image nginx:2): 1 desired, 1 updated, 1 ready (the App's Service selects its pods)
Previous:     revision web-1111111111: Deployment web (image nginx:1): 3 desired, 3 updated, 3 ready (kept for kubectl app abort until the scale-down delay ends)
`, promote: "error: the rollout of App ns/web is already being promoted", abort: "error: the rollout of App ns/web is being promoted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objects := rolloutObjects(t, tt.mutate)
			f := newFakes(t, objects)
			st, err := GetStatus(context.Background(), f.clients(), testNamespace, "web")
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := PrintStatus(&out, st, testNow); err != nil {
				t.Fatal(err)
			}
			summary, _, _ := strings.Cut(out.String(), "\n\n")
			_, rollout, _ := strings.Cut(summary, "\nRollout:")
			if want := strings.TrimPrefix(tt.want, "\n"); "Rollout:"+rollout+"\n" != want {
				t.Errorf("rollout lines:\n%s\nwant:\n%s", "Rollout:"+rollout, want)
			}
			app := rolloutApp(tt.mutate)
			for action, want := range map[appv1.RolloutAction]string{appv1.RolloutActionPromote: tt.promote, appv1.RolloutActionAbort: tt.abort} {
				got, err := requestEffect(app, action)
				if err != nil {
					got = "error: " + err.Error()
				}
				if !strings.HasPrefix(got, want) {
					t.Errorf("%s: %q, want %q", action, got, want)
				}
			}
		})
	}
}

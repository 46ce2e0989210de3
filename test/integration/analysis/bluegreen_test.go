package analysis

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller/appfixture"
	"github.com/app-controller/app-controller/pkg/controllermanager"
	"github.com/app-controller/app-controller/test/integration/apptest"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// prePromotionApp is an App of 2 replicas rolled out blue-green, switched on its own
// (autoPromotionSeconds 0) once its check before the switch passed: the preview pods'
// success rate >= 99% over 10 s, by their own metrics; no delay after the switch nor
// after an abort.
func prePromotionApp(ns, name string) *appv1.App {
	app := appfixture.NewApp(ns, name, "nginx:1", 2)
	app.Spec.Rollout = &appv1.Rollout{BlueGreen: &appv1.BlueGreenStrategy{
		AutoPromotionSeconds: ptr.To[int32](0), ScaleDownDelaySeconds: ptr.To[int32](0), AbortScaleDownDelaySeconds: ptr.To[int32](0),
		PrePromotionAnalysis: &appv1.AnalysisStep{Checks: []appv1.AnalysisCheck{{
			Name: "success-rate", SuccessRate: &appv1.SuccessRateCheck{Min: ptr.To("99")}, Source: appv1.AnalysisSourcePods,
			Interval: &metav1.Duration{Duration: 10 * time.Second}, Count: ptr.To[int32](1), MinRequests: ptr.To[int32](10),
		}}},
	}}
	return app
}

// TestBlueGreenPrePromotionAnalysis runs two blue-green rollouts with a check before the
// switch under one controller and a real Prometheus: the preview of one answers 10% 500s
// and is aborted before the switch (AnalysisFailed naming the check, a Warning Event),
// its active side untouched (no write to the App's Service or Deployment after the
// preview came up: the Service still selects the old pods, the Deployment runs the old
// image); the other's preview passes, and the switch comes on its own, then the
// promotion.
func TestBlueGreenPrePromotionAnalysis(t *testing.T) {
	c := apptest.NewClients(t)
	pods, target := startFakePods(t)
	opts := controllermanager.NewOptions()
	opts.ResyncPeriod = 5 * time.Second
	opts.PrometheusURL = framework.StartPrometheus(t, target)
	m := apptest.StartManagerWith(t, opts)
	ns := framework.Namespace(t)
	// The preview pods' series (a name the pattern DEPLOYMENT-canary-HASH-XXXXX matches).
	pods.serve(ns, "bad-deploy-canary-5d8f9c-x7k2p", 18, 2)
	pods.serve(ns, "good-deploy-canary-5d8f9c-x7k2p", 20, 0)
	for _, name := range []string{"bad", "good"} {
		c.Create(t, prePromotionApp(ns, name))
		c.WaitReady(t, ns, name)
		c.WaitRollout(t, ns, name, appv1.RolloutHealthy, 0)
	}
	start := time.Now()
	for _, name := range []string{"bad", "good"} {
		c.Update(t, ns, name, func(a *appv1.App) { a.Spec.DeploymentTemplate.Image = "nginx:2" })
	}

	// bad: the preview up, its check running at the switch's stage; then aborted.
	c.WaitRollout(t, ns, "bad", appv1.RolloutPaused, 1)
	var app *appv1.App
	framework.Eventually(t, apptest.Converge, func() (bool, error) {
		app = c.GetApp(t, ns, "bad")
		r := app.Status.Rollout
		return r.Phase != appv1.RolloutPaused || len(r.Analysis) == 1, nil
	})
	stableHash := app.Status.Rollout.Stable.ReplicaSetHash
	mark := len(m.WritesIn(ns))
	if msg := app.Status.Rollout.Message; !strings.Contains(msg, `waits for its checks: "success-rate" running`) {
		t.Errorf("bad at the switch's stage: %q, want it waiting for its check", msg)
	}
	printAppStatus(t, c, ns, "bad", "at the switch's stage, its check running")
	app = c.WaitAborted(t, ns, "bad", 1, appv1.ReasonAnalysisFailed, `check "success-rate" failed: 90%`)
	r := app.Status.Rollout
	t.Logf("bad aborted %.1fs after the change: %s", time.Since(start).Seconds(), r.Message)
	if !strings.Contains(r.Message, "aborted before the switch") {
		t.Errorf("bad: rollout message %q, want it aborted before the switch", r.Message)
	}
	framework.WaitEvent(t, c.Kube, ns, "App", "bad", "Warning RolloutAborted Blue-green rollout to revision", apptest.Converge)
	framework.Eventually(t, apptest.Converge, func() (bool, error) {
		n, _ := framework.DeploymentReplicas(t, c.Kube, ns, "bad-deploy-canary")
		return n == 0, nil
	})
	printAppStatus(t, c, ns, "bad", "after the abort")
	for _, w := range m.WritesIn(ns)[mark:] {
		if strings.HasSuffix(w, "/services/bad-svc") || strings.HasSuffix(w, "/deployments/bad-deploy") {
			t.Errorf("bad: %s after the preview came up: the active side was written", w)
		}
	}
	svc, err := c.Kube.CoreV1().Services(ns).Get(context.Background(), "bad-svc", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if svc.Spec.Selector["pod-template-hash"] != stableHash || svc.Spec.Selector[appv1.TrackLabel] != "" {
		t.Errorf("bad: the App's Service selects %v, want the old pods (pod-template-hash %s)", svc.Spec.Selector, stableHash)
	}
	if n, image := framework.DeploymentReplicas(t, c.Kube, ns, "bad-deploy"); n != 2 || image != "nginx:1" {
		t.Errorf("bad: the App's Deployment %d %s, want 2 nginx:1", n, image)
	}

	// good: passed, switched on its own, promoted.
	framework.Eventually(t, apptest.Converge, func() (bool, error) {
		app := c.GetApp(t, ns, "good")
		gone, _ := framework.DeploymentReplicas(t, c.Kube, ns, "good-deploy-canary")
		_, image := framework.DeploymentReplicas(t, c.Kube, ns, "good-deploy")
		return app.Status.Rollout.Phase == appv1.RolloutHealthy && gone == -1 && image == "nginx:2", nil
	})
	t.Logf("good promoted %.1fs after the change", time.Since(start).Seconds())
	framework.WaitEvent(t, c.Kube, ns, "App", "good", `Normal RolloutStep Stage "switch" of the blue-green rollout`, apptest.Converge)
	events := strings.Join(c.Events(t, ns, "App", "good"), "\n")
	if !strings.Contains(events, "after its duration, with its checks passed: success-rate 100% (>= 99%)") {
		t.Errorf("good: no switch after its check passed among\n%s", events)
	}
}

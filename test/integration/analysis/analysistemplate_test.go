package analysis

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controllermanager"
	"github.com/app-controller/app-controller/test/integration/apptest"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// The share of the canary pods' requests answered with a code matching {{.Args.code}},
// over the check's interval, by the pods' own http_requests_total (fakePods exports it).
const errorRatioQuery = `sum(rate(http_requests_total{namespace="{{.Namespace}}",pod=~"{{.CanaryDeployment}}-[a-z0-9]+-[a-z0-9]{5}",code=~"{{.Args.code}}"}[{{.Interval}}]))` +
	` / sum(rate(http_requests_total{namespace="{{.Namespace}}",pod=~"{{.CanaryDeployment}}-[a-z0-9]+-[a-z0-9]{5}"}[{{.Interval}}]))`

// errorRatio is a template of errorRatioQuery: at most 5% of errors passes; code, the
// codes counted as errors, defaults to def (nil: the check must give it).
func errorRatio(def *string) appv1.AnalysisTemplateSpec {
	return appv1.AnalysisTemplateSpec{
		Args:  []appv1.AnalysisTemplateArg{{Name: "code", Default: def}},
		Query: appv1.QueryCheck{PromQL: errorRatioQuery, SuccessCondition: &appv1.ValueRange{Max: ptr.To("0.05")}},
	}
}

// templateApp is an App of 2 replicas whose rollout is setWeight 50, then an analysis
// step of one check of template ref, count passes at interval.
func templateApp(ns, name string, ref appv1.AnalysisTemplateRef, interval time.Duration, count, deadline int32) *appv1.App {
	app := apptest.RolloutApp(ns, name, 2, apptest.SetWeight(50), appv1.CanaryStep{Analysis: &appv1.AnalysisStep{Checks: []appv1.AnalysisCheck{{
		Name: "errors", TemplateRef: &ref, Interval: &metav1.Duration{Duration: interval}, Count: ptr.To(count),
	}}}})
	app.Spec.Rollout.Canary.ProgressDeadlineSeconds = ptr.To(deadline)
	return app
}

// TestAnalysisTemplates: the API refuses bad templates and bad references naming the
// field; a check of a ClusterAnalysisTemplate and one of an AnalysisTemplate are
// judged by the real Prometheus (one canary promoted, one aborted, the template named
// in the status); a check whose template is missing holds its step with
// Ready=False/AnalysisTemplateNotFound and one Warning Event, goes on as soon as the
// template is created (its event, not a resync: the resync is 10 minutes), holds again
// as soon as it is deleted, keeping its count, and a rollout whose template never comes
// aborts at its progress deadline (AnalysisInconclusive), saying so.
func TestAnalysisTemplates(t *testing.T) {
	c := apptest.NewClients(t)
	ctx := context.Background()
	ns := framework.Namespace(t)

	// The API refuses, naming the field.
	bad := []struct {
		name   string
		create func() error
		want   []string
	}{
		{"a template without a condition", func() error {
			_, err := c.App.AppcontrollerV1().AnalysisTemplates(ns).Create(ctx, &appv1.AnalysisTemplate{ObjectMeta: metav1.ObjectMeta{Name: "no-condition"},
				Spec: appv1.AnalysisTemplateSpec{Query: appv1.QueryCheck{PromQL: "1"}}}, metav1.CreateOptions{})
			return err
		}, []string{"spec.query", "query sets successCondition, failureCondition or both"}},
		{"an argument name the query cannot write", func() error {
			spec := errorRatio(nil)
			spec.Args[0].Name = "1code"
			_, err := c.App.AppcontrollerV1().AnalysisTemplates(ns).Create(ctx, &appv1.AnalysisTemplate{ObjectMeta: metav1.ObjectMeta{Name: "bad-arg"}, Spec: spec}, metav1.CreateOptions{})
			return err
		}, []string{"spec.args[0].name", "should match"}},
		{"a cluster template whose range is upside down", func() error {
			spec := errorRatio(nil)
			spec.Query.SuccessCondition = &appv1.ValueRange{Min: ptr.To("1"), Max: ptr.To("0.5")}
			_, err := c.App.AppcontrollerV1().ClusterAnalysisTemplates().Create(ctx, &appv1.ClusterAnalysisTemplate{ObjectMeta: metav1.ObjectMeta{Name: ns + "-upside-down"}, Spec: spec}, metav1.CreateOptions{})
			return err
		}, []string{"spec.query.successCondition", "a range's min must not be above its max"}},
		{"a check with both a query and a template", func() error {
			app := templateApp(ns, "both", appv1.AnalysisTemplateRef{Name: "x"}, 10*time.Second, 1, 600)
			app.Spec.Rollout.Canary.Steps[1].Analysis.Checks[0].Query = &appv1.QueryCheck{PromQL: "1", SuccessCondition: &appv1.ValueRange{Max: ptr.To("1")}}
			_, err := c.App.AppcontrollerV1().Apps(ns).Create(ctx, app, metav1.CreateOptions{})
			return err
		}, []string{"spec.rollout.canary.steps[1].analysis.checks[0]", "each check sets exactly one of successRate, latency, query, templateRef and webhook"}},
		{"a template of an unknown kind", func() error {
			_, err := c.App.AppcontrollerV1().Apps(ns).Create(ctx, templateApp(ns, "kind", appv1.AnalysisTemplateRef{Kind: "MetricTemplate", Name: "x"}, 10*time.Second, 1, 600), metav1.CreateOptions{})
			return err
		}, []string{"spec.rollout.canary.steps[1].analysis.checks[0].templateRef.kind", `Unsupported value: "MetricTemplate"`}},
		{"an argument given twice", func() error {
			ref := appv1.AnalysisTemplateRef{Name: "x", Args: []appv1.AnalysisArg{{Name: "code", Value: "5.."}, {Name: "code", Value: "4.."}}}
			_, err := c.App.AppcontrollerV1().Apps(ns).Create(ctx, templateApp(ns, "twice", ref, 10*time.Second, 1, 600), metav1.CreateOptions{})
			return err
		}, []string{"spec.rollout.canary.steps[1].analysis.checks[0].templateRef.args[1]", "Duplicate value"}},
	}
	for _, b := range bad {
		err := b.create()
		if !apierrors.IsInvalid(err) {
			t.Errorf("%s: err = %v, want Invalid", b.name, err)
			continue
		}
		for _, w := range b.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v\nwant it to say %q", b.name, err, w)
			}
		}
	}

	// The templates: a ClusterAnalysisTemplate whose code the checks give, an
	// AnalysisTemplate whose code defaults to 5xx.
	cluster := ns + "-error-ratio"
	if _, err := c.App.AppcontrollerV1().ClusterAnalysisTemplates().Create(ctx, &appv1.ClusterAnalysisTemplate{ObjectMeta: metav1.ObjectMeta{Name: cluster}, Spec: errorRatio(nil)},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.App.AppcontrollerV1().ClusterAnalysisTemplates().Delete(context.Background(), cluster, metav1.DeleteOptions{})
	})
	if _, err := c.App.AppcontrollerV1().AnalysisTemplates(ns).Create(ctx, &appv1.AnalysisTemplate{ObjectMeta: metav1.ObjectMeta{Name: "error-ratio"}, Spec: errorRatio(ptr.To("5.."))},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	pods, target := startFakePods(t)
	opts := controllermanager.NewOptions()
	opts.ResyncPeriod = 10 * time.Minute // what moves a waiting check is the template's event
	opts.PrometheusURL = framework.StartPrometheus(t, target)
	apptest.StartManagerWith(t, opts)

	code := []appv1.AnalysisArg{{Name: "code", Value: "5.."}}
	apps := map[string]*appv1.App{
		"good":  templateApp(ns, "good", appv1.AnalysisTemplateRef{Name: "error-ratio"}, 10*time.Second, 1, 600),
		"bad":   templateApp(ns, "bad", appv1.AnalysisTemplateRef{Kind: appv1.AnalysisTemplateKindCluster, Name: cluster, Args: code}, 10*time.Second, 1, 600),
		"late":  templateApp(ns, "late", appv1.AnalysisTemplateRef{Name: "late"}, time.Minute, 2, 600),
		"never": templateApp(ns, "never", appv1.AnalysisTemplateRef{Kind: appv1.AnalysisTemplateKindCluster, Name: ns + "-never", Args: code}, 10*time.Second, 1, 20),
	}
	pods.serve(ns, "good-deploy-canary-5d8f9c-x7k2p", 20, 0)
	pods.serve(ns, "bad-deploy-canary-5d8f9c-x7k2p", 18, 2)
	pods.serve(ns, "late-deploy-canary-5d8f9c-x7k2p", 20, 0)
	rollOut(t, c, ns, apps)

	// good (an AnalysisTemplate, its default argument): promoted.
	framework.Eventually(t, apptest.Converge, func() (bool, error) {
		_, image := framework.DeploymentReplicas(t, c.Kube, ns, "good-deploy")
		return c.GetApp(t, ns, "good").Status.Rollout.Phase == appv1.RolloutHealthy && image == "nginx:2", nil
	})
	// bad (a ClusterAnalysisTemplate): 10% of 5xx is out of [-inf, 0.05]: aborted, the
	// template named.
	app := c.WaitAborted(t, ns, "bad", 1, appv1.ReasonAnalysisFailed, "is out of its success range [-inf, 0.05]")
	r := app.Status.Rollout
	if len(r.Analysis) != 1 || r.Analysis[0].Template != "ClusterAnalysisTemplate/"+cluster || r.Analysis[0].Failed != 1 {
		t.Errorf("bad: status.rollout.analysis %+v, want one failure of ClusterAnalysisTemplate/%s", r.Analysis, cluster)
	} else if v, err := strconv.ParseFloat(r.Analysis[0].Value, 64); err != nil || v < 0.09 || v > 0.11 {
		t.Errorf("bad: value %q, want 0.1 (2 errors in 20)", r.Analysis[0].Value)
	}
	printAppStatus(t, c, ns, "bad", "aborted by a ClusterAnalysisTemplate's check")

	// late: its template is missing: held, said in Ready and in one Warning Event.
	app = c.WaitCondition(t, ns, "late", appv1.ConditionReady, "False/"+appv1.ReasonAnalysisTemplateNotFound)
	if ready := meta.FindStatusCondition(app.Status.Conditions, appv1.ConditionReady); !strings.Contains(ready.Message, "AnalysisTemplate late not found in namespace "+ns) {
		t.Errorf("late: Ready message %q, want it to name the missing template", ready.Message)
	}
	if r := app.Status.Rollout; r.Phase != appv1.RolloutProgressing || r.CurrentStepIndex != 1 || len(r.Analysis) != 1 ||
		r.Analysis[0].Reason != appv1.ReasonAnalysisTemplateNotFound || r.Analysis[0].MeasuredAt != nil {
		t.Errorf("late: rollout %s at step %d, analysis %+v; want Progressing at step 2, the check not measured", r.Phase, r.CurrentStepIndex, r.Analysis)
	}
	printAppStatus(t, c, ns, "late", "its template missing")
	// The recorder folds a repeated Event into one with a count: the count is what was
	// emitted.
	warnings := func() int {
		list, err := c.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=App,involvedObject.name=late,reason=" + appv1.ReasonAnalysisTemplateNotFound})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range list.Items {
			if e.Type == corev1.EventTypeWarning {
				n += int(max(e.Count, 1))
			}
		}
		return n
	}
	framework.Eventually(t, apptest.Converge, func() (bool, error) { return warnings() == 1, nil })

	// The template is created: the check is measured at once (its event), and passes.
	if _, err := c.App.AppcontrollerV1().AnalysisTemplates(ns).Create(ctx, &appv1.AnalysisTemplate{ObjectMeta: metav1.ObjectMeta{Name: "late"}, Spec: errorRatio(ptr.To("5.."))},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var first appv1.CheckStatus
	framework.Eventually(t, apptest.Converge, func() (bool, error) {
		r := c.GetApp(t, ns, "late").Status.Rollout
		if len(r.Analysis) == 1 && r.Analysis[0].Passed == 1 {
			first = r.Analysis[0]
			return true, nil
		}
		return false, nil
	})
	if first.Reason != "" || first.Template != "AnalysisTemplate/late" {
		t.Errorf("late: after the template's creation %+v, want a measurement of AnalysisTemplate/late", first)
	}
	app = c.GetApp(t, ns, "late")
	if got := framework.AppCondition(app, appv1.ConditionReady); got != "False/"+appv1.ReasonRolloutProgressing {
		t.Errorf("late: Ready %s once its template exists, want False/RolloutProgressing", got)
	}
	// Deleted: held again at once (the next measurement is a minute away), its count kept.
	if err := c.App.AppcontrollerV1().AnalysisTemplates(ns).Delete(ctx, "late", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, func() (bool, error) {
		r := c.GetApp(t, ns, "late").Status.Rollout
		return len(r.Analysis) == 1 && r.Analysis[0].Reason == appv1.ReasonAnalysisTemplateNotFound && r.Analysis[0].Passed == 1, nil
	})
	framework.Eventually(t, apptest.Converge, func() (bool, error) { return warnings() == 2, nil })
	// Created again: measured at once, the second pass ends the step; promoted.
	if _, err := c.App.AppcontrollerV1().AnalysisTemplates(ns).Create(ctx, &appv1.AnalysisTemplate{ObjectMeta: metav1.ObjectMeta{Name: "late"}, Spec: errorRatio(ptr.To("5.."))},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, apptest.Converge, func() (bool, error) {
		_, image := framework.DeploymentReplicas(t, c.Kube, ns, "late-deploy")
		return c.GetApp(t, ns, "late").Status.Rollout.Phase == appv1.RolloutHealthy && image == "nginx:2", nil
	})
	if n := warnings(); n != 2 {
		t.Errorf("late: %d AnalysisTemplateNotFound Warnings, want 2 (one each time the template went missing)", n)
	}

	// never: its template never comes: aborted at the progress deadline (20s), saying so.
	c.WaitAborted(t, ns, "never", 1, appv1.ReasonAnalysisInconclusive,
		"stayed inconclusive for progressDeadlineSeconds (20s)", "ClusterAnalysisTemplate "+ns+"-never not found")
	printAppStatus(t, c, ns, "never", "aborted at the progress deadline, its template missing")
}

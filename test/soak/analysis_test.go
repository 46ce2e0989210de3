package soak

import (
	"slices"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"github.com/app-controller/app-controller/pkg/analysis"
	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// TestAnalyzedCanary pins the analyzed canaries' versions: a healthy one (demoapp, its
// metrics announced where it serves them) is expected Ready, the one that fails the
// analysis (metrics announced on a port where nothing listens) RolloutAborted; the
// canary operations keep demoapp on them; kwok's mix has no canary-analysis-fail.
func TestAnalyzedCanary(t *testing.T) {
	d, a := analyzedCanary()
	if !analyzed(a) || a.Spec.DeploymentTemplate.Image != "demoapp:1" || a.Spec.Rollout.Canary.Analysis.Checks[0].TemplateRef.Name != analysisTemplate {
		t.Fatalf("makeAnalyzed: %+v", a.Spec)
	}
	if got := d.expect(&a.Spec); got != "" {
		t.Errorf("healthy analyzed canary expected %q, want Ready", got)
	}
	d.nextImage(a)
	if a.Spec.DeploymentTemplate.Image != "demoapp:1" || a.Spec.DeploymentTemplate.Args != nil || a.Spec.DeploymentTemplate.PodAnnotations[annotationPort] != demoappMetricsPort {
		t.Errorf("nextImage of an analyzed canary: %+v, want demoapp with its metrics announced", a.Spec.DeploymentTemplate)
	}
	a.Spec.DeploymentTemplate.PodAnnotations[annotationPort] = failingMetricsPort
	if got := d.expect(&a.Spec); got != appv1.ReasonRolloutAborted {
		t.Errorf("a version that fails the analysis expected %q, want %s", got, appv1.ReasonRolloutAborted)
	}
	d.fixPods(a)
	if got := d.expect(&a.Spec); got != "" || a.Spec.DeploymentTemplate.Image != "demoapp:1" {
		t.Errorf("fixed: expected %q, image %s; want Ready, demoapp", got, a.Spec.DeploymentTemplate.Image)
	}
	if !slices.ContainsFunc(d.mix(), func(e MixEntry) bool { return e.Op == opCanaryAnalysisFail }) {
		t.Errorf("a real node's mix has no %s", opCanaryAnalysisFail)
	}
	d.images.analysis = nil
	if slices.ContainsFunc(d.mix(), func(e MixEntry) bool { return e.Op == opCanaryAnalysisFail }) || len(d.mix()) != len(DefaultMix)-1 {
		t.Errorf("kwok's mix %v, want DefaultMix without %s", d.mix(), opCanaryAnalysisFail)
	}
}

// analyzedCanary returns a driver whose analysed canaries run demoapp:1 and its App
// ns/a00009 of shard a, a gated canary made analysed.
func analyzedCanary() (*driver, *appv1.App) {
	d := &driver{images: images{good: []string{"agnhost:1", "agnhost:2"}, args: []string{"pause"}, bad: "missing:1",
		crashArgs: []string{"exit"}, analysis: &analysisImage{image: "demoapp:1"}}}
	a := d.newApp("ns", "a00009", shardA)
	shape(a, kindGate)
	d.images.analysis.makeAnalyzed(a)
	return d, a
}

// TestAnalysisCounts pins the report's counts of the analyzed canaries from their status
// writes: rollouts promoted (after a measurement passed, or before one), and one aborted by its analysis (AnalysisFailed) apart from
// an abort of another reason.
func TestAnalysisCounts(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 16, 0, 0, 0, time.UTC)
	w := func(rv int64, analyzed bool, ro *appv1.RolloutStatus) statusWrite {
		return statusWrite{at: t0.Add(time.Duration(rv) * time.Second), rv: rv, app: "ns/a", steps: 4, analyzed: analyzed, rollout: ro}
	}
	rev := func(h string) *appv1.RolloutVersion { return &appv1.RolloutVersion{PodTemplateHash: h} }
	step := func(canary string, i int32, phase appv1.RolloutPhase, reason string) *appv1.RolloutStatus {
		return &appv1.RolloutStatus{Phase: phase, CurrentStepIndex: i, Canary: rev(canary), Stable: rev("s"), CanaryWeight: 25, AbortReason: reason}
	}
	passed := func(ro *appv1.RolloutStatus) *appv1.RolloutStatus {
		ro.Analysis = []appv1.CheckStatus{{Name: analysisTemplate, Step: -1, Phase: appv1.AnalysisPassed, Passed: 1}}
		return ro
	}
	b := &bodies{status: []statusWrite{
		w(1, true, &appv1.RolloutStatus{Stable: rev("s")}),
		w(2, true, step("c1", 0, appv1.RolloutProgressing, "")),
		w(3, true, passed(step("c1", 0, appv1.RolloutProgressing, ""))),
		w(4, true, &appv1.RolloutStatus{Stable: rev("c1")}), // promoted after a pass
		w(5, true, step("c4", 0, appv1.RolloutProgressing, "")),
		w(6, true, &appv1.RolloutStatus{Stable: rev("c4")}), // promoted before a measurement
		w(7, true, step("c2", 0, appv1.RolloutProgressing, "")),
		w(8, true, step("c2", 0, appv1.RolloutAborted, appv1.ReasonAnalysisFailed)),
		w(9, true, &appv1.RolloutStatus{Stable: rev("c4")}),
		w(10, true, step("c3", 0, appv1.RolloutProgressing, "")),
		w(11, true, step("c3", 0, appv1.RolloutAborted, "CanaryUnhealthy")),
	}}
	c := checkRollouts(b, nil, 0, func(_, _ string) string { return "ns/a" })
	if c.AnalyzedPromoted != 2 || c.AnalysisPassedPromoted != 1 || c.AnalysisAborts != 1 || c.Aborted != 2 {
		t.Errorf("analyzed promoted %d (%d after a pass), aborted by analysis %d of %d aborts; want 2 (1), 1 of 2 (jumps %q)",
			c.AnalyzedPromoted, c.AnalysisPassedPromoted, c.AnalysisAborts, c.Aborted, c.Jumps)
	}
}

// TestStampVersion checks the version an analysed App's pods and check carry: the same
// in both, kept by a change of the replicas, changed by one of the pods (the failing
// version's metrics port), none on an App without analysis.
func TestStampVersion(t *testing.T) {
	d, a := analyzedCanary()
	version := func(a *appv1.App) string {
		v := string(a.Spec.DeploymentTemplate.PodLabels[versionLabel])
		args := a.Spec.Rollout.Canary.Analysis.Checks[0].TemplateRef.Args
		if v == "" || len(args) != 1 || args[0].Name != versionArg || args[0].Value != v {
			t.Fatalf("pods labelled %q, check's args %+v: want the same version in both", v, args)
		}
		return v
	}
	v1 := version(a)
	a.Spec.DeploymentTemplate.Replicas = ptr.To[int32](7)
	stampVersion(a)
	if v := version(a); v != v1 {
		t.Errorf("replicas changed the version: %s, was %s", v, v1)
	}
	a.Spec.DeploymentTemplate.PodAnnotations[annotationPort] = failingMetricsPort
	stampVersion(a)
	if v := version(a); v == v1 {
		t.Errorf("the failing version's pods kept version %s", v)
	}
	plain := d.newApp("ns", "a00003", shardA)
	shape(plain, kindGate)
	stampVersion(plain)
	if _, ok := plain.Spec.DeploymentTemplate.PodLabels[versionLabel]; ok {
		t.Errorf("an App without analysis labelled %q", versionLabel)
	}
}

// TestAnalysisQuery renders the template's query as the controller does for an App's
// canary: the version's pods alone, and those that are targets now.
func TestAnalysisQuery(t *testing.T) {
	q := appv1.QueryCheck{PromQL: analysisQuery}
	got, err := analysis.CustomQuery(&q, map[string]string{versionArg: "0badcafe"},
		analysis.Target{Namespace: "soak-1", App: "a00019", CanaryDeployment: "a00019-deploy-canary"}, analysisInterval)
	if err != nil {
		t.Fatal(err)
	}
	sel := `job="kubernetes-pods", namespace="soak-1", pod=~"a00019-deploy-canary-.*", soak_version="0badcafe"`
	if want := `min(max_over_time(up{` + sel + `}[30s]) and on(pod) up{` + sel + `})`; got != want {
		t.Errorf("query\n%s\nwant\n%s", got, want)
	}
}

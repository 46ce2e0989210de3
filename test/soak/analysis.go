package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// Canary analysis on a real node (the fleet runs a Prometheus, fleet_prometheus.go, and
// the controller queries it: the chart's analysis.prometheus.url). Every other gate
// canary of the setup (id%10 = 9) runs demoapp, its pods annotated for Prometheus, with
// a background analysis (canary.analysis from step 0 to the promotion) of one check, the
// AnalysisTemplate analysisTemplate of its namespace: the canary's pods scraped (up = 1).
// A healthy version passes it (the canary operations walk these canaries as the other
// gates); the version canary-analysis-fail gives one announces its metrics on a port
// where nothing listens (failingMetricsPort): its pods run and are Ready, but Prometheus
// cannot scrape them (up = 0), the check fails and the rollout aborts by itself with
// reason AnalysisFailed. On kwok no Prometheus runs: none of this is made.

const (
	// opCanaryAnalysisFail: a gate canary with analysis given a version that fails it:
	// the rollout aborts by itself (AnalysisFailed), the App says RolloutAborted.
	opCanaryAnalysisFail = "canary-analysis-fail"
	// analysisTemplate is the AnalysisTemplate of each namespace the analyzed canaries'
	// check refers to.
	analysisTemplate = "pods-up"
	// analysisInterval is the check's interval: the floor of the API.
	analysisInterval = 10 * time.Second
	// failingMetricsPort is the port the failing version's pods announce for their
	// metrics: nothing listens there.
	failingMetricsPort = "9"
	// demoappMetricsPort is where demoapp serves /metrics (and its app).
	demoappMetricsPort = "8080"
	annotationScrape   = "prometheus.io/scrape"
	annotationPort     = "prometheus.io/port"
)

// analysisQuery is the template's query: over the canary's pods (its Deployment's,
// whose pods are named after it), the lowest of each one's best up over the last 30 s:
// 1 when every one was scraped at least once then, 0 when one could not be at all; no
// value (inconclusive) before the first scrape. The fleet's Prometheus scrapes Ready
// pods alone (prometheusOptions): a pod that runs but does not serve yet is not one
// that cannot be scraped. The best of 30 s (15 scrapes) and not
// the last up: on a busy machine a healthy pod's scrape can time out (2 s), which
// aborted a healthy version on a run at a load of 135.
//
// The version's pods alone (label versionLabel, the template's argument version, both
// stamped by stampVersion): the canary Deployment's pods of the version before, which
// a new version replaces mid-rollout, are still scraped until they go, and their last
// samples stay in the 30 s for as long again. A healthy version given to a canary whose
// version failed the analysis (canary-fix) was aborted by the pods it replaced (up = 0)
// on a real-node run; Argo Rollouts' documented answer is the same, the canary's pod
// template hash as an argument of the template.
//
// And the pods that are targets now alone (and on(pod) the instant up, which a pod gone
// from the targets leaves at once, by its staleness marker): a version's pods killed by
// an abort stay in the 30 s with their last up = 0 (scraped while they stopped), and a
// retry of the same version within 30 s read them (the 60-minute run of session 24:
// a healthy version aborted at its last pause, 29 s after an abort of the same version).
const analysisQuery = `min(max_over_time(up{` + analysisSelector + `}[30s]) and on(pod) up{` + analysisSelector + `})`

// analysisSelector selects the series of the analysed version's canary pods.
const analysisSelector = `job="kubernetes-pods", namespace="{{.Namespace}}", pod=~"{{.CanaryDeployment}}-.*", soak_version="{{.Args.version}}"`

// versionLabel is the pod label that names an analysed canary's version (Prometheus
// writes it soak_version), and versionArg the template's argument that receives it.
const (
	versionLabel = "soak-version"
	versionArg   = "version"
)

// stampVersion labels an analysed App's pods with their version, a hash of its
// deploymentTemplate without the label and its replicas, and gives its check the same as
// the template's argument: a change of anything else (a route, the replicas) keeps it.
func stampVersion(a *appv1.App) {
	t := a.Spec.DeploymentTemplate
	if !analyzed(a) || t == nil || a.Spec.Rollout.Canary.Analysis == nil {
		return
	}
	delete(t.PodLabels, versionLabel)
	pods := *t
	pods.Replicas = nil // the autoscaler's and the churn's, not the pods'
	data, err := json.Marshal(pods)
	if err != nil {
		return
	}
	version := fmt.Sprintf("%08x", crc32.ChecksumIEEE(data))
	if t.PodLabels == nil {
		t.PodLabels = map[string]appv1.LabelValue{}
	}
	t.PodLabels[versionLabel] = appv1.LabelValue(version)
	for i := range a.Spec.Rollout.Canary.Analysis.Checks {
		if ref := a.Spec.Rollout.Canary.Analysis.Checks[i].TemplateRef; ref != nil && ref.Name == analysisTemplate {
			ref.Args = []appv1.AnalysisArg{{Name: versionArg, Value: version}}
		}
	}
}

// analysisImage is the analyzed canaries' image: demoapp of the cluster's registry (nil
// images.analysis: no analysis, kwok).
type analysisImage struct{ image string }

// analysisSpec is the analyzed canaries' background analysis: the template's check
// every analysisInterval, one failure tolerated (a scrape missed on a busy machine), two
// abort.
func analysisSpec() *appv1.BackgroundAnalysis {
	return &appv1.BackgroundAnalysis{Checks: []appv1.AnalysisCheck{{
		Name:         analysisTemplate,
		TemplateRef:  &appv1.AnalysisTemplateRef{Name: analysisTemplate},
		Interval:     &metav1.Duration{Duration: analysisInterval},
		FailureLimit: 1,
	}}}
}

// analyzed tells whether a is a canary with analysis.
func analyzed(a *appv1.App) bool {
	return a.Spec.Rollout != nil && a.Spec.Rollout.Canary != nil && a.Spec.Rollout.Canary.Analysis != nil
}

// analysisFails tells whether t is the version that fails the analysis.
func analysisFails(t *appv1.DeploymentTemplate) bool {
	return t != nil && t.PodAnnotations[annotationPort] == failingMetricsPort
}

// makeAnalyzed gives a gate canary its analysis and demoapp's pods.
func (ai *analysisImage) makeAnalyzed(a *appv1.App) {
	a.Spec.Rollout.Canary.Analysis = analysisSpec()
	ai.healthy(a.Spec.DeploymentTemplate)
	stampVersion(a)
}

// healthy gives t demoapp, serving, its metrics announced where it serves them.
func (ai *analysisImage) healthy(t *appv1.DeploymentTemplate) {
	t.Image = ai.image
	t.Args = nil
	t.PodAnnotations = map[string]string{annotationScrape: "true", annotationPort: demoappMetricsPort}
}

// createAnalysisTemplate creates the namespace's AnalysisTemplate.
func (d *driver) createAnalysisTemplate(ctx context.Context, ns string) error {
	at := &appv1.AnalysisTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: analysisTemplate, Namespace: ns, Labels: map[string]string{runLabel: runLabelValue}},
		Spec: appv1.AnalysisTemplateSpec{Args: []appv1.AnalysisTemplateArg{{Name: versionArg}}, Query: appv1.QueryCheck{PromQL: analysisQuery,
			SuccessCondition: &appv1.ValueRange{Min: ptr.To("1")}, FailureCondition: &appv1.ValueRange{Max: ptr.To("0")}}},
	}
	_, err := d.apps.AppcontrollerV1().AnalysisTemplates(ns).Create(ctx, at, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the AnalysisTemplate %s/%s: %w", ns, analysisTemplate, err)
	}
	return nil
}

// opCanaryAnalysisFail gives an analyzed gate canary a version that fails its analysis
// and waits until the rollout aborted by itself, by the analysis, and the App converged
// (Ready=False RolloutAborted).
func (d *driver) opCanaryAnalysisFail(ctx context.Context) error {
	r := d.pickKind([]string{kindGate}, func(r *appRecord) bool { return r.latest != nil && analyzed(r.latest) && !d.broken(r) })
	if r == nil {
		return errSkipped
	}
	defer d.release(r)
	if err := d.update(ctx, r, opCanaryAnalysisFail, func(_ *appRecord, a *appv1.App) {
		d.nextImage(a)
		a.Spec.DeploymentTemplate.PodAnnotations[annotationPort] = failingMetricsPort
	}); err != nil {
		return err
	}
	if err := d.waitRollout(ctx, r, "an abort by the analysis", func(ro *appv1.RolloutStatus) bool {
		return ro.Phase == appv1.RolloutAborted
	}); err != nil {
		return err
	}
	d.w.mu.Lock()
	ro, _ := rolloutOf(r)
	d.w.mu.Unlock()
	if ro.AbortReason != appv1.ReasonAnalysisFailed {
		return fmt.Errorf("App %s: the rollout of a version that fails its analysis aborted with %s (%s), want %s", r.key(), ro.AbortReason, ro.AbortMessage, appv1.ReasonAnalysisFailed)
	}
	return d.waitConverged(ctx, r)
}

// mix is the churn's mix: DefaultMix, without the canary analysis where no Prometheus
// runs (kwok).
func (d *driver) mix() []MixEntry {
	if d.images.analysis != nil {
		return DefaultMix
	}
	return slices.DeleteFunc(slices.Clone(DefaultMix), func(e MixEntry) bool { return e.Op == opCanaryAnalysisFail })
}

// analysisPassed tells whether ro's analysis has a check that passed a measurement.
func analysisPassed(ro *appv1.RolloutStatus) bool {
	return slices.ContainsFunc(ro.Analysis, func(c appv1.CheckStatus) bool { return c.Passed > 0 })
}

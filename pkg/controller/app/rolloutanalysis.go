package app

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/app-controller/app-controller/pkg/analysis"
	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
	applisters "github.com/app-controller/app-controller/pkg/generated/listers/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/rollout"
)

// The canary's analysis in a sync (docs/progressive-delivery.md): the checks that run at
// the rollout's step are measured when due (analysis.Due: a metric check's first
// measurement an interval after its step started, so that its window holds the step's
// requests only; one measurement per check per interval per App; none when no rollout
// runs its steps), their counts and last results go to
// status.rollout.analysis through the state machine (rollout.Observation.Analysis), and
// what they add up to is the machine's rollout.Observation.Checks. A restarted
// controller reads the counts and the time of the last measurement from the status: it
// neither measures again before the interval nor counts afresh. A check of a template
// (templateRef) is resolved from the template informers' caches at each sync; an App
// in a rollout is queued when a template it refers to changes (templateIndex).

// analysisTarget returns what app's checks measure at step of its rollout: the canary's
// (a blue-green rollout's preview's) and the stable's Deployments and Services.
func analysisTarget(app *appv1.App, r *appv1.RolloutStatus, gateway bool) analysis.Target {
	t := analysis.Target{Namespace: app.Namespace, App: app.Name, Gateway: gateway, Step: r.CurrentStepIndex}
	if d := app.Spec.DeploymentTemplate; d != nil {
		t.StableDeployment, t.CanaryDeployment = d.Name, d.Name+appv1.CanarySuffix
	}
	if s := app.Spec.ServiceTemplate; s != nil {
		t.StableService, t.CanaryService = s.Name+appv1.StableSuffix, s.Name+appv1.CanarySuffix
		if app.Spec.Rollout != nil && app.Spec.Rollout.BlueGreen != nil {
			// Blue-green: the Gateway sends the App's hosts to the App's Service and the
			// preview's hosts (previewHosts) to the preview Service.
			t.StableService, t.CanaryService = s.Name, s.Name+appv1.PreviewSuffix
		}
	}
	if r.Canary != nil {
		t.Revision = r.Canary.Revision
	}
	return t
}

// rolloutChecks makes the measurements due at now of the checks that run at the step of
// rollout state cur (strategy s), and returns their results for the state machine, their
// state for the status, when the next one is due (0: none), and, for a rollout that asks
// for metric checks of a controller without Prometheus, the abort that refuses it.
func (c *Controller) rolloutChecks(ctx context.Context, app *appv1.App, s *appv1.CanaryStrategy, cur *appv1.RolloutStatus, gateway bool,
	now time.Time) ([]rollout.CheckResult, []appv1.CheckStatus, time.Duration, rollout.Abort) {
	if cur == nil || cur.Canary == nil || cur.Phase == appv1.RolloutAborted || cur.CurrentStepIndex >= int32(len(s.Steps)) {
		return nil, nil, 0, rollout.Abort{}
	}
	if c.analyzer.Prometheus == nil {
		if names := analysis.NeedsPrometheus(s); len(names) > 0 {
			return nil, nil, 0, rollout.Abort{Reason: appv1.ReasonPrometheusNotConfigured, Message: fmt.Sprintf(
				"the rollout asks for metric checks (%s) and the controller has no Prometheus (--prometheus-url, Helm value prometheus.url): "+
					"set it, or remove the checks", strings.Join(names, ", "))}
		}
	}
	active := analysis.ActiveChecks(s, cur.CurrentStepIndex)
	if len(active) == 0 {
		return nil, nil, 0, rollout.Abort{}
	}
	sts := analysis.Statuses(active, cur.Analysis)
	target := analysisTarget(app, cur, gateway)
	var started time.Time
	if cur.StepStartedAt != nil {
		started = cur.StepStartedAt.Time
	}
	logger := klog.FromContext(ctx)
	for i, a := range active {
		check := a.Check
		if ref := check.TemplateRef; ref != nil {
			// Resolved at each sync (a lister's read): a template's change applies from
			// the next measurement, a deleted one holds the check at once.
			resolved, terr := analysis.Resolve(check, target, c.templates)
			if terr != nil {
				prev := sts[i]
				sts[i] = analysis.Unresolved(sts[i], ref, terr)
				if prev.Reason != terr.Reason || prev.Message != terr.Message {
					// Once per new problem: the status keeps the last one, across restarts.
					c.recorder.Event(app, corev1.EventTypeWarning, terr.Reason, controller.TruncateMessage(terr.Message))
				}
				logger.V(2).Info("Analysis check not measured", "check", check.Name, "template", ref.String(), "reason", terr.Reason)
				continue
			}
			check = resolved
			sts[i] = analysis.Resolved(sts[i])
			sts[i].Template = ref.String()
		}
		if !analysis.Due(check, &sts[i], started, now) {
			continue
		}
		m := c.analyzer.Measure(ctx, check, target, now)
		analysisMeasurements.WithLabelValues(string(m.Phase)).Inc()
		logger.V(2).Info("Analysis measurement", "check", check.Name, "phase", m.Phase, "value", m.Value, "threshold", m.Threshold, "message", m.Message)
		logger.V(4).Info("Analysis query", "check", check.Name, "query", m.Query)
		sts[i] = analysis.Record(sts[i], m, now)
	}
	results := make([]rollout.CheckResult, len(active))
	for i, a := range active {
		results[i] = checkResult(a, &sts[i])
	}
	var next time.Duration
	if at := analysis.NextDue(active, sts, started); !at.IsZero() {
		// A second late: the status stores times to the second.
		next = max(at.Sub(now)+time.Second, time.Second)
	}
	if analysis.FirstUnresolved(sts) != nil && cur.StepStartedAt != nil {
		// A check whose template is missing holds the step until the progress deadline
		// (pkg/rollout aborts it then, AnalysisInconclusive): a sync is due then, at a
		// step of any kind. The template's creation queues one before.
		at := cur.StepStartedAt.Add(time.Duration(ptr.Deref(s.ProgressDeadlineSeconds, 600))*time.Second + time.Second)
		if d := at.Sub(now); d > 0 && (next == 0 || d < next) {
			next = d
		}
	}
	return results, sts, next, rollout.Abort{}
}

// templates finds the AnalysisTemplates and ClusterAnalysisTemplates of checks in the
// informers' caches.
type templates struct {
	namespaced applisters.AnalysisTemplateLister
	cluster    applisters.ClusterAnalysisTemplateLister
}

var _ analysis.Templates = templates{}

// errNoClusterTemplates is why a ClusterAnalysisTemplate cannot be read when the
// controller does not watch them.
var errNoClusterTemplates = errors.New("the controller does not watch ClusterAnalysisTemplates: at its start it could not list and watch them " +
	"(grant list and watch on clusteranalysistemplates.appcontroller.k8s.io in a ClusterRole, as the chart does, then restart it)")

// Template returns the spec of the template of kind and name, nil when the cache has
// none.
func (t templates) Template(kind appv1.AnalysisTemplateKind, namespace, name string) (*appv1.AnalysisTemplateSpec, error) {
	var spec *appv1.AnalysisTemplateSpec
	var err error
	switch kind {
	case appv1.AnalysisTemplateKindCluster:
		if t.cluster == nil {
			return nil, errNoClusterTemplates
		}
		var tmpl *appv1.ClusterAnalysisTemplate
		if tmpl, err = t.cluster.Get(name); err == nil {
			spec = &tmpl.Spec
		}
	default:
		var tmpl *appv1.AnalysisTemplate
		if tmpl, err = t.namespaced.AnalysisTemplates(namespace).Get(name); err == nil {
			spec = &tmpl.Spec
		}
	}
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return spec, err
}

// checkResult is what check a, whose state is st, says to the state machine: Failed
// beyond its failureLimit; Inconclusive while its template cannot be used; a check of canary.analysis otherwise never holds a step; one
// of an analysis step has Passed once it passed its count, is Inconclusive while its
// last measurement was, and Running until then.
func checkResult(a analysis.Active, st *appv1.CheckStatus) rollout.CheckResult {
	r := rollout.CheckResult{Name: st.Name, Value: st.Value, Threshold: st.Threshold, Message: st.Message}
	if st.MeasuredAt != nil {
		r.MeasuredAt = st.MeasuredAt.Time
	}
	switch {
	case st.Failed > a.Check.FailureLimit:
		r.Phase = rollout.CheckFailed
	case st.Reason != "":
		// Its template is missing or does not fit: it holds the step, even a
		// background check's, which would otherwise guard nothing.
		r.Phase = rollout.CheckInconclusive
	case a.Step == analysis.BackgroundStep, st.Passed >= ptr.Deref(a.Check.Count, 1):
		r.Phase = rollout.CheckPassed
	case st.Phase == appv1.AnalysisInconclusive, st.Phase == appv1.AnalysisError:
		r.Phase = rollout.CheckInconclusive
	default:
		r.Phase = rollout.CheckRunning
	}
	return r
}

// notify sends the rollout's notification of an Event of app, when the controller has
// a notifier and the Event is one of a rollout's (started, step, paused, aborted,
// promoted); it never waits.
func (c *Controller) notify(app *appv1.App, n rollout.Note) {
	event := analysis.EventOf(n.Reason)
	if c.notifier == nil || event == "" {
		return
	}
	c.notifier.Notify(analysis.Notification{Event: event, Namespace: app.Namespace, App: app.Name, Reason: n.Reason, Message: n.Message, Time: c.clock.Now().UTC()})
}

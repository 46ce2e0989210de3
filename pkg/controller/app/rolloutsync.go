package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/lru"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
	"github.com/app-controller/app-controller/pkg/podhealth"
	"github.com/app-controller/app-controller/pkg/rollout"
)

// A sync of an App with a canary rollout (the engine: pkg/rollout) runs this before its
// children: it builds the version the App asks for and the stable one, observes the
// children and the canary's pods, computes the next state (rollout.Next), writes it to
// the status before any child is written for it (or leaves it to the sync's status
// write: deferRollout), and hands the children the plan of that state
// (syncInput.rollout).

// rolloutPlan is what the children are in the App's rollout state: the engine's plan
// (the replicas of each side, the HTTPRoute's weights) and the objects built from it.
type rolloutPlan struct {
	rollout.Plan
	// state is the rollout state the plan is of, as the App's status carries it; notes
	// are the Events and metrics of its transition when the sync's status write carries
	// it (deferRollout), told once that write is made.
	state *appv1.RolloutStatus
	notes []rollout.Note
	// stableTemplate is the pod template of the stable Deployment: the stable version's.
	// holdStable: it could not be built (the stable revision is gone), and the stable
	// Deployment is left as it is.
	stableTemplate *corev1ac.PodTemplateSpecApplyConfiguration
	holdStable     bool
	// canary is the canary Deployment when the plan has CanaryReplicas.
	canary *appsv1ac.DeploymentApplyConfiguration
}

// rolloutRecheck is how soon a sync that wrote a rollout's children is followed by
// another, which sees whether they completed the step.
const rolloutRecheck = time.Second

// rolloutSpecCacheSize bounds the specs of stable revisions kept in memory: one per App
// in a rollout, read once (the revision cache keeps no data).
const rolloutSpecCacheSize = 1024

// newRolloutSpecs returns the cache of the specs of stable revisions, by
// "namespace/name" of their ControllerRevision (whose name is the hash of its data).
func newRolloutSpecs() *lru.Cache { return lru.New(rolloutSpecCacheSize) }

// syncRollout runs app's canary rollout for this sync, revision being the App's current
// revision: it returns the App as it is after the state's write (the same App when
// nothing changed), the plan the children follow (nil: the App has no rollout), and
// when the App must be synced again for a time the rollout waits on (0: none).
func (c *Controller) syncRollout(ctx context.Context, key cache.ObjectName, app *appv1.App, in *syncInput, revision string) (*appv1.App, *rolloutPlan, time.Duration, error) {
	t := app.Spec.DeploymentTemplate
	if app.Spec.Rollout == nil || app.Spec.Rollout.Canary == nil || t == nil {
		return app, nil, 0, nil
	}
	s := app.Spec.Rollout.Canary
	now := c.clock.Now()
	cur := app.Status.Rollout
	if cur != nil && cur.Stable == nil {
		cur = nil // not one this controller wrote: start afresh
	}

	latest := (*appv1.RolloutVersion)(nil)
	if cur != nil {
		latest = cur.Stable
		if cur.Canary != nil {
			latest = cur.Canary
		}
	}
	desired, desiredTemplate, err := desiredVersion(app, in, revision, latest)
	if err != nil {
		return app, nil, 0, err
	}
	o := &rollout.Observation{Now: now, Desired: desired}
	o.StableSettled, o.StableHash = stableSettled(in.live)
	if cur == nil {
		if o.Initial, err = c.initialVersion(ctx, app, in, desired, desiredTemplate); err != nil {
			return app, nil, 0, err
		}
	}
	live := c.rolloutLive(app, in)
	o.Weighted = live.Gateway
	var recheck time.Duration
	if cur != nil {
		plan := rolloutPlan{Plan: rollout.NewPlan(s, cur, live, now)}
		if plan.StableMustRun {
			plan.StepDone, err = c.stableRuns(ctx, app, in, cur, &plan, desired, desiredTemplate)
			if err != nil {
				return app, nil, 0, err
			}
		}
		o.StepDone = plan.StepDone
		if cur.Canary != nil && cur.CurrentStepIndex < int32(len(s.Steps)) && cur.Phase != appv1.RolloutAborted {
			o.Failure, recheck = c.canaryFailure(app, s, now)
		}
		var measure time.Duration
		var refuse rollout.Abort
		o.Checks, o.Analysis, measure, refuse = c.rolloutChecks(ctx, app, s, cur, live.Gateway, now)
		if o.Failure.Reason == "" {
			o.Failure = refuse
		}
		recheck = controller.RequeueAfter(recheck, measure).RequeueAfter
	}
	if value := app.Annotations[appv1.RolloutRequestAnnotation]; value != "" {
		req, err := appv1.ParseRolloutRequest(value)
		o.RequestID, o.RequestErr = req.ID, err
		if err == nil {
			o.Request = &req
		} else {
			o.RequestID = "invalid:" + shortHash(value)
		}
	}

	next, notes := rollout.Next(s, cur, o)
	var deferred []rollout.Note
	switch {
	case next == cur:
	case deferRollout(cur, next):
		// The sync's status write carries the state, and its notes once it is written.
		deferred = notes
	default:
		if app, err = c.writeRollout(ctx, key, app, in, next, revision); err != nil {
			return app, nil, 0, err
		}
		c.emitRolloutNotes(ctx, app, notes)
		// The new state's children may be where it wants them at once (a step whose
		// canary is already at its share writes nothing), and the status write queues no
		// sync: the next sync looks, as after a child's write.
		recheck = controller.RequeueAfter(recheck, rolloutRecheck).RequeueAfter
	}

	plan := rolloutPlan{Plan: rollout.NewPlan(s, next, live, now), state: next, notes: deferred}
	if err := c.buildRolloutPlan(ctx, app, next, &plan, desired, desiredTemplate); err != nil {
		return app, nil, 0, err
	}
	return app, &plan, controller.RequeueAfter(recheck, rollout.Due(s, next, now)).RequeueAfter, nil
}

// deferRollout reports whether state next, which follows cur, may be written by the
// sync's status write, after the children, rather than before them: it has no canary and
// keeps the stable version of cur, which is none (a new App, or a strategy added) or
// that of a promotion's last stage (promoted: the stable Deployment runs the canary's
// template). A sync computes the same state again from cur and what is live, should the
// write not happen (a restart, a held-back or failed status write), and the write saves
// the one that would follow with the conditions the children's outcome implies.
func deferRollout(cur, next *appv1.RolloutStatus) bool {
	if next.Canary != nil {
		return false
	}
	return cur == nil || cur.Canary != nil && cur.Canary.PodTemplateHash == cur.Stable.PodTemplateHash &&
		next.Stable.PodTemplateHash == cur.Stable.PodTemplateHash
}

// desiredVersion returns the version app's spec asks for now, revision being its
// current revision, and its pod template. Its config hash is the current one when the
// referenced ConfigMaps and Secrets changed since the stable Deployment last saw them,
// else the latest version's (the canary's, else the stable's): a change that is not of
// the config keeps the pods' config hash.
func desiredVersion(app *appv1.App, in *syncInput, revision string, latest *appv1.RolloutVersion) (appv1.RolloutVersion, *corev1ac.PodTemplateSpecApplyConfiguration, error) {
	v := appv1.RolloutVersion{Revision: revision, RestartedAt: app.Annotations[appv1.RestartedAtAnnotation]}
	current, live := in.config.hash, in.live
	seen, known := "", false
	if live != nil {
		seen, known = live.Annotations[appv1.ConfigHashAnnotation]
	}
	switch {
	case live == nil, current != "" && known && seen != current:
		v.ConfigHash = current
	case latest != nil:
		v.ConfigHash = latest.ConfigHash
	default:
		v.ConfigHash = live.Spec.Template.Annotations[appv1.ConfigHashAnnotation]
	}
	template, err := desiredPodTemplate(app, v.ConfigHash, v.RestartedAt)
	if err != nil {
		return v, nil, fmt.Errorf("building the pod template of App %s/%s: %w", app.Namespace, app.Name, err)
	}
	if v.PodTemplateHash, err = podTemplateHash(template); err != nil {
		return v, nil, err
	}
	return v, template, nil
}

// podTemplateHash identifies a pod template the controller builds.
func podTemplateHash(t *corev1ac.PodTemplateSpecApplyConfiguration) (string, error) {
	data, err := json.Marshal(t)
	if err != nil {
		return "", fmt.Errorf("encoding a pod template: %w", err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:5]), nil
}

// shortHash is a short hash of s.
func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:5])
}

// initialVersion returns the version the stable Deployment runs when app has no rollout
// state yet: the desired one when there is no Deployment yet or it already runs it (the
// strategy was added alone); otherwise the version of the App's last revision, which the
// controller applied, with the Deployment's config hash and restart.
func (c *Controller) initialVersion(ctx context.Context, app *appv1.App, in *syncInput, desired appv1.RolloutVersion,
	desiredTemplate *corev1ac.PodTemplateSpecApplyConfiguration) (appv1.RolloutVersion, error) {
	live := in.live
	if live == nil {
		return desired, nil
	}
	t := app.Spec.DeploymentTemplate
	d, err := buildDeployment(app, t.Name, desiredTemplate, selectorLabels(app), t.Replicas, in.hashes.seen)
	if err != nil {
		return desired, err
	}
	replicas, resourceVersion := deploymentReplicas(app, live)
	d = withReplicas(d, replicas, resourceVersion)
	if upToDate, err := controller.UpToDate(live, d); err != nil || upToDate {
		return desired, err
	}
	rev := app.Status.CurrentRevision
	if rev == "" || rev == desired.Revision {
		return desired, nil // nothing better known of what it runs
	}
	v := appv1.RolloutVersion{
		Revision:    rev,
		ConfigHash:  live.Spec.Template.Annotations[appv1.ConfigHashAnnotation],
		RestartedAt: live.Spec.Template.Annotations[appv1.RestartedAtAnnotation],
	}
	template, found, err := c.versionTemplate(ctx, app, v)
	if err != nil || !found {
		return desired, err
	}
	v.PodTemplateHash, err = podTemplateHash(template)
	return v, err
}

// versionTemplate builds the pod template of version v of app from the spec of its
// revision, read once from the API server; found is false when the revision is gone.
func (c *Controller) versionTemplate(ctx context.Context, app *appv1.App, v appv1.RolloutVersion) (*corev1ac.PodTemplateSpecApplyConfiguration, bool, error) {
	key := app.Namespace + "/" + v.Revision
	var spec *appv1.AppSpec
	if cached, ok := c.rolloutSpecs.Get(key); ok {
		spec = cached.(*appv1.AppSpec)
	} else {
		rev, err := c.kubeClient.AppsV1().ControllerRevisions(app.Namespace).Get(ctx, v.Revision, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("reading revision %s of App %s/%s: %w", v.Revision, app.Namespace, app.Name, err)
		}
		if !controller.IsControlledBy(rev, app) {
			return nil, false, nil
		}
		var data map[string]appv1.AppSpec
		if err := json.Unmarshal(rev.Data.Raw, &data); err != nil {
			return nil, false, fmt.Errorf("decoding revision %s of App %s/%s: %w", v.Revision, app.Namespace, app.Name, err)
		}
		s := data[appv1.RevisionDataKey]
		spec = &s
		c.rolloutSpecs.Add(key, spec)
	}
	if spec.DeploymentTemplate == nil {
		return nil, false, nil
	}
	old := &appv1.App{ObjectMeta: app.ObjectMeta, Spec: *spec}
	template, err := desiredPodTemplate(old, v.ConfigHash, v.RestartedAt)
	if err != nil {
		return nil, false, fmt.Errorf("building the pod template of revision %s of App %s/%s: %w", v.Revision, app.Namespace, app.Name, err)
	}
	return template, true, nil
}

// templateOf returns the pod template of version v: the desired one when v is the
// desired version, else built from its revision (found false: it is gone).
func (c *Controller) templateOf(ctx context.Context, app *appv1.App, v *appv1.RolloutVersion, desired appv1.RolloutVersion,
	desiredTemplate *corev1ac.PodTemplateSpecApplyConfiguration) (*corev1ac.PodTemplateSpecApplyConfiguration, bool, error) {
	if v.PodTemplateHash == desired.PodTemplateHash {
		return desiredTemplate, true, nil
	}
	return c.versionTemplate(ctx, app, *v)
}

// stableSettled reports whether the stable Deployment d's pods are all of one template
// (the deployment controller observed its spec and left no old replica), and their
// pod-template-hash.
func stableSettled(d *appsv1.Deployment) (bool, string) {
	if d == nil || d.Status.ObservedGeneration < d.Generation || d.Status.Replicas != d.Status.UpdatedReplicas {
		return false, ""
	}
	hash := newReplicaSetHash(d)
	return hash != "", hash
}

// rolloutLive reads what the plan needs of app's children as they are.
func (c *Controller) rolloutLive(app *appv1.App, in *syncInput) rollout.Live {
	t := app.Spec.DeploymentTemplate
	l := rollout.Live{Gateway: c.route.splits(app), Autoscaled: app.Spec.Autoscaling != nil, CanaryWeight: -1}
	if in.live != nil {
		l.StableReplicas = ptr.Deref(in.live.Spec.Replicas, 1)
	}
	l.N = ptr.Deref(t.Replicas, l.StableReplicas)
	if l.Autoscaled {
		// deploymentTemplate.replicas is only the starting size: the count is the
		// autoscaler's, which it writes to the stable Deployment.
		l.N = l.StableReplicas
	}
	if canary := c.liveCanary(app); canary != nil {
		l.CanaryExists = true
		l.CanaryReplicas = ptr.Deref(canary.Spec.Replicas, 1)
		if deploymentRollout(canary.Name, canary, 0).rolledOut {
			l.CanaryAvailable = canary.Status.AvailableReplicas
		}
	}
	if l.Gateway {
		l.CanaryWeight = c.route.canaryWeight(app)
	}
	return l
}

// stableRuns reports whether the live stable Deployment runs the plan's stable template
// of state r (the promotion's last stage), rolled out and available.
func (c *Controller) stableRuns(ctx context.Context, app *appv1.App, in *syncInput, r *appv1.RolloutStatus, p *rolloutPlan,
	desired appv1.RolloutVersion, desiredTemplate *corev1ac.PodTemplateSpecApplyConfiguration) (bool, error) {
	if in.live == nil {
		return false, nil
	}
	if err := c.buildRolloutPlan(ctx, app, r, p, desired, desiredTemplate); err != nil || p.holdStable {
		return false, err
	}
	d, err := stableDeployment(app, in, p)
	if err != nil {
		return false, err
	}
	upToDate, err := controller.UpToDate(in.live, d)
	if err != nil || !upToDate {
		return false, err
	}
	ro := deploymentRollout(in.live.Name, in.live, 0)
	return ro.rolledOut && ro.available, nil
}

// buildRolloutPlan builds the objects of plan p of state r: the stable Deployment's
// template and the canary Deployment.
func (c *Controller) buildRolloutPlan(ctx context.Context, app *appv1.App, r *appv1.RolloutStatus, p *rolloutPlan,
	desired appv1.RolloutVersion, desiredTemplate *corev1ac.PodTemplateSpecApplyConfiguration) error {
	template, found, err := c.templateOf(ctx, app, r.Stable, desired, desiredTemplate)
	if err != nil {
		return err
	}
	if !found {
		klog.FromContext(ctx).V(2).Info("The stable revision of the rollout is gone: the stable Deployment is left as it is", "revision", r.Stable.Revision)
		p.holdStable = true
	}
	p.stableTemplate = template
	if p.CanaryReplicas == nil {
		return nil
	}
	// The canary runs the rollout's version; an aborted or promoted one its last.
	v := r.Canary
	if v == nil {
		v = r.Stable
	}
	canaryTemplate, found, err := c.templateOf(ctx, app, v, desired, desiredTemplate)
	if err != nil || !found {
		p.CanaryReplicas, p.KeepCanary = nil, true // nothing to build it from: left as it is
		return err
	}
	p.canary, err = canaryDeployment(app, canaryTemplate, *p.CanaryReplicas)
	return err
}

// canaryFailure returns why the canary of app fails, from its current pods (those of its
// Deployment's newest ReplicaSet): a pod whose image cannot be pulled, whose container
// cannot be created, exits or is OOMKilled, at once; a pod not ready
// readyDeadlineSeconds after its creation. It also returns when a pod not ready yet
// reaches that deadline (0: none).
func (c *Controller) canaryFailure(app *appv1.App, s *appv1.CanaryStrategy, now time.Time) (rollout.Abort, time.Duration) {
	d := c.liveCanary(app)
	if c.pods == nil || d == nil || d.Status.ObservedGeneration < d.Generation {
		return rollout.Abort{}, 0
	}
	objs, err := c.pods.ByIndex(podAppIndex, app.Namespace+"/"+app.Name)
	if err != nil {
		return rollout.Abort{}, 0
	}
	set := selectorLabels(app)
	set[appv1.TrackLabel] = appv1.TrackCanary
	pods := currentPods(objs, labels.SelectorFromSet(set), newReplicaSetHash(d))
	deadline := time.Duration(ptr.Deref(s.ReadyDeadlineSeconds, 120)) * time.Second
	var (
		failing  []*corev1.Pod
		overdue  *corev1.Pod
		recheck  time.Duration
		problems = map[string]bool{appv1.ReasonImagePullFailed: true, appv1.ReasonContainerConfigError: true,
			appv1.ReasonCrashLoopBackOff: true, appv1.ReasonOOMKilled: true}
	)
	for _, pod := range pods {
		if problem, _ := podhealth.Inspect(pod, now); problem != nil && problems[problem.Reason] {
			failing = append(failing, pod)
			continue
		}
		if podReady(pod) {
			continue
		}
		due := pod.CreationTimestamp.Add(deadline)
		if !now.Before(due) {
			if overdue == nil || pod.Name < overdue.Name {
				overdue = pod
			}
		} else if d := due.Sub(now); recheck == 0 || d < recheck {
			recheck = d
		}
	}
	if problem, _ := podhealth.First(failing, now); problem != nil {
		return rollout.Abort{Reason: problem.Reason, Message: problem.Message}, recheck
	}
	if overdue != nil {
		if problem, _ := podhealth.Inspect(overdue, now); problem != nil {
			problem = problem.WithProbeOutput(c.probeOutput(app.Namespace, problem))
			return rollout.Abort{Reason: problem.Reason, Message: fmt.Sprintf("%s, %s after it was created (readyDeadlineSeconds)", problem.Message, deadline)}, recheck
		}
		return rollout.Abort{Reason: appv1.ReasonContainerNotReady, Message: fmt.Sprintf("Pod %q is not ready %s after it was created (readyDeadlineSeconds)", overdue.Name, deadline)}, recheck
	}
	return rollout.Abort{}, recheck
}

// podReady reports whether every container of pod is ready (the pod cache keeps no
// Ready condition).
func podReady(pod *corev1.Pod) bool {
	ready, total := podhealth.ReadyContainers(pod)
	return pod.Status.Phase == corev1.PodRunning && total > 0 && ready == total
}

// writeRollout writes rollout state r to app's status at once, before any child is
// written for it (with the conditions it implies, the current revision and the stable
// Deployment's status as cached), and returns the App as written.
func (c *Controller) writeRollout(ctx context.Context, key cache.ObjectName, app *appv1.App, in *syncInput, r *appv1.RolloutStatus, revision string) (*appv1.App, error) {
	status := app.Status.DeepCopy()
	status.ObservedGeneration = app.Generation
	if in.live != nil {
		status.DeploymentStatus = deploymentStatusOf(in.live)
	}
	// The conditions are computed again in this sync, at this generation: written at it,
	// the status the sync ends with is this one when nothing else changed.
	for i := range status.Conditions {
		status.Conditions[i].ObservedGeneration = app.Generation
	}
	if revision != "" {
		status.CurrentRevision = revision
	}
	status.Rollout = r
	setRolloutConditions(status, app, metav1.NewTime(c.clock.Now()))
	if err := c.writeStatus(ctx, app, status, statusWriteChange); err != nil {
		return app, err
	}
	c.statusPending.clear(key)
	klog.FromContext(ctx).V(2).Info("Rollout state written", "phase", r.Phase, "step", r.CurrentStepIndex)
	written, exists, err := c.getApp(key)
	if err != nil || !exists {
		return app, err
	}
	return written, nil
}

// emitRolloutNotes emits the Events of a transition and counts its metrics.
func (c *Controller) emitRolloutNotes(ctx context.Context, app *appv1.App, notes []rollout.Note) {
	for _, n := range notes {
		c.recorder.Event(app, n.EventType, n.Reason, controller.TruncateMessage(n.Message))
		c.notify(app, n)
		klog.FromContext(ctx).V(2).Info("Rollout", "reason", n.Reason, "message", n.Message)
		switch n.Metric {
		case rollout.MetricStarted:
			rolloutsStarted.Inc()
		case rollout.MetricPromoted:
			rolloutsPromoted.Inc()
		case rollout.MetricAborted:
			rolloutsAborted.WithLabelValues(n.AbortReason).Inc()
		}
		if n.Step != "" {
			rolloutStepDuration.WithLabelValues(n.Step).Observe(n.Seconds)
		}
	}
}

// setRolloutConditions sets the conditions a rollout of status implies (kstatus:
// InProgress while it runs or is paused, Failed when aborted), unless a name conflict or
// a stalled stable Deployment says more.
func setRolloutConditions(status *appv1.AppStatus, app *appv1.App, now metav1.Time) {
	r := status.Rollout
	if r == nil || r.Canary == nil || meta.IsStatusConditionFalse(status.Conditions, appv1.ConditionNamesAccepted) {
		return
	}
	msg := controller.TruncateMessage(r.Message)
	set := func(t string, s metav1.ConditionStatus, reason string) {
		setCondition(status, app, now, t, s, reason, msg)
	}
	if r.Phase == appv1.RolloutAborted {
		set(appv1.ConditionReady, metav1.ConditionFalse, appv1.ReasonRolloutAborted)
		set(appv1.ConditionProgressing, metav1.ConditionFalse, appv1.ReasonRolloutAborted)
		set(appv1.ConditionStalled, metav1.ConditionTrue, appv1.ReasonRolloutAborted)
		meta.RemoveStatusCondition(&status.Conditions, appv1.ConditionReconciling)
		return
	}
	if c := meta.FindStatusCondition(status.Conditions, appv1.ConditionStalled); c != nil && c.Reason == appv1.ReasonRolloutAborted {
		meta.RemoveStatusCondition(&status.Conditions, appv1.ConditionStalled) // an abort of before
	}
	if meta.IsStatusConditionTrue(status.Conditions, appv1.ConditionStalled) {
		return // the stable Deployment's problem comes first
	}
	reason := appv1.ReasonRolloutProgressing
	switch {
	case r.Phase == appv1.RolloutPaused:
		reason = appv1.ReasonRolloutPaused
	case app.Spec.Rollout != nil && app.Spec.Rollout.Canary != nil && r.CurrentStepIndex >= int32(len(app.Spec.Rollout.Canary.Steps)):
		reason = appv1.ReasonRolloutPromoting
	}
	set(appv1.ConditionReady, metav1.ConditionFalse, reason)
	set(appv1.ConditionProgressing, metav1.ConditionTrue, reason)
	set(appv1.ConditionReconciling, metav1.ConditionTrue, reason)
}

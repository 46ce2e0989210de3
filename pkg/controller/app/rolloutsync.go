package app

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
	"github.com/app-controller/app-controller/pkg/rollout"
)

// A sync of an App with a canary rollout runs syncRollout before its children. The
// engine, pkg/rollout, decides; the files of this package that serve it, in the order a
// sync reads them: rolloutversion.go (the version the App asks for, the stable one and
// their pod templates), rolloutobserve.go (what the engine observes: the stable
// Deployment, the children as they are, the canary's pods judged in pods.go, a request;
// the plan of a state: newPlan), this file (the next state, nextRollout, written to the
// status before any child is written for it, or left to the sync's status write:
// deferRollout; its Events and metrics), and, after the children, status.go (the
// conditions a rollout implies: setRolloutConditions). The children read the plan of the
// state (syncInput.rollout, child.go).

// rolloutRecheck is how soon a sync that wrote a rollout's children is followed by
// another, which sees whether they completed the step.
const rolloutRecheck = time.Second

// syncRollout runs app's canary rollout for this sync, revision being the App's current
// revision: it returns the App as it is after the state's write (the same App when
// nothing changed), the plan the children follow (nil: the App has no rollout), and
// when the App must be synced again for a time the rollout waits on (0: none). In
// order: the versions (rolloutversion.go), what is observed (rolloutobserve.go), the
// next state (rollout.Next), written at once or left to the sync's status write, and
// the plan of that state with the pod templates it runs.
func (c *Controller) syncRollout(ctx context.Context, key cache.ObjectName, app *appv1.App, in *syncInput, revision string) (*appv1.App, *rolloutPlan, time.Duration, error) {
	s, bg := rollout.Strategy(app.Spec.Rollout)
	if s == nil || app.Spec.DeploymentTemplate == nil {
		return app, nil, 0, nil
	}
	cur := app.Status.Rollout
	if cur != nil && cur.Stable == nil {
		cur = nil // not one this controller wrote: start afresh
	}
	if copiesEnabled(app) {
		var err error
		if in.copies, err = c.readCopies(ctx, app, in.config.refs, revision); err != nil {
			return app, nil, 0, err
		}
	}
	vs, err := desiredVersion(app, in, revision, cur)
	if err != nil {
		return app, nil, 0, err
	}
	if in.copies != nil {
		// The copies the version reads exist before any Deployment names them.
		in.copies.desired = vs.desired.ConfigHash
		if _, err := c.ensureCopies(ctx, app, vs.desired.ConfigHash, in.copies); err != nil {
			return app, nil, 0, err
		}
	}
	o, live, recheck, err := c.observeRollout(ctx, app, in, s, bg, cur, vs)
	if err != nil {
		return app, nil, 0, err
	}

	next, notes := nextRollout(s, bg, cur, o)
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

	if next != cur && (cur == nil || rollout.RoutingAt(s, next.CurrentStepIndex).MirrorPercent != rollout.RoutingAt(s, cur.CurrentStepIndex).MirrorPercent) {
		// The new state's step mirrors another share: its mirror is checked before
		// the route is written (child_routerouting.go).
		live.MirrorUnsupported = c.mirrorCheck(ctx, app, s, next, live)
	}
	plan := rolloutPlan{Plan: newPlan(s, bg, next, live, o.Now), state: next, notes: deferred}
	if err := c.buildRolloutPlan(ctx, app, next, &plan, vs); err != nil {
		return app, nil, 0, err
	}
	return app, &plan, controller.RequeueAfter(recheck, rollout.Due(s, next, o.Now)).RequeueAfter, nil
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

// nextRollout returns the state that follows cur: the blue-green machine's when bg is
// set, else the canary's.
func nextRollout(s *appv1.CanaryStrategy, bg *appv1.BlueGreenStrategy, cur *appv1.RolloutStatus, o *rollout.Observation) (*appv1.RolloutStatus, []rollout.Note) {
	if bg != nil {
		return rollout.NextBlueGreen(bg, cur, o)
	}
	return rollout.Next(s, cur, o)
}

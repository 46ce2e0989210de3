package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
	"github.com/app-controller/app-controller/pkg/rollout"
)

// What a sync observes for the canary rollout's engine (rollout.Observation): the stable
// Deployment, the children as they are (rollout.Live; for a blue-green rollout, whether
// its switch is in effect: activeOnPreview), whether they are where the recorded state
// wants them, the canary's pods (pods.go: canaryFailure), the App's rollout request, and
// Observation.Checks, the results of the canary's checks at the current step
// (rolloutanalysis.go: rolloutChecks), which the engine decides on (pkg/rollout,
// checks.go). The plan of a state, which the sync reads here and in syncRollout, is
// newPlan's.

// observeRollout returns what the sync observed of app's rollout in its recorded state
// cur (nil: none yet) under strategy s, the versions being vs; the children as they
// are, which the plan reads; and when a canary pod reaches its ready deadline (0: none).
// bg is the blue-green strategy whose stages s is, nil for a canary.
func (c *Controller) observeRollout(ctx context.Context, app *appv1.App, in *syncInput, s *appv1.CanaryStrategy, bg *appv1.BlueGreenStrategy, cur *appv1.RolloutStatus,
	vs rolloutVersions) (*rollout.Observation, rollout.Live, time.Duration, error) {
	o := &rollout.Observation{Now: c.clock.Now(), Desired: vs.desired}
	o.StableSettled, o.StableHash = stableSettled(in.live)
	canary := c.liveCanary(app)
	live, settle := c.rolloutLive(app, in, canary, o.Now)
	live.StableHash = o.StableHash // "" while the stable rolls
	if bg != nil {
		live.ActiveOnPreview = c.activeOnPreview(app)
	}
	o.Weighted = live.Gateway
	o.RequestID, o.Request, o.RequestErr = rolloutRequest(app)
	var err error
	if cur == nil {
		o.Initial, err = c.initialVersion(ctx, app, in, vs)
		return o, live, settle, err
	}
	// A mirror the Gateway cannot do is never written; the rollout aborts instead.
	live.MirrorUnsupported = c.mirrorCheck(ctx, app, s, cur, live)
	plan := rolloutPlan{Plan: newPlan(s, bg, cur, live, o.Now)}
	if plan.StableMustRun {
		if plan.StepDone, err = c.stableRuns(ctx, app, in, cur, &plan, vs); err != nil {
			return nil, live, 0, err
		}
	}
	o.StepDone = plan.StepDone
	var recheck time.Duration
	if cur.Canary != nil && cur.CurrentStepIndex < int32(len(s.Steps)) && cur.Phase != appv1.RolloutAborted {
		o.Failure, recheck = c.canaryFailure(app, canary, s, o.Now)
		if o.Failure.Reason == "" && live.MirrorUnsupported != "" {
			o.Failure = rollout.Abort{Reason: appv1.ReasonMirrorUnsupported, Message: live.MirrorUnsupported}
		}
	}
	// The canary's analysis (rolloutanalysis.go): the checks due are measured, their
	// results and state go to the machine; a rollout that asks for metric checks of a
	// controller without Prometheus is refused.
	var measure time.Duration
	var refuse rollout.Abort
	o.Checks, o.Analysis, measure, refuse = c.rolloutChecks(ctx, app, s, cur, live.Gateway, o.Now)
	if o.Failure.Reason == "" {
		o.Failure = refuse
	}
	recheck = controller.RequeueAfter(controller.RequeueAfter(recheck, measure).RequeueAfter, settle).RequeueAfter
	return o, live, recheck, nil
}

// rolloutRequest returns app's rollout request (the annotation of kubectl app promote,
// abort, pause or resume) and its id; nil and "" when there is none. A request that
// cannot be read has an id of its own, and the error.
func rolloutRequest(app *appv1.App) (string, *appv1.RolloutRequest, error) {
	value := app.Annotations[appv1.RolloutRequestAnnotation]
	if value == "" {
		return "", nil, nil
	}
	req, err := appv1.ParseRolloutRequest(value)
	if err != nil {
		return "invalid:" + shortHash(value), nil, err
	}
	return req.ID, &req, nil
}

// shortHash is a short hash of s: the id of a request that cannot be read.
func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:5])
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

// rolloutLive reads what the plan needs of app's children as they are at now, canary
// being its canary Deployment as cached (nil: none); and, while the split Services or
// the canary's availability are too young for the HTTPRoute to rely on them
// (rollout.GatewaySettle), how long until they are not.
func (c *Controller) rolloutLive(app *appv1.App, in *syncInput, canary *appsv1.Deployment, now time.Time) (rollout.Live, time.Duration) {
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
	// What the canary Deployment says, read in one place.
	var available *appsv1.DeploymentCondition
	if canary != nil {
		l.CanaryExists = true
		l.CanaryReplicas = ptr.Deref(canary.Spec.Replicas, 1)
		if deploymentRollout(canary.Name, canary, 0).rolledOut {
			l.CanaryAvailable = canary.Status.AvailableReplicas
		}
		if a := deploymentCondition(canary, appsv1.DeploymentAvailable); a != nil && a.Status == corev1.ConditionTrue {
			available = a
		}
	}
	var settle time.Duration
	if l.Gateway {
		// The live HTTPRoute, read once: its weights, its header route and mirror, and
		// whether the Gateways have read it.
		route := c.route.liveRoute(app)
		l.CanaryWeight = canaryWeight(app, route)
		l.Routing = liveRouting(app, route)
		var since time.Time
		l.SplitServicesExist, since = c.splitServicesSince(app)
		if l.SplitServicesExist {
			settle = since.Add(rollout.GatewaySettle).Sub(now)
			l.SplitServicesExist = settle <= 0
		}
		if canary != nil && l.CanaryWeight == 0 {
			// The route went to canary 0 once the Services were settled: GatewaySettle
			// more for the Gateway to apply it (their age unknown: none).
			drained := since.Add(2 * rollout.GatewaySettle).Sub(now)
			if since.IsZero() {
				drained = 0
			}
			// And the Gateways have reported the route at canary 0 (its generation): the
			// Services' age says nothing of when the drain's route was written.
			l.CanaryDrained = drained <= 0 && routeReported(route, c.route.parents(app))
			if !l.CanaryDrained {
				settle = max(settle, drained)
			}
		}
		if canary == nil {
			l.CanaryPodsLeft = c.canaryPodsLeft(app)
		} else if available != nil {
			l.CanaryAvailableSince = available.LastTransitionTime.Time
			if l.CanaryWeight <= 0 {
				settle = max(settle, l.CanaryAvailableSince.Add(rollout.GatewaySettle).Sub(now))
			}
		}
	}
	return l, max(settle, 0)
}

// canaryWeight returns the weight of app's canary Service on route, app's live
// HTTPRoute (nil: none), -1 when the route does not split the traffic (or there is none).
func canaryWeight(app *appv1.App, route *gatewayv1.HTTPRoute) int32 {
	if route == nil || app.Spec.ServiceTemplate == nil || len(route.Spec.Rules) == 0 {
		return -1
	}
	canary := app.Spec.ServiceTemplate.Name + appv1.CanarySuffix
	for _, b := range route.Spec.Rules[0].BackendRefs {
		if string(b.Name) == canary {
			return ptr.Deref(b.Weight, 1)
		}
	}
	return -1
}

// liveRouting returns the header route and mirror to app's canary on route, app's live
// HTTPRoute (nil: none): the RequestMirror filter of the first rule to the canary's
// Service, and the header matches of a rule whose one backend is the canary's Service.
func liveRouting(app *appv1.App, route *gatewayv1.HTTPRoute) rollout.Routing {
	var out rollout.Routing
	if route == nil || app.Spec.ServiceTemplate == nil || len(route.Spec.Rules) == 0 {
		return out
	}
	canary := gatewayv1.ObjectName(app.Spec.ServiceTemplate.Name + appv1.CanarySuffix)
	for _, f := range route.Spec.Rules[0].Filters {
		if f.Type == gatewayv1.HTTPRouteFilterRequestMirror && f.RequestMirror != nil && f.RequestMirror.BackendRef.Name == canary {
			out.MirrorPercent = ptr.Deref(f.RequestMirror.Percent, 100)
		}
	}
	for _, rule := range route.Spec.Rules[1:] {
		if len(rule.BackendRefs) == 1 && rule.BackendRefs[0].Name == canary && len(rule.Matches) > 0 {
			out.Header = rule.Matches[0].Headers
		}
	}
	return out
}

// routeReported reports whether every Gateway of parents (those the App's route
// attaches to) that answered in the status of route, the App's live HTTPRoute (nil:
// none), has answered for the route's current generation (Accepted observed it): the
// Gateways have read the route as it is. None answered: nothing routes by it, nothing to
// wait for. An answer of a Gateway the route no longer attaches to is not waited for:
// its controller may never update it.
func routeReported(route *gatewayv1.HTTPRoute, parents []appv1.GatewayRef) bool {
	if route == nil {
		return true
	}
	for _, s := range route.Status.Parents {
		if !slices.ContainsFunc(parents, func(p appv1.GatewayRef) bool { return sameParent(s.ParentRef, route.Namespace, p) }) {
			continue
		}
		cond := meta.FindStatusCondition(s.Conditions, string(gatewayv1.RouteConditionAccepted))
		if cond == nil || cond.ObservedGeneration < route.Generation {
			return false
		}
	}
	return true
}

// splitServicesSince reports whether app's stable and canary Services (the split of its
// HTTPRoute) both exist, as cached (own writes included), and since when (the younger's
// creation; zero when unknown).
func (c *Controller) splitServicesSince(app *appv1.App) (bool, time.Time) {
	name := serviceName(app)
	if name == "" {
		return false, time.Time{}
	}
	var since time.Time
	for _, suffix := range []string{appv1.StableSuffix, appv1.CanarySuffix} {
		h, err := c.services.lookup(app, name+suffix)
		if err != nil || !h.exists || !h.ours {
			return false, time.Time{}
		}
		if h.managed != nil && h.managed.CreationTimestamp.After(since) {
			since = h.managed.CreationTimestamp.Time
		}
	}
	return true, since
}

// stableRuns reports whether the live stable Deployment runs the plan's stable template
// of state r (the promotion's last stage), rolled out and available.
func (c *Controller) stableRuns(ctx context.Context, app *appv1.App, in *syncInput, r *appv1.RolloutStatus, p *rolloutPlan, vs rolloutVersions) (bool, error) {
	if in.live == nil {
		return false, nil
	}
	if err := c.buildRolloutPlan(ctx, app, r, p, vs); err != nil || p.holdStable {
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

// activeOnPreview reports whether app's Service, as cached, selects the preview's pods.
func (c *Controller) activeOnPreview(app *appv1.App) bool {
	return c.services.activeSelector(app)[appv1.TrackLabel] == appv1.TrackCanary
}

// newPlan returns the plan of rollout state r: a blue-green one when bg is set, else
// the canary's of strategy s.
func newPlan(s *appv1.CanaryStrategy, bg *appv1.BlueGreenStrategy, r *appv1.RolloutStatus, l rollout.Live, now time.Time) rollout.Plan {
	if bg != nil {
		return rollout.NewBlueGreenPlan(bg, r, l, now)
	}
	return rollout.NewPlan(s, r, l, now)
}

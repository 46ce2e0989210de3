package rollout

import (
	"time"

	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// Plan is what the children are in a rollout state: the replicas of the stable and
// canary Deployments and the weights of the HTTPRoute between the stable and canary
// Services. The App controller builds the objects from it.
type Plan struct {
	// StableReplicas is the stable Deployment's replica count; nil: the App's own
	// (spec.replicas, or none).
	StableReplicas *int32
	// CanaryReplicas is the canary Deployment's replica count; nil: no canary
	// Deployment (pruned), unless KeepCanary: it stays as it is.
	CanaryReplicas *int32
	KeepCanary     bool
	// Split is how the HTTPRoute shares the traffic between the stable and canary
	// Services; nil: the App's Service alone. SplitServices: the stable and canary
	// Services exist (also while the HTTPRoute may still send to them).
	Split         *Split
	SplitServices bool
	// Routing is what the HTTPRoute does for the canary beside Split: a header route,
	// a mirror (routing.go); only while a step that asks for it runs.
	Routing Routing
	// StableHash is the pod-template-hash the stable Service selects.
	StableHash string
	// Active is what the App's Service selects during a blue-green rollout (bluegreen.go);
	// PreviewService: the preview Service exists; PreviewRoute: the HTTPRoute of the
	// preview's hosts too (with previewHosts), while the preview has pods.
	Active                       Active
	PreviewService, PreviewRoute bool
	// StepDone: the children are where the state wants them (Observation.StepDone);
	// when StableMustRun, only once the stable Deployment runs the stable version's
	// template, rolled out (the promotion's last stage): the caller looks.
	StepDone, StableMustRun bool
}

// Split is the weights of the HTTPRoute's stable and canary Services.
type Split struct {
	Stable, Canary int32
}

// Live is what the plan reads of the children as they are.
type Live struct {
	// Gateway: the App's route is an HTTPRoute, which splits the traffic by weight;
	// otherwise the share is the replicas'.
	Gateway bool
	// Autoscaled: the App's HorizontalPodAutoscaler owns the stable Deployment's count
	// (spec.autoscaling): the plan never sets it, and N is that count.
	Autoscaled bool
	// N is the App's replica count: spec.replicas, else (autoscaled, or no replicas) the
	// stable Deployment's.
	N int32
	// CanaryExists: the canary Deployment exists; CanaryReplicas is its spec's count,
	// CanaryAvailable its available replicas once rolled out (0 before).
	CanaryExists                    bool
	CanaryReplicas, CanaryAvailable int32
	// CanaryPodsLeft: the canary Deployment is gone (or hidden as deleted) but pods of
	// it are still there: the garbage collector has not deleted them yet, or they are
	// terminating. Behind the App's Service they would take requests as they stop.
	CanaryPodsLeft bool
	// CanaryWeight is the canary's weight on the live HTTPRoute; -1 when it does not
	// split.
	CanaryWeight int32
	// SplitServicesExist: the stable and canary Services of the split both exist.
	SplitServicesExist bool
	// StableHash is the pod-template-hash of the stable Deployment's pods when they all
	// run one template; "" while it rolls. At rest the stable Service of a drain (below)
	// selects them by it.
	StableHash string
	// CanaryDrained: the live HTTPRoute gives the canary nothing (weight 0), its
	// Gateways have reported that route (its generation) and have had GatewaySettle to
	// apply it (the split Services are older than twice GatewaySettle: the route went to
	// canary 0 once they were settled).
	CanaryDrained bool
	// CanaryAvailableSince is when the canary Deployment became available (its
	// Available condition); zero: unknown. The route gives the canary its first weight
	// only GatewaySettle after it (gatewaySees).
	CanaryAvailableSince time.Time
	// StableReplicas is the live stable Deployment's spec count.
	StableReplicas int32
	// Routing is the live HTTPRoute's header route and mirror to the canary.
	Routing Routing
	// MirrorUnsupported says why the App's Gateway cannot mirror (its GatewayClass does
	// not list the feature); "": it can, or nobody says it cannot. A mirror is then
	// never planned, and the observation aborts the rollout.
	MirrorUnsupported string
	// ActiveOnPreview: the App's Service selects the preview's pods (a blue-green
	// rollout's switch is in effect).
	ActiveOnPreview bool
}

// GatewaySettle is how long a change the Gateway must see before the HTTPRoute relies on
// it (the split Services created, the canary's first pods available) is given: the time
// for the Gateway's controller to see it, and the EndpointSlices the cluster makes of
// it. Traefik answered 500 to two seconds of requests (its Gateway provider's throttle)
// for a route that named Services written 20 ms before it, and 503 to the canary's
// share for two seconds when its first weight came as its pods became available, before
// it had their endpoints (test/e2e/analysis, on the real node).
const GatewaySettle = 2 * time.Second

// gatewaySees reports whether the Gateway has had GatewaySettle to see the canary's pods
// available at now (true when when is unknown).
func (l Live) gatewaySees(now time.Time) bool {
	return l.CanaryAvailableSince.IsZero() || !now.Before(l.CanaryAvailableSince.Add(GatewaySettle))
}

// appliedWeight is the canary's weight on the route at a step of weight w: w once the
// canary's pods are ready (its first weight once the Gateway has seen them:
// gatewaySees), else at most what the live route gives it.
func (l Live) appliedWeight(w int32, ready bool, now time.Time) int32 {
	if ready && (l.CanaryWeight > 0 || l.gatewaySees(now)) {
		return w
	}
	return min(w, max(l.CanaryWeight, 0))
}

// canaryReady reports whether the canary Deployment runs c available pods of its
// template (none wanted: it has none).
func (l Live) canaryReady(c int32) bool {
	if c == 0 {
		return !l.CanaryExists || l.CanaryReplicas == 0
	}
	return l.CanaryExists && l.CanaryReplicas == c && l.CanaryAvailable >= c
}

// NewPlan returns what the children are in rollout state r of strategy s, given what
// is live at now.
func NewPlan(s *appv1.CanaryStrategy, r *appv1.RolloutStatus, l Live, now time.Time) Plan {
	p := Plan{StableHash: r.Stable.ReplicaSetHash}
	scaleDownDue := r.CanaryScaleDownAt == nil || !now.Before(r.CanaryScaleDownAt.Time)
	steps := int32(len(s.Steps))
	switch {
	case r.Canary == nil:
		p.atRest(l, scaleDownDue)
	case r.Phase == appv1.RolloutAborted:
		// All the traffic on the stable pods: through the HTTPRoute, the canary pods stay
		// for the abort's scale-down delay; without it, they go at once.
		p.CanaryReplicas = ptr.To[int32](0)
		if l.Gateway {
			p.Split, p.SplitServices = &Split{Stable: 100}, true
			if !scaleDownDue {
				p.CanaryReplicas, p.KeepCanary = nil, true
			}
		}
	case r.CurrentStepIndex >= steps && r.Stable.PodTemplateHash != r.Canary.PodTemplateHash:
		// Promotion, first stage: through the HTTPRoute, the canary grows to the stable's
		// count (autoscaled: the autoscaler's, never its minimum), then takes all the
		// traffic. Without it there is nothing to wait for: the state machine passes this
		// stage (toStep), and only a state written otherwise (by an earlier
		// version, or before the route stopped being an HTTPRoute) is here.
		if !l.Gateway {
			p.CanaryReplicas = ptr.To(l.CanaryReplicas)
			if !l.Autoscaled {
				p.StableReplicas = ptr.To(l.StableReplicas)
			}
			p.StepDone = true
			break
		}
		p.CanaryReplicas = ptr.To(l.N)
		w := int32(100)
		if !l.canaryReady(l.N) {
			w = min(w, max(l.CanaryWeight, 0))
		}
		p.Split, p.SplitServices = &Split{Stable: 100 - w, Canary: w}, true
		p.StepDone = l.canaryReady(l.N) && l.CanaryWeight == 100
	case r.CurrentStepIndex >= steps:
		// Promotion, last stage: the stable Deployment rolls to the canary's template,
		// with its own replicas, while the canary serves.
		p.CanaryReplicas = ptr.To(l.CanaryReplicas)
		if l.Gateway {
			p.Split, p.SplitServices = &Split{Canary: 100}, true
		}
		p.StableMustRun = true
	default:
		w := WeightAt(s, r.CurrentStepIndex)
		c := canaryShare(l.N, w)
		if l.Autoscaled && !l.Gateway {
			c = canaryPodShare(l.N, w)
		}
		ready := l.canaryReady(c)
		p.CanaryReplicas = &c
		if l.Autoscaled && !l.Gateway {
			// The autoscaler owns the stable's count: the stable keeps it, and the canary
			// is sized for its share of the pods (at most the stable's count).
			p.StepDone = ready
			break
		}
		if l.Gateway {
			p.gatewayStep(s, r.CurrentStepIndex, w, c, l, now)
			break
		}
		// The stable side is scaled down to its share only once the canary's pods are
		// available: the capacity never drops within a step.
		stable := stableShare(l.N, w)
		if !ready {
			stable = min(l.N, max(stable, l.StableReplicas))
		}
		p.StableReplicas = &stable
		p.StepDone = ready && l.StableReplicas == stableShare(l.N, w)
	}
	if l.Gateway {
		orderSplit(&p, l)
	}
	return p
}

// atRest plans the children of a state without a rollout (p.StableHash the state's),
// the canary's scale-down delay due or not.
func (p *Plan) atRest(l Live, scaleDownDue bool) {
	// No rollout. A promoted canary stays for its scale-down delay, the route back
	// on the App's Service (it runs the stable template). Through an HTTPRoute it is
	// then drained before it goes, as any other canary: the route sends everything
	// to the stable pods alone, through the stable Service, which selects them at
	// rest by the hash they run (Live.StableHash: the state's is a rollout's), and
	// the canary goes once the Gateway has applied that (CanaryDrained); then the
	// route goes back on the App's Service once the canary's pods are gone too (the
	// garbage collector deletes them after the Deployment, and they terminate), and the
	// split Services once it no longer names them (orderSplit). Deleted while the route
	// still sent to the App's Service, its pods answered 502 to a few requests as they
	// stopped (Traefik, test/e2e/analysis); so did the pods the Deployment left, when
	// the route went back as soon as the Deployment was gone (a whole make test).
	// While the stable rolls there is no one hash to drain to: the canary goes at once.
	canary := l.CanaryExists || l.CanaryPodsLeft
	drain := l.Gateway && canary && scaleDownDue
	if p.StableHash == "" && l.Gateway && (drain || l.CanaryWeight == 0) {
		p.StableHash = l.StableHash
	}
	p.KeepCanary = !scaleDownDue
	if drain && p.StableHash != "" {
		p.Split, p.KeepCanary = &Split{Stable: 100}, l.CanaryExists && !l.CanaryDrained
	}
	p.SplitServices = l.Gateway && (!scaleDownDue || canary)
	p.StepDone = true
}

// gatewayStep plans step k of strategy s, of weight w and c canary pods by the weight,
// through the HTTPRoute. A header route and a mirror (routing.go) may want more canary
// pods than the weight; like the weight, each goes live once they are available (the
// weight first once the Gateway has seen them: appliedWeight), and one in effect stays
// while a canary pod restarts.
func (p *Plan) gatewayStep(s *appv1.CanaryStrategy, k, w, c int32, l Live, now time.Time) {
	routing := RoutingAt(s, k)
	if l.MirrorUnsupported != "" {
		routing.MirrorPercent = 0
	}
	c = max(c, routedShare(l.N, w, routing))
	ready := l.canaryReady(c)
	p.CanaryReplicas = &c
	applied := l.appliedWeight(w, ready, now)
	p.Routing = routing
	if !ready {
		p.Routing = l.Routing
	}
	p.Split, p.SplitServices = &Split{Stable: 100 - applied, Canary: applied}, true
	p.StepDone = ready && l.CanaryWeight == w && l.Routing.Equal(routing)
}

// orderSplit orders the HTTPRoute's and the split Services' writes, which a sync makes
// at once: the route names the stable and canary Services only once both exist, and
// they go only once the live route no longer names them. A Gateway that reads a route
// naming a Service it cannot find answers 500 to the requests for it (the Gateway
// API's rule for an unresolved backend): Traefik did, for a second or two of a
// rollout's requests, when the route and the Services were written in the same sync.
// Until the Services exist the route stays on the App's Service, which selects every
// pod of the App: no canary pod starts until the route splits (one that runs stays as
// it is, unless the plan scales it to 0), else it would take its share of the App's
// Service's requests, unweighted (the step is not done while the live route does not
// split).
func orderSplit(p *Plan, l Live) {
	if p.Split != nil && l.CanaryWeight < 0 && !l.SplitServicesExist {
		p.Split, p.SplitServices = nil, true
		if p.CanaryReplicas == nil || *p.CanaryReplicas != 0 {
			p.CanaryReplicas, p.KeepCanary = nil, l.CanaryExists
		}
	}
	if l.CanaryWeight >= 0 && p.StableHash != "" {
		p.SplitServices = true
	}
}

// canaryShare is the canary's replicas at weight w of n: rounded up, at least one when
// w > 0 (one replica at 20% runs one canary pod).
func canaryShare(n, w int32) int32 {
	if n == 0 || w == 0 {
		return 0
	}
	return max(1, (n*w+99)/100)
}

// canaryPodShare is the canary's replicas at weight w beside a stable side of n pods
// that keeps them (an autoscaled App without an HTTPRoute: its autoscaler owns the
// stable's count): the pods that make w of all of them, rounded up, at least one when
// w > 0, at most n (from w = 50 on, half of the pods).
func canaryPodShare(n, w int32) int32 {
	if n == 0 || w == 0 {
		return 0
	}
	if w >= 50 {
		return n
	}
	return min(n, max(1, (n*w+(99-w))/(100-w)))
}

// stableShare is the stable's replicas at canary weight w of n, without an HTTPRoute:
// rounded up, never below one pod (an abort always finds a stable pod serving).
func stableShare(n, w int32) int32 {
	if n == 0 {
		return 0
	}
	return max(1, (n*(100-w)+99)/100)
}

// Due returns how long after now state r of strategy s changes by the clock alone: a
// pause's end, a setWeight step's progress deadline, a canary's scale-down; 0: never.
func Due(s *appv1.CanaryStrategy, r *appv1.RolloutStatus, now time.Time) time.Duration {
	var due []time.Time
	if r.CanaryScaleDownAt != nil && now.Before(r.CanaryScaleDownAt.Time) {
		due = append(due, r.CanaryScaleDownAt.Time)
	}
	if r.Canary != nil && r.Phase != appv1.RolloutAborted && r.CurrentStepIndex < int32(len(s.Steps)) && r.StepStartedAt != nil {
		step := s.Steps[r.CurrentStepIndex]
		switch {
		case step.SetWeight != nil, step.Analysis != nil, routingStep(step):
			// An analysis step's deadline ends one that stays inconclusive; its
			// measurements are due by their own intervals (pkg/analysis.NextDue).
			due = append(due, r.StepStartedAt.Add(time.Duration(ptr.Deref(s.ProgressDeadlineSeconds, 600))*time.Second))
		case step.Pause != nil && step.Pause.Duration != nil && !r.PausedByRequest:
			due = append(due, r.StepStartedAt.Add(step.Pause.Duration.Duration))
		}
	}
	var soonest time.Duration
	for _, at := range due {
		// A second late: the API stores times to the second.
		d := at.Sub(now) + time.Second
		if d > 0 && (soonest == 0 || d < soonest) {
			soonest = d
		}
	}
	return soonest
}

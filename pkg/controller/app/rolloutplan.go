package app

import (
	"time"

	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// What the children of an App are in a state of its canary rollout (rollout.go), as the
// children read it (syncInput.rollout): the stable Deployment's template and replicas,
// the canary Deployment, and the weights of the HTTPRoute between the stable and canary
// Services. planRollout computes the numbers from the state and what is live, purely;
// rolloutsync.go builds the objects.

// rolloutPlan is what the children are in the App's rollout state.
type rolloutPlan struct {
	// state is the rollout state the plan is of, as the App's status carries it; notes
	// are the Events and metrics of its transition when the sync's status write carries
	// it (deferRollout), told once that write is made.
	state *appv1.RolloutStatus
	notes []rolloutNote
	// stableTemplate is the pod template of the stable Deployment: the stable version's.
	// holdStable: it could not be built (the stable revision is gone), and the stable
	// Deployment is left as it is.
	stableTemplate *corev1ac.PodTemplateSpecApplyConfiguration
	holdStable     bool
	// stableReplicas is the stable Deployment's replica count; nil: the App's own
	// (spec.replicas, or none).
	stableReplicas *int32
	// canaryReplicas is the canary Deployment's replica count; nil: no canary
	// Deployment (pruned), unless keepCanary: it stays as it is.
	canaryReplicas *int32
	keepCanary     bool
	// canary is the canary Deployment when canaryReplicas is set (rolloutsync.go).
	canary *appsv1ac.DeploymentApplyConfiguration
	// split is how the HTTPRoute shares the traffic between the stable and canary
	// Services; nil: the App's Service alone. splitServices: the stable and canary
	// Services exist (also while the HTTPRoute may still send to them).
	split         *routeSplit
	splitServices bool
	// stableHash is the pod-template-hash the stable Service selects.
	stableHash string
	// stepDone: the children are where the state wants them (rolloutObservation); when
	// stableMustRun, only once the stable Deployment runs stableTemplate, rolled out
	// (the promotion's last stage).
	stepDone, stableMustRun bool
}

// routeSplit is the weights of the HTTPRoute's stable and canary Services.
type routeSplit struct {
	stable, canary int32
}

// rolloutLive is what the plan reads of the children as they are.
type rolloutLive struct {
	// gateway: the App's route is an HTTPRoute, which splits the traffic by weight;
	// otherwise the share is the replicas'.
	gateway bool
	// autoscaled: the App's HorizontalPodAutoscaler owns the stable Deployment's count
	// (spec.autoscaling): the plan never sets it, and n is that count.
	autoscaled bool
	// n is the App's replica count: spec.replicas, else (autoscaled, or no replicas) the
	// stable Deployment's.
	n int32
	// canaryExists: the canary Deployment exists; canaryReplicas is its spec's count,
	// canaryAvailable its available replicas once rolled out (0 before).
	canaryExists                    bool
	canaryReplicas, canaryAvailable int32
	// canaryWeight is the canary's weight on the live HTTPRoute; -1 when it does not
	// split.
	canaryWeight int32
	// stableReplicas is the live stable Deployment's spec count.
	stableReplicas int32
}

// canaryReady reports whether the canary Deployment runs c available pods of its
// template (none wanted: it has none).
func (l rolloutLive) canaryReady(c int32) bool {
	if c == 0 {
		return !l.canaryExists || l.canaryReplicas == 0
	}
	return l.canaryExists && l.canaryReplicas == c && l.canaryAvailable >= c
}

// planRollout returns what the children are in rollout state r of strategy s, given
// what is live at now.
func planRollout(s *appv1.CanaryStrategy, r *appv1.RolloutStatus, l rolloutLive, now time.Time) rolloutPlan {
	p := rolloutPlan{stableHash: r.Stable.ReplicaSetHash}
	scaleDownDue := r.CanaryScaleDownAt == nil || !now.Before(r.CanaryScaleDownAt.Time)
	steps := int32(len(s.Steps))
	switch {
	case r.Canary == nil:
		// No rollout. A promoted canary stays for its scale-down delay, the route back
		// on the App's Service (it runs the stable template). Any other canary goes at
		// once, and while it is there the route sends it nothing.
		p.keepCanary = !scaleDownDue
		if l.gateway && l.canaryExists && scaleDownDue {
			p.split = &routeSplit{stable: 100}
		}
		p.splitServices = l.gateway && (!scaleDownDue || l.canaryExists)
		p.stepDone = true
	case r.Phase == appv1.RolloutAborted:
		// All the traffic on the stable pods: through the HTTPRoute, the canary pods stay
		// for the abort's scale-down delay; without it, they go at once.
		p.canaryReplicas = ptr.To[int32](0)
		if l.gateway {
			p.split, p.splitServices = &routeSplit{stable: 100}, true
			if !scaleDownDue {
				p.canaryReplicas, p.keepCanary = nil, true
			}
		}
	case r.CurrentStepIndex >= steps && r.Stable.PodTemplateHash != r.Canary.PodTemplateHash:
		// Promotion, first stage: through the HTTPRoute, the canary grows to the stable's
		// count (autoscaled: the autoscaler's, never its minimum), then takes all the
		// traffic. Without it there is nothing to wait for: the state machine passes this
		// stage (machine.toStep), and only a state written otherwise (by an earlier
		// version, or before the route stopped being an HTTPRoute) is here.
		if !l.gateway {
			p.canaryReplicas = ptr.To(l.canaryReplicas)
			if !l.autoscaled {
				p.stableReplicas = ptr.To(l.stableReplicas)
			}
			p.stepDone = true
			break
		}
		p.canaryReplicas = ptr.To(l.n)
		w := int32(100)
		if !l.canaryReady(l.n) {
			w = min(w, max(l.canaryWeight, 0))
		}
		p.split, p.splitServices = &routeSplit{stable: 100 - w, canary: w}, true
		p.stepDone = l.canaryReady(l.n) && l.canaryWeight == 100
	case r.CurrentStepIndex >= steps:
		// Promotion, last stage: the stable Deployment rolls to the canary's template,
		// with its own replicas, while the canary serves.
		p.canaryReplicas = ptr.To(l.canaryReplicas)
		if l.gateway {
			p.split, p.splitServices = &routeSplit{canary: 100}, true
		}
		p.stableMustRun = true
	default:
		w := weightAt(s, r.CurrentStepIndex)
		c := canaryShare(l.n, w)
		if l.autoscaled && !l.gateway {
			c = canaryPodShare(l.n, w)
		}
		ready := l.canaryReady(c)
		p.canaryReplicas = &c
		if l.autoscaled && !l.gateway {
			// The autoscaler owns the stable's count: the stable keeps it, and the canary
			// is sized for its share of the pods (at most the stable's count).
			p.stepDone = ready
			break
		}
		if l.gateway {
			applied := w
			if !ready {
				applied = min(w, max(l.canaryWeight, 0))
			}
			p.split, p.splitServices = &routeSplit{stable: 100 - applied, canary: applied}, true
			p.stepDone = ready && l.canaryWeight == w
			break
		}
		// The stable side is scaled down to its share only once the canary's pods are
		// available: the capacity never drops within a step.
		stable := stableShare(l.n, w)
		if !ready {
			stable = min(l.n, max(stable, l.stableReplicas))
		}
		p.stableReplicas = &stable
		p.stepDone = ready && l.stableReplicas == stableShare(l.n, w)
	}
	return p
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

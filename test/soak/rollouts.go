package soak

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/app-controller/app-controller/internal/localcluster"
	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/test/harness"
)

// The rollouts and the autoscalers as the API server's audit log saw them: every
// status.rollout the controller wrote (apps/status, logged with the object it wrote),
// every Deployment it wrote (logged with the request: its template and replicas), every
// write of a Deployment's scale by anyone else (the HorizontalPodAutoscaler controller).
// localcluster.Options.AuditBodies asks for these bodies (AuditBodies).

// AuditBodies are the writes the soak's cluster logs with their bodies: the Apps'
// status as written (a few KB each, one per transition or condition change), the
// Deployments' requests (an apply: its template and replicas), the Events' requests.
// A cluster passed in Config.Cluster must be started with them.
func AuditBodies() []localcluster.AuditBody {
	return []localcluster.AuditBody{
		{Group: appv1.GroupVersion.Group, Resources: []string{resourceAppStatus}, Level: localcluster.AuditLevelRequestResponse},
		// A Deployment's scale as an autoscaler writes it: its count.
		{Group: groupApps, Resources: []string{"deployments", "deployments/scale"}, Level: localcluster.AuditLevelRequest},
		// An Event's patch (a repeat folded into it) carries the repeat's lastTimestamp:
		// when it was recorded (write.madeAt).
		{Group: "", Resources: []string{resourceEvents}, Level: localcluster.AuditLevelRequest},
		// The route-split canaries' weights (rollouts_gateway.go).
		{Group: groupGateway, Resources: []string{resourceHTTPRoutes}, Level: localcluster.AuditLevelRequest},
	}
}

// statusWrite is one write of an App's status by the controller.
type statusWrite struct {
	at         time.Time
	rv         int64
	app        string // namespace/name
	user       string
	steps      int32  // the App's canary steps then (0: no strategy)
	deployment string // its spec.deploymentTemplate.name
	analyzed   bool   // its canary has an analysis (analysis.go)
	rollout    *appv1.RolloutStatus
}

// deploymentWrite is one write of a Deployment: the controller's (with the template and
// replicas it carried) or an autoscaler's write of its scale.
type deploymentWrite struct {
	at              time.Time
	namespace, name string
	user            string
	// scale: a write of the scale subresource by another user than the controller's
	// (the HorizontalPodAutoscaler controller's).
	scale bool
	// replicas is whether the write carries spec.replicas (a scale's always does, when
	// its body was logged), count the count it carries; template the controller's
	// spec.template, canonical JSON ("" if it carries none).
	replicas bool
	count    int64
	template string
}

// bodies are the writes read with their bodies.
type bodies struct {
	status      []statusWrite
	deployments []deploymentWrite
	routes      []routeWrite
}

// add reads ev, a write of a controller's user (controller) or another's, into b.
func (b *bodies) add(ev harness.AuditEvent, user string, controller bool) error {
	if controller && routeBody(ev) {
		return b.addRoute(ev, user)
	}
	return b.addWrite(ev, user, controller)
}

// addWrite is add for the writes of Apps' statuses and Deployments.
func (b *bodies) addWrite(ev harness.AuditEvent, user string, controller bool) error {
	if ev.Code() >= 300 || ev.ObjectRef == nil {
		return nil
	}
	ref := ev.ObjectRef
	switch {
	case controller && ev.Resource() == resourceAppStatus && ref.APIGroup == appv1.GroupVersion.Group && len(ev.ResponseObject) > 0:
		var a appv1.App
		if err := json.Unmarshal(ev.ResponseObject, &a); err != nil {
			return fmt.Errorf("decoding the App written by %s at %s: %w", user, ev.StageTimestamp, err)
		}
		rv, _ := strconv.ParseInt(a.ResourceVersion, 10, 64)
		sw := statusWrite{at: ev.StageTimestamp, rv: rv, app: key(a.Namespace, a.Name), user: user, rollout: a.Status.Rollout}
		if a.Spec.Rollout != nil && a.Spec.Rollout.Canary != nil {
			sw.steps = int32(len(a.Spec.Rollout.Canary.Steps))
			sw.analyzed = a.Spec.Rollout.Canary.Analysis != nil
		}
		if a.Spec.DeploymentTemplate != nil {
			sw.deployment = a.Spec.DeploymentTemplate.Name
		}
		b.status = append(b.status, sw)
	case controller && ev.Resource() == resourceDeployments && ref.APIGroup == groupApps && len(ev.RequestObject) > 0:
		var body struct {
			Spec struct {
				Replicas *int64          `json:"replicas"`
				Template json.RawMessage `json:"template"`
			} `json:"spec"`
		}
		if err := json.Unmarshal(ev.RequestObject, &body); err != nil {
			return fmt.Errorf("decoding the Deployment written by %s at %s: %w", user, ev.StageTimestamp, err)
		}
		dw := deploymentWrite{at: ev.StageTimestamp, namespace: ref.Namespace, name: ref.Name, user: user, replicas: body.Spec.Replicas != nil}
		if body.Spec.Replicas != nil {
			dw.count = *body.Spec.Replicas
		}
		if len(body.Spec.Template) > 0 {
			var v any
			if err := json.Unmarshal(body.Spec.Template, &v); err != nil {
				return fmt.Errorf("decoding the template of Deployment %s/%s: %w", ref.Namespace, ref.Name, err)
			}
			canonical, _ := json.Marshal(v) // map keys sorted
			dw.template = string(canonical)
		}
		b.deployments = append(b.deployments, dw)
	case !controller && ev.Resource() == resourceDeployments+"/scale" && ref.APIGroup == groupApps && (ev.Verb == "update" || ev.Verb == verbPatch):
		dw := deploymentWrite{at: ev.StageTimestamp, namespace: ref.Namespace, name: ref.Name, user: user, scale: true}
		var body struct {
			Spec struct {
				Replicas *int64 `json:"replicas"`
			} `json:"spec"`
		}
		if len(ev.RequestObject) > 0 && json.Unmarshal(ev.RequestObject, &body) == nil && body.Spec.Replicas != nil {
			dw.replicas, dw.count = true, *body.Spec.Replicas
		}
		b.deployments = append(b.deployments, dw)
	}
	return nil
}

// RolloutChecks are the invariants of the canaries and the autoscalers, from the audit
// log, and what the run did of them.
type RolloutChecks struct {
	// StatusWrites is the number of the controller's status writes read with the
	// object written; RolloutWrites those of an App with a canary strategy.
	StatusWrites  int `json:"status_writes"`
	RolloutWrites int `json:"rollout_writes"`
	// Started, Promoted, Aborted, RolledBack count the transitions written: a rollout
	// started (or restarted toward a newer template), ended by its promotion, aborted,
	// ended at once by a change back (fast rollback); Requests the requests handled
	// (status.rollout.lastRequest changed).
	Started    int `json:"started"`
	Promoted   int `json:"promoted"`
	Aborted    int `json:"aborted"`
	RolledBack int `json:"rolled_back"`
	Requests   int `json:"requests"`
	// AnalyzedPromoted and AnalysisAborts: the rollouts of canaries with an analysis
	// promoted (their analysis passed or had not failed), and those aborted by it
	// (abortReason AnalysisFailed).
	AnalyzedPromoted int `json:"analyzed_promoted"`
	AnalysisAborts   int `json:"analysis_aborts"`
	// AnalysisPassedPromoted: of AnalyzedPromoted, those whose last status before the
	// promotion showed a measurement of the analysis passed.
	AnalysisPassedPromoted int `json:"analysis_passed_promoted"`
	// AutoscaledApps is the number of Apps that had spec.autoscaling in the run;
	// ScaleWrites the autoscalers' writes of a Deployment's scale; ReplicaWrites the
	// controller's writes that carried a Deployment's spec.replicas.
	AutoscaledApps int `json:"autoscaled_apps"`
	ScaleWrites    int `json:"scale_writes"`
	ReplicaWrites  int `json:"replica_writes"`
	// Jumps: a status.rollout written with a step that the state machine does not go to
	// from the one written before (of the same rollout: one step on, the promotion by
	// promote --full, the steps again after an abort by a request; a new rollout starts
	// at step 0). WeightDecreases: a canaryWeight written below the one before within a
	// rollout (an abort and the steps again after it aside). AbortsRestartedStable: a
	// write of an aborted rollout's stable Deployment, from the abort until the rollout
	// left Aborted, with another pod template than it had before the abort.
	// ReplicaFights: the controller wrote spec.replicas of a Deployment after an
	// autoscaler wrote its scale, without the App's autoscaling turned off or on in
	// between.
	Jumps                 []string `json:"jumps"`
	WeightDecreases       []string `json:"weight_decreases"`
	AbortsRestartedStable []string `json:"aborts_restarted_stable"`
	ReplicaFights         []string `json:"replica_fights"`
	// RouteWrites are the controller's writes of an HTTPRoute read with their body;
	// RouteSplits the times a route was split between a canary and its stable (the
	// rollouts through a Gateway). WeightDecreases also counts a split route's canary
	// weight written below the one before, but to 0 (checkRouteWeights).
	RouteWrites int `json:"route_writes"`
	RouteSplits int `json:"route_splits"`
}

// checkRollouts checks the status writes and Deployment writes of b; toggles are the
// times the driver turned each App's autoscaling on or off (by App).
func checkRollouts(b *bodies, toggles map[string][]toggle, autoscaled int, ownerOf func(ns, name string) string) *RolloutChecks {
	c := &RolloutChecks{StatusWrites: len(b.status), AutoscaledApps: autoscaled}
	byApp := map[string][]statusWrite{}
	for _, sw := range b.status {
		byApp[sw.app] = append(byApp[sw.app], sw)
	}
	apps := sortedKeys(byApp)
	for _, app := range apps {
		ws := byApp[app]
		// The order of the writes is their resourceVersions' (one etcd revision each).
		sort.SliceStable(ws, func(i, j int) bool { return ws[i].rv < ws[j].rv })
		for i, sw := range ws {
			if sw.steps > 0 {
				c.RolloutWrites++
			}
			if i == 0 {
				continue
			}
			c.transition(app, ws[i-1], sw)
		}
		c.checkAbortedStable(app, ws, b.deployments)
	}
	c.checkReplicaFights(b.deployments, toggles, ownerOf)
	c.checkRouteWeights(b.routes)
	return c
}

// transition checks the step and the weight of cur against prev, the status written
// before it, and counts what happened.
func (c *RolloutChecks) transition(app string, prev, cur statusWrite) {
	p, n := prev.rollout, cur.rollout
	if p == nil || n == nil {
		return
	}
	requested := n.LastRequest != p.LastRequest
	if requested {
		c.Requests++
	}
	pc, nc := canaryHash(p), canaryHash(n)
	at := fmt.Sprintf("%s at %s (rv %d, by %s)", app, cur.at.Format(stampMilli), cur.rv, cur.user)
	from := describeRollout(p)
	switch {
	case nc == "" && pc != "":
		// The rollout ended: promoted (the stable is the canary) or at once (a change
		// back to the stable or a recent one).
		if n.Stable != nil && n.Stable.PodTemplateHash == pc {
			c.Promoted++
			if cur.analyzed {
				c.AnalyzedPromoted++
				if analysisPassed(p) {
					c.AnalysisPassedPromoted++
				}
			}
		} else {
			c.RolledBack++
		}
		return
	case nc == "":
		return
	case nc != pc:
		c.Started++
		if n.CurrentStepIndex != 0 {
			c.Jumps = append(c.Jumps, fmt.Sprintf("%s: a new rollout (canary %s) written at step %d, from %s", at, nc, n.CurrentStepIndex, from))
		}
		return
	}
	// The same rollout.
	if n.Phase == appv1.RolloutAborted && p.Phase != appv1.RolloutAborted {
		c.Aborted++
		if n.AbortReason == appv1.ReasonAnalysisFailed {
			c.AnalysisAborts++
		}
	}
	d := n.CurrentStepIndex - p.CurrentStepIndex
	restart := p.Phase == appv1.RolloutAborted && n.Phase != appv1.RolloutAborted && n.CurrentStepIndex == 0 && requested
	switch {
	case d == 0, d == 1:
	case restart:
		c.Started++
	case requested && n.CurrentStepIndex == cur.steps && cur.steps > 0:
		// kubectl app promote --full.
	default:
		c.Jumps = append(c.Jumps, fmt.Sprintf("%s: step %d written after %s (%d steps)%s", at, n.CurrentStepIndex, from, cur.steps,
			map[bool]string{true: ", a request handled"}[requested]))
	}
	if n.CanaryWeight < p.CanaryWeight && n.Phase != appv1.RolloutAborted && p.Phase != appv1.RolloutAborted && !restart {
		c.WeightDecreases = append(c.WeightDecreases, fmt.Sprintf("%s: weight %d written after %s", at, n.CanaryWeight, from))
	}
}

// canaryHash is the pod template hash of r's canary, "" without one.
func canaryHash(r *appv1.RolloutStatus) string {
	if r.Canary == nil {
		return ""
	}
	return r.Canary.PodTemplateHash
}

// describeRollout says where a rollout is.
func describeRollout(r *appv1.RolloutStatus) string {
	return fmt.Sprintf("%s step %d weight %d canary %s", r.Phase, r.CurrentStepIndex, r.CanaryWeight, canaryHash(r))
}

// checkAbortedStable checks that the stable Deployment of each aborted rollout of app
// (ws: its status writes in order) was written with no other template than before the
// abort, from the abort until the rollout left Aborted.
func (c *RolloutChecks) checkAbortedStable(app string, ws []statusWrite, deployments []deploymentWrite) {
	ns, _, _ := strings.Cut(app, "/")
	for i := 1; i < len(ws); i++ {
		p, n := ws[i-1].rollout, ws[i].rollout
		if p == nil || n == nil || n.Phase != appv1.RolloutAborted || p.Phase == appv1.RolloutAborted {
			continue
		}
		from, stable := ws[i].at, ws[i].deployment
		until := time.Time{}
		for _, later := range ws[i+1:] {
			if later.rollout == nil || later.rollout.Phase != appv1.RolloutAborted {
				until = later.at
				break
			}
		}
		before := ""
		for _, dw := range deployments {
			if dw.scale || dw.namespace != ns || dw.name != stable || dw.template == "" {
				continue
			}
			switch {
			case dw.at.Before(from):
				before = dw.template
			case (until.IsZero() || dw.at.Before(until)) && before != "" && dw.template != before:
				c.AbortsRestartedStable = append(c.AbortsRestartedStable, fmt.Sprintf("%s: its stable Deployment %s written with another pod template at %s, during the abort written at %s",
					app, stable, dw.at.Format(stampMilli), from.Format(stampMilli)))
			}
		}
	}
}

// toggle is the driver's change of an App's autoscaling: at the moment it sent it, on
// (spec.autoscaling set) or off (deploymentTemplate.replicas back).
type toggle struct {
	at time.Time
	on bool
}

// toggles returns, by App, when the driver turned its autoscaling on or off, in the order
// of the operations. The caller holds w.mu.
func (w *world) toggles() map[string][]toggle {
	out := map[string][]toggle{}
	for _, op := range w.ops {
		if op.kind == opAutoscale && op.spec != nil {
			out[op.app] = append(out[op.app], toggle{at: op.at, on: op.spec.Autoscaling != nil})
		}
	}
	return out
}

// checkReplicaFights finds the controller's writes of a Deployment's spec.replicas
// made after an autoscaler wrote its scale while the owner App's autoscaling stayed on:
// no change of it (toggles) between the two writes, and the last change before the
// controller's write (if any) turned it on. A write once the driver turned autoscaling
// off is the handover (the App's replicas taken back with force), even after a scale
// write: the autoscaler, not deleted yet, can write one more from its own cache after
// the driver sent the change (the smoke's a00017 and a00027, 0.3-0.6 s apart).
func (c *RolloutChecks) checkReplicaFights(deployments []deploymentWrite, toggles map[string][]toggle, ownerOf func(ns, name string) string) {
	lastScale := map[string]time.Time{}
	ordered := append([]deploymentWrite(nil), deployments...)
	sort.SliceStable(ordered, func(i, j int) bool { return ordered[i].at.Before(ordered[j].at) })
	for _, dw := range ordered {
		k := key(dw.namespace, dw.name)
		switch {
		case dw.scale:
			c.ScaleWrites++
			lastScale[k] = dw.at
		case dw.replicas:
			c.ReplicaWrites++
			h, ok := lastScale[k]
			if !ok {
				continue
			}
			toggled, on := false, true
			for _, t := range toggles[ownerOf(dw.namespace, dw.name)] {
				if t.at.Before(dw.at) {
					on = t.on
					if t.at.After(h) {
						toggled = true
					}
				}
			}
			if !toggled && on {
				c.ReplicaFights = append(c.ReplicaFights, fmt.Sprintf("Deployment %s: spec.replicas written by %s at %s, its scale written by an autoscaler at %s and the App's autoscaling on since",
					k, dw.user, dw.at.Format(stampMilli), h.Format(stampMilli)))
			}
		}
	}
}

// checkRollouts checks b against what the driver did: when it turned each App's
// autoscaling on or off, how many Apps were autoscaled.
func (w *world) checkRollouts(b *bodies) *RolloutChecks {
	w.mu.Lock()
	toggles := w.toggles()
	autoscaled := 0
	for _, r := range w.apps {
		if r.kind == kindAutoscaled {
			autoscaled++
		}
	}
	w.mu.Unlock()
	return checkRollouts(b, toggles, autoscaled, func(ns, name string) string {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.ownerOf(ns, name)
	})
}

package plugin

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// httpRouteResource is read by `kubectl app status` to show the weights of a rollout on
// the App's HTTPRoute.
var httpRouteResource = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "httproutes"}

// RolloutView is what `kubectl app status` shows of an App's canary rollout beside
// status.rollout: the stable and canary Deployments as they are, and the backends of
// the App's HTTPRoute and their weights.
type RolloutView struct {
	// Stable and Canary are the Deployments the App controls; nil when not, and the
	// note says why (the canary Deployment exists only during a rollout).
	Stable, Canary         *appsv1.Deployment
	StableNote, CanaryNote string
	// Backends are the Services the App's HTTPRoute sends its traffic to, with their
	// weights; none without an HTTPRoute.
	Backends []Backend
	// HeaderRoute: the App's HTTPRoute has a rule whose one backend is the canary's
	// Service (a setHeaderRoute step's); Mirror is the percent of the requests its first
	// rule mirrors to the canary's Service (a setMirrorRoute step's), 0: none.
	HeaderRoute bool
	Mirror      int64
}

// Backend is a Service an HTTPRoute sends traffic to, and its weight.
type Backend struct {
	Service string
	Weight  int64
}

// getRolloutView reads what the rollout of app runs.
func getRolloutView(ctx context.Context, c Clients, app *appv1.App) *RolloutView {
	v := &RolloutView{}
	if t := app.Spec.DeploymentTemplate; t != nil {
		v.Stable = &appsv1.Deployment{}
		if v.StableNote = getControlled(ctx, c, deploymentResource, app, t.Name, v.Stable); v.StableNote != "" {
			v.Stable = nil
		}
		v.Canary = &appsv1.Deployment{}
		if v.CanaryNote = getControlled(ctx, c, deploymentResource, app, t.Name+appv1.CanarySuffix, v.Canary); v.CanaryNote != "" {
			v.Canary = nil
		}
	}
	if app.Status.Route != "" {
		// An Ingress of the same name is not found here: it has no weights.
		if u, err := c.Dynamic.Resource(httpRouteResource).Namespace(app.Namespace).Get(ctx, app.Status.Route, metav1.GetOptions{}); err == nil {
			v.Backends = routeBackends(u)
			v.HeaderRoute, v.Mirror = routeRouting(u)
		}
	}
	return v
}

// routeBackends returns the backends of the first rule of an HTTPRoute (the App's
// HTTPRoute has one rule), weight 1 when unset, as the Gateway API defaults it.
func routeBackends(route *unstructured.Unstructured) []Backend {
	rules, _, _ := unstructured.NestedSlice(route.Object, "spec", "rules")
	if len(rules) == 0 {
		return nil
	}
	rule, _ := rules[0].(map[string]any)
	refs, _, _ := unstructured.NestedSlice(rule, "backendRefs")
	var out []Backend
	for _, r := range refs {
		ref, _ := r.(map[string]any)
		name, _, _ := unstructured.NestedString(ref, "name")
		weight, found, _ := unstructured.NestedInt64(ref, "weight")
		if !found {
			weight = 1
		}
		out = append(out, Backend{Service: name, Weight: weight})
	}
	return out
}

// routeRouting reads the canary's header route and mirror on an HTTPRoute: a rule after
// the first whose one backend is a canary Service, and the percent of a RequestMirror
// filter of the first rule to a canary Service (100 when unset, as the Gateway API
// defaults it).
func routeRouting(route *unstructured.Unstructured) (header bool, mirror int64) {
	rules, _, _ := unstructured.NestedSlice(route.Object, "spec", "rules")
	for i, r := range rules {
		rule, _ := r.(map[string]any)
		if i == 0 {
			filters, _, _ := unstructured.NestedSlice(rule, "filters")
			for _, f := range filters {
				filter, _ := f.(map[string]any)
				name, _, _ := unstructured.NestedString(filter, "requestMirror", "backendRef", "name")
				if !strings.HasSuffix(name, appv1.CanarySuffix) {
					continue
				}
				mirror = 100
				if p, found, _ := unstructured.NestedInt64(filter, "requestMirror", "percent"); found {
					mirror = p
				}
			}
			continue
		}
		refs, _, _ := unstructured.NestedSlice(rule, "backendRefs")
		if len(refs) == 1 {
			ref, _ := refs[0].(map[string]any)
			if name, _, _ := unstructured.NestedString(ref, "name"); strings.HasSuffix(name, appv1.CanarySuffix) {
				header = true
			}
		}
	}
	return header, mirror
}

// routingLine says what the current step asks of the HTTPRoute beside the weights (the
// last setHeaderRoute and setMirrorRoute at or before it) and whether the live route
// has it; "" when neither asks nor the route has any.
func routingLine(steps []appv1.CanaryStep, r *appv1.RolloutStatus, v *RolloutView) string {
	var header *appv1.HeaderRoute
	var mirror int32
	if r.Phase != appv1.RolloutAborted && int(r.CurrentStepIndex) < len(steps) {
		for _, s := range steps[:r.CurrentStepIndex+1] {
			if s.SetHeaderRoute != nil {
				header = s.SetHeaderRoute
			}
			if s.SetMirrorRoute != nil {
				mirror = ptr.Deref(s.SetMirrorRoute.Percent, 0)
			}
		}
	}
	if header != nil && len(header.Match) == 0 {
		header = nil
	}
	if header == nil && mirror == 0 && !v.HeaderRoute && v.Mirror == 0 {
		return ""
	}
	state := func(want, live bool) string {
		switch {
		case want && live:
			return " (in effect)"
		case want:
			return " (not on the HTTPRoute yet)"
		}
		return " (still on the HTTPRoute)"
	}
	var parts []string
	switch {
	case header != nil:
		parts = append(parts, "requests matching "+strings.TrimPrefix(header.String(), "header route ")+" to the canary"+state(true, v.HeaderRoute))
	case v.HeaderRoute:
		parts = append(parts, "a header route to the canary"+state(false, true))
	}
	switch {
	case mirror > 0:
		parts = append(parts, fmt.Sprintf("%d%% mirrored to the canary, its answers dropped", mirror)+state(true, int64(mirror) == v.Mirror))
	case v.Mirror > 0:
		parts = append(parts, fmt.Sprintf("%d%% mirrored to the canary", v.Mirror)+state(false, true))
	}
	return strings.Join(parts, "; ")
}

// printRollout writes the rollout lines of `kubectl app status`: the phase and step
// with status.rollout's message, the steps, the traffic split as it is, and the stable
// and canary versions with their Deployments.
func printRollout(w io.Writer, app *appv1.App, v *RolloutView) {
	r := app.Status.Rollout
	if r == nil {
		fmt.Fprintf(w, "Rollout:\tnot reported by the controller yet\n")
		return
	}
	if s := app.Spec.Rollout; s != nil && s.BlueGreen != nil {
		printBlueGreen(w, app, v)
		return
	}
	var steps []appv1.CanaryStep
	if s := app.Spec.Rollout; s != nil && s.Canary != nil {
		steps = s.Canary.Steps
	}
	line := string(r.Phase)
	if r.Canary != nil {
		if int(r.CurrentStepIndex) >= len(steps) {
			line += ", past the last step: promoting"
		} else {
			line += fmt.Sprintf(" at step %d of %d", r.CurrentStepIndex+1, len(steps))
		}
	}
	if r.PausedByRequest {
		line += " (kubectl app pause)"
	}
	if r.Message != "" && r.Phase != appv1.RolloutAborted { // the Aborted line says why
		line += ": " + r.Message
	}
	fmt.Fprintf(w, "Rollout:\t%s\n", oneLine(line))
	if r.Phase == appv1.RolloutAborted && r.AbortMessage != "" {
		fmt.Fprintf(w, "Aborted:\t%s\n", oneLine(r.AbortReason+": "+r.AbortMessage))
	}
	if len(steps) > 0 {
		fmt.Fprintf(w, "Steps:\t%s\n", stepsLine(steps, r))
	}
	for _, c := range r.Analysis {
		fmt.Fprintf(w, "Check:\t%s\n", oneLine(checkLine(c)))
	}
	if r.Canary != nil {
		fmt.Fprintf(w, "Traffic:\t%s\n", trafficLine(app, v))
		if line := routingLine(steps, r, v); line != "" {
			fmt.Fprintf(w, "Routing:\t%s\n", oneLine(line))
		}
	}
	fmt.Fprintf(w, "Stable:\t%s\n", versionLine(r.Stable, v.Stable, v.StableNote))
	if r.Canary != nil || v.Canary != nil {
		fmt.Fprintf(w, "Canary:\t%s\n", versionLine(r.Canary, v.Canary, v.CanaryNote))
	}
}

// checkLine says where a check of the rollout's analysis stands: the template its query
// came from, its last measurement (value, threshold, when), its counts, and what the
// measurement said; or why it was not measured (its template missing).
func checkLine(c appv1.CheckStatus) string {
	where := fmt.Sprintf("step %d", c.Step+1)
	if c.Step < 0 {
		where = "background"
	}
	return checkLineAt(c, where)
}

// checkLineAt is checkLine for a check that runs where ("step 2", "background", "before
// the switch").
func checkLineAt(c appv1.CheckStatus, where string) string {
	if c.Template != "" {
		where += ", " + c.Template
	}
	line := fmt.Sprintf("%s (%s): ", c.Name, where)
	if c.Reason != "" {
		if c.Passed+c.Failed+c.Inconclusive > 0 {
			line += fmt.Sprintf("%d passed, %d failed, %d inconclusive; ", c.Passed, c.Failed, c.Inconclusive)
		}
		return line + "not measured now: " + strings.TrimPrefix(c.Message, "check "+c.Name+": ")
	}
	if c.MeasuredAt == nil {
		return line + "not measured yet"
	}
	line += string(c.Phase)
	if c.Value != "" {
		line += " " + c.Value
	}
	if c.Threshold != "" {
		line += fmt.Sprintf(" (threshold %s)", c.Threshold)
	}
	line += fmt.Sprintf(" at %s; %d passed, %d failed, %d inconclusive", c.MeasuredAt.UTC().Format(time.RFC3339), c.Passed, c.Failed, c.Inconclusive)
	if c.Message != "" {
		line += ": " + c.Message
	}
	return line
}

// stepsLine lists the steps, marking those done and the current one.
func stepsLine(steps []appv1.CanaryStep, r *appv1.RolloutStatus) string {
	names := make([]string, len(steps))
	for i, s := range steps {
		names[i] = s.String()
	}
	return progressLine(names, r)
}

// progressLine lists the steps (or a blue-green rollout's stages) named names, marking
// those done and the current one of rollout r.
func progressLine(names []string, r *appv1.RolloutStatus) string {
	parts := make([]string, len(names))
	for i, name := range names {
		parts[i] = fmt.Sprintf("%d %s", i+1, name)
		if r.Canary == nil {
			continue
		}
		switch {
		case int32(i) < r.CurrentStepIndex:
			parts[i] += " (done)"
		case int32(i) == r.CurrentStepIndex:
			parts[i] += " (current)"
		}
	}
	return strings.Join(parts, ", ")
}

// trafficLine says how the traffic is split now: the weights on the App's HTTPRoute, or,
// without one, the share of the ready pods behind the App's Service.
func trafficLine(app *appv1.App, v *RolloutView) string {
	want := fmt.Sprintf("(the step asks for %d%%)", app.Status.Rollout.CanaryWeight)
	if len(v.Backends) > 0 {
		var total int64
		parts := make([]string, 0, len(v.Backends))
		for _, b := range v.Backends {
			total += b.Weight
			parts = append(parts, fmt.Sprintf("%s %d", b.Service, b.Weight))
		}
		canary := int64(0)
		for _, b := range v.Backends {
			if strings.HasSuffix(b.Service, appv1.CanarySuffix) {
				canary = b.Weight
			}
		}
		share := int64(0)
		if total > 0 {
			share = canary * 100 / total
		}
		return fmt.Sprintf("canary %d%% by the weights of HTTPRoute %s: %s %s", share, app.Status.Route, strings.Join(parts, ", "), want)
	}
	var stable, canary int32
	if v.Stable != nil {
		stable = v.Stable.Status.ReadyReplicas
	}
	if v.Canary != nil {
		canary = v.Canary.Status.ReadyReplicas
	}
	share := int32(0)
	if stable+canary > 0 {
		share = canary * 100 / (stable + canary)
	}
	return fmt.Sprintf("canary %d%% by ready pods behind the App's Service: %d canary, %d stable %s", share, canary, stable, want)
}

// versionLine describes a version of the rollout and the Deployment that runs it:
// "web-6b7c9d5f4e: Deployment web (image nginx:1.27): 3 desired, 3 ready".
func versionLine(version *appv1.RolloutVersion, d *appsv1.Deployment, note string) string {
	line := noValue
	if version != nil && version.Revision != "" {
		line = "revision " + version.Revision
	}
	if d == nil {
		return oneLine(line + "; Deployment " + note)
	}
	image := noValue
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == appv1.ContainerName {
			image = c.Image
		}
	}
	return oneLine(fmt.Sprintf("%s: Deployment %s (image %s): %d desired, %d updated, %d ready", line, d.Name, image,
		ptr.Deref(d.Spec.Replicas, 1), d.Status.UpdatedReplicas, d.Status.ReadyReplicas))
}

package app

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1ac "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/rollout"
)

// A canary step's header route and mirror (setHeaderRoute, setMirrorRoute;
// rollout.Routing) are parts of the App's HTTPRoute while the rollout splits it: the
// header route a second rule, the paths of the first with the header matches, whose
// one backend is the canary's Service (a Gateway prefers the rule with more header
// matches, whatever the order: the weighted rule stays the first, which canaryWeight
// reads); the mirror a RequestMirror filter of the weighted rule to the canary's
// Service, with its percent. Both go with the split. What the live route says of them
// is read with the rest of the rollout's observation (rolloutobserve.go: liveRouting).

// features of the Gateway API that a mirror needs in a GatewayClass's
// status.supportedFeatures.
const (
	featureRequestMirror           = "HTTPRouteRequestMirror"
	featureRequestPercentageMirror = "HTTPRouteRequestPercentageMirror"
)

// canaryRouting adds routing's mirror to weighted, the HTTPRoute's weighted rule, and
// returns the rule of its header route (nil: none): the canary's Service canary, at
// port, for paths.
func canaryRouting(weighted *gatewayv1ac.HTTPRouteRuleApplyConfiguration, canary string, port int32,
	paths []appv1.RoutePath, routing rollout.Routing) *gatewayv1ac.HTTPRouteRuleApplyConfiguration {
	if routing.MirrorPercent > 0 {
		weighted.WithFilters(gatewayv1ac.HTTPRouteFilter().
			WithType(gatewayv1.HTTPRouteFilterRequestMirror).
			WithRequestMirror(gatewayv1ac.HTTPRequestMirrorFilter().
				WithBackendRef(gatewayv1ac.BackendObjectReference().WithName(gatewayv1.ObjectName(canary)).WithPort(port)).
				WithPercent(routing.MirrorPercent)))
	}
	if len(routing.Header) == 0 {
		return nil
	}
	rule := gatewayv1ac.HTTPRouteRule().
		WithBackendRefs(gatewayv1ac.HTTPBackendRef().WithName(gatewayv1.ObjectName(canary)).WithPort(port))
	for _, p := range paths {
		match := gatewayv1.PathMatchPathPrefix
		if p.Type == "Exact" {
			match = gatewayv1.PathMatchExact
		}
		m := gatewayv1ac.HTTPRouteMatch().WithPath(gatewayv1ac.HTTPPathMatch().WithType(match).WithValue(p.Path))
		for _, h := range routing.Header {
			m.WithHeaders(gatewayv1ac.HTTPHeaderMatch().WithType(ptr.Deref(h.Type, gatewayv1.HeaderMatchExact)).WithName(h.Name).WithValue(h.Value))
		}
		rule.WithMatches(m)
	}
	return rule
}

// routing returns the header route and mirror of the HTTPRoute in plan p; none without
// a plan.
func (p *rolloutPlan) routing() rollout.Routing {
	if p == nil {
		return rollout.Routing{}
	}
	return p.Routing
}

// mirrorCheck returns why the Gateways of app's route cannot do the mirror of rollout
// state r of strategy s (Live.MirrorUnsupported); "" when r mirrors nothing (no running
// step that mirrors, or no HTTPRoute), or they can.
func (c *Controller) mirrorCheck(ctx context.Context, app *appv1.App, s *appv1.CanaryStrategy, r *appv1.RolloutStatus, l rollout.Live) string {
	if !l.Gateway || r == nil || r.Canary == nil || r.Phase == appv1.RolloutAborted {
		return ""
	}
	m := rollout.RoutingAt(s, r.CurrentStepIndex).MirrorPercent
	if m == 0 {
		return ""
	}
	return c.mirrorUnsupported(ctx, app, m)
}

// mirrorUnsupported says why the Gateways of app's route cannot mirror percent of the
// requests: the first whose GatewayClass lists its supported features
// (status.supportedFeatures) without HTTPRouteRequestMirror, or, below 100%,
// HTTPRouteRequestPercentageMirror; or that the controller cannot read a Gateway or its
// class (not allowed to: a controller that watches some namespaces only), so cannot
// tell. "" when they all list it, or a Gateway or its class does not exist (nothing
// routes through it), or a class lists nothing: the Gateway then reports what it does
// with the filter in the HTTPRoute's status, if anything. A Gateway that does not support
// the filter may answer the whole rule with errors (Traefik 3.6 answers 500): the mirror
// is never written to one that says so, nor to one the controller cannot read.
func (c *Controller) mirrorUnsupported(ctx context.Context, app *appv1.App, percent int32) string {
	if c.gatewayClient == nil {
		return ""
	}
	want := []string{featureRequestMirror}
	if percent < 100 {
		want = append(want, featureRequestPercentageMirror)
	}
	for _, p := range c.route.parents(app) {
		ns := p.Namespace
		if ns == "" {
			ns = app.Namespace
		}
		gw, err := c.gatewayClient.GatewayV1().Gateways(ns).Get(ctx, p.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return fmt.Sprintf("cannot tell whether Gateway %s supports mirroring: reading it: %v", p.String(app.Namespace), err)
		}
		class, err := c.gatewayClient.GatewayV1().GatewayClasses().Get(ctx, string(gw.Spec.GatewayClassName), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return fmt.Sprintf("cannot tell whether Gateway %s supports mirroring: reading its GatewayClass %s: %v", p.String(app.Namespace), gw.Spec.GatewayClassName, err)
		}
		features := class.Status.SupportedFeatures
		if len(features) == 0 {
			continue
		}
		var missing []string
		for _, f := range want {
			if !slices.ContainsFunc(features, func(s gatewayv1.SupportedFeature) bool { return string(s.Name) == f }) {
				missing = append(missing, f)
			}
		}
		if len(missing) > 0 {
			return fmt.Sprintf("Gateway %s (GatewayClass %s, controller %s) does not support mirroring %d%% of the requests: its class's supportedFeatures lack %s",
				p.String(app.Namespace), class.Name, class.Spec.ControllerName, percent, strings.Join(missing, " and "))
		}
	}
	return ""
}

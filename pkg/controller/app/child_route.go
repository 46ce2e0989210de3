package app

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1ac "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
	"github.com/app-controller/app-controller/pkg/rollout"
)

// An App's route (spec.route) publishes its Service under hosts and paths. It is one
// child of two shapes, named as the App (no other App can claim that name), owned by
// it: an Ingress, or, with parentRefs (or, with --default-gateway, a route that asks for
// neither TLS nor an ingress class), a Gateway API HTTPRoute attached to those Gateways.
// The shape the route is not is pruned. Whether each Gateway accepted the HTTPRoute is
// read back from its status (routeParentsStatus). The route reports RouteAccepted,
// which keeps the App from Ready unless True: refused when a host is held by another
// namespace (routehosts.go), when the route cannot be written (a port the App's Service
// does not have, the API server's refusal), or when its Gateway refused it; pending
// while a Gateway has not answered.

// routeChild is the App's route.
type routeChild struct {
	ingresses *childReconciler[*networkingv1.Ingress, *networkingv1ac.IngressApplyConfiguration]
	// httpRoutes is nil when the cluster does not serve the Gateway API: a route that
	// asks for an HTTPRoute is then refused (GatewayAPIUnavailable).
	httpRoutes *childReconciler[*gatewayv1.HTTPRoute, *gatewayv1ac.HTTPRouteApplyConfiguration]
	// defaultGateway is the parent of routes that name none (Options.DefaultGateway).
	defaultGateway *appv1.GatewayRef
	// sharedNamespaces may share route hosts among themselves (routehosts.go).
	sharedNamespaces sets.Set[string]
}

// newRouteChild wires the Ingress informers and, when the cluster serves the Gateway
// API, the HTTPRoute informers, with the host index and handler of each (routehosts.go).
func newRouteChild(c *Controller, inf Informers, opts Options) (appChild, error) {
	r := &routeChild{defaultGateway: opts.DefaultGateway, sharedNamespaces: sets.New(opts.SharedNamespaces...)}
	c.route = r
	var err error
	r.ingresses, err = newChildReconciler[*networkingv1.Ingress](c, "Ingress", inf.Ingresses.Informer(), inf.UnmanagedIngresses.Informer(),
		c.kubeClient.NetworkingV1().Ingresses, networkingv1ac.Ingress)
	if err != nil {
		return nil, err
	}
	if err := c.indexRouteHosts(inf.Ingresses.Informer()); err != nil {
		return nil, err
	}
	if inf.HTTPRoutes == nil {
		return r, nil
	}
	r.httpRoutes, err = newChildReconciler[*gatewayv1.HTTPRoute](c, "HTTPRoute", inf.HTTPRoutes.Informer(), inf.UnmanagedHTTPRoutes.Informer(),
		opts.GatewayClient.GatewayV1().HTTPRoutes, gatewayv1ac.HTTPRoute)
	if err != nil {
		return nil, err
	}
	return r, c.indexRouteHosts(inf.HTTPRoutes.Informer())
}

// claim is "": the route is named as the App, a name no other App claims.
func (r *routeChild) claim(*appv1.App) string { return "" }

// sync writes the route of app in its shape, prunes the other shape, and reports
// status.route and RouteAccepted.
func (r *routeChild) sync(ctx context.Context, app *appv1.App, in *syncInput) (childOutcome, error) {
	parents := r.parents(app)
	refused, err := r.refusal(app)
	if err != nil {
		return childOutcome{}, err
	}
	var (
		ingress   *networkingv1ac.IngressApplyConfiguration
		httpRoute *gatewayv1ac.HTTPRouteApplyConfiguration
		invalid   string
	)
	switch {
	case app.Spec.Route == nil || app.Spec.ServiceTemplate == nil || refused != "":
	case parents != nil && r.httpRoutes == nil:
		// No Gateway API to write an HTTPRoute to (accepted says so).
	default:
		if _, err := routePort(app); err != nil {
			invalid = err.Error() // the same check for both shapes
			break
		}
		if parents == nil {
			if ingress, err = DesiredRoute(app); err != nil {
				return childOutcome{}, fmt.Errorf("building the route of App %s/%s: %w", app.Namespace, app.Name, err)
			}
		} else if httpRoute, err = desiredHTTPRoute(app, parents, in.rollout.routeSplit(), in.rollout.routing()); err != nil {
			invalid = err.Error()
		}
	}
	ingressName, httpRouteName := "", ""
	if ingress != nil {
		ingressName = app.Name
	}
	if httpRoute != nil {
		httpRouteName = app.Name
	}
	ing, ingErr := r.ingresses.reconcile(ctx, app, ingressName, ingress, r.claim(app))
	var (
		hr    childResult[*gatewayv1.HTTPRoute]
		hrErr error
	)
	if r.httpRoutes != nil {
		// A rollout moves the weights at one generation of the App: steps, not repairs.
		hr, hrErr = r.httpRoutes.reconcileWith(ctx, app, httpRouteName, httpRoute, r.claim(app), reconcileOptions{planned: in.rollout != nil})
	}
	for _, err := range []*error{&ingErr, &hrErr} {
		if apierrors.IsInvalid(*err) {
			// The API server refused the route's Ingress or HTTPRoute: the message
			// names the field; a change of the App queues it again.
			invalid, *err = (*err).Error(), nil
		}
	}
	if err := errors.Join(ingErr, hrErr); err != nil {
		return childOutcome{}, err
	}

	out := ing.outcome()
	if hr.name != "" {
		out = hr.outcome()
	}
	out.changed = ing.changed || hr.changed
	out.conflict = ing.conflict + hr.conflict // one of them at most: the other is not wanted
	status, routed := r.accepted(app, parents, refused, invalid, ing, hr)
	if status != nil && status.status == metav1.ConditionTrue && in.rollout != nil && in.rollout.PreviewRoute && previewRouteName(app) != "" {
		// The preview's HTTPRoute (child_previewroute.go) is not written while another
		// namespace holds one of its hosts: the App's route is, and says so.
		held, err := r.heldHost(app, previewRouteName(app), previewHosts(app))
		if err != nil {
			return childOutcome{}, err
		}
		if held != "" {
			status = &childCondition{conditionType: appv1.ConditionRouteAccepted, status: metav1.ConditionFalse, reason: appv1.ReasonHostConflict, warn: true,
				message: fmt.Sprintf("%s, one of rollout.blueGreen.previewHosts: HTTPRoute %q of the preview is not written until that namespace lets it go (the App's %s)",
					held, previewRouteName(app), strings.TrimPrefix(status.message, "HTTPRoute "))}
		}
	}
	if status != nil {
		out.conditions = []childCondition{*status}
	}
	out.report = func(status *appv1.AppStatus) { status.Route = routed }
	return out, nil
}

// accepted returns the RouteAccepted condition of app's route and the name of the
// object that routes it, from what syncing it found: refused (a host held by another
// namespace, or a Gateway that did not accept the HTTPRoute, with a Warning Event when
// that is new), invalid (the App's Service has no such port, the API server's refusal),
// no Gateway API, a name conflict, waiting for a Gateway, or routed. Without a route the
// condition goes; nil leaves it as it is.
func (r *routeChild) accepted(app *appv1.App, parents []appv1.GatewayRef, refused, invalid string,
	ing childResult[*networkingv1.Ingress], hr childResult[*gatewayv1.HTTPRoute]) (*childCondition, string) {
	spec := app.Spec.Route
	if spec == nil {
		return &childCondition{conditionType: appv1.ConditionRouteAccepted}, ""
	}
	cond := func(s metav1.ConditionStatus, reason, msg string) *childCondition {
		return &childCondition{conditionType: appv1.ConditionRouteAccepted, status: s, reason: reason, message: msg}
	}
	hosts := make([]string, 0, len(spec.Hosts))
	for _, h := range spec.Hosts {
		hosts = append(hosts, string(h))
	}
	gateways := make([]string, 0, len(parents))
	for _, p := range parents {
		gateways = append(gateways, p.String(app.Namespace))
	}
	switch {
	case refused != "":
		c := cond(metav1.ConditionFalse, appv1.ReasonHostConflict, refused)
		c.warn = true
		return c, ""
	case invalid != "":
		return cond(metav1.ConditionFalse, appv1.ReasonRouteRefused, invalid), ""
	case parents != nil && r.httpRoutes == nil:
		return cond(metav1.ConditionFalse, appv1.ReasonGatewayAPIUnavailable, fmt.Sprintf(
			"the route attaches to Gateway %s, but the cluster did not serve gateway.networking.k8s.io/v1 HTTPRoutes when the controller started: install the Gateway API CRDs and restart the controller, or drop spec.route.parentRefs for an Ingress",
			strings.Join(gateways, ", "))), ""
	case ing.conflict != "" || hr.conflict != "":
		return cond(metav1.ConditionFalse, appv1.ReasonNameConflict, ing.conflict+hr.conflict), ""
	case parents != nil && hr.obj != nil:
		_, refusedBy, pending := routeParentsStatus(hr.obj, app.Namespace, parents)
		switch {
		case refusedBy != "":
			c := cond(metav1.ConditionFalse, appv1.ReasonGatewayRefused, refusedBy)
			c.warn = true
			return c, hr.name
		case pending != "":
			return cond(metav1.ConditionUnknown, appv1.ReasonRoutePending, pending), hr.name
		}
		return cond(metav1.ConditionTrue, appv1.ReasonRouted, fmt.Sprintf("HTTPRoute %q, accepted by Gateway %s, routes %s to Service %q",
			hr.name, strings.Join(gateways, ", "), strings.Join(hosts, ", "), app.Spec.ServiceTemplate.Name)), hr.name
	case ing.obj != nil:
		return cond(metav1.ConditionTrue, appv1.ReasonRouted, fmt.Sprintf("Ingress %q routes %s to Service %q", ing.name, strings.Join(hosts, ", "), app.Spec.ServiceTemplate.Name)), ing.name
	}
	return nil, ""
}

// parents returns the Gateways app's route attaches to: its parentRefs, else the
// controller's default Gateway for a route without TLS and ingress class; nil when the
// route is an Ingress (or there is no route).
func (r *routeChild) parents(app *appv1.App) []appv1.GatewayRef {
	spec := app.Spec.Route
	switch {
	case spec == nil || app.Spec.ServiceTemplate == nil:
		return nil
	case len(spec.ParentRefs) > 0:
		return spec.ParentRefs
	case r.defaultGateway != nil && spec.TLS == nil && spec.IngressClassName == "":
		return []appv1.GatewayRef{*r.defaultGateway}
	}
	return nil
}

// DesiredHTTPRoute returns the apply configuration of the HTTPRoute of app's route,
// attached to parents, or nil when app has no route; an error when the App's Service
// has no such port (routePort). An HTTPRoute names its backend's port by number.
func DesiredHTTPRoute(app *appv1.App, parents []appv1.GatewayRef) (*gatewayv1ac.HTTPRouteApplyConfiguration, error) {
	return desiredHTTPRoute(app, parents, nil, rollout.Routing{})
}

// desiredHTTPRoute is DesiredHTTPRoute during a canary rollout: with split, the route
// sends the traffic to the rollout's stable and canary Services by their weights
// (rollout.Plan) instead of to the App's Service; with routing (and a split), it also
// sends the requests of a header route to the canary and mirrors a share of them to it
// (child_routerouting.go).
func desiredHTTPRoute(app *appv1.App, parents []appv1.GatewayRef, split *rollout.Split, routing rollout.Routing) (*gatewayv1ac.HTTPRouteApplyConfiguration, error) {
	r, svc := app.Spec.Route, app.Spec.ServiceTemplate
	if r == nil || svc == nil || len(parents) == 0 {
		return nil, nil
	}
	port, err := routePort(app)
	if err != nil {
		return nil, err
	}
	spec := httpRouteSpec(parents, r.Hosts)
	paths := routePaths(r)
	rule := gatewayv1ac.HTTPRouteRule()
	if split == nil {
		rule.WithBackendRefs(gatewayv1ac.HTTPBackendRef().
			WithName(gatewayv1.ObjectName(svc.Name)).
			WithPort(port.port))
	} else {
		// A stable Service of weight 0 is not named: the promotion's last stage deletes it
		// (the stable Deployment rolls to the canary's template, whose pods it cannot
		// select yet), and a Gateway refuses a route naming a Service it cannot find
		// (Traefik said Accepted=False for the 27 s the stable rolled, on the real node).
		// The route at canary 100 names the canary alone before that stage starts.
		if split.Stable > 0 {
			rule.WithBackendRefs(gatewayv1ac.HTTPBackendRef().WithName(gatewayv1.ObjectName(svc.Name + appv1.StableSuffix)).WithPort(port.port).WithWeight(split.Stable))
		}
		rule.WithBackendRefs(gatewayv1ac.HTTPBackendRef().WithName(gatewayv1.ObjectName(svc.Name + appv1.CanarySuffix)).WithPort(port.port).WithWeight(split.Canary))
	}
	withPathMatches(rule, paths)
	var headerRule *gatewayv1ac.HTTPRouteRuleApplyConfiguration
	if split != nil {
		headerRule = canaryRouting(rule, svc.Name+appv1.CanarySuffix, port.port, paths, routing)
	}
	spec.WithRules(rule)
	if headerRule != nil {
		spec.WithRules(headerRule)
	}
	route := gatewayv1ac.HTTPRoute(app.Name, app.Namespace).
		WithLabels(childLabels(app)).
		WithOwnerReferences(controller.OwnerReference(app, appKind)).
		WithSpec(spec)
	return controller.WithAppliedHash(route)
}

// httpRouteSpec returns the spec of an HTTPRoute attached to parents, for hosts, without
// rules.
func httpRouteSpec(parents []appv1.GatewayRef, hosts []appv1.Hostname) *gatewayv1ac.HTTPRouteSpecApplyConfiguration {
	spec := gatewayv1ac.HTTPRouteSpec()
	for _, p := range parents {
		ref := gatewayv1ac.ParentReference().
			WithGroup(gatewayv1.GroupName).
			WithKind("Gateway").
			WithName(gatewayv1.ObjectName(p.Name))
		if p.Namespace != "" {
			ref.WithNamespace(gatewayv1.Namespace(p.Namespace))
		}
		if p.SectionName != "" {
			ref.WithSectionName(gatewayv1.SectionName(p.SectionName))
		}
		spec.WithParentRefs(ref)
	}
	for _, h := range hosts {
		spec.WithHostnames(gatewayv1.Hostname(h))
	}
	return spec
}

// routePaths returns the paths of route r: "/" when it names none.
func routePaths(r *appv1.Route) []appv1.RoutePath {
	if len(r.Paths) == 0 {
		return []appv1.RoutePath{{Path: "/"}}
	}
	return r.Paths
}

// withPathMatches adds to rule a match of each of paths: by prefix, or exact.
func withPathMatches(rule *gatewayv1ac.HTTPRouteRuleApplyConfiguration, paths []appv1.RoutePath) {
	for _, p := range paths {
		match := gatewayv1.PathMatchPathPrefix
		if p.Type == "Exact" {
			match = gatewayv1.PathMatchExact
		}
		rule.WithMatches(gatewayv1ac.HTTPRouteMatch().WithPath(gatewayv1ac.HTTPPathMatch().WithType(match).WithValue(p.Path)))
	}
}

// splits reports whether app's route is an HTTPRoute, which shares the traffic of a
// canary rollout by weight (otherwise the share is the replicas').
func (r *routeChild) splits(app *appv1.App) bool {
	return r.httpRoutes != nil && r.parents(app) != nil
}

// liveRoute returns app's HTTPRoute as cached (own writes included) when app controls
// it; nil otherwise, or when the cluster does not serve HTTPRoutes.
func (r *routeChild) liveRoute(app *appv1.App) *gatewayv1.HTTPRoute {
	if r.httpRoutes == nil {
		return nil
	}
	return r.httpRoutes.controlled(app, app.Name)
}

// routePort returns the port of the App's Service the route sends traffic to:
// spec.route.port, by name or number, else the Service's first port. It is the one check
// of the route's port, for both shapes: an error naming the port when the App's Service
// has no such port (RouteAccepted=False: an Ingress or HTTPRoute to it would route to
// nothing).
func routePort(app *appv1.App) (servicePort, error) {
	ports := servicePorts(app)
	if len(ports) == 0 {
		return servicePort{}, fmt.Errorf("spec.route: the App has no Service to route to")
	}
	if p := app.Spec.Route.Port; p != nil {
		return findServicePort(ports, *p, "spec.route.port")
	}
	return ports[0], nil
}

// routeParentsStatus reads what the Gateways answered in route's status for each of
// parents (in the App's namespace ns): accepted when every one accepted the current
// generation and resolved its backend; otherwise refused names the first Gateway that
// refused it and quotes its condition, or pending names the first that has not answered.
func routeParentsStatus(route *gatewayv1.HTTPRoute, ns string, parents []appv1.GatewayRef) (accepted bool, refused, pending string) {
	for _, p := range parents {
		gw := "Gateway " + p.String(ns)
		i := slices.IndexFunc(route.Status.Parents, func(s gatewayv1.RouteParentStatus) bool {
			return sameParent(s.ParentRef, route.Namespace, p)
		})
		if i < 0 {
			if pending == "" {
				pending = fmt.Sprintf("waiting for %s to accept HTTPRoute %q: no controller of that Gateway has answered", gw, route.Name)
			}
			continue
		}
		for _, t := range []string{string(gatewayv1.RouteConditionAccepted), string(gatewayv1.RouteConditionResolvedRefs)} {
			cond := meta.FindStatusCondition(route.Status.Parents[i].Conditions, t)
			switch {
			case cond == nil || cond.ObservedGeneration < route.Generation || cond.Status == metav1.ConditionUnknown:
				if pending == "" {
					pending = fmt.Sprintf("waiting for %s to accept HTTPRoute %q: its controller %s has not reported %s for the current spec",
						gw, route.Name, route.Status.Parents[i].ControllerName, t)
				}
			case cond.Status == metav1.ConditionFalse:
				if refused == "" {
					refused = fmt.Sprintf("%s refused HTTPRoute %q: %s=False (%s): %s", gw, route.Name, t, cond.Reason, cond.Message)
				}
			}
			if cond == nil || cond.Status != metav1.ConditionTrue {
				break // ResolvedRefs after an Accepted that is not True says nothing more
			}
		}
	}
	return refused == "" && pending == "", refused, pending
}

// sameParent reports whether ref, a parentRef of an HTTPRoute in namespace ns, is the
// Gateway p.
func sameParent(ref gatewayv1.ParentReference, ns string, p appv1.GatewayRef) bool {
	if ref.Group != nil && string(*ref.Group) != gatewayv1.GroupName || ref.Kind != nil && *ref.Kind != "Gateway" {
		return false
	}
	refNS, pNS := ns, ns
	if ref.Namespace != nil {
		refNS = string(*ref.Namespace)
	}
	if p.Namespace != "" {
		pNS = p.Namespace
	}
	section := ""
	if ref.SectionName != nil {
		section = string(*ref.SectionName)
	}
	return string(ref.Name) == p.Name && refNS == pNS && section == p.SectionName
}

// DesiredRoute returns the apply configuration of the Ingress of app's route, or nil
// when app has none; an error when the App's Service has no such port (routePort).
func DesiredRoute(app *appv1.App) (*networkingv1ac.IngressApplyConfiguration, error) {
	r, svc := app.Spec.Route, app.Spec.ServiceTemplate
	if r == nil || svc == nil {
		return nil, nil
	}
	backend, err := routePort(app)
	if err != nil {
		return nil, err
	}
	// As the App names it: by number when spec.route.port is one, else by name.
	port := networkingv1ac.ServiceBackendPort()
	if r.Port != nil && r.Port.Type == intstr.Int {
		port.WithNumber(backend.port)
	} else {
		port.WithName(backend.name)
	}
	paths := r.Paths
	if len(paths) == 0 {
		paths = []appv1.RoutePath{{Path: "/", Type: string(networkingv1.PathTypePrefix)}}
	}
	spec := networkingv1ac.IngressSpec()
	hosts := make([]string, 0, len(r.Hosts))
	for _, h := range r.Hosts {
		hosts = append(hosts, string(h))
		value := networkingv1ac.HTTPIngressRuleValue()
		for _, p := range paths {
			pathType := networkingv1.PathType(p.Type)
			if pathType == "" {
				pathType = networkingv1.PathTypePrefix
			}
			value.WithPaths(networkingv1ac.HTTPIngressPath().
				WithPath(p.Path).
				WithPathType(pathType).
				WithBackend(networkingv1ac.IngressBackend().
					WithService(networkingv1ac.IngressServiceBackend().WithName(svc.Name).WithPort(port))))
		}
		spec.WithRules(networkingv1ac.IngressRule().WithHost(string(h)).WithHTTP(value))
	}
	if r.IngressClassName != "" {
		spec.WithIngressClassName(r.IngressClassName)
	}
	ing := networkingv1ac.Ingress(app.Name, app.Namespace).
		WithLabels(childLabels(app)).
		WithOwnerReferences(controller.OwnerReference(app, appKind))
	if t := r.TLS; t != nil {
		spec.WithTLS(networkingv1ac.IngressTLS().WithHosts(hosts...).WithSecretName(t.SecretName))
		switch {
		case t.Issuer != "":
			ing.WithAnnotations(map[string]string{"cert-manager.io/issuer": t.Issuer})
		case t.ClusterIssuer != "":
			ing.WithAnnotations(map[string]string{"cert-manager.io/cluster-issuer": t.ClusterIssuer})
		}
	}
	return controller.WithAppliedHash(ing.WithSpec(spec))
}

// routeSplit returns the split of the HTTPRoute in plan p; nil without a plan.
func (p *rolloutPlan) routeSplit() *rollout.Split {
	if p == nil {
		return nil
	}
	return p.Split
}

package app

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1ac "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
)

// A route with parentRefs (or, with --default-gateway, a route that asks for neither
// TLS nor an ingress class) is a Gateway API HTTPRoute named as the App, owned by it,
// attached to those Gateways. Whether each Gateway accepted it is read back from the
// HTTPRoute's status into RouteAccepted, which keeps the App from Ready until every
// Gateway has (routeParentsStatus). Its hosts count for host ownership like an
// Ingress's (route.go, pkg/controller/ingress/hosts.go).

// routeParents returns the Gateways app's route attaches to: its parentRefs, else the
// controller's default Gateway for a route without TLS and ingress class; nil when the
// route is an Ingress (or there is no route).
func (c *Controller) routeParents(app *appv1.App) []appv1.GatewayRef {
	r := app.Spec.Route
	switch {
	case r == nil || app.Spec.ServiceTemplate == nil:
		return nil
	case len(r.ParentRefs) > 0:
		return r.ParentRefs
	case c.defaultGateway != nil && r.TLS == nil && r.IngressClassName == "":
		return []appv1.GatewayRef{*c.defaultGateway}
	}
	return nil
}

// DesiredHTTPRoute returns the apply configuration of the HTTPRoute of app's route,
// attached to parents, or nil when app has no route. An HTTPRoute names its backend's
// port by number: a port given by name is looked up in the App's Service template.
func DesiredHTTPRoute(app *appv1.App, parents []appv1.GatewayRef) (*gatewayv1ac.HTTPRouteApplyConfiguration, error) {
	r, svc := app.Spec.Route, app.Spec.ServiceTemplate
	if r == nil || svc == nil || len(parents) == 0 {
		return nil, nil
	}
	port, err := servicePortNumber(svc, r.Port)
	if err != nil {
		return nil, err
	}
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
	for _, h := range r.Hosts {
		spec.WithHostnames(gatewayv1.Hostname(h))
	}
	paths := r.Paths
	if len(paths) == 0 {
		paths = []appv1.RoutePath{{Path: "/"}}
	}
	rule := gatewayv1ac.HTTPRouteRule().WithBackendRefs(gatewayv1ac.HTTPBackendRef().
		WithName(gatewayv1.ObjectName(svc.Name)).
		WithPort(port))
	for _, p := range paths {
		match := gatewayv1.PathMatchPathPrefix
		if p.Type == "Exact" {
			match = gatewayv1.PathMatchExact
		}
		rule.WithMatches(gatewayv1ac.HTTPRouteMatch().WithPath(gatewayv1ac.HTTPPathMatch().WithType(match).WithValue(p.Path)))
	}
	route := gatewayv1ac.HTTPRoute(app.Name, app.Namespace).
		WithLabels(childLabels(app)).
		WithOwnerReferences(controller.OwnerReference(app, appKind)).
		WithSpec(spec.WithRules(rule))
	return controller.WithAppliedHash(route)
}

// servicePortNumber returns the number of the port of the App's Service that port
// names (by name or number); nil names the first port.
func servicePortNumber(svc *appv1.ServiceTemplate, port *intstr.IntOrString) (int32, error) {
	first, firstName := firstServicePort(svc)
	switch {
	case port == nil:
		return first, nil
	case port.Type == intstr.Int:
		return port.IntVal, nil
	case port.StrVal == firstName:
		return first, nil
	}
	for _, p := range svc.Ports {
		if p.Name == port.StrVal {
			return p.Port, nil
		}
	}
	return 0, fmt.Errorf("spec.route.port: the App's Service has no port named %q", port.StrVal)
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

package app

import (
	"fmt"
	"strings"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	"k8s.io/client-go/tools/cache"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
)

// An App's route (spec.route) is an Ingress named as the App, owned by it, routing its
// hosts and paths to the App's Service, with TLS. Hosts belong to the namespace that
// claimed them first: among the Ingresses app-controller manages (of routes and of
// Services' ingress/* annotations alike), the oldest that routes a host, or a wildcard
// covering it, holds it. A route to a host held by another namespace gets no Ingress
// (one it had is deleted): RouteAccepted=False, reason HostConflict, and a Warning Event.
// The Service->Ingress controller counts the routes' Ingresses the same way
// (pkg/controller/ingress/hosts.go).

// routeHostIndex indexes the managed Ingresses by the buckets of their rules' hosts
// (controller.HostBucket).
const routeHostIndex = "app.appcontroller.k8s.io/ingress-host"

// indexIngressByHost is the routeHostIndex function.
func indexIngressByHost(obj interface{}) ([]string, error) {
	ing, ok := obj.(*networkingv1.Ingress)
	if !ok {
		return nil, nil
	}
	return controller.HostBuckets(ruleHosts(ing)...), nil
}

// ruleHosts returns the hosts of ing's rules.
func ruleHosts(ing *networkingv1.Ingress) []string {
	hosts := make([]string, 0, len(ing.Spec.Rules))
	for _, r := range ing.Spec.Rules {
		hosts = append(hosts, r.Host)
	}
	return hosts
}

// DesiredRoute returns the apply configuration of the Ingress of app's route, or nil
// when app has none.
func DesiredRoute(app *appv1.App) (*networkingv1ac.IngressApplyConfiguration, error) {
	r, svc := app.Spec.Route, app.Spec.ServiceTemplate
	if r == nil || svc == nil {
		return nil, nil
	}
	port := networkingv1ac.ServiceBackendPort()
	switch {
	case r.Port == nil:
		name := svc.PortName
		if name == "" {
			name = appv1.PortName
		}
		port.WithName(name)
	case r.Port.Type == intstr.Int:
		port.WithNumber(r.Port.IntVal)
	default:
		port.WithName(r.Port.StrVal)
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

// routeRefusal says why app's route may not have an Ingress: a host held by another
// namespace, whose Ingress routes a conflicting host since before app's own (or at all,
// when app has none yet). "" when it may.
func (c *Controller) routeRefusal(app *appv1.App) (string, error) {
	r := app.Spec.Route
	if r == nil {
		return "", nil
	}
	var since time.Time // of app's own route Ingress; zero: none yet
	if obj, exists, err := c.ingresses.managed.GetByKey(app.Namespace + "/" + app.Name); err == nil && exists {
		if own, ok := obj.(*networkingv1.Ingress); ok && controller.IsControlledBy(own, app) {
			since = own.CreationTimestamp.Time
		}
	}
	for _, h := range r.Hosts {
		host := strings.ToLower(string(h))
		objs, err := c.ingresses.managed.ByIndex(routeHostIndex, controller.HostBucket(host))
		if err != nil {
			return "", fmt.Errorf("listing the Ingresses of hosts under %q: %w", controller.HostBucket(host), err)
		}
		for _, obj := range objs {
			ing, ok := obj.(*networkingv1.Ingress)
			if !ok || ing.Namespace == app.Namespace || c.sharedNamespaces.Has(ing.Namespace) && c.sharedNamespaces.Has(app.Namespace) {
				continue
			}
			if !since.IsZero() && !ing.CreationTimestamp.Time.Before(since) {
				continue // younger than app's own: app holds it
			}
			for _, rule := range ing.Spec.Rules {
				if controller.HostsConflict(strings.ToLower(rule.Host), host) {
					holder := "Ingress " + ing.Name
					if ref := metav1.GetControllerOfNoCopy(ing); ref != nil {
						holder = ref.Kind + " " + ref.Name
					}
					return fmt.Sprintf("host %q is held by namespace %q (%s, routing %q since %s); the route gets no Ingress until that namespace lets it go",
						host, ing.Namespace, holder, rule.Host, ing.CreationTimestamp.UTC().Format(time.RFC3339)), nil
				}
			}
		}
	}
	return "", nil
}

// enqueueRouteClaimants queues the Apps whose route names a host in the buckets of a
// deleted or changed Ingress: a host let go may be theirs now.
func (c *Controller) enqueueRouteClaimants(ing *networkingv1.Ingress) {
	buckets, _ := indexIngressByHost(ing)
	for _, b := range buckets {
		objs, err := c.appIndexer.ByIndex(routeIndex, b)
		if err != nil {
			continue
		}
		for _, obj := range objs {
			if app, ok := obj.(*appv1.App); ok && app.Namespace != ing.Namespace {
				c.loop.Enqueue(cache.MetaObjectToName(app))
			}
		}
	}
}

// routeIndex indexes Apps by the buckets of their route's hosts.
const routeIndex = "app.appcontroller.k8s.io/route-host"

// indexAppByRouteHost is the routeIndex function.
func indexAppByRouteHost(obj interface{}) ([]string, error) {
	app, ok := obj.(*appv1.App)
	if !ok || app.Spec.Route == nil {
		return nil, nil
	}
	hosts := make([]string, 0, len(app.Spec.Route.Hosts))
	for _, h := range app.Spec.Route.Hosts {
		hosts = append(hosts, string(h))
	}
	return controller.HostBuckets(hosts...), nil
}

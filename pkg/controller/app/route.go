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

// routeHostIndex indexes the managed Ingresses and HTTPRoutes by the buckets of the
// hosts they route (controller.HostBucket).
const routeHostIndex = "app.appcontroller.k8s.io/ingress-host"

// indexIngressByHost is the routeHostIndex function.
func indexIngressByHost(obj interface{}) ([]string, error) {
	return controller.HostBuckets(controller.RoutedHosts(obj)...), nil
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
		_, name := firstServicePort(svc)
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

// routeRefusal says why app's route may not have an Ingress or HTTPRoute: a host held
// by another namespace, whose Ingress or HTTPRoute routes a conflicting host since
// before app's own (or at all, when app has none yet; on a tie of creation times, an
// App's route holds it before a Service's, then the first by namespace and name, as
// the Service->Ingress controller decides). "" when it may.
func (c *Controller) routeRefusal(app *appv1.App) (string, error) {
	r := app.Spec.Route
	if r == nil {
		return "", nil
	}
	var since time.Time // of app's own route object; zero: none yet
	for _, own := range c.routeObjects(app.Namespace + "/" + app.Name) {
		if controller.IsControlledBy(own, app) && (since.IsZero() || own.GetCreationTimestamp().Time.Before(since)) {
			since = own.GetCreationTimestamp().Time
		}
	}
	holds := func(other metav1.Object, ref *metav1.OwnerReference) bool {
		created := other.GetCreationTimestamp().Time
		switch {
		case since.IsZero() || created.Before(since):
			return true
		case created.After(since):
			return false
		}
		return ref != nil && ref.Kind == appKind.Kind &&
			(other.GetNamespace() < app.Namespace || other.GetNamespace() == app.Namespace && ref.Name < app.Name)
	}
	for _, h := range r.Hosts {
		host := strings.ToLower(string(h))
		objs, err := c.routesByHost(controller.HostBucket(host))
		if err != nil {
			return "", err
		}
		for _, obj := range objs {
			ref := metav1.GetControllerOfNoCopy(obj)
			if obj.GetNamespace() == app.Namespace || c.sharedNamespaces.Has(obj.GetNamespace()) && c.sharedNamespaces.Has(app.Namespace) || !holds(obj, ref) {
				continue
			}
			for _, other := range controller.RoutedHosts(obj) {
				if controller.HostsConflict(other, host) {
					holder := controller.RouteKind(obj) + " " + obj.GetName()
					if ref != nil {
						holder = ref.Kind + " " + ref.Name
					}
					return fmt.Sprintf("host %q is held by namespace %q (%s, routing %q since %s); the route gets no Ingress or HTTPRoute until that namespace lets it go",
						host, obj.GetNamespace(), holder, other, obj.GetCreationTimestamp().UTC().Format(time.RFC3339)), nil
				}
			}
		}
	}
	return "", nil
}

// routeObjects returns the managed Ingress and HTTPRoute of key in the caches.
func (c *Controller) routeObjects(key string) []metav1.Object {
	var objs []metav1.Object
	for _, cache := range c.routeCaches() {
		if obj, exists, err := cache.GetByKey(key); err == nil && exists {
			if o, ok := obj.(metav1.Object); ok {
				objs = append(objs, o)
			}
		}
	}
	return objs
}

// routesByHost returns the managed Ingresses and HTTPRoutes that route a host of bucket.
func (c *Controller) routesByHost(bucket string) ([]metav1.Object, error) {
	var objs []metav1.Object
	for _, cache := range c.routeCaches() {
		found, err := cache.ByIndex(routeHostIndex, bucket)
		if err != nil {
			return nil, fmt.Errorf("listing the routes of hosts under %q: %w", bucket, err)
		}
		for _, obj := range found {
			if o, ok := obj.(metav1.Object); ok {
				objs = append(objs, o)
			}
		}
	}
	return objs, nil
}

// routeCaches returns the caches of managed Ingresses and, when the cluster serves the
// Gateway API, HTTPRoutes.
func (c *Controller) routeCaches() []*controller.WriteCache {
	if c.httpRoutes == nil {
		return []*controller.WriteCache{c.ingresses.managed}
	}
	return []*controller.WriteCache{c.ingresses.managed, c.httpRoutes.managed}
}

// enqueueRouteClaimants queues the Apps whose route names a host in the buckets of a
// deleted or changed Ingress or HTTPRoute: a host let go may be theirs now.
func (c *Controller) enqueueRouteClaimants(obj metav1.Object) {
	buckets, _ := indexIngressByHost(obj)
	for _, b := range buckets {
		objs, err := c.appIndexer.ByIndex(routeIndex, b)
		if err != nil {
			continue
		}
		for _, o := range objs {
			if app, ok := o.(*appv1.App); ok && app.Namespace != obj.GetNamespace() {
				c.loop.Enqueue(cache.MetaObjectToName(app))
			}
		}
	}
}

// routeHostHandler queues, when a managed Ingress or HTTPRoute changes or goes, the Apps
// whose routes wait for a host it routed.
func (c *Controller) routeHostHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, _ interface{}) {
			if obj, ok := old.(metav1.Object); ok {
				c.enqueueRouteClaimants(obj)
			}
		},
		DeleteFunc: func(obj interface{}) {
			if o := controller.ObjectFromTombstone(obj); o != nil {
				c.enqueueRouteClaimants(o)
			}
		},
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

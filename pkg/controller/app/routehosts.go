package app

import (
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
)

// Hosts belong to the namespace that claimed them first: among the Ingresses and
// HTTPRoutes app-controller manages (of App routes and of Services' ingress/*
// annotations alike), the oldest that routes a host, or a wildcard covering it, holds
// it. A route to a host held by another namespace gets no Ingress or HTTPRoute (one it
// had is deleted): RouteAccepted=False, reason HostConflict, and a Warning Event
// (child_route.go). The Service->Ingress controller counts the routes' Ingresses the
// same way (pkg/controller/ingress/hosts.go).

// routeHostIndex indexes the managed Ingresses and HTTPRoutes by the buckets of the
// hosts they route (controller.HostBucket).
const routeHostIndex = "app.appcontroller.k8s.io/ingress-host"

// indexIngressByHost is the routeHostIndex function.
func indexIngressByHost(obj interface{}) ([]string, error) {
	return controller.HostBuckets(controller.RoutedHosts(obj)...), nil
}

// refusal says why app's route may not have an Ingress or HTTPRoute: a host held
// by another namespace, whose Ingress or HTTPRoute routes a conflicting host since
// before app's own (or at all, when app has none yet; on a tie of creation times, an
// App's route holds it before a Service's, then the first by namespace and name, as
// the Service->Ingress controller decides). "" when it may.
func (r *routeChild) refusal(app *appv1.App) (string, error) {
	spec := app.Spec.Route
	if spec == nil {
		return "", nil
	}
	held, err := r.heldHost(app, app.Name, spec.Hosts)
	if held == "" || err != nil {
		return "", err
	}
	return held + "; the route gets no Ingress or HTTPRoute until that namespace lets it go", nil
}

// heldHost says which of hosts, routed by app's object named own (its route, or the
// preview's HTTPRoute), another namespace holds, as refusal decides; "" when none.
func (r *routeChild) heldHost(app *appv1.App, own string, hosts []appv1.Hostname) (string, error) {
	var since time.Time // of app's own route object; zero: none yet
	for _, o := range r.objects(app.Namespace + "/" + own) {
		if controller.IsControlledBy(o, app) && (since.IsZero() || o.GetCreationTimestamp().Time.Before(since)) {
			since = o.GetCreationTimestamp().Time
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
	for _, h := range hosts {
		host := strings.ToLower(string(h))
		objs, err := r.byHost(controller.HostBucket(host))
		if err != nil {
			return "", err
		}
		for _, obj := range objs {
			ref := metav1.GetControllerOfNoCopy(obj)
			if obj.GetNamespace() == app.Namespace || r.sharedNamespaces.Has(obj.GetNamespace()) && r.sharedNamespaces.Has(app.Namespace) || !holds(obj, ref) {
				continue
			}
			for _, other := range controller.RoutedHosts(obj) {
				if controller.HostsConflict(other, host) {
					holder := controller.RouteKind(obj) + " " + obj.GetName()
					if ref != nil {
						holder = ref.Kind + " " + ref.Name
					}
					return fmt.Sprintf("host %q is held by namespace %q (%s, routing %q since %s)",
						host, obj.GetNamespace(), holder, other, obj.GetCreationTimestamp().UTC().Format(time.RFC3339)), nil
				}
			}
		}
	}
	return "", nil
}

// objects returns the managed Ingress and HTTPRoute of key in the caches.
func (r *routeChild) objects(key string) []metav1.Object {
	var objs []metav1.Object
	for _, store := range r.caches() {
		if obj, exists, err := store.GetByKey(key); err == nil && exists {
			if o, ok := obj.(metav1.Object); ok {
				objs = append(objs, o)
			}
		}
	}
	return objs
}

// byHost returns the managed Ingresses and HTTPRoutes that route a host of bucket.
func (r *routeChild) byHost(bucket string) ([]metav1.Object, error) {
	return controller.RoutesByHost(r.caches(), routeHostIndex, bucket)
}

// caches returns the caches of managed Ingresses and, when the cluster serves the
// Gateway API, HTTPRoutes.
func (r *routeChild) caches() []*controller.WriteCache {
	if r.httpRoutes == nil {
		return []*controller.WriteCache{r.ingresses.managed}
	}
	return []*controller.WriteCache{r.ingresses.managed, r.httpRoutes.managed}
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

// indexRouteHosts indexes the managed Ingresses or HTTPRoutes of informer by the hosts
// they route, and queues, when one changes or goes, the Apps whose routes wait for a
// host it routed (routeHostHandler).
func (c *Controller) indexRouteHosts(informer cache.SharedIndexInformer) error {
	if err := informer.AddIndexers(cache.Indexers{routeHostIndex: indexIngressByHost}); err != nil {
		return fmt.Errorf("adding the host index to the route informer: %w", err)
	}
	return c.watch(informer, "route host", c.routeHostHandler())
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

// previewHosts returns the preview hosts of app's blue-green strategy; nil without. They
// are held as the route's own hosts are (routeIndex, heldHost).
func previewHosts(app *appv1.App) []appv1.Hostname {
	if app.Spec.Rollout == nil || app.Spec.Rollout.BlueGreen == nil {
		return nil
	}
	return app.Spec.Rollout.BlueGreen.PreviewHosts
}

// routeIndex indexes Apps by the buckets of their route's hosts and their preview's
// (rollout.blueGreen.previewHosts).
const routeIndex = "app.appcontroller.k8s.io/route-host"

// indexAppByRouteHost is the routeIndex function.
func indexAppByRouteHost(obj interface{}) ([]string, error) {
	app, ok := obj.(*appv1.App)
	if !ok || app.Spec.Route == nil {
		return nil, nil
	}
	hosts := make([]string, 0, len(app.Spec.Route.Hosts))
	for _, h := range append(slices.Clip(app.Spec.Route.Hosts), previewHosts(app)...) {
		hosts = append(hosts, string(h))
	}
	return controller.HostBuckets(hosts...), nil
}

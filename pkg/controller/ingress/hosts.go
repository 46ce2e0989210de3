package ingress

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
)

// Host ownership between namespaces. Any tenant who may annotate a Service could
// otherwise take another tenant's host: an Ingress for it in their namespace. A host
// belongs to the namespace that claimed it first, as OpenShift's router decides:
//
//   - A claim is a Service that asks for an Ingress (ingress/http: "true") with a host
//     (ingress/host). Two hosts conflict when they are equal, or when one is a wildcard
//     ("*.example.com") that covers the other ("shop.example.com": one label more).
//   - Among the claims of conflicting hosts, those whose Ingress already routes the host
//     come first, the oldest Ingress first; then the claims still waiting, the oldest
//     Service first. The first claim's namespace holds the host. The decision is
//     derived from the Ingresses and Services in the cluster, never from memory, so a
//     restarted controller keeps the same holders.
//   - Claims from the holder's namespace share the host (their paths differ); so do the
//     namespaces an administrator lists in --ingress-shared-namespaces, among
//     themselves. A claim from another namespace gets no Ingress (an Ingress it had is
//     deleted) and a Warning Event HostConflict naming the holder.
//   - When the holder lets the host go (its annotation or Service gone, its host
//     changed), the Ingress's deletion or update queues the waiting claims: the next one
//     gets the host within a second.
//
// A Service without ingress/host asks for a catch-all rule: no host, so no ownership;
// --ingress-catch-all-namespaces says where that is allowed.

// hostIndex indexes Services that claim a host, and the Ingresses the controller
// manages by the hosts of their rules, by hostBucket: conflicting hosts share a bucket.
const hostIndex = "ingress.appcontroller.k8s.io/host"

// claimedHost returns the host svc claims, lowercased, and whether it claims one: it
// asks for an Ingress with a valid ingress/host.
func claimedHost(svc *corev1.Service) (string, bool) {
	host := strings.ToLower(svc.Annotations[AnnotationHost])
	if !wantsIngress(svc) || host == "" || len(validateHost(host)) > 0 {
		return "", false
	}
	return host, true
}

// indexByHost is the hostIndex function of both informers.
func indexByHost(obj interface{}) ([]string, error) {
	switch o := obj.(type) {
	case *corev1.Service:
		if host, ok := claimedHost(o); ok {
			return []string{controller.HostBucket(host)}, nil
		}
	case *networkingv1.Ingress:
		if o.Labels[appv1.ManagedByLabel] != appv1.ManagedByValue {
			return nil, nil
		}
		return controller.HostBuckets(controller.RoutedHosts(o)...), nil
	case *gatewayv1.HTTPRoute:
		if o.Labels[appv1.ManagedByLabel] != appv1.ManagedByValue {
			return nil, nil
		}
		return controller.HostBuckets(controller.RoutedHosts(o)...), nil
	}
	return nil, nil
}

// hostClaim is a claim of a host: a Service, and its Ingress if it routes the host.
type hostClaim struct {
	// namespace claims the host for claimant: "Service NAME" or "the route of App NAME".
	namespace, claimant string
	// routed: the Service's Ingress (or the App's Ingress or HTTPRoute: routedBy)
	// routes a conflicting host, since ingressCreated.
	routed         bool
	routedBy       string
	ingressCreated time.Time
	serviceCreated time.Time
}

// before orders claims: routed ones first, oldest Ingress first, then waiting ones,
// oldest Service first; names break ties, so every sync computes the same holder.
func (a hostClaim) before(b hostClaim) int {
	if a.routed != b.routed {
		if a.routed {
			return -1
		}
		return 1
	}
	if a.routed && !a.ingressCreated.Equal(b.ingressCreated) {
		return a.ingressCreated.Compare(b.ingressCreated)
	}
	if !a.serviceCreated.Equal(b.serviceCreated) {
		return a.serviceCreated.Compare(b.serviceCreated)
	}
	return cmp.Or(strings.Compare(a.namespace, b.namespace), strings.Compare(a.claimant, b.claimant))
}

// hostHolder returns the first claim of host and every host conflicting with it: the
// claim whose namespace holds it. ok is false when nobody claims it (not even svc, whose
// annotation the caches may not show yet).
func (c *Controller) hostHolder(host string) (hostClaim, bool, error) {
	bucket := controller.HostBucket(host)
	claims := map[string]hostClaim{}
	routed, err := c.routedByHost(bucket)
	if err != nil {
		return hostClaim{}, false, err
	}
	for _, obj := range routed {
		ref := metav1.GetControllerOfNoCopy(obj)
		if ref == nil || !slices.ContainsFunc(controller.RoutedHosts(obj), func(h string) bool { return controller.HostsConflict(h, host) }) {
			continue
		}
		created := obj.GetCreationTimestamp().Time
		switch ref.Kind {
		case "App":
			// An App's route (pkg/controller/app/routehosts.go): routed since its Ingress or
			// HTTPRoute (the older, while it turns from one into the other).
			key := "App " + obj.GetNamespace() + "/" + ref.Name
			if cl, ok := claims[key]; !ok || created.Before(cl.ingressCreated) {
				claims[key] = hostClaim{namespace: obj.GetNamespace(), claimant: "the route of App " + ref.Name, routed: true,
					routedBy: controller.RouteKind(obj), ingressCreated: created}
			}
		case serviceKind.Kind:
			svc, err := c.serviceLister.Services(obj.GetNamespace()).Get(ref.Name)
			if err != nil || svc.UID != ref.UID {
				continue // the Service is gone: its Ingress goes with it
			}
			claims[obj.GetNamespace()+"/"+ref.Name] = hostClaim{namespace: obj.GetNamespace(), claimant: "Service " + ref.Name, routed: true,
				ingressCreated: created, serviceCreated: svc.CreationTimestamp.Time}
		}
	}
	services, err := c.serviceIndex.ByIndex(hostIndex, bucket)
	if err != nil {
		return hostClaim{}, false, fmt.Errorf("listing the Services claiming hosts under %q: %w", bucket, err)
	}
	for _, obj := range services {
		svc, ok := obj.(*corev1.Service)
		if !ok {
			continue
		}
		claimed, ok := claimedHost(svc)
		key := svc.Namespace + "/" + svc.Name
		if _, routed := claims[key]; routed || !ok || !controller.HostsConflict(claimed, host) {
			continue
		}
		claims[key] = hostClaim{namespace: svc.Namespace, claimant: "Service " + svc.Name, serviceCreated: svc.CreationTimestamp.Time}
	}
	if len(claims) == 0 {
		return hostClaim{}, false, nil
	}
	all := make([]hostClaim, 0, len(claims))
	for _, cl := range claims {
		all = append(all, cl)
	}
	return slices.MinFunc(all, hostClaim.before), true, nil
}

// routedByHost returns the managed Ingresses, and HTTPRoutes when the controller watches
// them, that route a host of bucket.
func (c *Controller) routedByHost(bucket string) ([]metav1.Object, error) {
	indexes := []interface {
		ByIndex(indexName, indexedValue string) ([]interface{}, error)
	}{c.ingressIndex}
	if c.httpRouteIndex != nil {
		indexes = append(indexes, c.httpRouteIndex)
	}
	return controller.RoutesByHost(indexes, hostIndex, bucket)
}

// hostRefusal says why svc may not have an Ingress for host, held by another namespace,
// or "" when it may.
func (c *Controller) hostRefusal(svc *corev1.Service, host string) (string, error) {
	holder, ok, err := c.hostHolder(host)
	if err != nil || !ok || holder.namespace == svc.Namespace || c.sharedNamespaces.Has(holder.namespace) && c.sharedNamespaces.Has(svc.Namespace) {
		return "", err
	}
	since := "it waits for an Ingress too, and is older"
	if holder.routed {
		since = fmt.Sprintf("its %s routes it since %s", cmp.Or(holder.routedBy, "Ingress"), holder.ingressCreated.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("host %q is held by namespace %q (%s: %s); no Ingress for it here until that namespace lets it go",
		host, holder.namespace, holder.claimant, since), nil
}

// catchAllRefusal says why svc may not have a catch-all Ingress (no ingress/host), or
// "" when it may.
func (c *Controller) catchAllRefusal(svc *corev1.Service) string {
	if c.catchAll.Has("*") || c.catchAll.Has(svc.Namespace) {
		return ""
	}
	return fmt.Sprintf("annotation %s is not set: a rule without a host catches every host, which namespace %q may not claim (--ingress-catch-all-namespaces); set %s",
		AnnotationHost, svc.Namespace, AnnotationHost)
}

// enqueueHostClaimants queues the Services that claim a host in buckets: a host let go
// may be theirs now.
func (c *Controller) enqueueHostClaimants(buckets []string) {
	for _, bucket := range sets.List(sets.New(buckets...)) {
		objs, err := c.serviceIndex.ByIndex(hostIndex, bucket)
		if err != nil {
			continue
		}
		for _, obj := range objs {
			if svc, ok := obj.(*corev1.Service); ok {
				c.loop.Enqueue(cache.MetaObjectToName(svc))
			}
		}
	}
}

// hostBuckets returns the host buckets of a Service's claim or of an Ingress's rules.
func hostBuckets(obj interface{}) []string {
	buckets, _ := indexByHost(obj)
	return buckets
}

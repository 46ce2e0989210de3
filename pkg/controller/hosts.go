package controller

import (
	"fmt"
	"slices"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Hosts of Ingress rules and routes, for the ownership of hosts between namespaces
// (pkg/controller/ingress/hosts.go, pkg/controller/app/routehosts.go).

// HostBucket returns the bucket of host: its parent domain ("example.com" for
// "shop.example.com" and for "*.example.com"). Hosts conflict only within a bucket.
func HostBucket(host string) string {
	_, parent, _ := strings.Cut(host, ".")
	return parent
}

// HostsConflict reports whether two hosts would route the same requests: equal, or one
// a wildcard covering the other.
func HostsConflict(a, b string) bool {
	return a == b || wildcardCovers(a, b) || wildcardCovers(b, a)
}

// wildcardCovers reports whether wildcard host w ("*.example.com") matches host h: h is w with
// its "*" replaced by one label.
func wildcardCovers(w, h string) bool {
	suffix, ok := strings.CutPrefix(w, "*")
	if !ok || strings.HasPrefix(h, "*") {
		return false
	}
	label, found := strings.CutSuffix(h, suffix)
	return found && label != "" && !strings.Contains(label, ".")
}

// HostBuckets returns the buckets of hosts (lowercased; "" skipped: a rule without a
// host claims none), each once, sorted: the index values of an object that routes them.
func HostBuckets(hosts ...string) []string {
	var buckets []string
	for _, h := range hosts {
		if h == "" {
			continue
		}
		if b := HostBucket(strings.ToLower(h)); !slices.Contains(buckets, b) {
			buckets = append(buckets, b)
		}
	}
	slices.Sort(buckets)
	return buckets
}

// RoutedHosts returns the hosts an Ingress (its rules') or an HTTPRoute (its hostnames)
// routes, lowercased ("" for a rule without a host); nil for any other object.
func RoutedHosts(obj interface{}) []string {
	var hosts []string
	switch o := obj.(type) {
	case *networkingv1.Ingress:
		hosts = make([]string, 0, len(o.Spec.Rules))
		for _, r := range o.Spec.Rules {
			hosts = append(hosts, strings.ToLower(r.Host))
		}
	case *gatewayv1.HTTPRoute:
		hosts = make([]string, 0, len(o.Spec.Hostnames))
		for _, h := range o.Spec.Hostnames {
			hosts = append(hosts, strings.ToLower(string(h)))
		}
	}
	return hosts
}

// RouteKind returns the kind of a route object: "HTTPRoute" for a Gateway API HTTPRoute,
// else "Ingress".
func RouteKind(obj interface{}) string {
	if _, ok := obj.(*gatewayv1.HTTPRoute); ok {
		return "HTTPRoute"
	}
	return "Ingress"
}

// RoutesByHost returns the route objects (Ingresses, HTTPRoutes) of the caches indexes
// that route a host of bucket, indexed by HostBuckets under index.
func RoutesByHost[I interface {
	ByIndex(indexName, indexedValue string) ([]interface{}, error)
}](indexes []I, index, bucket string) ([]metav1.Object, error) {
	var routed []metav1.Object
	for _, i := range indexes {
		objs, err := i.ByIndex(index, bucket)
		if err != nil {
			return nil, fmt.Errorf("listing the routes of hosts under %q: %w", bucket, err)
		}
		for _, obj := range objs {
			if o, ok := obj.(metav1.Object); ok {
				routed = append(routed, o)
			}
		}
	}
	return routed, nil
}

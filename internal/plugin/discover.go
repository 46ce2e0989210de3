package plugin

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	appclientset "github.com/app-controller/app-controller/pkg/generated/clientset/versioned"
)

// Clients are the API clients the plugin reads with.
type Clients struct {
	// Discovery finds the App API and the namespaced resources the tree walk lists.
	Discovery discovery.DiscoveryInterface
	// Metadata lists objects for the walk: ownerReferences are all it needs, so the
	// data of Secrets and ConfigMaps never leaves the server.
	Metadata metadata.Interface
	// Dynamic reads Apps, and the full objects of the kinds found in a tree to compute
	// their health.
	Dynamic dynamic.Interface
	// Apps creates Apps (create), reads them and writes a revision's spec back
	// (rollback), with the generated clientset.
	Apps appclientset.Interface
	// Kube lists an App's revisions (history, rollback) and restarts its Deployment.
	Kube kubernetes.Interface
}

// appResourceName is the plural resource name of App.
const appResourceName = "apps"

// resourceType is a namespaced resource the tree walk lists.
type resourceType struct {
	gvr  schema.GroupVersionResource
	kind string
}

// groupKind returns the group and kind of the resource's objects.
func (r resourceType) groupKind() schema.GroupKind {
	return schema.GroupKind{Group: r.gvr.Group, Kind: r.kind}
}

// skippedResources are never listed by the tree walk: Events are the most numerous
// objects of a namespace and have no owners, pod metrics are computed on each request
// by an aggregated API and have no owners either.
var skippedResources = map[schema.GroupResource]bool{
	{Group: "", Resource: "events"}:              true,
	{Group: "events.k8s.io", Resource: "events"}: true,
	{Group: "metrics.k8s.io", Resource: "pods"}:  true,
}

// appGroupVersion is the App API's group and version (appv1.GroupVersion), as the
// schema type of client-go.
var appGroupVersion = schema.GroupVersion(appv1.GroupVersion)

// appResource returns the resource of App (appcontroller.k8s.io/v1 apps) after checking
// that the server serves it. A cached discovery client that does not know the API is
// invalidated and asked again: the CRD may have been installed after the cache was
// written.
func appResource(dc discovery.DiscoveryInterface) (schema.GroupVersionResource, error) {
	gvr := appGroupVersion.WithResource(appResourceName)
	served, err := servesApps(dc)
	if err == nil && !served {
		if cached, ok := dc.(discovery.CachedDiscoveryInterface); ok && !cached.Fresh() {
			cached.Invalidate()
			served, err = servesApps(dc)
		}
	}
	if err != nil {
		return gvr, fmt.Errorf("discovering the App API %s: %w", appGroupVersion, err)
	}
	if !served {
		return gvr, fmt.Errorf("the server does not serve the App API (%s, resource %s): is the App CRD installed?",
			appGroupVersion, appResourceName)
	}
	return gvr, nil
}

// servesApps tells whether discovery lists the resource apps in appcontroller.k8s.io/v1.
func servesApps(dc discovery.DiscoveryInterface) (bool, error) {
	list, err := dc.ServerResourcesForGroupVersion(appGroupVersion.String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, r := range list.APIResources {
		if r.Name == appResourceName {
			return true, nil
		}
	}
	return false, nil
}

// namespacedResources returns the namespaced resources, in their preferred version, that
// can be listed and are not skippedResources, sorted by group and resource. Only these
// can hold objects owned by a namespaced App: an owner reference must point to an object
// of the same namespace, or to a cluster-scoped one. Groups whose discovery failed are
// left out, each with a warning.
func namespacedResources(dc discovery.DiscoveryInterface) ([]resourceType, []string, error) {
	// The package function, not the method: it works the same with every implementation
	// of DiscoveryInterface, fakes included.
	lists, err := discovery.ServerPreferredNamespacedResources(dc)
	var warnings []string
	if err != nil {
		var failed *discovery.ErrGroupDiscoveryFailed
		if !errors.As(err, &failed) {
			return nil, nil, fmt.Errorf("discovering the server's resources: %w", err)
		}
		for gv, gvErr := range failed.Groups {
			warnings = append(warnings, fmt.Sprintf("skipping API %s, its discovery failed: %v", gv, gvErr))
		}
		sort.Strings(warnings)
	}
	seen := map[schema.GroupVersionResource]bool{}
	var out []resourceType
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("skipping API %q: %v", list.GroupVersion, err))
			continue
		}
		for _, r := range list.APIResources {
			rt, ok := listable(gv, r)
			if !ok || seen[rt.gvr] {
				continue
			}
			seen[rt.gvr] = true
			out = append(out, rt)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].gvr.Group != out[j].gvr.Group {
			return out[i].gvr.Group < out[j].gvr.Group
		}
		return out[i].gvr.Resource < out[j].gvr.Resource
	})
	return out, warnings, nil
}

// listable returns the resourceType of r, served in gv, if the walk should list it.
func listable(gv schema.GroupVersion, r metav1.APIResource) (resourceType, bool) {
	if !r.Namespaced || strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") {
		return resourceType{}, false
	}
	if r.Group != "" {
		gv.Group = r.Group
	}
	if r.Version != "" {
		gv.Version = r.Version
	}
	gr := schema.GroupResource{Group: gv.Group, Resource: r.Name}
	if skippedResources[gr] {
		return resourceType{}, false
	}
	return resourceType{gvr: gv.WithResource(r.Name), kind: r.Kind}, true
}

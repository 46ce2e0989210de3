package soak

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
	"github.com/app-controller/app-controller/pkg/controllermanager"
	"github.com/app-controller/app-controller/pkg/podhealth"
)

// The API's side of an informer cache. A cache leaks when it holds objects the API no
// longer has (or holds them twice), not when it grows with the cluster: the Services
// of the managed cache follow the canaries in flight (two split Services each), the
// pods follow the rollouts' surges. So at every sample the sampler also counts, from
// the API server, the objects each store of a process should hold, and the trend of a
// store is that of its excess over the count (trends.go).
//
// What a store should hold is what its informer lists and watches: the resource, the
// label or field selector of its factory (pkg/controllermanager/context.go), every
// namespace (the soak's fleets give no --watch-namespace: fleet_process.go's flags,
// fleet_chart.go's values), and for the Apps the shard's --app-selector, the only
// informer the shards split (shard=a, shard=b). The factories' names are
// app_controller_informer_store_objects' factory label (storemetrics.go); the resource
// label is "resource.group" (schema.GroupResource's String).

// appsResource is the resource of the App informer, the one the shards split.
var appsResource = schema.GroupResource{Group: appv1.GroupName, Resource: "apps"}

// storeQuery is what the API server is asked to count for a store: a resource, with
// the label and field selectors of the store's informer, in every namespace.
type storeQuery struct {
	resource                     schema.GroupResource
	labelSelector, fieldSelector string
}

func (q storeQuery) String() string {
	var sel []string
	for _, s := range []string{q.labelSelector, q.fieldSelector} {
		if s != "" {
			sel = append(sel, s)
		}
	}
	if len(sel) == 0 {
		return q.resource.String()
	}
	return q.resource.String() + " (" + strings.Join(sel, "; ") + ")"
}

// queryOf returns what the API server holds of store ("factory/resource") of a process
// of shard. ok is false for a store the harness cannot count: a factory it does not
// know (its selection unknown), or the Apps of a process of no known shard; such a
// store is judged on its own size, as before the counts (trends.go).
func queryOf(store, shard string) (q storeQuery, ok bool) {
	factory, resource, found := strings.Cut(store, "/")
	if !found || resource == "" {
		return storeQuery{}, false
	}
	q.resource = schema.ParseGroupResource(resource)
	switch factory {
	case controllermanager.FactoryKube, controllermanager.FactoryMetadata:
		// Every object of the resource.
	case controllermanager.FactoryManaged, controllermanager.FactoryManagedGateway:
		q.labelSelector = controller.ManagedSelector().String()
	case controllermanager.FactoryUnmanagedMetadata:
		q.labelSelector = controller.UnmanagedSelector().String()
	case controllermanager.FactoryProbeEvents:
		q.fieldSelector = podhealth.ProbeEventSelector
	case controllermanager.FactoryApps:
		// The factory's --app-selector selects the Apps; the checks' templates, from
		// the same factory, are watched without it (templateInformers).
		if q.resource == appsResource {
			if shard != shardA && shard != shardB {
				return storeQuery{}, false
			}
			q.labelSelector = shardLabel + "=" + shard
		}
	default:
		return storeQuery{}, false
	}
	return q, true
}

// storeCounter counts the objects the API server holds for a query.
type storeCounter interface {
	count(ctx context.Context, q storeQuery) (int, error)
}

const (
	// countTimeout bounds the counts of one sample: half the sample interval, so that
	// the sampler keeps its pace with an API server that does not answer (a count that
	// fails leaves that sample's excess out).
	countTimeout = 5 * time.Second
	// countPageSize is the page of a count's list.
	countPageSize = 500
)

// apiCounter counts with lists of the objects' metadata alone (no spec, no status),
// from the API server's watch cache (resourceVersion "0"): cheap for the API server
// (no etcd read) and for the harness, and the same cache the controller's watches are
// fed from, so that the count is what the store should have caught up with. During an
// etcd pause the watch cache still answers.
type apiCounter struct {
	metadata metadata.Interface
	// mapper finds a version the API server serves of a resource of a named group.
	mapper meta.RESTMapper
}

// newAPICounter builds the counter from cfg and kube's discovery.
func newAPICounter(cfg *rest.Config, kube kubernetes.Interface) (*apiCounter, error) {
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the metadata client of the store counts: %w", err)
	}
	return &apiCounter{metadata: md, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery()))}, nil
}

// count lists the metadata of q's objects in every namespace, page by page, and
// returns how many there are.
func (c *apiCounter) count(ctx context.Context, q storeQuery) (int, error) {
	// The core group has one version; asked without a group, a mapper would also match
	// the resources of that name in other groups (events.k8s.io's events).
	gvr := q.resource.WithVersion("v1")
	if q.resource.Group != "" {
		var err error
		if gvr, err = c.mapper.ResourceFor(q.resource.WithVersion("")); err != nil {
			return 0, fmt.Errorf("counting %s: finding a version the API server serves: %w", q, err)
		}
	}
	opts := metav1.ListOptions{LabelSelector: q.labelSelector, FieldSelector: q.fieldSelector, ResourceVersion: "0", Limit: countPageSize}
	n := 0
	for {
		list, err := c.metadata.Resource(gvr).List(ctx, opts)
		if err != nil {
			return 0, fmt.Errorf("counting %s: listing the metadata of %s: %w", q, gvr, err)
		}
		n += len(list.Items)
		if list.Continue == "" {
			return n, nil
		}
		// The next pages at the first one's version, which the continue token carries
		// (a resourceVersion beside it is refused).
		opts.Continue, opts.ResourceVersion = list.Continue, ""
	}
}

package controllermanager

import (
	"context"
	"reflect"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// app_controller_informer_store_objects: how many objects the cache of each shared
// informer holds, counted at scrape time. A cache that keeps growing while the cluster
// does not is a leak the soak test looks for (test/soak); it also shows which cache
// holds the memory that docs/operations.md's sizing measures.

// Informer factory names, the factory label of app_controller_informer_store_objects
// (the soak counts each factory's objects in the API by them: test/soak).
const (
	FactoryKube              = "kube"
	FactoryManaged           = "managed"
	FactoryUnmanagedMetadata = "unmanaged-metadata"
	FactoryMetadata          = "metadata"
	FactoryApps              = "apps"
	FactoryManagedGateway    = "managed-gateway"
	FactoryProbeEvents       = "probe-events"
)

var informerStoreObjectsDesc = metrics.NewDesc("app_controller_informer_store_objects",
	"Objects in the cache of each started shared informer, by informer factory and resource (resource.group), counted at scrape time; the caches of several --watch-namespace are added up",
	[]string{"factory", "resource"}, nil, metrics.ALPHA, "")

// informerStore is the cache of one started informer.
type informerStore struct {
	factory, resource string
	store             cache.Store
}

// storeCollector serves app_controller_informer_store_objects for the caches of every
// running ControllerContext (one per --watch-namespace).
type storeCollector struct {
	metrics.BaseStableCollector

	mu     sync.Mutex
	stores map[*ControllerContext][]informerStore
}

// informerStores is the process's collector, registered in the legacy registry once.
var (
	informerStores         = &storeCollector{stores: map[*ControllerContext][]informerStore{}}
	registerInformerStores sync.Once
)

// countInformerStores makes the caches of cc's started informers count in the
// process's app_controller_informer_store_objects, until cc shuts down.
func countInformerStores(cc *ControllerContext) {
	registerInformerStores.Do(func() { legacyregistry.CustomMustRegister(informerStores) })
	informerStores.add(cc, cc.startedStores())
}

// add makes stores, the caches of cc's informers, count until remove.
func (s *storeCollector) add(cc *ControllerContext, stores []informerStore) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stores[cc] = stores
}

// remove stops counting cc's caches (its informers stopped).
func (s *storeCollector) remove(cc *ControllerContext) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.stores, cc)
}

// DescribeWithStability implements metrics.StableCollector.
func (s *storeCollector) DescribeWithStability(ch chan<- *metrics.Desc) {
	ch <- informerStoreObjectsDesc
}

// CollectWithStability implements metrics.StableCollector: one series per factory and
// resource, the objects of every context's cache of that pair added up.
func (s *storeCollector) CollectWithStability(ch chan<- metrics.Metric) {
	type key struct{ factory, resource string }
	counts := map[key]int{}
	s.mu.Lock()
	for _, stores := range s.stores {
		for _, st := range stores {
			counts[key{st.factory, st.resource}] += len(st.store.ListKeys())
		}
	}
	s.mu.Unlock()
	for k, n := range counts {
		ch <- metrics.NewLazyConstMetric(informerStoreObjectsDesc, metrics.GaugeValue, float64(n), k.factory, k.resource)
	}
}

// storeScheme knows the types of every typed factory, to name their resources.
var storeScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(appv1.Install(s))
	utilruntime.Must(gatewayv1.Install(s))
	return s
}()

// typedStores returns the caches of the started informers of a typed factory (client-go
// or generated): synced is its WaitForCacheSyncWithContext on a cancelled context, which
// lists the started informers without waiting; informerFor its InformerFor, which
// returns the existing informer of a type.
func typedStores(factory string, synced map[reflect.Type]bool, informerFor func(runtime.Object) cache.SharedIndexInformer) []informerStore {
	var out []informerStore
	for t := range synced {
		obj, ok := reflect.New(t.Elem()).Interface().(runtime.Object)
		if !ok {
			continue
		}
		resource := t.Elem().Name()
		if gvks, _, err := storeScheme.ObjectKinds(obj); err == nil && len(gvks) > 0 {
			plural, _ := meta.UnsafeGuessKindToResource(gvks[0])
			resource = plural.GroupResource().String()
		}
		out = append(out, informerStore{factory: factory, resource: resource, store: informerFor(obj).GetStore()})
	}
	return out
}

// metadataStores returns the caches of the started informers of a metadata factory.
func metadataStores(factory string, synced map[schema.GroupVersionResource]bool, informerFor func(schema.GroupVersionResource) cache.SharedIndexInformer) []informerStore {
	out := make([]informerStore, 0, len(synced))
	for gvr := range synced {
		out = append(out, informerStore{factory: factory, resource: gvr.GroupResource().String(), store: informerFor(gvr).GetStore()})
	}
	return out
}

// startedStores lists the caches of every informer cc's factories started.
func (cc *ControllerContext) startedStores() []informerStore {
	listOnly, cancel := context.WithCancel(context.Background())
	cancel()
	closed := listOnly.Done()
	var out []informerStore
	out = append(out, typedStores(FactoryKube, cc.KubeInformers.WaitForCacheSyncWithContext(listOnly).Synced,
		func(o runtime.Object) cache.SharedIndexInformer { return cc.KubeInformers.InformerFor(o, nil) })...)
	out = append(out, typedStores(FactoryManaged, cc.ManagedInformers.WaitForCacheSyncWithContext(listOnly).Synced,
		func(o runtime.Object) cache.SharedIndexInformer { return cc.ManagedInformers.InformerFor(o, nil) })...)
	out = append(out, typedStores(FactoryProbeEvents, cc.ProbeEventInformers.WaitForCacheSyncWithContext(listOnly).Synced,
		func(o runtime.Object) cache.SharedIndexInformer { return cc.ProbeEventInformers.InformerFor(o, nil) })...)
	out = append(out, typedStores(FactoryApps, cc.AppInformers.WaitForCacheSyncWithContext(listOnly).Synced,
		func(o runtime.Object) cache.SharedIndexInformer { return cc.AppInformers.InformerFor(o, nil) })...)
	out = append(out, typedStores(FactoryManagedGateway, cc.ManagedGatewayInformers.WaitForCacheSyncWithContext(listOnly).Synced,
		func(o runtime.Object) cache.SharedIndexInformer {
			return cc.ManagedGatewayInformers.InformerFor(o, nil)
		})...)
	out = append(out, metadataStores(FactoryUnmanagedMetadata, cc.UnmanagedMetadataInformers.WaitForCacheSync(closed),
		func(gvr schema.GroupVersionResource) cache.SharedIndexInformer {
			return cc.UnmanagedMetadataInformers.ForResource(gvr).Informer()
		})...)
	out = append(out, metadataStores(FactoryMetadata, cc.MetadataInformers.WaitForCacheSync(closed),
		func(gvr schema.GroupVersionResource) cache.SharedIndexInformer {
			return cc.MetadataInformers.ForResource(gvr).Informer()
		})...)
	return out
}

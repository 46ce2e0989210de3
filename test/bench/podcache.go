package bench

import (
	"context"
	"fmt"
	"runtime"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/app-controller/app-controller/pkg/controller"
	"github.com/app-controller/app-controller/pkg/podhealth"
)

// heapCost returns how many bytes of Go heap the objects that list returns take once
// each is passed through transform and kept in a cache.Indexer, as an informer keeps
// them: the heap in use after a GC with the indexer held, minus before; the listed
// objects themselves are dropped first. It also returns how many objects there were.
func heapCost(list func() ([]interface{}, error), transform func(interface{}) (interface{}, error)) (int, float64, error) {
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	objs, err := list()
	if err != nil {
		return 0, 0, err
	}
	n := len(objs)
	for i, obj := range objs {
		kept, err := transform(obj)
		if err != nil {
			return 0, 0, err
		}
		if err := indexer.Add(kept); err != nil {
			return 0, 0, err
		}
		objs[i] = nil
	}
	after := heap()
	runtime.KeepAlive(indexer)
	if n == 0 || after < before {
		return n, 0, nil
	}
	return n, float64(after - before), nil
}

// podCacheSize measures what the App controller's pod cache holds per 1000 pods: the
// managed pods of namespace ns, listed as the informer lists them (protobuf), kept
// trimmed by podhealth.TrimPod (as the informer keeps them) and, for comparison, whole
// (managedFields dropped). It returns the pod count and the MiB per 1000 pods, trimmed
// and whole.
func podCacheSize(ctx context.Context, kube kubernetes.Interface, ns string) (pods int, trimmedMiB, wholeMiB float64, err error) {
	list := func() ([]interface{}, error) {
		return listed(kube.CoreV1().Pods(ns).List(ctx, managedOnly()))
	}
	pods, trimmed, err := heapCost(list, podhealth.TrimPod)
	if err != nil {
		return 0, 0, 0, err
	}
	_, whole, err := heapCost(list, func(obj interface{}) (interface{}, error) {
		obj.(*corev1.Pod).ManagedFields = nil // what the other informers drop (controller.StripManagedFields)
		return obj, nil
	})
	return pods, mibPer1000(trimmed, pods), mibPer1000(whole, pods), err
}

// cacheSizes measures what the App controller's caches of namespace ns's Apps,
// Deployments and Services hold per 1000 Apps, each kept as its informer keeps it
// (managedFields dropped; Deployments and Services listed as protobuf, Apps as JSON, as
// the controller lists them), by resource. The pods are podCacheSize's.
func cacheSizes(ctx context.Context, c clients, ns string, apps int) (map[string]float64, error) {
	lists := map[string]func() ([]interface{}, error){
		"apps": func() ([]interface{}, error) {
			return listed(c.app.AppcontrollerV1().Apps(ns).List(ctx, metav1.ListOptions{}))
		},
		"deployments": func() ([]interface{}, error) {
			return listed(c.kube.AppsV1().Deployments(ns).List(ctx, managedOnly()))
		},
		"services": func() ([]interface{}, error) {
			return listed(c.kube.CoreV1().Services(ns).List(ctx, managedOnly()))
		},
	}
	sizes := make(map[string]float64, len(lists))
	for resource, list := range lists {
		_, bytes, err := heapCost(list, controller.StripManagedFields)
		if err != nil {
			return nil, fmt.Errorf("measuring the cache of %s: %w", resource, err)
		}
		sizes[resource] = mibPer1000(bytes, apps)
	}
	return sizes, nil
}

// managedOnly lists the objects labelled as managed by app-controller, as the managed
// informers do.
func managedOnly() metav1.ListOptions {
	return metav1.ListOptions{LabelSelector: controller.ManagedSelector().String()}
}

// listed returns copies of the items of a List call's result, each its own allocation
// as an informer's objects are, so that the list itself can be dropped.
func listed(list k8sruntime.Object, err error) ([]interface{}, error) {
	if err != nil {
		return nil, fmt.Errorf("listing: %w", err)
	}
	objs, err := meta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	out := make([]interface{}, len(objs))
	for i, obj := range objs {
		out[i] = obj.DeepCopyObject()
	}
	return out, nil
}

// mibPer1000 is bytes in MiB per 1000 of n objects; 0 for none.
func mibPer1000(bytes float64, n int) float64 {
	if n == 0 {
		return 0
	}
	return round2(bytes / (1 << 20) * 1000 / float64(n))
}

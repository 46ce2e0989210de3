package bench

import (
	"context"
	"fmt"
	"runtime"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	objs = nil
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
		l, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: controller.ManagedSelector().String()})
		if err != nil {
			return nil, fmt.Errorf("listing the pods of %s: %w", ns, err)
		}
		objs := make([]interface{}, len(l.Items))
		for i := range l.Items {
			objs[i] = l.Items[i].DeepCopy()
		}
		return objs, nil
	}
	perThousand := func(n int, bytes float64) float64 {
		if n == 0 {
			return 0
		}
		return round2(bytes / (1 << 20) * 1000 / float64(n))
	}
	pods, trimmed, err := heapCost(list, podhealth.TrimPod)
	if err != nil {
		return 0, 0, 0, err
	}
	_, whole, err := heapCost(list, func(obj interface{}) (interface{}, error) {
		obj.(*corev1.Pod).ManagedFields = nil // what the other informers drop (controller.StripManagedFields)
		return obj, nil
	})
	return pods, perThousand(pods, trimmed), perThousand(pods, whole), err
}

// cacheSizes measures what the App controller's caches of namespace ns's Apps,
// Deployments and Services hold per 1000 Apps, each kept as its informer keeps it
// (managedFields dropped; Deployments and Services listed as protobuf, Apps as JSON, as
// the controller lists them), by resource. The pods are podCacheSize's.
func cacheSizes(ctx context.Context, c clients, ns string, apps int) (map[string]float64, error) {
	lists := map[string]func() ([]interface{}, error){
		"apps": func() ([]interface{}, error) {
			l, err := c.app.AppcontrollerV1().Apps(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, fmt.Errorf("listing the Apps of %s: %w", ns, err)
			}
			objs := make([]interface{}, len(l.Items))
			for i := range l.Items {
				objs[i] = l.Items[i].DeepCopy()
			}
			return objs, nil
		},
		"deployments": func() ([]interface{}, error) {
			l, err := c.kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{LabelSelector: controller.ManagedSelector().String()})
			if err != nil {
				return nil, fmt.Errorf("listing the Deployments of %s: %w", ns, err)
			}
			objs := make([]interface{}, len(l.Items))
			for i := range l.Items {
				objs[i] = l.Items[i].DeepCopy()
			}
			return objs, nil
		},
		"services": func() ([]interface{}, error) {
			l, err := c.kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{LabelSelector: controller.ManagedSelector().String()})
			if err != nil {
				return nil, fmt.Errorf("listing the Services of %s: %w", ns, err)
			}
			objs := make([]interface{}, len(l.Items))
			for i := range l.Items {
				objs[i] = l.Items[i].DeepCopy()
			}
			return objs, nil
		},
	}
	sizes := make(map[string]float64, len(lists))
	for resource, list := range lists {
		_, bytes, err := heapCost(list, controller.StripManagedFields)
		if err != nil {
			return nil, err
		}
		sizes[resource] = round2(bytes / (1 << 20) * 1000 / float64(apps))
	}
	return sizes, nil
}

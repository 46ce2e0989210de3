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

// podCacheSize measures what the App controller's pod cache holds per 1000 pods: the
// managed pods of namespace ns, listed as the informer lists them (protobuf), kept in a
// cache.Indexer trimmed by podhealth.TrimPod (as the informer keeps them) and, for
// comparison, whole. Each is the Go heap in use after a GC with the indexer held, minus
// before; the listed objects themselves are dropped first. It returns the pod count and
// the MiB per 1000 pods, trimmed and whole.
func podCacheSize(ctx context.Context, kube kubernetes.Interface, ns string) (pods int, trimmedMiB, wholeMiB float64, err error) {
	measure := func(transform func(*corev1.Pod) (interface{}, error)) (int, float64, error) {
		heap := func() uint64 {
			runtime.GC()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			return m.HeapAlloc
		}
		before := heap()
		indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
		list, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: controller.ManagedSelector().String()})
		if err != nil {
			return 0, 0, fmt.Errorf("listing the pods of %s: %w", ns, err)
		}
		n := len(list.Items)
		for i := range list.Items {
			obj, err := transform(list.Items[i].DeepCopy())
			if err != nil {
				return 0, 0, err
			}
			if err := indexer.Add(obj); err != nil {
				return 0, 0, err
			}
		}
		list = nil
		after := heap()
		runtime.KeepAlive(indexer)
		if n == 0 || after < before {
			return n, 0, nil
		}
		return n, float64(after-before) / (1 << 20) * 1000 / float64(n), nil
	}
	pods, trimmedMiB, err = measure(func(p *corev1.Pod) (interface{}, error) { return podhealth.TrimPod(p) })
	if err != nil {
		return 0, 0, 0, err
	}
	_, wholeMiB, err = measure(func(p *corev1.Pod) (interface{}, error) {
		p.ManagedFields = nil // what the other informers drop (controller.StripManagedFields)
		return p, nil
	})
	return pods, round2(trimmedMiB), round2(wholeMiB), err
}

// Package controllertest holds what the controllers' unit tests share: a test context,
// seeding of informer caches, draining of work queues and fake event recorders, the
// write actions of a fake clientset, what kstatus reads from an App, and the heap that
// objects take in an informer's store. Tests run controllers on fake clientsets with
// caches seeded by hand (the informers never run), in the style of
// kube-controller-manager's tests. The Apps they build are in appfixture.
package controllertest

import (
	"context"
	goruntime "runtime"
	"slices"
	"strconv"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// Context returns a context whose logger writes to the test's log; for benchmarks (or
// any non-*testing.T) it logs as in production, with klog at its default verbosity.
func Context(tb testing.TB) context.Context {
	if t, ok := tb.(*testing.T); ok {
		_, ctx := ktesting.NewTestContext(t)
		return ctx
	}
	return klog.NewContext(context.Background(), klog.Background())
}

// Seed adds objs to an informer's cache and, if tracker is not nil, to a fake
// clientset's object tracker, so that the cache and the fake API server agree.
func Seed(tb testing.TB, indexer cache.Indexer, tracker core.ObjectTracker, objs ...runtime.Object) {
	tb.Helper()
	for _, obj := range objs {
		if err := indexer.Add(obj); err != nil {
			tb.Fatalf("seeding the cache: %v", err)
		}
		if tracker == nil {
			continue
		}
		if err := tracker.Add(obj); err != nil {
			tb.Fatalf("seeding the fake API server: %v", err)
		}
	}
}

// Writes returns the write actions (every verb but get, list and watch) among actions.
func Writes(actions ...[]core.Action) []core.Action {
	var out []core.Action //nolint:prealloc // nil, not empty, when there is no write: tests compare with nil
	for _, a := range slices.Concat(actions...) {
		switch a.GetVerb() {
		case "get", "list", "watch":
			continue
		}
		out = append(out, a)
	}
	return out
}

// Verbs returns actions as "verb resource" strings (nil for no action).
func Verbs(actions []core.Action) []string {
	var out []string //nolint:prealloc // nil for no action, as documented: tests compare with nil
	for _, a := range actions {
		out = append(out, a.GetVerb()+" "+a.GetResource().Resource)
	}
	return out
}

// DrainEvents returns the events a fake recorder holds ("Type Reason Message"), and
// empties it.
func DrainEvents(recorder *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// DrainQueue returns the keys queue holds, sorted, and empties it (each key is taken,
// done and forgotten).
func DrainQueue(queue workqueue.TypedRateLimitingInterface[cache.ObjectName]) []string {
	var out []string
	for queue.Len() > 0 {
		key, _ := queue.Get()
		queue.Done(key)
		queue.Forget(key)
		out = append(out, key.String())
	}
	slices.Sort(out)
	return out
}

// KStatus computes app's status as kstatus-based tools (Flux, Argo CD, kpt) do.
func KStatus(tb testing.TB, app *appv1.App) kstatus.Status {
	tb.Helper()
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(app)
	if err != nil {
		tb.Fatalf("converting App %s/%s: %v", app.Namespace, app.Name, err)
	}
	res, err := kstatus.Compute(&unstructured.Unstructured{Object: content})
	if err != nil {
		tb.Fatalf("computing the kstatus of App %s/%s: %v", app.Namespace, app.Name, err)
	}
	return res.Status
}

// StoreFootprint reports, as the benchmark's heap-bytes/object metric, the live heap that
// n objects of type P take in an informer's store: each decoded afresh from raw
// (protobuf), as a watch hands objects out (nothing shared between them), named apart,
// and passed through transform (nil: none), as the informer's transform would. The
// time per op is not the figure.
func StoreFootprint[P interface {
	*T
	metav1.Object
	Unmarshal([]byte) error
}, T any](b *testing.B, n int, raw []byte, transform cache.TransformFunc) {
	var perObject float64
	for b.Loop() {
		before := HeapInUse()
		store := cache.NewStore(cache.MetaNamespaceKeyFunc)
		for i := range n {
			o := P(new(T))
			if err := o.Unmarshal(raw); err != nil {
				b.Fatal(err)
			}
			o.SetName(o.GetName() + "-" + strconv.Itoa(i))
			var obj interface{} = o
			if transform != nil {
				var err error
				if obj, err = transform(obj); err != nil {
					b.Fatal(err)
				}
			}
			if err := store.Add(obj); err != nil {
				b.Fatal(err)
			}
		}
		perObject = float64(HeapInUse()-before) / float64(n)
		goruntime.KeepAlive(store)
	}
	b.ReportMetric(perObject, "heap-bytes/object")
}

// HeapInUse returns the live heap after a full collection.
func HeapInUse() int64 {
	goruntime.GC()
	goruntime.GC()
	var m goruntime.MemStats
	goruntime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

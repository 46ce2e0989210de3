package bench

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	appinformers "github.com/app-controller/app-controller/pkg/generated/informers/externalversions"
)

// appReady tells whether the App reports Ready=True at its generation.
func appReady(a *appv1.App) bool {
	cond := meta.FindStatusCondition(a.Status.Conditions, appv1.ConditionReady)
	return cond != nil && cond.Status == metav1.ConditionTrue && cond.ObservedGeneration == a.Generation &&
		a.Status.ObservedGeneration == a.Generation
}

// deploymentAvailable tells whether a Deployment is rolled out at its generation and
// available: what the App controller requires of it for Ready.
func deploymentAvailable(d *appsv1.Deployment) bool {
	desired := int32(1)
	if d.Spec.Replicas != nil {
		desired = *d.Spec.Replicas
	}
	st := d.Status
	if st.ObservedGeneration < d.Generation || st.UpdatedReplicas < desired || st.Replicas > st.UpdatedReplicas ||
		st.AvailableReplicas < desired {
		return false
	}
	for _, c := range st.Conditions {
		if c.Type == appsv1.DeploymentAvailable {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// appWatch follows the Apps of a namespace and records when each is first seen Ready at
// each generation.
type appWatch struct {
	mu sync.Mutex
	// readyAt[name][generation] is when the App was first seen Ready at generation.
	readyAt map[string]map[int64]time.Time
	// ready[name] tells whether the App's latest state is Ready at its generation.
	ready  map[string]bool
	cancel context.CancelFunc
}

// watchApps starts an informer on the Apps of ns and returns once it has synced.
func watchApps(ctx context.Context, c clients, ns string) (*appWatch, error) {
	w := &appWatch{readyAt: map[string]map[int64]time.Time{}, ready: map[string]bool{}}
	ctx, w.cancel = context.WithCancel(ctx)
	factory := appinformers.NewSharedInformerFactoryWithOptions(c.app, 0, appinformers.WithNamespace(ns))
	informer := factory.Appcontroller().V1().Apps().Informer()
	observe := func(obj any) {
		a, ok := obj.(*appv1.App)
		if !ok {
			return
		}
		now := time.Now()
		w.mu.Lock()
		defer w.mu.Unlock()
		r := appReady(a)
		w.ready[a.Name] = r
		if !r {
			return
		}
		gens := w.readyAt[a.Name]
		if gens == nil {
			gens = map[int64]time.Time{}
			w.readyAt[a.Name] = gens
		}
		if _, seen := gens[a.Generation]; !seen {
			gens[a.Generation] = now
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    observe,
		UpdateFunc: func(_, obj any) { observe(obj) },
	}); err != nil {
		w.cancel()
		return nil, fmt.Errorf("watching Apps: %w", err)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		w.cancel()
		return nil, fmt.Errorf("the App informer of %s did not sync", ns)
	}
	return w, nil
}

func (w *appWatch) stop() { w.cancel() }

// readyTime returns when the App was first seen Ready at generation gen or later (zero
// if never).
func (w *appWatch) readyTime(name string, gen int64) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	var first time.Time
	for g, t := range w.readyAt[name] {
		if g >= gen && (first.IsZero() || t.Before(first)) {
			first = t
		}
	}
	return first
}

// waitReady waits until every App of want (name -> generation) has been Ready at its
// generation and every App of want is Ready now. It returns when the last became Ready,
// or the names still not Ready at timeout.
func (w *appWatch) waitReady(ctx context.Context, want map[string]int64, timeout time.Duration) (time.Time, []string, error) {
	deadline := time.Now().Add(timeout)
	for {
		var last time.Time
		var stuck []string
		w.mu.Lock()
		for name, gen := range want {
			var first time.Time
			for g, t := range w.readyAt[name] {
				if g >= gen && (first.IsZero() || t.Before(first)) {
					first = t
				}
			}
			if first.IsZero() || !w.ready[name] {
				stuck = append(stuck, name)
				continue
			}
			if first.After(last) {
				last = first
			}
		}
		w.mu.Unlock()
		if len(stuck) == 0 {
			return last, nil, nil
		}
		if time.Now().After(deadline) {
			sort.Strings(stuck)
			return time.Time{}, stuck, fmt.Errorf("%d of %d Apps not Ready at their generation after %s", len(stuck), len(want), timeout)
		}
		select {
		case <-ctx.Done():
			return time.Time{}, stuck, ctx.Err()
		case <-time.After(pollInterval):
		}
	}
}

// watchDeployments calls available once for each Deployment of ns the first time it is
// seen available; it returns once the informer has synced, and a stop function.
func watchDeployments(ctx context.Context, c clients, ns string, available func(name string)) (func(), error) {
	ctx, cancel := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactoryWithOptions(c.kube, 0, informers.WithNamespace(ns))
	informer := factory.Apps().V1().Deployments().Informer()
	var mu sync.Mutex
	seen := map[string]bool{}
	observe := func(obj any) {
		d, ok := obj.(*appsv1.Deployment)
		if !ok || !deploymentAvailable(d) {
			return
		}
		mu.Lock()
		first := !seen[d.Name]
		seen[d.Name] = true
		mu.Unlock()
		if first {
			available(d.Name)
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    observe,
		UpdateFunc: func(_, obj any) { observe(obj) },
	}); err != nil {
		cancel()
		return nil, fmt.Errorf("watching Deployments: %w", err)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		cancel()
		return nil, fmt.Errorf("the Deployment informer of %s did not sync", ns)
	}
	return cancel, nil
}

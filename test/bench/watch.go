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
// each generation, and when each is first seen in the state of the goal it was last
// given (expect).
type appWatch struct {
	mu sync.Mutex
	// readyAt[name][generation] is when the App was first seen Ready at generation.
	readyAt map[string]map[int64]time.Time
	// ready[name] tells whether the App's latest state is Ready at its generation.
	ready map[string]bool
	// goals has the Apps as last seen and when each was first seen in the state of the
	// goal last set.
	goals  goalTracker[*appv1.App]
	cancel context.CancelFunc
}

// watchApps starts an informer on the Apps of ns and returns once it has synced.
func watchApps(ctx context.Context, c clients, ns string) (*appWatch, error) {
	w := &appWatch{readyAt: map[string]map[int64]time.Time{}, ready: map[string]bool{}, goals: newGoalTracker[*appv1.App]()}
	ctx, w.cancel = context.WithCancel(ctx)
	factory := appinformers.NewSharedInformerFactoryWithOptions(c.app, 0, appinformers.WithNamespace(ns))
	informer := factory.Appcontroller().V1().Apps().Informer()
	if err := observeInformer(ctx, factory, informer, w.observe, "App", ns); err != nil {
		w.cancel()
		return nil, err
	}
	return w, nil
}

// observe records what the informer delivered of an App.
func (w *appWatch) observe(a *appv1.App) {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.goals.observe(a.Name, a, now)
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

func (w *appWatch) stop() { w.cancel() }

// expect sets the state waitReached waits for: from now on, each App is recorded when
// first seen in it (an App already in it is recorded now).
func (w *appWatch) expect(goal func(*appv1.App) bool) {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.goals.setGoal(goal, now)
}

// app returns the App name as last seen, nil if never.
func (w *appWatch) app(name string) *appv1.App {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.goals.last[name]
}

// waitReached waits until every App of names has been seen in the state of the goal set
// by expect and is in it now. It returns when the last one reached it, or the names
// not in it at timeout.
func (w *appWatch) waitReached(ctx context.Context, names []string, what string, timeout time.Duration) (time.Time, []string, error) {
	return w.poll(ctx, timeout, len(names), what, func() (time.Time, []string) { return w.goals.reached(names) })
}

// poll runs check, under the lock, every pollInterval until it finds no App stuck, and
// returns the time it returned then; at timeout, the Apps still stuck and an error saying
// how many of total are not what.
func (w *appWatch) poll(ctx context.Context, timeout time.Duration, total int, what string, check func() (time.Time, []string)) (time.Time, []string, error) {
	deadline := time.Now().Add(timeout)
	for {
		w.mu.Lock()
		last, stuck := check()
		w.mu.Unlock()
		if len(stuck) == 0 {
			return last, nil, nil
		}
		if time.Now().After(deadline) {
			sort.Strings(stuck)
			return time.Time{}, stuck, fmt.Errorf("%d of %d Apps not %s after %s", len(stuck), total, what, timeout)
		}
		select {
		case <-ctx.Done():
			return time.Time{}, stuck, ctx.Err()
		case <-time.After(pollInterval):
		}
	}
}

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
	return w.poll(ctx, timeout, len(want), "Ready at their generation", func() (last time.Time, stuck []string) {
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
		return last, stuck
	})
}

// watchDeployments calls available once for each Deployment of ns the first time it is
// seen available; it returns once the informer has synced, and a stop function.
func watchDeployments(ctx context.Context, c clients, ns string, available func(name string)) (func(), error) {
	ctx, cancel := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactoryWithOptions(c.kube, 0, informers.WithNamespace(ns))
	informer := factory.Apps().V1().Deployments().Informer()
	var mu sync.Mutex
	seen := map[string]bool{}
	observe := func(d *appsv1.Deployment) {
		if !deploymentAvailable(d) {
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
	if err := observeInformer(ctx, factory, informer, observe, "Deployment", ns); err != nil {
		cancel()
		return nil, err
	}
	return cancel, nil
}

// observeInformer calls observe with every object of type T informer sees added or
// updated, starts factory until ctx is done and waits until informer has synced; kind
// names the informer's objects (App, Deployment) in errors, ns their namespace.
func observeInformer[T any](ctx context.Context, factory interface{ Start(<-chan struct{}) }, informer cache.SharedInformer, observe func(T), kind, ns string) error {
	typed := func(obj any) {
		if o, ok := obj.(T); ok {
			observe(o)
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    typed,
		UpdateFunc: func(_, obj any) { typed(obj) },
	}); err != nil {
		return fmt.Errorf("watching %ss: %w", kind, err)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		return fmt.Errorf("the %s informer of %s did not sync", kind, ns)
	}
	return nil
}

package bench

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
	appctrl "github.com/app-controller/app-controller/pkg/controller/app"
)

// floorRun is one floor loop's outcome.
type floorRun struct {
	concurrency int
	seconds     float64
	writes      writeCounts
	// from and to bound the loop: its first request and its last response.
	from, to time.Time
	// cpu is what the loop took, its namespace's creation included; apiserverProfile is
	// the API server's CPU profile of its first seconds (Breakdown; "": none).
	cpu              CPUUse
	apiserverProfile string
}

// ended returns r, of a loop begun at start that ends now, with its time and the
// floor's writes meanwhile (from the audit log).
func (r floorRun) ended(e *env, start time.Time) (floorRun, error) {
	end := time.Now()
	r.seconds, r.from, r.to = end.Sub(start).Seconds(), start, end.Add(time.Millisecond)
	var err error
	r.writes, err = e.audit.count(floorUser, start, end.Add(time.Millisecond))
	return r, err
}

// children returns the Deployment and Service the App controller makes for app, built
// by the controller's own builders, as typed objects for a plain POST.
func children(app *appv1.App) (*appsv1.Deployment, *corev1.Service, error) {
	desiredDeployment, err := appctrl.DesiredDeployment(app)
	if err != nil {
		return nil, nil, fmt.Errorf("building the Deployment of %s: %w", app.Name, err)
	}
	desiredService, err := appctrl.DesiredService(app)
	if err != nil {
		return nil, nil, fmt.Errorf("building the Service of %s: %w", app.Name, err)
	}
	deployment, service := &appsv1.Deployment{}, &corev1.Service{}
	if err := controller.Convert(desiredDeployment, deployment); err != nil {
		return nil, nil, fmt.Errorf("converting the Deployment of %s: %w", app.Name, err)
	}
	if err := controller.Convert(desiredService, service); err != nil {
		return nil, nil, fmt.Errorf("converting the Service of %s: %w", app.Name, err)
	}
	return deployment, service, nil
}

// createChildren creates, with plain POSTs, the Deployment and the Service the App
// controller makes for app; loop names the floor loop in errors.
func createChildren(ctx context.Context, e *env, ns string, app *appv1.App, loop string) error {
	deployment, service, err := children(app)
	if err != nil {
		return err
	}
	if _, err := e.floor.kube.AppsV1().Deployments(ns).Create(ctx, deployment, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("%s: creating Deployment %s: %w", loop, deployment.Name, err)
	}
	if _, err := e.floor.kube.CoreV1().Services(ns).Create(ctx, service, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("%s: creating Service %s: %w", loop, service.Name, err)
	}
	return nil
}

// readyStatus is the one status the floor writes per App: Ready at its generation.
func readyStatus(app *appv1.App) {
	app.Status.ObservedGeneration = app.Generation
	meta.SetStatusCondition(&app.Status.Conditions, metav1.Condition{
		Type:               appv1.ConditionReady,
		Status:             metav1.ConditionTrue,
		Reason:             appv1.ReasonAvailable,
		Message:            "Deployment " + app.Spec.DeploymentTemplate.Name + " is available",
		ObservedGeneration: app.Generation,
	})
}

// runFloor is one floor loop: concurrency workers, no client-side limit, create for each
// of n Apps the App, its Deployment and its Service (plain POSTs), and write each App's
// status once after its Deployment is available. A worker takes a pending status write
// before a new App, so that at most concurrency requests are in flight. It returns when
// the last status write is done.
func runFloor(ctx context.Context, e *env, ns string, concurrency int) (floorRun, error) {
	r := floorRun{concurrency: concurrency}
	if err := createNamespace(ctx, e.admin.kube, ns); err != nil {
		return r, err
	}
	var (
		mu      sync.Mutex
		created = make(map[string]*appv1.App, e.cfg.Apps)
	)
	// Deployments may become available before their App is recorded (never: the App is
	// created first) or in any order; each is written once.
	pending := make(chan string, e.cfg.Apps)
	stopWatch, err := watchDeployments(ctx, e.admin, ns, func(deployment string) {
		pending <- strings.TrimSuffix(deployment, "-deploy")
	})
	if err != nil {
		return r, err
	}
	defer stopWatch()

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	timeout := e.convergeTimeout()
	var next, written atomic.Int64
	n := int64(e.cfg.Apps)
	start := time.Now()
	createOne := func(i int) error {
		app := newApp(ns, appName(i), e.cfg.Replicas)
		app, err := e.floor.app.AppcontrollerV1().Apps(ns).Create(ctx, app, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("floor: creating App %s: %w", appName(i), err)
		}
		mu.Lock()
		created[app.Name] = app
		mu.Unlock()
		return createChildren(ctx, e, ns, app, "floor")
	}
	writeStatus := func(name string) error {
		mu.Lock()
		app := created[name].DeepCopy()
		mu.Unlock()
		readyStatus(app)
		if _, err := e.floor.app.AppcontrollerV1().Apps(ns).UpdateStatus(ctx, app, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("floor: writing the status of App %s: %w", name, err)
		}
		written.Add(1)
		return nil
	}
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			for written.Load() < n && ctx.Err() == nil {
				var err error
				select {
				case name := <-pending:
					err = writeStatus(name)
				default:
					if i := next.Add(1) - 1; i < n {
						err = createOne(int(i))
						break
					}
					select {
					case name := <-pending:
						err = writeStatus(name)
					case <-ctx.Done():
					case <-time.After(pollInterval):
					}
				}
				if err != nil {
					cancel(err)
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
		cancel(fmt.Errorf("floor at concurrency %d: %d of %d status writes done after %s", concurrency, written.Load(), n, timeout))
		<-done
	}
	if err := context.Cause(ctx); err != nil {
		return r, err
	}
	return r.ended(e, start)
}

// runBatchedFloor is the batched floor loop, in three phases with concurrency workers
// each and no client-side limit: create for each of n Apps the App, its Deployment and
// its Service (plain POSTs, protobuf for the built-in types); wait until every
// Deployment is available; then write each App's status once. It is the floor of the
// issue "Speed against the tightest floor", written apart from the interleaved loop:
// status writes never compete with creates, which makes it the faster floor when the
// API server, not the deployment controller, is the bound.
func runBatchedFloor(ctx context.Context, e *env, ns string, concurrency int) (floorRun, error) {
	r := floorRun{concurrency: concurrency}
	if err := createNamespace(ctx, e.admin.kube, ns); err != nil {
		return r, err
	}
	n := e.cfg.Apps
	var available atomic.Int64
	allAvailable := make(chan struct{})
	stopWatch, err := watchDeployments(ctx, e.admin, ns, func(string) {
		if available.Add(1) == int64(n) {
			close(allAvailable)
		}
	})
	if err != nil {
		return r, err
	}
	defer stopWatch()

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	deadline := time.After(e.convergeTimeout())
	apps := make([]*appv1.App, n)
	// each runs do(i) for every i in [0, n) on concurrency workers; the first error
	// cancels the rest.
	each := func(do func(i int) error) error {
		var next atomic.Int64
		var wg sync.WaitGroup
		for range concurrency {
			wg.Go(func() {
				for i := int(next.Add(1) - 1); i < n && ctx.Err() == nil; i = int(next.Add(1) - 1) {
					if err := do(i); err != nil {
						cancel(err)
					}
				}
			})
		}
		wg.Wait()
		return context.Cause(ctx)
	}
	start := time.Now()
	if err := each(func(i int) error {
		app, err := e.floor.app.AppcontrollerV1().Apps(ns).Create(ctx, newApp(ns, appName(i), e.cfg.Replicas), metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("batched floor: creating App %s: %w", appName(i), err)
		}
		apps[i] = app
		return createChildren(ctx, e, ns, app, "batched floor")
	}); err != nil {
		return r, err
	}
	select {
	case <-allAvailable:
	case <-deadline:
		return r, fmt.Errorf("batched floor at concurrency %d: %d of %d Deployments available after %s", concurrency, available.Load(), n, e.convergeTimeout())
	case <-ctx.Done():
		return r, context.Cause(ctx)
	}
	if err := each(func(i int) error {
		app := apps[i].DeepCopy()
		readyStatus(app)
		if _, err := e.floor.app.AppcontrollerV1().Apps(ns).UpdateStatus(ctx, app, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("batched floor: writing the status of App %s: %w", app.Name, err)
		}
		return nil
	}); err != nil {
		return r, err
	}
	return r.ended(e, start)
}

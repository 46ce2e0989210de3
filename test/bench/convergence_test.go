package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
	appctrl "github.com/app-controller/app-controller/pkg/controller/app"
	"github.com/app-controller/app-controller/pkg/controller/controllertest"
	"github.com/app-controller/app-controller/pkg/controllermanager"
	appclientset "github.com/app-controller/app-controller/pkg/generated/clientset/versioned"
	appinformers "github.com/app-controller/app-controller/pkg/generated/informers/externalversions"
	"github.com/app-controller/app-controller/test/integration/framework"
)

const (
	// workers is the concurrency of the floor's client loop, of the App creation loop and
	// of the controller (its default).
	workers = appctrl.DefaultWorkers
	// clientQPS and clientBurst are the client-side limits of the floor and of the
	// controller alike, high enough that neither is throttled.
	clientQPS   = 1000
	clientBurst = 2000
	// pollInterval is the period of the polls of setup and cleanup steps.
	pollInterval = 100 * time.Millisecond
	// settle is how long the controller is watched after convergence, for late writes.
	settle = 3 * time.Second
	// image is the image of every Deployment; kwok runs no container.
	image = "nginx"
	// servicePort is every Service's port and target port.
	servicePort = 8080
)

// BenchmarkConvergence measures how long N Apps take to converge with the App controller
// against the time the cluster itself needs for the same objects, the API writes each
// costs, and the controller process's heap.
//
//   - floor: a raw client-go loop with `workers` workers creates, for each app, a
//     Deployment and a Service of the shapes the controller makes, then waits until
//     every Deployment is rolled out and available.
//   - app: the controller-manager (App controller only, default workers, client limits
//     raised to the floor's) runs in this process; N Apps are created with `workers`
//     workers; it waits until every App reports Ready=True at its generation.
//
// Each phase has its own namespace, emptied (and waited for) before the next one. An
// iteration runs `rounds` rounds of both phases, in alternating order (floor first,
// then app first, ...), so that neither always runs on a warmer or more loaded cluster.
//
// Convergence is observed through watches (event-driven, exact times). Metrics are
// means over the rounds: ns/op is the app phase's convergence time, B/op and allocs/op
// are this process's allocations while an app phase converges (the controller's, plus
// the harness's creates and watches); the x-floor metrics are ratios to the floor's
// figure measured in the same round: seconds (x-floor), API writes (writes-x-floor),
// allocations (allocs-x-floor) and heap after GC (heap-x-floor for HeapInuse,
// live-x-floor for HeapAlloc; their floor is the heap before the manager starts).
func BenchmarkConvergence(b *testing.B) {
	b.StopTimer()
	n, replicas := *appsFlag, int32(*replicasFlag)
	admin := newClients(b, framework.Config(b))
	ctx := context.Background()

	// One Deployment through the whole pipeline (scheduler, kwok, deployment and
	// replicaset controllers) before anything is measured.
	warmNS := createNamespace(ctx, b, admin.kube, "bench-warmup-")
	deployment := watchDeployments(ctx, b, admin, warmNS, 1)
	deployment.begin(time.Now())
	if err := admin.createChildren(ctx, warmNS, "warmup", replicas); err != nil {
		b.Fatal(err)
	}
	if err := deployment.wait(60*time.Second, nil); err != nil {
		b.Fatalf("warm-up: %v", err)
	}
	deployment.stop()
	emptyNamespace(ctx, b, admin, warmNS)
	// A manager started and stopped once, so that package-level state initialised on
	// first use (about 1 MiB of heap here, kept after the manager stops) is part of every
	// round's heap floor rather than of the first round's per-App figure.
	warmUpManager(ctx, b, admin, replicas)

	var runs []run
	var tables []string
	for range b.N {
		for round := range *roundsFlag {
			r := run{round: len(runs) + 1, appFirst: round%2 == 1, apps: n, replicas: replicas}
			if r.appFirst {
				r.app, r.heap = runApp(ctx, b, admin, n, replicas)
				r.floor = runFloor(ctx, b, admin, n, replicas)
			} else {
				r.floor = runFloor(ctx, b, admin, n, replicas)
				r.app, r.heap = runApp(ctx, b, admin, n, replicas)
			}
			runs = append(runs, r)
			tables = append(tables, r.table())
		}
	}
	// The summary first: without -v, the testing package shows only the first 10 lines
	// of a benchmark's log.
	b.Logf("\n%s", summary(runs))
	b.Logf("Per-round details (shown in full with -v):\n%s", strings.Join(tables, ""))
	reportMetrics(b, runs)
}

// run is the outcome of one round: both phases.
type run struct {
	round    int
	appFirst bool
	apps     int
	replicas int32
	floor    phase
	app      phase
	heap     heapFigures
}

// phase is what one phase measured.
type phase struct {
	// created: every object the harness writes (floor: Deployments and Services; app:
	// Apps) was created. childrenDone: every Deployment rolled out and available.
	// ready: converged (floor: = childrenDone; app: every App Ready at its generation).
	created, childrenDone, ready time.Duration
	// writes counts the non-GET requests to the phase's namespace by the measured
	// client (floor: the loop; app: the controller), by "METHOD resource[/subresource]",
	// until the end of the settle period (app) or convergence (floor).
	writes map[string]writeStats
	// writesAfterReady: the controller's writes during the settle period after all
	// Apps were Ready.
	writesAfterReady map[string]int
	// gets counts GETs of single named objects in the namespace by the measured client.
	gets int
	// allocs and allocBytes are this process's heap allocations from the first create
	// to convergence: the loop's or the controller's, plus the harness's (its creates and
	// its watches, which cost in proportion to the events: the app phase also watches
	// the Apps).
	allocs, allocBytes uint64
}

func (p phase) totalWrites() int {
	total := 0
	for _, w := range p.writes {
		total += w.count
	}
	return total
}

// heapFigures are heap samples of this process, each after a full GC.
type heapFigures struct {
	// before: before the manager started (the floor). warm: manager running, caches
	// synced, one warm-up App ready. after: all N Apps Ready and the settle period over,
	// the manager still running.
	before, warm, after heapSample
}

// heapSample is what runtime.ReadMemStats says of the heap right after a full GC.
type heapSample struct {
	// inuse is HeapInuse: the bytes of the spans holding at least one object, which
	// counts the free slots of partly used spans (fragmentation) too.
	inuse uint64
	// live is HeapAlloc: the bytes of the live objects.
	live uint64
}

// runFloor is the floor phase.
func runFloor(ctx context.Context, b *testing.B, admin clients, n int, replicas int32) phase {
	b.Helper()
	ns := createNamespace(ctx, b, admin.kube, "bench-floor-")
	counter := newRequestCounter()
	cfg := framework.Config(b)
	cfg.QPS, cfg.Burst = clientQPS, clientBurst
	cfg.Wrap(counter.wrap)
	loop := newClients(b, cfg)

	var p phase
	deployments := watchDeployments(ctx, b, admin, ns, n)
	allocs := startAllocs()
	counter.begin(ns)
	start := time.Now()
	deployments.begin(start)
	if err := parallel(n, func(i int) error { return loop.createChildren(ctx, ns, appName(i), replicas) }); err != nil {
		b.Fatalf("floor: %v", err)
	}
	p.created = time.Since(start)
	if err := deployments.wait(convergeTimeout(n), nil); err != nil {
		b.Fatalf("floor: %v", err)
	}
	p.allocs, p.allocBytes = allocs()
	p.childrenDone = deployments.doneAt()
	p.ready = max(p.created, p.childrenDone) // the Services too
	p.writes, p.gets = counter.snapshot()
	deployments.stop()
	emptyNamespace(ctx, b, admin, ns)
	return p
}

// runApp is the product phase: the controller-manager in this process.
func runApp(ctx context.Context, b *testing.B, admin clients, n int, replicas int32) (phase, heapFigures) {
	b.Helper()
	var heap heapFigures
	heap.before = readHeap()

	counter := newRequestCounter()
	cfg := framework.Config(b)
	cfg.Wrap(counter.wrap)
	mgr := startManager(cfg)
	defer mgr.stop(b)

	warmNS := warmUpApp(ctx, b, admin, mgr, replicas)
	heap.warm = readHeap()

	ns := createNamespace(ctx, b, admin.kube, "bench-app-")
	var p phase
	deployments := watchDeployments(ctx, b, admin, ns, n)
	apps := watchApps(ctx, b, admin, ns, n)
	b.StartTimer()
	allocs := startAllocs()
	counter.begin(ns)
	start := time.Now()
	deployments.begin(start)
	apps.begin(start)
	if err := parallel(n, func(i int) error {
		_, err := admin.app.AppcontrollerV1().Apps(ns).Create(ctx, newApp(ns, appName(i), replicas), metav1.CreateOptions{})
		return err
	}); err != nil {
		b.Fatalf("creating Apps: %v", err)
	}
	p.created = time.Since(start)
	err := apps.wait(convergeTimeout(n), mgr.failed)
	p.allocs, p.allocBytes = allocs()
	b.StopTimer()
	if err != nil {
		b.Fatalf("%v; %s", err, deployments.progress())
	}
	p.ready = apps.doneAt()
	p.childrenDone = deployments.doneAt()
	atReady, _ := counter.snapshot()
	deployments.stop()
	apps.stop()
	time.Sleep(settle)
	p.writes, p.gets = counter.snapshot()
	p.writesAfterReady = map[string]int{}
	for k, w := range p.writes {
		if d := w.count - atReady[k].count; d > 0 {
			p.writesAfterReady[k] = d
		}
	}
	heap.after = readHeap()

	mgr.stop(b)
	emptyNamespace(ctx, b, admin, ns)
	emptyNamespace(ctx, b, admin, warmNS)
	return p, heap
}

// warmUpApp creates an App in a namespace of its own and waits until it is Ready: then
// the manager's caches are synced and its clients connected. It returns the namespace.
func warmUpApp(ctx context.Context, b *testing.B, admin clients, mgr *manager, replicas int32) string {
	b.Helper()
	ns := createNamespace(ctx, b, admin.kube, "bench-app-warmup-")
	app := watchApps(ctx, b, admin, ns, 1)
	defer app.stop()
	app.begin(time.Now())
	if _, err := admin.app.AppcontrollerV1().Apps(ns).Create(ctx, newApp(ns, "warmup", replicas), metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if err := app.wait(60*time.Second, mgr.failed); err != nil {
		b.Fatalf("warm-up: %v", err)
	}
	return ns
}

// warmUpManager runs a manager until a warm-up App is Ready, then stops it.
func warmUpManager(ctx context.Context, b *testing.B, admin clients, replicas int32) {
	b.Helper()
	cfg := framework.Config(b)
	mgr := startManager(cfg)
	defer mgr.stop(b)
	ns := warmUpApp(ctx, b, admin, mgr, replicas)
	mgr.stop(b)
	emptyNamespace(ctx, b, admin, ns)
}

// table renders one run's figures.
func (r run) table() string {
	var sb strings.Builder
	n := float64(r.apps)
	order := "floor, then app"
	if r.appFirst {
		order = "app, then floor"
	}
	fmt.Fprintf(&sb, "Round %d (%s): convergence of %d Apps (%d replica(s) each), %d workers, client QPS %d burst %d:\n",
		r.round, order, r.apps, r.replicas, workers, clientQPS, clientBurst)
	fmt.Fprintf(&sb, "  %-44s %12s %12s %9s\n", "(times: since the first create)", "floor", "app", "x-floor")
	row := func(name string, floor, app float64, format string) {
		fmt.Fprintf(&sb, "  %-44s %12s %12s %9s\n", name, fmt.Sprintf(format, floor), fmt.Sprintf(format, app), fmt.Sprintf("%.2f", ratio(app, floor)))
	}
	row("harness's creates done (s)", r.floor.created.Seconds(), r.app.created.Seconds(), "%.2f")
	row("all Deployments rolled out and available (s)", r.floor.childrenDone.Seconds(), r.app.childrenDone.Seconds(), "%.2f")
	row("converged (s)", r.floor.ready.Seconds(), r.app.ready.Seconds(), "%.2f")
	row("API writes per App", float64(r.floor.totalWrites())/n, float64(r.app.totalWrites())/n, "%.2f")
	row("single-object GETs per App", float64(r.floor.gets)/n, float64(r.app.gets)/n, "%.2f")
	lastWrite := func(w map[string]writeStats, resource string) float64 {
		var last time.Duration
		for k, s := range w {
			if strings.HasSuffix(k, " "+resource) {
				last = max(last, s.last)
			}
		}
		return last.Seconds()
	}
	row("last Deployment written (s)", lastWrite(r.floor.writes, "deployments"), lastWrite(r.app.writes, "deployments"), "%.2f")
	row("last Service written (s)", lastWrite(r.floor.writes, "services"), lastWrite(r.app.writes, "services"), "%.2f")
	union := maps.Clone(r.app.writes)
	maps.Copy(union, r.floor.writes)
	fmt.Fprintf(&sb, "  writes per App (mean round trip):\n")
	cell := func(w writeStats) string {
		if w.count == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f (%dms)", float64(w.count)/n, (w.latency / time.Duration(w.count)).Milliseconds())
	}
	for _, k := range slices.Sorted(maps.Keys(union)) {
		fmt.Fprintf(&sb, "  %-44s %12s %12s\n", "  "+k, cell(r.floor.writes[k]), cell(r.app.writes[k]))
	}
	after := "none"
	if len(r.app.writesAfterReady) > 0 {
		after = fmt.Sprint(r.app.writesAfterReady)
	}
	fmt.Fprintf(&sb, "  app: writes in the %s after all Ready: %s\n", settle, after)
	row("process allocations while converging (k)", float64(r.floor.allocs)/1e3, float64(r.app.allocs)/1e3, "%.0f")
	row("process allocated bytes while converging (MiB)", mib(r.floor.allocBytes), mib(r.app.allocBytes), "%.1f")
	fmt.Fprintf(&sb, "  process heap after GC (MiB); its floor is the heap before the manager starts:\n")
	for _, m := range []struct {
		name string
		get  func(heapSample) uint64
	}{{"HeapInuse", func(h heapSample) uint64 { return h.inuse }}, {"HeapAlloc (live objects)", func(h heapSample) uint64 { return h.live }}} {
		h := r.heap
		row("  "+m.name, mib(m.get(h.before)), mib(m.get(h.after)), "%.1f")
		fmt.Fprintf(&sb, "  %-44s %12s %12.1f\n", "    manager + 1 warm-up App", "", mib(m.get(h.warm)))
		fmt.Fprintf(&sb, "  %-44s %12s %12.1f\n", "    per App, (after-before)/N (KiB)", "", perApp(m.get(h.after), m.get(h.before), r.apps)/1024)
		fmt.Fprintf(&sb, "  %-44s %12s %12.1f\n", "    marginal per App, (after-warm)/N (KiB)", "", perApp(m.get(h.after), m.get(h.warm), r.apps)/1024)
	}
	return sb.String()
}

// perApp is (after-before)/n.
func perApp(after, before uint64, n int) float64 {
	return (float64(after) - float64(before)) / float64(n)
}

// summary renders one line per round and the means.
func summary(runs []run) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "Summary, %d Apps (%d replica(s) each); floor = raw client-go loop (heap: before the manager), app = App controller:\n",
		runs[0].apps, runs[0].replicas)
	const format = "  %-6v %-6s %8.2f %8.2f %8.2f %9.2f %9.2f %9.2f %10.1f %9.2f %10.1f %9.2f\n"
	fmt.Fprintf(&sb, "  %-6s %-6s %8s %8s %8s %9s %9s %9s %10s %9s %10s %9s\n", "round", "first", "floor s", "app s", "x-floor",
		"fl wr/App", "wr/App", "wr x-fl", "inuse KiB", "inuse x-fl", "live KiB", "live x-fl")
	for _, r := range runs {
		first := "floor"
		if r.appFirst {
			first = "app"
		}
		m := means([]run{r})
		fmt.Fprintf(&sb, format, r.round, first, m["floor-s"], m["app-s"], m["x-floor"],
			m["floor-writes/app"], m["app-writes/app"], m["writes-x-floor"],
			m["heap-B/app"]/1024, m["heap-x-floor"], m["live-B/app"]/1024, m["live-x-floor"])
	}
	m := means(runs)
	fmt.Fprintf(&sb, format, "mean", "", m["floor-s"], m["app-s"], m["x-floor"],
		m["floor-writes/app"], m["app-writes/app"], m["writes-x-floor"],
		m["heap-B/app"]/1024, m["heap-x-floor"], m["live-B/app"]/1024, m["live-x-floor"])
	fmt.Fprintf(&sb, "  (KiB are per App: (after-before)/N; inuse = HeapInuse, live = HeapAlloc, both after a GC)\n")
	return sb.String()
}

func (r run) floorWritesPerApp() float64 { return float64(r.floor.totalWrites()) / float64(r.apps) }
func (r run) appWritesPerApp() float64   { return float64(r.app.totalWrites()) / float64(r.apps) }

// means returns the means over the runs of the reported metrics, by unit.
func means(runs []run) map[string]float64 {
	metrics := map[string]func(run) float64{
		"floor-s":          func(r run) float64 { return r.floor.ready.Seconds() },
		"app-s":            func(r run) float64 { return r.app.ready.Seconds() },
		"x-floor":          func(r run) float64 { return ratio(r.app.ready.Seconds(), r.floor.ready.Seconds()) },
		"floor-writes/app": run.floorWritesPerApp,
		"app-writes/app":   run.appWritesPerApp,
		"writes-x-floor":   func(r run) float64 { return ratio(r.appWritesPerApp(), r.floorWritesPerApp()) },
		"heap-B/app":       func(r run) float64 { return perApp(r.heap.after.inuse, r.heap.before.inuse, r.apps) },
		"heap-x-floor":     func(r run) float64 { return ratio(float64(r.heap.after.inuse), float64(r.heap.before.inuse)) },
		"live-B/app":       func(r run) float64 { return perApp(r.heap.after.live, r.heap.before.live, r.apps) },
		"live-x-floor":     func(r run) float64 { return ratio(float64(r.heap.after.live), float64(r.heap.before.live)) },
		"allocs-x-floor":   func(r run) float64 { return ratio(float64(r.app.allocs), float64(r.floor.allocs)) },
		"ns/op":            func(r run) float64 { return float64(r.app.ready.Nanoseconds()) },
		"allocs/op":        func(r run) float64 { return float64(r.app.allocs) },
		"B/op":             func(r run) float64 { return float64(r.app.allocBytes) },
	}
	out := map[string]float64{}
	for unit, f := range metrics {
		var sum float64
		for _, r := range runs {
			sum += f(r)
		}
		out[unit] = sum / float64(len(runs))
	}
	return out
}

// reportMetrics reports the means over the runs as benchmark metrics; ns/op, B/op and
// allocs/op replace the framework's.
func reportMetrics(b *testing.B, runs []run) {
	for unit, v := range means(runs) {
		b.ReportMetric(v, unit)
	}
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func mib(v uint64) float64 { return float64(v) / (1 << 20) }

// startAllocs starts counting this process's allocations; the returned function gives
// the number of allocations and bytes allocated since.
func startAllocs() func() (uint64, uint64) {
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	return func() (uint64, uint64) {
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		return after.Mallocs - before.Mallocs, after.TotalAlloc - before.TotalAlloc
	}
}

// readHeap samples this process's heap after a full garbage collection.
func readHeap() heapSample {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return heapSample{inuse: ms.HeapInuse, live: ms.HeapAlloc}
}

// convergeTimeout bounds a phase's convergence.
func convergeTimeout(n int) time.Duration {
	return 60*time.Second + time.Duration(n)*time.Second
}

func appName(i int) string { return fmt.Sprintf("app-%04d", i) }

// floorChildren returns the Deployment and Service the App controller makes for an App
// named name (the controller's own builders), but without an App to own them.
func floorChildren(ns, name string, replicas int32) (*appsv1.Deployment, *corev1.Service, error) {
	app := newApp(ns, name, replicas)
	desiredDeployment, err := appctrl.DesiredDeployment(app)
	if err != nil {
		return nil, nil, err
	}
	desiredService, err := appctrl.DesiredService(app)
	if err != nil {
		return nil, nil, err
	}
	deployment, service := &appsv1.Deployment{}, &corev1.Service{}
	if err := controller.Convert(desiredDeployment, deployment); err != nil {
		return nil, nil, err
	}
	if err := controller.Convert(desiredService, service); err != nil {
		return nil, nil, err
	}
	deployment.OwnerReferences, service.OwnerReferences = nil, nil
	return deployment, service, nil
}

// newApp is the App of the product phase; floorChildren builds its children.
func newApp(ns, name string, replicas int32) *appv1.App {
	app := controllertest.NewApp(ns, name, image, replicas)
	app.Spec.ServiceTemplate.Port = servicePort
	app.Spec.ServiceTemplate.Type = corev1.ServiceTypeClusterIP
	return app
}

// clients are typed clients for one configuration.
type clients struct {
	kube kubernetes.Interface
	app  appclientset.Interface
	meta metadata.Interface
}

func newClients(tb testing.TB, cfg *rest.Config) clients {
	tb.Helper()
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	app, err := appclientset.NewForConfig(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return clients{kube: kube, app: app, meta: meta}
}

// createChildren creates the floor's Deployment and Service of one app.
func (c clients) createChildren(ctx context.Context, ns, name string, replicas int32) error {
	deployment, service, err := floorChildren(ns, name, replicas)
	if err != nil {
		return err
	}
	if _, err := c.kube.AppsV1().Deployments(ns).Create(ctx, deployment, metav1.CreateOptions{}); err != nil {
		return err
	}
	_, err = c.kube.CoreV1().Services(ns).Create(ctx, service, metav1.CreateOptions{})
	return err
}

// tracker follows, through an informer, how many of the n objects of a namespace are
// done, and when they all were (first time). Event-driven: its times are exact, and its
// cost in this process is proportional to the events, not to the time waited.
type tracker struct {
	what    string
	n       int
	stopCh  chan struct{}
	reached chan struct{}

	mu    sync.Mutex
	start time.Time
	done  map[string]bool
	count int
	at    time.Duration
}

func newTracker(what string, n int) *tracker {
	return &tracker{what: what, n: n, stopCh: make(chan struct{}), reached: make(chan struct{}), done: map[string]bool{}}
}

// begin sets the time the tracker's times are measured from.
func (t *tracker) begin(start time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.start = start
}

// set records whether the object name is done.
func (t *tracker) set(name string, done bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done[name] == done {
		return
	}
	t.done[name] = done
	if done {
		t.count++
	} else {
		t.count--
	}
	if t.count == t.n && t.at == 0 {
		t.at = time.Since(t.start)
		close(t.reached)
	}
}

// handler calls set with done(obj) for every added or updated object.
func handler[T metav1.Object](t *tracker, done func(T) bool) cache.ResourceEventHandler {
	f := func(obj interface{}) {
		if o, ok := obj.(T); ok {
			t.set(o.GetName(), done(o))
		}
	}
	return cache.ResourceEventHandlerFuncs{AddFunc: f, UpdateFunc: func(_, obj interface{}) { f(obj) }}
}

// wait waits until all n objects are done, failed returns an error, or timeout passes.
func (t *tracker) wait(timeout time.Duration, failed func() error) error {
	deadline := time.After(timeout)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-t.reached:
			return nil
		case <-deadline:
			return fmt.Errorf("not converged within %s: %s", timeout, t.progress())
		case <-tick.C:
			if failed != nil {
				if err := failed(); err != nil {
					return err
				}
			}
		}
	}
}

// doneAt returns when all n objects were first done, 0 if they were not.
func (t *tracker) doneAt() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.at
}

func (t *tracker) progress() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return fmt.Sprintf("%d of %d %s done (%d seen)", t.count, t.n, t.what, len(t.done))
}

// stop stops the tracker's informer; its cache is then garbage.
func (t *tracker) stop() { close(t.stopCh) }

// watchDeployments tracks the Deployments of ns that are rolled out and available.
func watchDeployments(ctx context.Context, b *testing.B, c clients, ns string, n int) *tracker {
	b.Helper()
	t := newTracker("Deployments rolled out and available", n)
	factory := informers.NewSharedInformerFactoryWithOptions(c.kube, 0, informers.WithNamespace(ns))
	informer := factory.Apps().V1().Deployments().Informer()
	if _, err := informer.AddEventHandler(handler(t, deploymentDone)); err != nil {
		b.Fatal(err)
	}
	factory.Start(t.stopCh)
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		b.Fatal("the Deployment informer did not sync")
	}
	return t
}

// watchApps tracks the Apps of ns that are Ready at their generation.
func watchApps(ctx context.Context, b *testing.B, c clients, ns string, n int) *tracker {
	b.Helper()
	t := newTracker("Apps Ready", n)
	factory := appinformers.NewSharedInformerFactoryWithOptions(c.app, 0, appinformers.WithNamespace(ns))
	informer := factory.Appcontroller().V1().Apps().Informer()
	if _, err := informer.AddEventHandler(handler(t, appReady)); err != nil {
		b.Fatal(err)
	}
	factory.Start(t.stopCh)
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		b.Fatal("the App informer did not sync")
	}
	return t
}

// deploymentDone mirrors what the App controller requires of a Deployment for Ready:
// current generation observed, every replica updated, no old one, all available.
func deploymentDone(d *appsv1.Deployment) bool {
	desired := int32(1)
	if d.Spec.Replicas != nil {
		desired = *d.Spec.Replicas
	}
	st := d.Status
	if st.ObservedGeneration < d.Generation || st.UpdatedReplicas < desired || st.Replicas > st.UpdatedReplicas ||
		st.AvailableReplicas < st.UpdatedReplicas || st.AvailableReplicas < desired {
		return false
	}
	for _, c := range st.Conditions {
		if c.Type == appsv1.DeploymentAvailable {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// appReady tells whether the App reports Ready=True at its generation.
func appReady(a *appv1.App) bool {
	cond := meta.FindStatusCondition(a.Status.Conditions, appv1.ConditionReady)
	return cond != nil && cond.Status == metav1.ConditionTrue && cond.ObservedGeneration == a.Generation &&
		a.Status.ObservedGeneration == a.Generation
}

// manager is a controller-manager running in this process.
type manager struct {
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	mu     sync.Mutex
	err    error
	exited bool
}

// startManager runs the controller-manager with only the App controller, default
// workers and resync, and the client limits of the floor.
func startManager(cfg *rest.Config) *manager {
	opts := controllermanager.NewOptions()
	opts.Controllers = []string{appctrl.ControllerName}
	opts.KubeAPIQPS, opts.KubeAPIBurst = clientQPS, clientBurst
	opts.ShutdownTimeout = 5 * time.Second
	// klog's logger at its default verbosity, as the binary runs by default.
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background()))
	m := &manager{cancel: cancel, done: make(chan error, 1)}
	go func() {
		err := controllermanager.RunWithConfig(ctx, cfg, opts)
		m.mu.Lock()
		m.err, m.exited = err, true
		m.mu.Unlock()
		m.done <- err
	}()
	return m
}

// failed returns an error if the manager exited on its own.
func (m *manager) failed() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.exited {
		return nil
	}
	if m.err != nil {
		return fmt.Errorf("controller-manager exited: %w", m.err)
	}
	return errors.New("controller-manager exited")
}

// stop stops the manager and waits for it; later calls do nothing.
func (m *manager) stop(tb testing.TB) {
	m.once.Do(func() {
		m.cancel()
		select {
		case err := <-m.done:
			if err != nil {
				tb.Errorf("controller-manager: %v", err)
			}
		case <-time.After(30 * time.Second):
			tb.Errorf("controller-manager did not stop within 30s")
		}
	})
}

// requestCounter counts a client's requests to one namespace.
type requestCounter struct {
	mu     sync.Mutex
	ns     string
	start  time.Time
	writes map[string]writeStats
	gets   int
}

// writeStats are the writes of one kind ("METHOD resource[/subresource]").
type writeStats struct {
	count int
	// latency is the sum of their round-trip times.
	latency time.Duration
	// last is when the last one was sent, since the counter began.
	last time.Duration
}

func newRequestCounter() *requestCounter {
	return &requestCounter{writes: map[string]writeStats{}}
}

// begin starts counting the requests to namespace ns, from now on.
func (c *requestCounter) begin(ns string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ns, c.start = ns, time.Now()
}

// snapshot returns copies of the counts.
func (c *requestCounter) snapshot() (map[string]writeStats, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.writes), c.gets
}

// wrap is a rest.Config WrapTransport that counts requests.
func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return framework.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
		key, counted := c.classify(req)
		if !counted || key == "" {
			return rt.RoundTrip(req)
		}
		sent := time.Now()
		resp, err := rt.RoundTrip(req)
		c.recordWrite(key, sent)
		return resp, err
	})
}

// classify tells whether req targets an object in the counter's namespace and, for a
// write, returns its kind. GETs of one named object (not lists, not watches) are
// counted here.
func (c *requestCounter) classify(req *http.Request) (string, bool) {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	i := slices.Index(parts, "namespaces")
	if i < 0 || i+2 >= len(parts) {
		return "", false // cluster-scoped, or a namespace itself
	}
	ns, rest := parts[i+1], parts[i+2:]
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ns == "" || ns != c.ns {
		return "", false
	}
	switch req.Method {
	case http.MethodGet, http.MethodHead:
		if len(rest) >= 2 && req.URL.Query().Get("watch") == "" {
			c.gets++
		}
		return "", true
	}
	resource := rest[0]
	if len(rest) >= 3 {
		resource += "/" + rest[2]
	}
	return req.Method + " " + resource, true
}

func (c *requestCounter) recordWrite(key string, sent time.Time) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.writes[key]
	w.count++
	w.latency += now.Sub(sent)
	w.last = sent.Sub(c.start)
	c.writes[key] = w
}

// parallel runs do(0..n-1) on `workers` goroutines and returns the first error.
func parallel(n int, do func(i int) error) error {
	indexes := make(chan int)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range indexes {
				if err := do(i); err != nil {
					errs <- err
					for range indexes { // drain: stop working, let the feeder finish
					}
					return
				}
			}
		})
	}
	for i := range n {
		indexes <- i
	}
	close(indexes)
	wg.Wait()
	close(errs)
	return <-errs
}

// waitUntil polls condition every pollInterval until it returns true or an error, or
// timeout passes.
func waitUntil(ctx context.Context, timeout time.Duration, condition func(context.Context) (bool, error)) error {
	return wait.PollUntilContextTimeout(ctx, pollInterval, timeout, true, condition)
}

// createNamespace creates a namespace and waits for its default ServiceAccount (pods are
// refused until it exists). It is deleted at the end of the benchmark if still there.
func createNamespace(ctx context.Context, tb testing.TB, client kubernetes.Interface, prefix string) string {
	tb.Helper()
	ns, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: prefix},
	}, metav1.CreateOptions{})
	if err != nil {
		tb.Fatalf("creating a namespace: %v", err)
	}
	tb.Cleanup(func() {
		err := client.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			tb.Errorf("deleting namespace %s: %v", ns.Name, err)
		}
	})
	if err := waitUntil(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		tb.Fatalf("waiting for the default ServiceAccount of %s: %v", ns.Name, err)
	}
	return ns.Name
}

// emptyNamespace deletes the Apps, Deployments, ReplicaSets, Pods (without grace
// period) and Services of a namespace and waits until they are gone, so that their
// deletion does not load the cluster during the next phase. The namespace itself, by
// then almost empty, is deleted when the benchmark ends: waiting for the namespace
// controller would take 5-10s per namespace here.
func emptyNamespace(ctx context.Context, tb testing.TB, c clients, ns string) {
	tb.Helper()
	kinds := []schema.GroupVersionResource{
		appv1.SchemeGroupVersion.WithResource("apps"),
		appsv1.SchemeGroupVersion.WithResource("deployments"),
		appsv1.SchemeGroupVersion.WithResource("replicasets"),
		corev1.SchemeGroupVersion.WithResource("pods"),
		corev1.SchemeGroupVersion.WithResource("services"),
	}
	deleteAll := func(gvr schema.GroupVersionResource) error {
		opts := metav1.DeleteOptions{PropagationPolicy: new(metav1.DeletePropagationBackground)}
		if gvr.Resource == "pods" {
			opts.GracePeriodSeconds = new(int64(0))
		}
		return c.meta.Resource(gvr).Namespace(ns).DeleteCollection(ctx, opts, metav1.ListOptions{})
	}
	for _, gvr := range kinds {
		if err := deleteAll(gvr); err != nil {
			tb.Fatalf("deleting the %s of namespace %s: %v", gvr.Resource, ns, err)
		}
	}
	var left string
	err := waitUntil(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
		for _, gvr := range kinds {
			list, err := c.meta.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			if n := len(list.Items); n > 0 {
				left = fmt.Sprintf("%d %s left", n, gvr.Resource)
				if gvr.Resource == "pods" {
					_ = deleteAll(gvr) // made by a ReplicaSet before it was deleted
				}
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		tb.Fatalf("emptying namespace %s: %v (%s)", ns, err, left)
	}
}

package soak

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/app-controller/app-controller/internal/plugin"
	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller/appfixture"
	appclientset "github.com/app-controller/app-controller/pkg/generated/clientset/versioned"
	"github.com/app-controller/app-controller/test/harness"
)

// Names and labels of what the driver makes.
const (
	// runLabel marks the namespaces, Apps and objects of the soak.
	runLabel      = "app-controller.soak"
	runLabelValue = "true"
	// shardLabel splits the Apps between the two shards.
	shardLabel = "shard"
	shardA     = "a"
	shardB     = "b"
	// historyLimit is every App's revisionHistoryLimit: low, so that the churn makes
	// Apps outgrow it and the controller deletes their oldest revisions.
	historyLimit = 2
	// envName is the env var the env operation changes.
	envName = "SOAK_ENV"
	// decoyName is the foreign Deployment of each namespace that a conflict App claims.
	decoyName = "decoy"
	// decoyLabel selects the decoy's pods.
	decoyLabel = "app"
	// opTimeout bounds an operation, its retries through a fault included.
	opTimeout = 2 * time.Minute
	// servicePort is every App's Service port.
	servicePort = 8080
	// Annotations of kwok's fault stage (hack/kwok/pod-fault.yaml).
	kwokFaultReason  = "fault.kwok.appcontroller.k8s.io/waiting-reason"
	kwokFaultMessage = "fault.kwok.appcontroller.k8s.io/message"
)

// images are the images and arguments of the Apps' containers.
type images struct {
	// good are the images a working App cycles through; args its container's
	// arguments.
	good []string
	args []string
	// bad is an image that does not exist; crashArgs make the container exit at once
	// (nil on kwok, where no container runs: kwok's fault stage reports the pull
	// failure the kubelet would).
	bad       string
	crashArgs []string
	kwok      bool
	// load is the autoscaled Apps' image and CPU load on a real node (load.go); nil on
	// kwok.
	load *cpuLoad
	// analysis is the analyzed canaries' image on a real node (analysis.go); nil on
	// kwok.
	analysis *analysisImage
}

// driver makes the churn: it creates the namespaces, ConfigMaps, decoys and the first
// Apps, then every minute the operations of the mix.
type driver struct {
	cfg        *Config
	w          *world
	kube       kubernetes.Interface
	apps       appclientset.Interface
	plugin     plugin.Clients
	images     images
	namespaces []string

	rngMu sync.Mutex
	rng   *rand.Rand

	mu     sync.Mutex
	nextID int
	turns  map[string]int
	stats  map[string]*OpStats
	wg     sync.WaitGroup
}

// OpStats counts one kind of operation.
type OpStats struct {
	Planned int `json:"planned"`
	Done    int `json:"done"`
	// Skipped: no App could take it then (every candidate busy converging).
	Skipped int `json:"skipped"`
	// Failed: the API refused it or did not answer within the operation's timeout.
	Failed int      `json:"failed"`
	Errors []string `json:"errors,omitempty"`
}

func newDriver(cfg *Config, w *world, kube kubernetes.Interface, apps appclientset.Interface, imgs images) *driver {
	d := &driver{cfg: cfg, w: w, kube: kube, apps: apps, images: imgs,
		plugin: plugin.Clients{Apps: apps, Kube: kube},
		rng:    rand.New(rand.NewPCG(uint64(cfg.Seed), 35)),
		stats:  map[string]*OpStats{}, turns: map[string]int{}}
	for i := range cfg.Namespaces {
		d.namespaces = append(d.namespaces, fmt.Sprintf("soak-%d", i))
	}
	return d
}

// intn returns a random number in [0, n).
func (d *driver) intn(n int) int {
	d.rngMu.Lock()
	defer d.rngMu.Unlock()
	return d.rng.IntN(n)
}

// configMapsPerNamespace: each referenced by about three Apps (half the Apps reference
// one).
func (d *driver) configMapsPerNamespace() int {
	return max(2, d.cfg.Apps/d.cfg.Namespaces/6)
}

// setup creates the namespaces, their ConfigMaps, decoys and conflict Apps, and the
// first Apps, and waits until every App converged.
func (d *driver) setup(ctx context.Context) error {
	for i, ns := range d.namespaces {
		obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{runLabel: runLabelValue}}}
		if _, err := d.kube.CoreV1().Namespaces().Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating namespace %s: %w", ns, err)
		}
		for j := range d.configMapsPerNamespace() {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cfg-%d", j), Namespace: ns, Labels: map[string]string{runLabel: runLabelValue}},
				Data: map[string]string{"version": "1"}}
			if _, err := d.kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("creating ConfigMap %s/%s: %w", ns, cm.Name, err)
			}
			d.w.mu.Lock()
			d.w.configMaps[key(ns, cm.Name)] = 1
			d.w.mu.Unlock()
		}
		if err := d.createDecoy(ctx, ns); err != nil {
			return err
		}
		if d.images.analysis != nil {
			if err := d.createAnalysisTemplate(ctx, ns); err != nil {
				return err
			}
		}
		conflict := d.newApp(ns, fmt.Sprintf("conflict-%d", i), shardA)
		conflict.Spec.DeploymentTemplate.Name = decoyName
		if err := d.create(ctx, conflict, true); err != nil {
			return err
		}
	}
	// A fifth of the first Apps have a route, so that routes can move and go; the churn
	// then adds and removes them at the same pace, and creates and deletes Apps without.
	// A tenth of them are canaries walked by hand, a tenth timed canaries, a tenth
	// autoscaled (appKind).
	return harness.Parallel(ctx, d.cfg.Apps, 5, func(ctx context.Context, i int) error { return d.createApp(ctx, i%5 == 0, appKind(i)) })
}

// fillHistories changes the env of every App once, so that each holds as many
// revisions as its limit from the start: the revisions cache then keeps its size
// through the run instead of growing towards it.
func (d *driver) fillHistories(ctx context.Context) error {
	d.w.mu.Lock()
	apps := d.w.live()
	d.w.mu.Unlock()
	return harness.Parallel(ctx, len(apps), 5, func(ctx context.Context, i int) error {
		r := apps[i]
		if r.conflict {
			return nil
		}
		if err := d.update(ctx, r, opEnv, func(_ *appRecord, a *appv1.App) { setEnv(a, 1) }); err != nil {
			return err
		}
		if r.kind == kindGate {
			return d.walk(ctx, r, false, "") // a canary's rollout, promoted at its pauses
		}
		return nil
	})
}

// setEnv adds delta to the value of the env var the env operation changes.
func setEnv(a *appv1.App, delta int) {
	for i, e := range a.Spec.DeploymentTemplate.Env {
		if e.Name == envName {
			n, _ := strconv.Atoi(e.Value)
			a.Spec.DeploymentTemplate.Env[i].Value = strconv.Itoa(n + delta)
		}
	}
}

// createDecoy creates the namespace's foreign Deployment and Service (no App controls
// them; a conflict App claims the Deployment's name): the controller must never write
// them.
func (d *driver) createDecoy(ctx context.Context, ns string) error {
	labels := map[string]string{decoyLabel: decoyName, runLabel: runLabelValue}
	deploy := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: decoyName, Namespace: ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{decoyLabel: decoyName}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{decoyLabel: decoyName}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: d.images.good[0], Args: d.images.args}}},
			},
		},
	}
	if _, err := d.kube.AppsV1().Deployments(ns).Create(ctx, deploy, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the decoy Deployment of %s: %w", ns, err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: decoyName + "-svc", Namespace: ns, Labels: labels},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{decoyLabel: decoyName}, Ports: []corev1.ServicePort{{Port: servicePort}}},
	}
	if _, err := d.kube.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the decoy Service of %s: %w", ns, err)
	}
	return nil
}

// newApp is an App of the run: one replica of a good image, a Service, an env var the
// churn changes, the history limit, in shard.
func (d *driver) newApp(ns, name, shard string) *appv1.App {
	app := appfixture.NewApp(ns, name, d.images.good[0], 1)
	app.Labels = map[string]string{runLabel: runLabelValue, shardLabel: shard}
	app.Spec.RevisionHistoryLimit = ptr.To[int32](historyLimit)
	app.Spec.ServiceTemplate.Port = servicePort
	app.Spec.DeploymentTemplate.Args = d.images.args
	app.Spec.DeploymentTemplate.Env = []corev1.EnvVar{{Name: envName, Value: "0"}}
	return app
}

// run makes the mix every minute until ctx ends, then waits for the operations under
// way.
func (d *driver) run(ctx context.Context) {
	carry := map[string]float64{}
	for ctx.Err() == nil {
		d.rngMu.Lock()
		plan := minutePlan(d.mix(), d.cfg.Rate, carry, d.rng)
		d.rngMu.Unlock()
		start := time.Now()
		for i, op := range plan {
			at := start.Add(time.Duration(i) * time.Minute / time.Duration(len(plan)))
			select {
			case <-ctx.Done():
			case <-time.After(time.Until(at)):
			}
			if ctx.Err() != nil {
				break
			}
			d.count(op, func(s *OpStats) { s.Planned++ })
			d.wg.Go(func() { d.do(op) })
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Until(start.Add(time.Minute))):
		}
	}
	d.wg.Wait()
}

// errSkipped: no App could take the operation.
var errSkipped = errors.New("no App can take it now")

// do makes one operation, within opTimeout.
func (d *driver) do(op string) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	var err error
	switch op {
	case opCreate:
		err = d.opCreate(ctx)
	case opDelete:
		err = d.opDelete(ctx)
	case opConfigMap:
		err = d.opConfigMap(ctx)
	case opRouteMove:
		err = d.opRouteMove(ctx)
	case opShardMove:
		err = d.opShardMove(ctx)
	case opRollback:
		err = d.opRollback(ctx)
	case opCanary:
		err = d.opCanary(ctx)
	case opCanaryCrash:
		err = d.opCanaryCrash(ctx)
	case opCanaryAbort:
		err = d.opCanaryAbort(ctx)
	case opCanaryFix:
		err = d.opCanaryFix(ctx)
	case opCanaryRollback:
		err = d.opCanaryRollback(ctx)
	case opCanaryConfig:
		err = d.opCanaryConfig(ctx)
	case opAutoscale:
		err = d.opAutoscale(ctx)
	case opCanaryAnalysisFail:
		err = d.opCanaryAnalysisFail(ctx)
	default:
		err = d.opSpec(ctx, op)
	}
	d.count(op, func(s *OpStats) {
		switch {
		case errors.Is(err, errSkipped):
			s.Skipped++
		case err != nil:
			s.Failed++
			if len(s.Errors) < 5 {
				s.Errors = append(s.Errors, err.Error())
			}
		default:
			s.Done++
		}
	})
}

func (d *driver) count(op string, f func(*OpStats)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stats[op] == nil {
		d.stats[op] = &OpStats{}
	}
	f(d.stats[op])
}

// pick marks as pending and returns a live App without a strategy or autoscaling that
// converged since its last change, takes part in the churn and satisfies ok, chosen at
// random; nil if none does.
func (d *driver) pick(ok func(*appRecord) bool) *appRecord { return d.pickKind([]string{""}, ok) }

// pickKind is pick among the Apps of kinds.
func (d *driver) pickKind(kinds []string, ok func(*appRecord) bool) *appRecord {
	d.w.mu.Lock()
	defer d.w.mu.Unlock()
	var candidates []*appRecord
	for _, r := range d.w.apps {
		if r.deleted.IsZero() && !r.pending && !r.conflict && slices.Contains(kinds, r.kind) && r.convergedNow() && (ok == nil || ok(r)) {
			candidates = append(candidates, r)
		}
	}
	if len(candidates) == 0 {
		return nil
	}
	slices.SortFunc(candidates, func(a, b *appRecord) int { return compareStrings(a.key(), b.key()) })
	r := candidates[d.intn(len(candidates))]
	r.pending = true
	return r
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// release ends r's pending operation.
func (d *driver) release(r *appRecord) {
	d.w.mu.Lock()
	defer d.w.mu.Unlock()
	r.pending = false
}

// expect is what an App with spec must report: the reason of a broken pod, "" for Ready.
// A canary whose new pods cannot run, or fail its analysis, aborts its rollout:
// RolloutAborted.
func (d *driver) expect(spec *appv1.AppSpec) string {
	t := spec.DeploymentTemplate
	broken := t != nil && (t.Image == d.images.bad || d.images.crashArgs != nil && slices.Equal(t.Args, d.images.crashArgs) || analysisFails(t))
	switch {
	case t == nil:
		return ""
	case broken && spec.Rollout != nil:
		return appv1.ReasonRolloutAborted
	case !broken && spec.Autoscaling != nil && d.images.kwok:
		return expectReadyOrInactive
	case t.Image == d.images.bad:
		return appv1.ReasonImagePullFailed
	case d.images.crashArgs != nil && slices.Equal(t.Args, d.images.crashArgs):
		return appv1.ReasonCrashLoopBackOff
	}
	return ""
}

// broken tells whether r's current spec gives it pods that cannot run.
func (d *driver) broken(r *appRecord) bool {
	return r.latest != nil && d.expect(&r.latest.Spec) != ""
}

// hostOf is the host of an App's own route.
func hostOf(a *appv1.App) appv1.Hostname {
	return appv1.Hostname(fmt.Sprintf("%s.%s.soak.test", a.Name, a.Namespace))
}

// opCreate creates a new App: in the next namespace, in the shards in turn, referencing
// a ConfigMap half of the time.
func (d *driver) opCreate(ctx context.Context) error { return d.createApp(ctx, false, "") }

// createApp creates an App as opCreate does, with a route if withRoute, of kind (a
// canary's ConfigMap: a timed one always, a gate never, whose pause a ConfigMap change
// would leave waiting for a promote; an autoscaled one none).
func (d *driver) createApp(ctx context.Context, withRoute bool, kind string) error {
	d.mu.Lock()
	id := d.nextID
	d.nextID++
	d.mu.Unlock()
	ns := d.namespaces[id%len(d.namespaces)]
	app := d.newApp(ns, fmt.Sprintf("a%05d", id), shardOf(id))
	if withRoute {
		app.Spec.Route = &appv1.Route{Hosts: []appv1.Hostname{hostOf(app)}}
	}
	shape(app, kind)
	d.splitByRoute(app, kind)
	if kind == kindAutoscaled && d.images.load != nil {
		d.images.load.apply(app.Spec.DeploymentTemplate)
	}
	if kind == kindGate && d.images.analysis != nil && id%10 == 9 {
		d.images.analysis.makeAnalyzed(app)
	}
	if kind == kindTimed || kind == "" && d.intn(2) == 0 {
		cm := fmt.Sprintf("cfg-%d", d.intn(d.configMapsPerNamespace()))
		app.Spec.DeploymentTemplate.EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm}}}}
	}
	return d.create(ctx, app, false)
}

// shardOf is the shard of the n-th App (or the n-th deletion, or shard move): the
// shards in turn, so that the churn keeps each shard's number of Apps, and with it its
// caches, steady.
func shardOf(n int) string {
	if n%2 == 0 {
		return shardA
	}
	return shardB
}

// turn returns the next number of the counter of op, for shardOf.
func (d *driver) turn(op string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := d.turns[op]
	d.turns[op]++
	return n
}

// create creates app (retrying through faults) and records it.
func (d *driver) create(ctx context.Context, app *appv1.App, conflict bool) error {
	r := &appRecord{namespace: app.Namespace, name: app.Name, shard: app.Labels[shardLabel], created: time.Now(), conflict: conflict, pending: true}
	switch {
	case app.Spec.Rollout != nil && len(app.Spec.Rollout.Canary.Steps) == len(timedSteps()):
		r.kind = kindTimed
	case app.Spec.Rollout != nil:
		r.kind = kindGate
	case app.Spec.Autoscaling != nil:
		r.kind = kindAutoscaled
	}
	d.w.mu.Lock()
	d.w.apps[r.key()] = r
	d.w.mu.Unlock()
	defer d.release(r)
	var created *appv1.App
	var at time.Time // when the write that went through was sent: the controller may act before it returns
	err := retryThroughFaults(ctx, func() error {
		var err error
		at = time.Now()
		created, err = d.apps.AppcontrollerV1().Apps(app.Namespace).Create(ctx, app, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) { // an earlier attempt went through
			created, err = d.apps.AppcontrollerV1().Apps(app.Namespace).Get(ctx, app.Name, metav1.GetOptions{})
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("creating App %s: %w", r.key(), err)
	}
	expect := d.expect(&created.Spec)
	if conflict {
		expect = appv1.ReasonNameConflict
	}
	d.w.wrote(r, created, opCreate, expect, at)
	return nil
}

// opDelete deletes an App without a route, of the shards in turn.
func (d *driver) opDelete(ctx context.Context) error {
	shard := shardOf(d.turn(opDelete))
	r := d.pick(func(r *appRecord) bool { return r.shard == shard && r.latest.Spec.Route == nil })
	if r == nil {
		return errSkipped
	}
	var at time.Time
	err := retryThroughFaults(ctx, func() error {
		at = time.Now()
		err := d.apps.AppcontrollerV1().Apps(r.namespace).Delete(ctx, r.name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &r.uid}})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
	if err != nil {
		d.release(r)
		return fmt.Errorf("deleting App %s: %w", r.key(), err)
	}
	d.w.mu.Lock()
	r.deleted = at
	r.pending = false
	d.w.mu.Unlock()
	d.w.record(r, opDelete, at)
	return nil
}

// opSpec changes the spec of an App for op: image, env, a route added or removed, a
// pod broken or fixed.
func (d *driver) opSpec(ctx context.Context, op string) error {
	var ok func(*appRecord) bool
	var change func(*appRecord, *appv1.App)
	switch op {
	case opImage:
		ok = func(r *appRecord) bool { return !d.broken(r) }
		change = func(_ *appRecord, a *appv1.App) {
			t := a.Spec.DeploymentTemplate
			i := slices.Index(d.images.good, t.Image)
			t.Image = d.images.good[(i+1)%len(d.images.good)]
		}
	case opEnv:
		ok = func(r *appRecord) bool { return !d.broken(r) }
		change = func(_ *appRecord, a *appv1.App) { setEnv(a, 1) }
	case opRouteAdd:
		ok = func(r *appRecord) bool { return !d.broken(r) && r.latest.Spec.Route == nil }
		change = func(_ *appRecord, a *appv1.App) { a.Spec.Route = &appv1.Route{Hosts: []appv1.Hostname{hostOf(a)}} }
	case opRouteRemove:
		ok = func(r *appRecord) bool { return r.latest.Spec.Route != nil }
		change = func(_ *appRecord, a *appv1.App) { a.Spec.Route = nil }
	case opBreak:
		ok = func(r *appRecord) bool { return !d.broken(r) }
		change = func(_ *appRecord, a *appv1.App) { d.breakPods(a) }
	case opFix:
		ok = d.broken
		change = func(_ *appRecord, a *appv1.App) { d.fixPods(a) }
	default:
		return fmt.Errorf("unknown operation %q", op)
	}
	r := d.pick(ok)
	if r == nil {
		return errSkipped
	}
	defer d.release(r)
	return d.update(ctx, r, op, change)
}

// breakPods gives a pods that cannot run: an image that does not exist, or on a real
// node, every other time, a container that exits at once.
func (d *driver) breakPods(a *appv1.App) {
	t := a.Spec.DeploymentTemplate
	if d.images.crashArgs != nil && d.intn(2) == 0 {
		t.Args = d.images.crashArgs
		return
	}
	t.Image = d.images.bad
	if d.images.kwok {
		// kwok runs no container: its fault stage reports what the kubelet would.
		t.PodAnnotations = map[string]string{kwokFaultReason: "ImagePullBackOff",
			kwokFaultMessage: fmt.Sprintf("Back-off pulling image %q", d.images.bad)}
	}
}

// fixPods gives a back a good image and arguments (an analyzed canary demoapp's, its
// metrics where it serves them).
func (d *driver) fixPods(a *appv1.App) {
	t := a.Spec.DeploymentTemplate
	if analyzed(a) && d.images.analysis != nil {
		d.images.analysis.healthy(t)
		return
	}
	if t.Image == d.images.bad {
		t.Image = d.images.good[d.intn(len(d.images.good))]
	}
	t.Args = d.images.args
	t.PodAnnotations = nil
}

// update changes r's spec with change (retrying through faults and conflicts, as
// retryWrite) and records the new generation.
func (d *driver) update(ctx context.Context, r *appRecord, op string, change func(*appRecord, *appv1.App)) error {
	var updated *appv1.App
	var at time.Time // when the attempt that went through was sent
	moved, err := d.retryWrite(ctx, r, func() error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			a, err := d.apps.AppcontrollerV1().Apps(r.namespace).Get(ctx, r.name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			change(r, a)
			stampVersion(a)
			at = time.Now()
			updated, err = d.apps.AppcontrollerV1().Apps(r.namespace).Update(ctx, a, metav1.UpdateOptions{})
			return err
		})
	})
	if err != nil {
		return fmt.Errorf("%s of App %s: %w", op, r.key(), err)
	}
	if moved != nil {
		updated = moved
	}
	d.w.wrote(r, updated, op, d.expect(&updated.Spec), at)
	return nil
}

// opConfigMap changes a ConfigMap that live Apps reference: their pods roll.
func (d *driver) opConfigMap(ctx context.Context) error {
	d.w.mu.Lock()
	names := make([]string, 0, len(d.w.configMaps))
	for k := range d.w.configMaps {
		names = append(names, k)
	}
	d.w.mu.Unlock()
	slices.Sort(names)
	return d.changeConfigMap(ctx, names[d.intn(len(names))])
}

// changeConfigMap changes the ConfigMap name (namespace/name) and records the change on
// every live App that references it: opConfigMap on an App without a strategy,
// opConfigMapCanary on a canary (a rollout), opConfigMapAutoscaled on an autoscaled one.
func (d *driver) changeConfigMap(ctx context.Context, name string) error {
	var ns, cm string
	for i := range name {
		if name[i] == '/' {
			ns, cm = name[:i], name[i+1:]
			break
		}
	}
	d.w.mu.Lock()
	version := d.w.configMaps[name] + 1
	d.w.configMaps[name] = version
	d.w.mu.Unlock()
	patch := fmt.Appendf(nil, `{"data":{"version":%q}}`, strconv.Itoa(version))
	var now time.Time
	err := retryThroughFaults(ctx, func() error {
		now = time.Now()
		_, err := d.kube.CoreV1().ConfigMaps(ns).Patch(ctx, cm, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("changing ConfigMap %s: %w", name, err)
	}
	d.w.mu.Lock()
	var referencing []*appRecord
	for _, r := range d.w.apps {
		if r.deleted.IsZero() && r.namespace == ns && r.latest != nil && referencesConfigMap(&r.latest.Spec, cm) {
			referencing = append(referencing, r)
		}
	}
	d.w.mu.Unlock()
	for _, r := range referencing {
		switch {
		case r.isCanary():
			d.w.record(r, opConfigMapCanary, now)
		case r.kind == kindAutoscaled:
			d.w.record(r, opConfigMapAutoscaled, now)
		default:
			d.w.record(r, opConfigMap, now)
		}
	}
	return nil
}

// referencesConfigMap tells whether spec's container takes its env from ConfigMap cm.
func referencesConfigMap(spec *appv1.AppSpec, cm string) bool {
	if spec.DeploymentTemplate == nil {
		return false
	}
	for _, e := range spec.DeploymentTemplate.EnvFrom {
		if e.ConfigMapRef != nil && e.ConfigMapRef.Name == cm {
			return true
		}
	}
	return false
}

// opRouteMove moves a host from an App with a route to an App of the same namespace
// without one: the first gives the route up, and once it converged the other takes it.
func (d *driver) opRouteMove(ctx context.Context) error {
	from := d.pick(func(r *appRecord) bool { return r.latest.Spec.Route != nil })
	if from == nil {
		return errSkipped
	}
	defer d.release(from)
	to := d.pick(func(r *appRecord) bool {
		return r.namespace == from.namespace && !d.broken(r) && r.latest.Spec.Route == nil
	})
	if to == nil {
		return errSkipped
	}
	defer d.release(to)
	var hosts []appv1.Hostname
	if err := d.update(ctx, from, opRouteMove, func(_ *appRecord, a *appv1.App) {
		if a.Spec.Route != nil {
			hosts = a.Spec.Route.Hosts
		}
		a.Spec.Route = nil
	}); err != nil {
		return err
	}
	if err := d.waitConverged(ctx, from); err != nil {
		return err
	}
	return d.update(ctx, to, opRouteTake, func(_ *appRecord, a *appv1.App) {
		a.Spec.Route = &appv1.Route{Hosts: hosts}
	})
}

// waitConverged waits until r reports what the driver expects of its last generation.
func (d *driver) waitConverged(ctx context.Context, r *appRecord) error {
	for {
		d.w.mu.Lock()
		done := r.convergedNow()
		d.w.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for App %s to converge: %w", r.key(), ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// opShardMove moves an App to the other shard, from each shard in turn: a change of
// its label.
func (d *driver) opShardMove(ctx context.Context) error {
	from := shardOf(d.turn(opShardMove))
	r := d.pick(func(r *appRecord) bool { return r.shard == from })
	if r == nil {
		return errSkipped
	}
	defer d.release(r)
	to := shardA
	if r.shard == shardA {
		to = shardB
	}
	patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:%q}}}`, shardLabel, to)
	var at time.Time
	err := retryThroughFaults(ctx, func() error {
		at = time.Now()
		_, err := d.apps.AppcontrollerV1().Apps(r.namespace).Patch(ctx, r.name, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("moving App %s to shard %s: %w", r.key(), to, err)
	}
	d.w.mu.Lock()
	r.shard = to
	d.w.mu.Unlock()
	d.w.record(r, opShardMove, at)
	return nil
}

// opRollback rolls an App with at least two revisions back to the one before its
// current, as `kubectl app rollback NAME` does.
func (d *driver) opRollback(ctx context.Context) error {
	// The spec rolled back to has a route if the current one has: the number of routes,
	// and the Ingress caches with it, stays put (route-add and route-remove change it
	// by turns).
	r := d.pick(func(r *appRecord) bool {
		n := len(r.history)
		return n >= 2 && (r.history[n-2].Route == nil) == (r.history[n-1].Route == nil)
	})
	if r == nil {
		return errSkipped
	}
	defer d.release(r)
	rolled, err := d.requestRollback(ctx, r, opRollback)
	if err == nil && !rolled {
		return errSkipped
	}
	return err
}

// requestRollback rolls r back to the revision before its current, as `kubectl app rollback
// NAME` does (the plugin's Rollback, retried through faults as retryWrite), and records
// the generation it wrote as op; false when r's spec already is that revision's (nothing
// written).
func (d *driver) requestRollback(ctx context.Context, r *appRecord, op string) (bool, error) {
	var res *plugin.RollbackResult
	var at time.Time // when the attempt that went through was sent
	moved, err := d.retryWrite(ctx, r, func() error {
		var err error
		at = time.Now()
		res, err = plugin.Rollback(ctx, d.plugin, r.namespace, r.name, 0)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("rolling back App %s: %w", r.key(), err)
	}
	a := moved
	switch {
	case a == nil && len(res.Changes) == 0:
		return false, nil
	case a == nil:
		if a, err = d.get(ctx, r); err != nil {
			return false, err
		}
	}
	d.w.wrote(r, a, op, d.expect(&a.Spec), at)
	return true, nil
}

// retryWrite calls write, a change of r's spec, through faults (retryThroughFaults).
// Before trying again it reads the App: when its generation moved since the driver's
// last write, the attempt that failed went through (the API server applied it, and its
// answer was lost: it stopped, or timed out, after the write), and retryWrite returns
// the App instead of writing again. Written again, a change would apply twice (a toggle
// undone, a generation the driver never recorded in between), and a rollback would,
// before the controller recorded the spec just written as the current revision, find
// nothing to change and leave that generation unrecorded.
func (d *driver) retryWrite(ctx context.Context, r *appRecord, write func() error) (moved *appv1.App, err error) {
	before := d.w.lastGeneration(r)
	tried := false
	err = retryThroughFaults(ctx, func() error {
		if tried {
			a, err := d.apps.AppcontrollerV1().Apps(r.namespace).Get(ctx, r.name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if a.Generation != before {
				moved = a
				return nil
			}
		}
		tried = true
		return write()
	})
	return moved, err
}

// retryThroughFaults calls f until it succeeds, ctx ends or f fails with an error a
// fault does not explain (a refusal by the API: invalid, forbidden, not found).
func retryThroughFaults(ctx context.Context, f func() error) error {
	for {
		err := f()
		if err == nil || apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsNotFound(err) || apierrors.IsBadRequest(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %w)", ctx.Err(), err)
		case <-time.After(2 * time.Second):
		}
	}
}

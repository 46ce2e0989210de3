package plugin

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// The dashboard follows the cluster through informers: the Apps of its namespaces
// (dynamic, so that status fields this plugin does not know yet, such as analysis
// results, reach the page), and of the same namespaces the Deployments, Pods and
// ControllerRevisions that carry an App's instance label and the Events about Apps. Each
// change is published to the pages that show it (dashHub); nothing polls.

// revisionResource is the resource of ControllerRevisions, an App's revisions.
const revisionResource = "controllerrevisions"

// syncTimeout bounds the first list of the Apps; the other informers are not waited
// for (a resource the user may not list shows as a note on the App's page).
const syncTimeout = 30 * time.Second

// dashCache holds the informers of a dashboard and the last list error of each.
type dashCache struct {
	apps        cache.SharedIndexInformer
	deployments cache.SharedIndexInformer
	pods        cache.SharedIndexInformer
	events      cache.SharedIndexInformer
	revisions   cache.SharedIndexInformer
	hub         *dashHub

	mu sync.Mutex
	// errs is the last error of each informer's list or watch, by resource; cleared by
	// the next object it delivers.
	errs map[string]string
}

// newDashCache makes the informers of namespace ("" for all) with clients; start runs
// them.
func newDashCache(c Clients, namespace string) (*dashCache, error) {
	appGVR, err := appResource(c.Discovery)
	if err != nil {
		return nil, err
	}
	d := &dashCache{hub: newDashHub(), errs: map[string]string{}}
	dyn := dynamicinformer.NewFilteredDynamicSharedInformerFactory(c.Dynamic, 0, namespace, nil)
	d.apps = dyn.ForResource(appGVR).Informer()

	instance, err := labels.NewRequirement(appv1.InstanceLabel, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	owned := informers.NewSharedInformerFactoryWithOptions(c.Kube, 0, informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = labels.NewSelector().Add(*instance).String() }))
	d.deployments = owned.Apps().V1().Deployments().Informer()
	d.pods = owned.Core().V1().Pods().Informer()
	d.revisions = owned.Apps().V1().ControllerRevisions().Informer()
	aboutApps := informers.NewSharedInformerFactoryWithOptions(c.Kube, 0, informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("involvedObject.kind", "App").String()
		}))
	d.events = aboutApps.Core().V1().Events().Informer()

	for name, inf := range d.informers() {
		transform := stripForDashboard
		if inf == d.apps {
			transform = appTransform
		}
		if err := inf.SetTransform(transform); err != nil {
			return nil, fmt.Errorf("setting the transform of the %s informer: %w", name, err)
		}
		if err := inf.SetWatchErrorHandler(func(_ *cache.Reflector, err error) { d.setErr(name, err.Error()) }); err != nil {
			return nil, fmt.Errorf("setting the error handler of the %s informer: %w", name, err)
		}
		if _, err := inf.AddEventHandler(d.handler(name)); err != nil {
			return nil, fmt.Errorf("watching %s: %w", name, err)
		}
	}
	return d, nil
}

// stripForDashboard drops what the pages never show and what makes most of an
// object's size: its managedFields and the annotation of kubectl apply's last
// configuration.
func stripForDashboard(obj any) (any, error) {
	if o, err := meta.Accessor(obj); err == nil {
		o.SetManagedFields(nil)
		if a := o.GetAnnotations(); a[corev1.LastAppliedConfigAnnotation] != "" {
			a = maps.Clone(a)
			delete(a, corev1.LastAppliedConfigAnnotation)
			o.SetAnnotations(a)
		}
	}
	return obj, nil
}

// informers returns the informers by the resource they list.
func (d *dashCache) informers() map[string]cache.SharedIndexInformer {
	return map[string]cache.SharedIndexInformer{
		appResourceName: d.apps, deploymentResource.Resource: d.deployments, podResource.Resource: d.pods,
		eventResource.Resource: d.events, revisionResource: d.revisions,
	}
}

// start runs the informers until ctx ends and waits until the Apps are listed.
func (d *dashCache) start(ctx context.Context) error {
	for _, inf := range d.informers() {
		go inf.RunWithContext(ctx)
	}
	syncCtx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), d.apps.HasSynced) {
		if msg := d.err(appResourceName); msg != "" {
			return fmt.Errorf("listing the Apps: %s", msg)
		}
		return fmt.Errorf("listing the Apps: not done within %s", syncTimeout)
	}
	return nil
}

// setErr records the last error of the informer of resource.
func (d *dashCache) setErr(resource, msg string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.errs[resource] = msg
}

// err returns the last error of the informer of resource, "" when it works.
func (d *dashCache) err(resource string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.errs[resource]
}

// handler publishes each change of an object of resource to the hub, as the App it
// belongs to.
func (d *dashCache) handler(resource string) cache.ResourceEventHandler {
	publish := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		d.setErr(resource, "")
		switch o := obj.(type) {
		case *cachedApp:
			d.hub.publish(change{namespace: o.Namespace, app: o.Name, isApp: true})
		case *corev1.Event:
			d.hub.publish(change{namespace: o.Namespace, app: o.InvolvedObject.Name})
		case metav1.Object:
			d.hub.publish(change{namespace: o.GetNamespace(), app: o.GetLabels()[appv1.InstanceLabel]})
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    publish,
		UpdateFunc: func(_, obj any) { publish(obj) },
		DeleteFunc: publish,
	}
}

// cachedApp is an App of the cache, decoded once by the informer's transform
// (appTransform): typed, with the lists of objects of its status.rollout that the typed
// App may not have (the analysis results of a newer controller) as tables. A typed App
// takes a fraction of the memory of the map the dynamic client decodes.
type cachedApp struct {
	appv1.App
	// Analysis are the tables of analysisTables.
	Analysis []tableView
	// DecodeError says why the App could not be decoded; the App then has only its
	// metadata.
	DecodeError string
}

// DeepCopyObject copies the cached App (the informer's mutation detector compares
// copies).
func (a *cachedApp) DeepCopyObject() runtime.Object {
	c := &cachedApp{App: *a.DeepCopy(), DecodeError: a.DecodeError}
	for _, t := range a.Analysis {
		rows := make([][]string, len(t.Rows))
		for i, r := range t.Rows {
			rows[i] = slices.Clone(r)
		}
		c.Analysis = append(c.Analysis, tableView{Title: t.Title, Columns: slices.Clone(t.Columns), Rows: rows})
	}
	return c
}

// appTransform decodes an App of the dynamic informer into a *cachedApp.
func appTransform(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil // a tombstone holds an object already transformed
	}
	a := &cachedApp{Analysis: analysisTables(u)}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &a.App); err != nil {
		a.App = appv1.App{ObjectMeta: metav1.ObjectMeta{Namespace: u.GetNamespace(), Name: u.GetName(), UID: u.GetUID(), Generation: u.GetGeneration()}}
		a.DecodeError = fmt.Sprintf("decoding App %s/%s: %v", u.GetNamespace(), u.GetName(), err)
	}
	a.ManagedFields = nil
	delete(a.Annotations, corev1.LastAppliedConfigAnnotation)
	return a, nil
}

// toApp returns the App of an object of the Apps informer.
func toApp(obj any) (*cachedApp, error) {
	a, ok := obj.(*cachedApp)
	if !ok {
		return nil, fmt.Errorf("unexpected object %T in the App informer", obj)
	}
	return a, nil
}

// app returns the App namespace/name; ok is false when the cache has none.
func (d *dashCache) app(namespace, name string) (*cachedApp, bool, error) {
	obj, ok, err := d.apps.GetStore().GetByKey(namespace + "/" + name)
	if err != nil || !ok {
		return nil, false, err
	}
	app, err := toApp(obj)
	return app, err == nil, err
}

// appList returns every App of the cache, by namespace and name.
func (d *dashCache) appList() []*cachedApp {
	objs := d.apps.GetStore().List()
	apps := make([]*cachedApp, 0, len(objs))
	for _, obj := range objs {
		if app, err := toApp(obj); err == nil {
			apps = append(apps, app)
		}
	}
	sort.Slice(apps, func(i, j int) bool {
		if apps[i].Namespace != apps[j].Namespace {
			return apps[i].Namespace < apps[j].Namespace
		}
		return apps[i].Name < apps[j].Name
	})
	return apps
}

// namespaced returns the objects of inf in namespace, cast to T.
func namespaced[T any](inf cache.SharedIndexInformer, namespace string) []T {
	objs, err := inf.GetIndexer().ByIndex(cache.NamespaceIndex, namespace)
	if err != nil {
		return nil
	}
	out := make([]T, 0, len(objs))
	for _, obj := range objs {
		if t, ok := obj.(T); ok {
			out = append(out, t)
		}
	}
	return out
}

// appPodsOf returns the pods of app (its selector's labels), by name.
func (d *dashCache) appPodsOf(app *appv1.App) []corev1.Pod {
	var pods []corev1.Pod
	for _, p := range namespaced[*corev1.Pod](d.pods, app.Namespace) {
		if p.Labels[appv1.NameLabel] == app.Name && p.Labels[appv1.InstanceLabel] == app.Name {
			pods = append(pods, *p)
		}
	}
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	return pods
}

// deployment returns the Deployment name of app's namespace if app controls it.
func (d *dashCache) deployment(app *appv1.App, name string) *appsv1.Deployment {
	obj, ok, err := d.deployments.GetStore().GetByKey(app.Namespace + "/" + name)
	if err != nil || !ok {
		return nil
	}
	dep, _ := obj.(*appsv1.Deployment)
	if dep == nil {
		return nil
	}
	if ref := metav1.GetControllerOfNoCopy(dep); ref == nil || ref.UID != app.UID {
		return nil
	}
	return dep
}

// appEventsOf returns the most recent Events about app, the latest last.
func (d *dashCache) appEventsOf(app *appv1.App) []corev1.Event {
	var events []corev1.Event
	for _, e := range namespaced[*corev1.Event](d.events, app.Namespace) {
		if e.InvolvedObject.UID == app.UID {
			events = append(events, *e)
		}
	}
	return recentEvents(events)
}

// historyOfApp returns app's revisions.
func (d *dashCache) historyOfApp(app *appv1.App) (*History, error) {
	revisions := namespaced[*appsv1.ControllerRevision](d.revisions, app.Namespace)
	crs := make([]appsv1.ControllerRevision, 0, len(revisions))
	for _, cr := range revisions {
		crs = append(crs, *cr)
	}
	return historyOf(app, crs)
}

// change is a change of an object of App app (its name) in namespace; isApp when the
// object is the App itself.
type change struct {
	namespace, app string
	isApp          bool
}

// dashHub hands the cache's changes to the pages' streams.
type dashHub struct {
	mu   sync.Mutex
	subs map[*subscription]struct{}
}

// subscription is a stream's interest: the changes that match, gathered until the
// stream takes them.
type subscription struct {
	match func(change) bool
	// wake has a value when changes wait.
	wake chan struct{}

	mu      sync.Mutex
	pending map[change]struct{}
}

func newDashHub() *dashHub { return &dashHub{subs: map[*subscription]struct{}{}} }

// subscribe returns a subscription to the changes that match; cancel ends it.
func (h *dashHub) subscribe(match func(change) bool) (s *subscription, cancel func()) {
	s = &subscription{match: match, wake: make(chan struct{}, 1), pending: map[change]struct{}{}}
	h.mu.Lock()
	h.subs[s] = struct{}{}
	h.mu.Unlock()
	return s, func() {
		h.mu.Lock()
		delete(h.subs, s)
		h.mu.Unlock()
	}
}

// publish hands c to the subscriptions it matches.
func (h *dashHub) publish(c change) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		if !s.match(c) {
			continue
		}
		s.mu.Lock()
		s.pending[c] = struct{}{}
		s.mu.Unlock()
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// take returns the changes gathered since the last take.
func (s *subscription) take() []change {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]change, 0, len(s.pending))
	for c := range s.pending {
		out = append(out, c)
	}
	clear(s.pending)
	return out
}

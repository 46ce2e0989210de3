package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/metadata/metadatainformer"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayfake "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/fake"
	gatewayinformers "sigs.k8s.io/gateway-api/pkg/client/informers/externalversions"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
	"github.com/app-controller/app-controller/pkg/controller/appfixture"
	"github.com/app-controller/app-controller/pkg/controller/controllertest"

	appfake "github.com/app-controller/app-controller/pkg/generated/clientset/versioned/fake"
	appinformers "github.com/app-controller/app-controller/pkg/generated/informers/externalversions"
)

// testNow is the fixed time of the fake clock.
var testNow = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// httpRouteResource is the Gateway API's HTTPRoute resource, for the fake clients.
var httpRouteResource = schema.GroupVersion(gatewayv1.GroupVersion).WithResource("httproutes")

// fixture is a Controller on fake clientsets whose informer caches are seeded directly
// (the informers never run), in the style of kube-controller-manager's tests.
type fixture struct {
	t          testing.TB
	ctx        context.Context
	c          *Controller
	kubeClient *kubefake.Clientset
	appClient  *appfake.Clientset
	// gatewayClient serves HTTPRoutes when the fixture has the Gateway API
	// (newGatewayFixture); nil otherwise.
	gatewayClient *gatewayfake.Clientset
	recorder      *record.FakeRecorder
	inf           Informers
	clock         *clocktesting.FakePassiveClock
	// statusRV is the resourceVersion of the last status write the fake API server answered.
	statusRV int
	// requeues are the RequeueAfter delays the syncs asked for, as the loop would queue
	// them.
	requeues []time.Duration
	// appGone: the fake API server no longer has any App, though the cache still does.
	appGone bool
}

// newFixture builds a Controller; seed its caches with the add* methods. Tests log to
// the test's log; benchmarks log as in production, with klog at its default verbosity.
func newFixture(t testing.TB) *fixture {
	t.Helper()
	return newFixtureWith(t, false, nil)
}

// newGatewayFixture is newFixture on a cluster that serves the Gateway API, with
// defaultGateway as --default-gateway (nil: none).
func newGatewayFixture(t testing.TB, defaultGateway *appv1.GatewayRef) *fixture {
	t.Helper()
	return newFixtureWith(t, true, defaultGateway)
}

func newFixtureWith(t testing.TB, gatewayAPI bool, defaultGateway *appv1.GatewayRef) *fixture {
	t.Helper()
	ctx := controllertest.Context(t)
	f := &fixture{t: t, ctx: ctx, statusRV: 1000}
	f.kubeClient = kubefake.NewClientset()
	// The config copies the controller creates get a UID, as from an API server: the
	// write cache tells a deleted copy from one created since under its name by it.
	uids := 0
	f.kubeClient.PrependReactor("create", "*", func(action core.Action) (bool, runtime.Object, error) {
		if r := action.GetResource().Resource; r != "configmaps" && r != "secrets" {
			return false, nil, nil
		}
		if obj, ok := action.(core.CreateAction).GetObject().(metav1.Object); ok && obj.GetUID() == "" {
			uids++
			obj.SetUID(types.UID(fmt.Sprintf("%s-uid-%d", obj.GetName(), uids)))
		}
		return false, nil, nil
	})
	f.appClient = appfake.NewClientset()
	// Answer status patches from the App cache, as the fake tracker holds no Apps.
	f.appClient.PrependReactor("patch", "apps", func(action core.Action) (bool, runtime.Object, error) {
		patch := action.(core.PatchAction)
		if patch.GetSubresource() != "status" {
			return false, nil, nil
		}
		obj, exists, err := f.inf.Apps.Informer().GetIndexer().GetByKey(patch.GetNamespace() + "/" + patch.GetName())
		if err != nil || !exists {
			return true, nil, err
		}
		if f.appGone {
			return true, nil, apierrors.NewNotFound(appv1.Resource("apps"), patch.GetName())
		}
		app := obj.(*appv1.App).DeepCopy()
		if err := jsonMergeStatus(patch.GetPatch(), app); err != nil {
			return true, nil, err
		}
		f.statusRV++
		app.ResourceVersion = fmt.Sprint(f.statusRV)
		return true, app, nil
	})

	// Answer reads of an App from the App cache too (confirmLive); appGone makes them
	// NotFound, as for an App deleted since the cache saw it.
	f.appClient.PrependReactor("get", "apps", func(action core.Action) (bool, runtime.Object, error) {
		get := action.(core.GetAction)
		obj, exists, err := f.inf.Apps.Informer().GetIndexer().GetByKey(get.GetNamespace() + "/" + get.GetName())
		if err != nil {
			return true, nil, err
		}
		if !exists || f.appGone {
			return true, nil, apierrors.NewNotFound(appv1.Resource("apps"), get.GetName())
		}
		return true, obj.(*appv1.App).DeepCopy(), nil
	})

	kubeInformers := informers.NewSharedInformerFactory(f.kubeClient, 0)
	appInformers := appinformers.NewSharedInformerFactory(f.appClient, 0)
	scheme := runtime.NewScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	metadataInformers := metadatainformer.NewSharedInformerFactory(metadatafake.NewSimpleMetadataClient(scheme), 0)
	f.inf = Informers{
		Apps:                       appInformers.Appcontroller().V1().Apps(),
		Deployments:                kubeInformers.Apps().V1().Deployments(),
		Services:                   kubeInformers.Core().V1().Services(),
		UnmanagedDeployments:       metadataInformers.ForResource(appsv1.SchemeGroupVersion.WithResource("deployments")),
		UnmanagedServices:          metadataInformers.ForResource(corev1.SchemeGroupVersion.WithResource("services")),
		Pods:                       kubeInformers.Core().V1().Pods(),
		ProbeEvents:                kubeInformers.Core().V1().Events(),
		ConfigMaps:                 metadataInformers.ForResource(corev1.SchemeGroupVersion.WithResource("configmaps")),
		Secrets:                    metadataInformers.ForResource(corev1.SchemeGroupVersion.WithResource("secrets")),
		Revisions:                  kubeInformers.Apps().V1().ControllerRevisions(),
		DisruptionBudgets:          kubeInformers.Policy().V1().PodDisruptionBudgets(),
		UnmanagedDisruptionBudgets: metadataInformers.ForResource(policyv1.SchemeGroupVersion.WithResource("poddisruptionbudgets")),
		Ingresses:                  kubeInformers.Networking().V1().Ingresses(),
		UnmanagedIngresses:         metadataInformers.ForResource(networkingv1.SchemeGroupVersion.WithResource("ingresses")),
		Autoscalers:                kubeInformers.Autoscaling().V2().HorizontalPodAutoscalers(),
		UnmanagedAutoscalers:       metadataInformers.ForResource(autoscalingv2.SchemeGroupVersion.WithResource("horizontalpodautoscalers")),
	}
	if gatewayAPI {
		f.gatewayClient = gatewayfake.NewClientset()
		f.inf.HTTPRoutes = gatewayinformers.NewSharedInformerFactory(f.gatewayClient, 0).Gateway().V1().HTTPRoutes()
		f.inf.UnmanagedHTTPRoutes = metadataInformers.ForResource(httpRouteResource)
	}
	f.recorder = record.NewFakeRecorder(1000)
	f.clock = clocktesting.NewFakePassiveClock(testNow)
	c, err := NewController(ctx, f.kubeClient, f.appClient, f.inf, f.recorder, Options{
		GatewayClient:  f.gatewayClient,
		DefaultGateway: defaultGateway,
		Clock:          f.clock,
		// Retries wait an hour: a retry never lands in the queue while a test looks at it.
		RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[cache.ObjectName](time.Hour, time.Hour),
	})
	if err != nil {
		t.Fatalf("NewController: %v", err)
	}
	f.c = c
	return f
}

// addApps seeds the App cache. An App the controller has synced before (its status
// observed its generation) gets the revision of its spec, in the revision cache and the
// fake API server, and its status names it, as the controller leaves them.
func (f *fixture) addApps(apps ...*appv1.App) {
	for _, a := range apps {
		if a.Status.ObservedGeneration == a.Generation && a.Generation > 0 {
			rev := revisionOf(f.t, a, 1)
			a.Status.CurrentRevision = rev.Name
			if _, exists, _ := f.inf.Revisions.Informer().GetIndexer().GetByKey(a.Namespace + "/" + rev.Name); !exists {
				f.addRevisions(rev)
			}
		}
		controllertest.Seed(f.t, f.inf.Apps.Informer().GetIndexer(), nil, a)
	}
}

// addRevisions seeds the revision cache (trimmed) and the fake API server.
func (f *fixture) addRevisions(revs ...*appsv1.ControllerRevision) {
	for _, r := range revs {
		if err := f.kubeClient.Tracker().Add(r.DeepCopy()); err != nil && !apierrors.IsAlreadyExists(err) {
			f.t.Fatalf("seeding revision %s: %v", r.Name, err)
		}
		trimmed, _ := TrimRevision(r.DeepCopy())
		controllertest.Seed(f.t, f.inf.Revisions.Informer().GetIndexer(), nil, trimmed.(*appsv1.ControllerRevision))
	}
}

// revisionOf returns the revision number n that records app's current spec, as the
// controller creates it.
func revisionOf(t testing.TB, app *appv1.App, n int64) *appsv1.ControllerRevision {
	t.Helper()
	data, hash, err := RevisionData(&app.Spec)
	if err != nil {
		t.Fatal(err)
	}
	return &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: app.Namespace, Name: app.Name + "-" + hash, UID: types.UID(app.Name + "-" + hash + "-uid"),
			ResourceVersion: "5", Labels: childLabels(app), OwnerReferences: controlledBy(app),
		},
		Data:     runtime.RawExtension{Raw: data},
		Revision: n,
	}
}

// addDeployments seeds the managed Deployment cache and the fake API server.
func (f *fixture) addDeployments(ds ...*appsv1.Deployment) {
	for _, d := range ds {
		controllertest.Seed(f.t, f.inf.Deployments.Informer().GetIndexer(), f.kubeClient.Tracker(), d)
	}
}

// addServices seeds the managed Service cache and the fake API server.
func (f *fixture) addServices(ss ...*corev1.Service) {
	for _, s := range ss {
		controllertest.Seed(f.t, f.inf.Services.Informer().GetIndexer(), f.kubeClient.Tracker(), s)
	}
}

// addUnmanaged seeds the unmanaged metadata cache of kind ("Deployment" or "Service").
func (f *fixture) addUnmanaged(kind string, objs ...*metav1.PartialObjectMetadata) {
	i := f.inf.UnmanagedDeployments
	if kind == "Service" {
		i = f.inf.UnmanagedServices
	}
	for _, o := range objs {
		controllertest.Seed(f.t, i.Informer().GetIndexer(), nil, o)
	}
}

// sync runs syncApp for the App namespace/name and, if it held the status write back
// to coalesce it, runs it again when the window has passed (as the queue does), with
// nothing else changed. writes returns the writes of both.
func (f *fixture) sync(namespace, name string) error {
	if err := f.syncOnce(namespace, name); err != nil {
		return err
	}
	key := cache.ObjectName{Namespace: namespace, Name: name}
	if !f.c.statusPending.pending(key) {
		return nil
	}
	f.step(StatusCoalesceWindow)
	f.catchUp()
	return f.syncApp(key)
}

// mustSync is sync of the App tcs/name, failing the test on an error.
func (f *fixture) mustSync(name string) {
	f.t.Helper()
	if err := f.sync("tcs", name); err != nil {
		f.t.Fatalf("syncing App tcs/%s: %v", name, err)
	}
}

// catchUp makes the managed child caches hold what the fake API server holds, as the
// informers would by the time a held-back sync runs.
func (f *fixture) catchUp() {
	f.t.Helper()
	for _, c := range []struct {
		gvr     schema.GroupVersionResource
		gvk     schema.GroupVersionKind
		indexer cache.Indexer
	}{
		{appsv1.SchemeGroupVersion.WithResource("deployments"), appsv1.SchemeGroupVersion.WithKind("Deployment"), f.inf.Deployments.Informer().GetIndexer()},
		{corev1.SchemeGroupVersion.WithResource("services"), corev1.SchemeGroupVersion.WithKind("Service"), f.inf.Services.Informer().GetIndexer()},
		{policyv1.SchemeGroupVersion.WithResource("poddisruptionbudgets"), policyv1.SchemeGroupVersion.WithKind("PodDisruptionBudget"), f.inf.DisruptionBudgets.Informer().GetIndexer()},
		{networkingv1.SchemeGroupVersion.WithResource("ingresses"), networkingv1.SchemeGroupVersion.WithKind("Ingress"), f.inf.Ingresses.Informer().GetIndexer()},
		{autoscalingv2.SchemeGroupVersion.WithResource("horizontalpodautoscalers"), autoscalingv2.SchemeGroupVersion.WithKind("HorizontalPodAutoscaler"), f.inf.Autoscalers.Informer().GetIndexer()},
	} {
		list, err := f.kubeClient.Tracker().List(c.gvr, c.gvk, "")
		if err != nil {
			f.t.Fatalf("listing %s: %v", c.gvr.Resource, err)
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			f.t.Fatalf("listing %s: %v", c.gvr.Resource, err)
		}
		var managed []interface{}
		for _, item := range items {
			if m, err := meta.Accessor(item); err == nil && controller.ManagedSelector().Matches(labels.Set(m.GetLabels())) {
				// As the informers' transforms.
				if d, ok := item.(*appsv1.Deployment); ok {
					d = d.DeepCopy()
					_, _ = controller.StripManagedFieldsButReplicas(d)
					item = d
				}
				managed = append(managed, item)
			}
		}
		if err := c.indexer.Replace(managed, ""); err != nil {
			f.t.Fatalf("replacing the %s cache: %v", c.gvr.Resource, err)
		}
	}
	if f.gatewayClient != nil {
		list, err := f.gatewayClient.Tracker().List(httpRouteResource, schema.GroupVersion(gatewayv1.GroupVersion).WithKind("HTTPRoute"), "")
		if err != nil {
			f.t.Fatalf("listing httproutes: %v", err)
		}
		items, _ := meta.ExtractList(list)
		if err := f.inf.HTTPRoutes.Informer().GetIndexer().Replace(items2ifaces(items), ""); err != nil {
			f.t.Fatalf("replacing the HTTPRoute cache: %v", err)
		}
	}
	gvr := appsv1.SchemeGroupVersion.WithResource("controllerrevisions")
	list, err := f.kubeClient.Tracker().List(gvr, appsv1.SchemeGroupVersion.WithKind("ControllerRevision"), "")
	if err != nil {
		f.t.Fatalf("listing revisions: %v", err)
	}
	revs, _ := meta.ExtractList(list)
	trimmed := make([]interface{}, 0, len(revs))
	for _, r := range revs {
		obj, _ := TrimRevision(r.(*appsv1.ControllerRevision).DeepCopy())
		trimmed = append(trimmed, obj)
	}
	if err := f.inf.Revisions.Informer().GetIndexer().Replace(trimmed, ""); err != nil {
		f.t.Fatalf("replacing the revision cache: %v", err)
	}
}

// items2ifaces returns objs as a []interface{}, for Indexer.Replace.
func items2ifaces(objs []runtime.Object) []interface{} {
	out := make([]interface{}, 0, len(objs))
	for _, o := range objs {
		out = append(out, o)
	}
	return out
}

// syncOnce runs syncApp once for the App namespace/name.
func (f *fixture) syncOnce(namespace, name string) error {
	f.kubeClient.ClearActions()
	f.appClient.ClearActions()
	if f.gatewayClient != nil {
		f.gatewayClient.ClearActions()
	}
	return f.syncApp(cache.ObjectName{Namespace: namespace, Name: name})
}

// syncApp runs syncApp for key and records the RequeueAfter of its Result in requeues.
func (f *fixture) syncApp(key cache.ObjectName) error {
	res, err := f.c.syncApp(f.ctx, key)
	if res.RequeueAfter > 0 {
		f.requeues = append(f.requeues, res.RequeueAfter)
	}
	return err
}

// step advances the fake clock by d.
func (f *fixture) step(d time.Duration) {
	f.clock.SetTime(f.clock.Now().Add(d))
}

// writes returns the write actions (everything but get, list and watch) of both clients.
func (f *fixture) writes() []core.Action {
	if f.gatewayClient != nil {
		return controllertest.Writes(f.kubeClient.Actions(), f.appClient.Actions(), f.gatewayClient.Actions())
	}
	return controllertest.Writes(f.kubeClient.Actions(), f.appClient.Actions())
}

// events drains the recorded events.
func (f *fixture) events() []string { return controllertest.DrainEvents(f.recorder) }

// childOf returns the kind of child K of c's table.
func childOf[K appChild](t testing.TB, c *Controller) K {
	t.Helper()
	for _, child := range c.children {
		if k, ok := child.(K); ok {
			return k
		}
	}
	var none K
	t.Fatalf("no %T in the table of children", none)
	return none
}

// newApp returns an App like the seed's test_app.yaml as the API server holds it:
// schema defaults applied, identity and creation time set.
func newApp(name string, created time.Time) *appv1.App {
	app := appfixture.NewApp("tcs", name, "nginx", 2)
	app.TypeMeta = metav1.TypeMeta{APIVersion: appv1.GroupVersion.String(), Kind: "App"}
	app.UID = types.UID(name + "-uid")
	app.Generation = 1
	app.ResourceVersion = "1"
	app.CreationTimestamp = metav1.NewTime(created)
	app.Spec.ServiceTemplate = &appv1.ServiceTemplate{Name: name + "-service", Port: 8080, Type: corev1.ServiceTypeClusterIP}
	return app
}

// controlledBy returns owner references making app the controller.
func controlledBy(app *appv1.App) []metav1.OwnerReference {
	return []metav1.OwnerReference{*metav1.NewControllerRef(app, appKind)}
}

// desiredObject returns the object of type T that build (DesiredDeployment,
// DesiredService...) describes for app, without what the API server adds, or fails t.
func desiredObject[T any, A any](t testing.TB, build func(*appv1.App) (A, error), app *appv1.App) *T {
	t.Helper()
	obj := new(T)
	desired, err := build(app)
	if err == nil {
		err = controller.Convert(desired, obj)
	}
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

// addScaledChildren adds app's children as the API server holds them, its Deployment
// scaled to replicas by another writer.
func (f *fixture) addScaledChildren(t testing.TB, app *appv1.App, replicas int32) {
	t.Helper()
	d := liveDeployment(t, app)
	d.Spec.Replicas = ptr.To(replicas)
	f.addDeployments(d)
	f.addServices(liveService(t, app))
}

// liveDeployment returns the Deployment the API server would hold after applying what
// app wants, as the deployment controller reports it when fully rolled out.
func liveDeployment(t testing.TB, app *appv1.App) *appsv1.Deployment {
	t.Helper()
	d := desiredObject[appsv1.Deployment](t, DesiredDeployment, app)
	d.TypeMeta = metav1.TypeMeta{} // informers' objects carry no type meta
	d.UID = types.UID(d.Name + "-uid")
	d.ResourceVersion = "10"
	d.Generation = 1
	// Server-side defaults, which the controller does not own.
	if d.Spec.Replicas == nil {
		d.Spec.Replicas = ptr.To[int32](1)
	}
	d.Spec.Strategy.Type = appsv1.RollingUpdateDeploymentStrategyType
	d.Spec.Template.Spec.Containers[0].ImagePullPolicy = corev1.PullAlways
	d.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways
	replicas := *d.Spec.Replicas
	d.Status = appsv1.DeploymentStatus{
		ObservedGeneration: 1, Replicas: replicas, UpdatedReplicas: replicas,
		ReadyReplicas: replicas, AvailableReplicas: replicas,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"},
		},
	}
	return d
}

// liveService returns the Service the API server would hold after applying what app wants.
func liveService(t testing.TB, app *appv1.App) *corev1.Service {
	t.Helper()
	s := desiredObject[corev1.Service](t, DesiredService, app)
	s.TypeMeta = metav1.TypeMeta{}
	s.UID = types.UID(s.Name + "-uid")
	s.ResourceVersion = "11"
	s.Spec.ClusterIP = "10.96.0.10"
	s.Spec.SessionAffinity = corev1.ServiceAffinityNone
	return s
}

// unmanaged returns the metadata of an object not managed by app-controller.
func unmanaged(kind, name string, owners ...metav1.OwnerReference) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{Kind: kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: "tcs", Name: name, UID: types.UID(name + "-foreign"), OwnerReferences: owners},
	}
}

// jsonMergeStatus sets app's status to the value of the controller's status patch,
// [{"op": "add", "path": "/status", "value": ...}].
func jsonMergeStatus(patch []byte, app *appv1.App) error {
	var ops []struct {
		Op, Path string
		Value    appv1.AppStatus
	}
	if err := json.Unmarshal(patch, &ops); err != nil {
		return err
	}
	if len(ops) != 1 || ops[0].Op != "add" || ops[0].Path != "/status" {
		return fmt.Errorf("unexpected status patch %s", patch)
	}
	app.Status = ops[0].Value
	return nil
}

// nameOf is the queue key of an object.
func nameOf(obj metav1.Object) cache.ObjectName { return cache.MetaObjectToName(obj) }

// withRV returns a copy of app with another resourceVersion.
func withRV(app *appv1.App, rv string) *appv1.App {
	app = app.DeepCopy()
	app.ResourceVersion = rv
	return app
}

// runtimeObject shortens reactor signatures.
type runtimeObject = runtime.Object

// errBoom is an injected API failure.
var errBoom = errors.New("injected failure")

// syncedApp returns app as the cache shows it after a sync found its children rolled out.
func syncedApp(t *testing.T, app *appv1.App) *appv1.App {
	t.Helper()
	f := newFixture(t)
	f.addApps(app)
	f.addDeployments(liveDeployment(t, app))
	f.addServices(liveService(t, app))
	if err := f.sync(app.Namespace, app.Name); err != nil {
		t.Fatal(err)
	}
	obj, _, _ := f.c.getApp(nameOf(app))
	return obj
}

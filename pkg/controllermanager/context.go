package controllermanager

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclientset "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
	gatewayinformers "sigs.k8s.io/gateway-api/pkg/client/informers/externalversions"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
	appclientset "github.com/app-controller/app-controller/pkg/generated/clientset/versioned"
	appinformers "github.com/app-controller/app-controller/pkg/generated/informers/externalversions"
	appv1informers "github.com/app-controller/app-controller/pkg/generated/informers/externalversions/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/podhealth"
)

// ControllerContext is what every controller's InitFunc gets: clients and one set of
// shared informer factories. A factory starts only the informers that enabled
// controllers asked for.
type ControllerContext struct {
	KubeClient     kubernetes.Interface
	AppClient      appclientset.Interface
	MetadataClient metadata.Interface

	// KubeInformers watch every object of a type.
	KubeInformers informers.SharedInformerFactory
	// ManagedInformers watch only objects labelled as managed by app-controller, without
	// their managedFields.
	ManagedInformers informers.SharedInformerFactory
	// UnmanagedMetadataInformers watch the metadata of every object not labelled as
	// managed by app-controller, without managedFields and annotations.
	UnmanagedMetadataInformers metadatainformer.SharedInformerFactory
	// MetadataInformers watch the metadata of every object of a type.
	MetadataInformers metadatainformer.SharedInformerFactory
	// GatewayClient and ManagedGatewayInformers (HTTPRoutes labelled as managed by
	// app-controller, without managedFields) serve the Gateway API; GatewayAPI tells
	// whether the cluster served gateway.networking.k8s.io/v1 HTTPRoutes at start.
	GatewayClient           gatewayclientset.Interface
	ManagedGatewayInformers gatewayinformers.SharedInformerFactory
	GatewayAPI              bool
	// AppInformers watch Apps.
	AppInformers appinformers.SharedInformerFactory
	// ProbeEventInformers watch only the kubelet's Events about probes that do not pass
	// (podhealth.ProbeEventSelector).
	ProbeEventInformers informers.SharedInformerFactory

	// EventRecorder records Events as component app-controller.
	EventRecorder record.EventRecorder
	broadcaster   record.EventBroadcaster

	Options *Options
	// namespace is the namespace the informers watch ("": every namespace).
	namespace string
}

// queueName names the work queue of controller: the controller's name, or with several
// --watch-namespace (one set of controllers per namespace in one process)
// "controller/namespace", so that the queues' workqueue_* series stay apart.
func (cc *ControllerContext) queueName(controllerName string) string {
	if len(cc.Options.WatchNamespaces) < 2 {
		return controllerName
	}
	return controllerName + "/" + cc.namespace
}

// NewControllerContext builds the clients and informer factories for cfg, the informers
// watching namespace ns ("": every namespace).
func NewControllerContext(ctx context.Context, cfg *rest.Config, opts *Options, ns string) (*ControllerContext, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS = float32(opts.KubeAPIQPS)
	cfg.Burst = opts.KubeAPIBurst
	cfg = rest.AddUserAgent(cfg, appv1.FieldManager)

	// Built-in types travel as protobuf: smaller and cheaper to decode than JSON for the
	// Deployments, Services and Events the controllers read and write. (Apply requests
	// still send their body as apply YAML/JSON; Apps, a custom resource, have no protobuf.)
	kubeCfg := rest.CopyConfig(cfg)
	kubeCfg.ContentType = runtime.ContentTypeProtobuf
	kubeCfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	kubeClient, err := kubernetes.NewForConfig(kubeCfg)
	if err != nil {
		return nil, fmt.Errorf("building the Kubernetes clientset: %w", err)
	}
	appClient, err := appclientset.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the App clientset: %w", err)
	}
	metadataClient, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the metadata client: %w", err)
	}

	// Gateway API types are custom resources: JSON.
	gatewayClient, err := gatewayclientset.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the Gateway API clientset: %w", err)
	}
	gatewayAPI, err := discoverHTTPRoutes(ctx, kubeClient.Discovery().ServerResourcesForGroupVersion, time.Second)
	if err != nil {
		return nil, err
	}

	managed := controller.ManagedSelector().String()
	unmanaged := controller.UnmanagedSelector().String()
	// --watch-namespace: every informer watches that namespace only.
	unmanagedInformers := metadatainformer.NewFilteredSharedInformerFactory(metadataClient, opts.ResyncPeriod, ns,
		func(o *metav1.ListOptions) { o.LabelSelector = unmanaged })

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(appv1.Install(scheme))
	broadcaster := newEventBroadcaster(ctx)

	return &ControllerContext{
		KubeClient:     kubeClient,
		AppClient:      appClient,
		MetadataClient: metadataClient,
		KubeInformers: informers.NewSharedInformerFactoryWithOptions(kubeClient, opts.ResyncPeriod,
			informers.WithNamespace(ns), informers.WithTransform(controller.StripManagedFields)),
		ManagedInformers: informers.NewSharedInformerFactoryWithOptions(kubeClient, opts.ResyncPeriod, informers.WithNamespace(ns),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = managed }),
			informers.WithTransform(controller.StripManagedFields)),
		GatewayClient: gatewayClient,
		ManagedGatewayInformers: gatewayinformers.NewSharedInformerFactoryWithOptions(gatewayClient, opts.ResyncPeriod, gatewayinformers.WithNamespace(ns),
			gatewayinformers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = managed }),
			gatewayinformers.WithTransform(controller.StripManagedFields)),
		GatewayAPI:                 gatewayAPI,
		UnmanagedMetadataInformers: unmanagedInformers,
		MetadataInformers:          metadatainformer.NewFilteredSharedInformerFactory(metadataClient, opts.ResyncPeriod, ns, nil),
		AppInformers: appinformers.NewSharedInformerFactoryWithOptions(appClient, opts.ResyncPeriod,
			appinformers.WithNamespace(ns), appinformers.WithTransform(controller.StripWriteRecords),
			appinformers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = opts.AppSelector })),
		ProbeEventInformers: informers.NewSharedInformerFactoryWithOptions(kubeClient, opts.ResyncPeriod, informers.WithNamespace(ns),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = podhealth.ProbeEventSelector }),
			informers.WithTransform(podhealth.TrimProbeEvent)),
		EventRecorder: broadcaster.NewRecorder(scheme, corev1.EventSource{Component: appv1.FieldManager}),
		broadcaster:   broadcaster,
		Options:       opts,
		namespace:     ns,
	}, nil
}

// templateInformers returns the informers of the checks' templates, from the App
// factory (started, synced and shut down with it) but without its --app-selector: an
// App of the shard refers to any template. AnalysisTemplates of the watched namespace,
// ClusterAnalysisTemplates of the cluster. Both nil when the API server serves no
// AnalysisTemplate or ClusterAnalysisTemplate (their CRDs not installed yet: an upgrade
// with crds.enabled=false before the release's crds.yaml), so that the controller still
// starts: a check that refers to a template then waits (AnalysisTemplateNotFound). The
// cluster one alone nil when the controller may not list and watch ClusterAnalysisTemplates.
func (cc *ControllerContext) templateInformers(ctx context.Context) (namespaced, cluster cache.SharedIndexInformer) {
	resources, err := cc.KubeClient.Discovery().ServerResourcesForGroupVersion(appv1.GroupVersion.String())
	served := func(name string) bool {
		return err == nil && slices.ContainsFunc(resources.APIResources, func(r metav1.APIResource) bool { return r.Name == name })
	}
	if !served("analysistemplates") || !served("clusteranalysistemplates") {
		klog.FromContext(ctx).Info("The cluster serves no AnalysisTemplates or ClusterAnalysisTemplates: checks that refer to one wait (AnalysisTemplateNotFound); "+
			"install the CRDs (crds.yaml) and restart the controller", "groupVersion", appv1.GroupVersion, "err", err)
		return nil, nil
	}
	namespaced = cc.AppInformers.InformerFor(&appv1.AnalysisTemplate{}, func(c appclientset.Interface, resync time.Duration) cache.SharedIndexInformer {
		return appv1informers.NewAnalysisTemplateInformer(c, cc.namespace, resync, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	})
	// A namespaced install (watchNamespaces: Roles) may not have the ClusterRole that
	// reads ClusterAnalysisTemplates: its informer would never sync, and the controller
	// never start. Without the right, the controller runs without it, and a check that
	// refers to one says why it waits.
	if denied := cc.mayNotListClusterTemplates(ctx); denied != "" {
		klog.FromContext(ctx).Info("Not watching ClusterAnalysisTemplates: checks that refer to one wait (AnalysisTemplateNotFound); "+
			"grant list and watch on clusteranalysistemplates.appcontroller.k8s.io in a ClusterRole (the chart does) and restart the controller", "reason", denied)
		return namespaced, nil
	}
	cluster = cc.AppInformers.InformerFor(&appv1.ClusterAnalysisTemplate{}, func(c appclientset.Interface, resync time.Duration) cache.SharedIndexInformer {
		return appv1informers.NewClusterAnalysisTemplateInformer(c, resync, cache.Indexers{})
	})
	return namespaced, cluster
}

// mayNotListClusterTemplates tries a list of one ClusterAnalysisTemplate, and returns
// why the controller may not read them ("" when it may, or when the API
// server answers another error: the informer then retries as it would anyway). A read,
// not a SelfSubjectAccessReview: the controller writes nothing at its start.
func (cc *ControllerContext) mayNotListClusterTemplates(ctx context.Context) string {
	const resource = "clusteranalysistemplates"
	_, err := cc.AppClient.AppcontrollerV1().ClusterAnalysisTemplates().List(ctx, metav1.ListOptions{Limit: 1})
	switch {
	case apierrors.IsForbidden(err):
		return fmt.Sprintf("listing %s.%s: %v", resource, appv1.GroupVersion.Group, err)
	case err != nil:
		klog.FromContext(ctx).Info("Could not try a list of "+resource+"; watching them", "err", err)
	}
	return ""
}

// discoverHTTPRoutes tells whether the API server serves gateway.networking.k8s.io/v1
// HTTPRoutes, asking resourcesFor (discovery's ServerResourcesForGroupVersion). An API
// server that cannot answer yet (starting, restarting, unreachable) is asked again every
// interval until ctx ends, as the informers would retry their lists: the process waits
// rather than exits, so that it never crash-loops on an API server that is away.
func discoverHTTPRoutes(ctx context.Context, resourcesFor func(groupVersion string) (*metav1.APIResourceList, error), interval time.Duration) (bool, error) {
	logger := klog.FromContext(ctx)
	serves := false
	err := wait.PollUntilContextCancel(ctx, interval, true, func(context.Context) (bool, error) {
		resources, err := resourcesFor(gatewayv1.GroupVersion.String())
		switch {
		case apierrors.IsNotFound(err):
			return true, nil
		case err != nil:
			logger.Info("Discovering the Gateway API failed; retrying", "groupVersion", gatewayv1.GroupVersion, "err", err)
			return false, nil
		}
		serves = slices.ContainsFunc(resources.APIResources, func(r metav1.APIResource) bool { return r.Name == "httproutes" })
		return true, nil
	})
	if err != nil {
		return false, fmt.Errorf("discovering the Gateway API (%s): %w", gatewayv1.GroupVersion, err)
	}
	return serves, nil
}

// unmanagedMetadataInformer returns the shared metadata informer of the objects of gvr
// not managed by app-controller, keeping only their identity and owners in its cache.
func (cc *ControllerContext) unmanagedMetadataInformer(gvr schema.GroupVersionResource) (informers.GenericInformer, error) {
	i := cc.UnmanagedMetadataInformers.ForResource(gvr)
	if err := i.Informer().SetTransform(controller.StripToIdentity); err != nil {
		return nil, fmt.Errorf("setting the transform of the unmanaged %s informer: %w", gvr.Resource, err)
	}
	return i, nil
}

// versionInformer returns the shared metadata informer of every object of gvr, keeping
// only identity and resourceVersion in its cache.
func (cc *ControllerContext) versionInformer(gvr schema.GroupVersionResource) (informers.GenericInformer, error) {
	i := cc.MetadataInformers.ForResource(gvr)
	if err := i.Informer().SetTransform(controller.StripToVersion); err != nil {
		return nil, fmt.Errorf("setting the transform of the %s metadata informer: %w", gvr.Resource, err)
	}
	return i, nil
}

// start starts event recording and every informer that a controller asked for, and
// counts their caches in app_controller_informer_store_objects.
func (cc *ControllerContext) start(ctx context.Context) {
	cc.broadcaster.StartStructuredLogging(3)
	cc.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cc.KubeClient.CoreV1().Events("")})
	cc.KubeInformers.Start(ctx.Done())
	cc.ManagedInformers.Start(ctx.Done())
	cc.UnmanagedMetadataInformers.Start(ctx.Done())
	cc.MetadataInformers.Start(ctx.Done())
	cc.AppInformers.Start(ctx.Done())
	cc.ManagedGatewayInformers.Start(ctx.Done())
	cc.ProbeEventInformers.Start(ctx.Done())
	countInformerStores(cc)
}

// waitForCacheSync waits until every started informer has synced; false if ctx ended
// first or an informer failed to sync.
func (cc *ControllerContext) waitForCacheSync(ctx context.Context) bool {
	ok := true
	for _, m := range []map[reflect.Type]bool{
		cc.KubeInformers.WaitForCacheSync(ctx.Done()),
		cc.ManagedInformers.WaitForCacheSync(ctx.Done()),
		cc.AppInformers.WaitForCacheSync(ctx.Done()),
		cc.ManagedGatewayInformers.WaitForCacheSync(ctx.Done()),
		cc.ProbeEventInformers.WaitForCacheSync(ctx.Done()),
	} {
		for _, synced := range m {
			ok = ok && synced
		}
	}
	for _, f := range []metadatainformer.SharedInformerFactory{cc.UnmanagedMetadataInformers, cc.MetadataInformers} {
		for _, synced := range f.WaitForCacheSync(ctx.Done()) {
			ok = ok && synced
		}
	}
	return ok
}

// shutdown stops the informers and event recording, after the controllers stopped.
func (cc *ControllerContext) shutdown() {
	informerStores.remove(cc)
	cc.KubeInformers.Shutdown()
	cc.ManagedInformers.Shutdown()
	cc.UnmanagedMetadataInformers.Shutdown()
	cc.MetadataInformers.Shutdown()
	cc.AppInformers.Shutdown()
	cc.ManagedGatewayInformers.Shutdown()
	cc.ProbeEventInformers.Shutdown()
	cc.broadcaster.Shutdown()
}

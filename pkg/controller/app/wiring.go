package app

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/lru"

	"github.com/app-controller/app-controller/pkg/analysis"
	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
	appclientset "github.com/app-controller/app-controller/pkg/generated/clientset/versioned"
	applisters "github.com/app-controller/app-controller/pkg/generated/listers/appcontroller/v1"
)

// RBAC of the App controller, generated into config/rbac/role.yaml by controller-gen
// (make generate). Apps are listed and watched by the App informer, read one by one
// before a sync creates an object for one (get: confirmLive, for an App deleted since the
// cache saw it), and only their status is written (a JSON patch: patch). Children carry an owner reference with
// blockOwnerDeletion=true, which the OwnerReferencesPermissionEnforcement admission
// plugin accepts only from a user who may update the App's finalizers (and delete the
// child).
//
// Deployments and Services are listed and watched by the managed informers and by the
// metadata-only informers of unmanaged ones; they are written with server-side apply
// and JSON patches (patch; an apply that creates the object is authorized as create
// too), read live after a create that conflicted (get) and deleted when pruned or when
// the name goes to an older App. Events go through the recorder. PodDisruptionBudgets,
// the third kind of child (spec.disruptionBudget), the same; so are the Ingresses and,
// where the cluster serves the Gateway API, the HTTPRoutes of routes (spec.route), and
// the HorizontalPodAutoscalers of spec.autoscaling.
//
// Pods are only listed and watched (the managed ones, by the pod informer), to name in
// the App's Ready condition what keeps them from being ready; they are never read one
// by one or written. The kubelet's Events about probes that do not pass (reason
// Unhealthy, by field selector) are listed and watched for the probe's output.
//
// ConfigMaps and Secrets are listed and watched as metadata only (the metadata API
// still needs list and watch), to roll the pods of the Apps that reference one when it
// changes. Only for an App with spec.rollout.versionedConfig is one read (get) to be
// copied, and are its copies created and deleted (configcopy.go); a Secret only when
// Secrets are watched (the chart drops "secrets" from every rule otherwise).
// ControllerRevisions, the revisions of Apps'
// specs, are listed and watched (the managed ones), created, read after a create that
// found the name taken (get), patched (an older revision made current again) and
// deleted beyond the history limit. AnalysisTemplates and ClusterAnalysisTemplates, the
// templates of the rollouts' checks, are only read (listed and watched; get with them,
// as for Apps); they are never written.
//
// +kubebuilder:rbac:groups=appcontroller.k8s.io,resources=apps,verbs=get;list;watch
// +kubebuilder:rbac:groups=appcontroller.k8s.io,resources=analysistemplates;clusteranalysistemplates,verbs=get;list;watch
// +kubebuilder:rbac:groups=appcontroller.k8s.io,resources=apps/status,verbs=patch
// +kubebuilder:rbac:groups=appcontroller.k8s.io,resources=apps/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch;list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=list;watch
// +kubebuilder:rbac:groups="",resources=configmaps;secrets,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=apps,resources=controllerrevisions,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=networking.k8s.io,resources=ingresses,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=httproutes,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=gateways;gatewayclasses,verbs=get
// +kubebuilder:rbac:groups=autoscaling,resources=horizontalpodautoscalers,verbs=get;list;watch;create;patch;delete

// NewController wires a Controller to its clients and informers and registers its event
// handlers and indexers. The informers must not have been started yet.
func NewController(ctx context.Context, kubeClient kubernetes.Interface, appClient appclientset.Interface,
	inf Informers, recorder record.EventRecorder, opts Options) (*Controller, error) {
	logger := klog.FromContext(ctx)
	if opts.MaxRetries <= 0 {
		opts.MaxRetries = MaxRetries
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Analyzer == nil {
		opts.Analyzer = &analysis.Analyzer{}
	}
	registerMetrics()

	appInformer := inf.Apps.Informer()
	podInformer := inf.Pods.Informer()
	c := &Controller{
		kubeClient:      kubeClient,
		appClient:       appClient,
		appLister:       inf.Apps.Lister(),
		appSynced:       appInformer.HasSynced,
		appIndexer:      appInformer.GetIndexer(),
		apps:            controller.NewWriteCache(appInformer.GetIndexer(), 0, opts.Clock),
		statusPending:   newPendingWrites(),
		analyzer:        opts.Analyzer,
		notifier:        opts.Notifier,
		pods:            podInformer.GetIndexer(),
		configMaps:      inf.ConfigMaps.Informer().GetIndexer(),
		configMapCopies: controller.NewWriteCache(inf.ConfigMaps.Informer().GetIndexer(), 0, opts.Clock),
		copyHashes:      lru.New(rolloutSpecCacheSize),
		revisions: &revisions{
			client:  kubeClient,
			cache:   controller.NewWriteCache(inf.Revisions.Informer().GetIndexer(), 0, opts.Clock),
			highest: map[types.UID]int64{},
		},
		rolloutSpecs:      newRolloutSpecs(),
		recorder:          recorder,
		clock:             opts.Clock,
		contest:           newContestTracker(opts.Contest, opts.Clock),
		ownServiceAccount: opts.OwnServiceAccount,
		logger:            logger,
		gatewayClient:     opts.GatewayClient,
		synced: []cache.InformerSynced{
			appInformer.HasSynced,
			podInformer.HasSynced,
			inf.ConfigMaps.Informer().HasSynced,
			inf.Revisions.Informer().HasSynced,
		},
	}
	if inf.Secrets != nil {
		c.secrets = inf.Secrets.Informer().GetIndexer()
		c.secretCopies = controller.NewWriteCache(c.secrets, 0, opts.Clock)
		if err := inf.Secrets.Informer().AddIndexers(cache.Indexers{controllerIndex: indexByControllerUID}); err != nil {
			return nil, fmt.Errorf("adding the controller index to the Secret informer: %w", err)
		}
		c.synced = append(c.synced, inf.Secrets.Informer().HasSynced)
	}
	// Each kind of child wires its informers: indexes, event handlers, synced.
	for _, newChild := range appChildren {
		child, err := newChild(c, inf, opts)
		if err != nil {
			return nil, err
		}
		c.children = append(c.children, child)
	}
	if err := appInformer.AddIndexers(cache.Indexers{claimIndex: c.indexByClaim, configIndex: indexByConfig, routeIndex: indexAppByRouteHost,
		templateIndex: indexByTemplate}); err != nil {
		return nil, fmt.Errorf("adding the claimed-name index to the App informer: %w", err)
	}
	if err := inf.Revisions.Informer().AddIndexers(cache.Indexers{controllerIndex: indexByControllerUID}); err != nil {
		return nil, fmt.Errorf("adding the controller index to the ControllerRevision informer: %w", err)
	}
	if err := inf.ConfigMaps.Informer().AddIndexers(cache.Indexers{controllerIndex: indexByControllerUID}); err != nil {
		return nil, fmt.Errorf("adding the controller index to the ConfigMap informer: %w", err)
	}
	if err := podInformer.AddIndexers(cache.Indexers{podAppIndex: indexPodByApp}); err != nil {
		return nil, fmt.Errorf("adding the App index to the pod informer: %w", err)
	}
	var eventInformer cache.SharedIndexInformer
	if inf.ProbeEvents != nil {
		eventInformer = inf.ProbeEvents.Informer()
		if err := eventInformer.AddIndexers(cache.Indexers{podEventIndex: indexEventByPod}); err != nil {
			return nil, fmt.Errorf("adding the pod index to the probe Event informer: %w", err)
		}
		c.synced = append(c.synced, eventInformer.HasSynced)
	}
	if inf.AnalysisTemplates != nil {
		t := templates{namespaced: applisters.NewAnalysisTemplateLister(inf.AnalysisTemplates.GetIndexer())}
		c.synced = append(c.synced, inf.AnalysisTemplates.HasSynced)
		if inf.ClusterAnalysisTemplates != nil {
			t.cluster = applisters.NewClusterAnalysisTemplateLister(inf.ClusterAnalysisTemplates.GetIndexer())
			c.synced = append(c.synced, inf.ClusterAnalysisTemplates.HasSynced)
		}
		c.templates = t
	}
	c.loop = controller.NewLoop(controller.LoopConfig{
		Name:      ControllerName,
		QueueName: opts.QueueName,
		LogKey:    "app",
		Sync:      c.syncApp,
		Synced:    c.synced,
		Policy: controller.RetryPolicy{
			MaxAttempts:   opts.MaxRetries,
			RetryOnResync: true,
			GiveUp:        c.reportReconcileFailed,
		},
		Order:           controller.NewUrgentFirst(c.readyToReport),
		RateLimiter:     opts.RateLimiter,
		ShutdownTimeout: opts.ShutdownTimeout,
		Recorder:        recorder,
		Object:          c.appForEvent,
	})
	type watched struct {
		informer cache.SharedIndexInformer
		what     string
		handler  cache.ResourceEventHandler
	}
	handlers := []watched{
		{appInformer, "App", cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj interface{}) { c.addApp(logger, obj) },
			UpdateFunc: func(old, cur interface{}) { c.updateApp(logger, old, cur) },
			DeleteFunc: func(obj interface{}) { c.deleteApp(logger, obj) },
		}},
		{podInformer, "pod", c.podHandler(logger)},
		{inf.ConfigMaps.Informer(), kindConfigMap, c.configHandler(logger, kindConfigMap)},
		{inf.Revisions.Informer(), "ControllerRevision", c.revisionHandler(logger)},
	}
	if inf.Secrets != nil {
		handlers = append(handlers, watched{inf.Secrets.Informer(), kindSecret, c.configHandler(logger, kindSecret)})
	}
	if eventInformer != nil {
		c.probeEvents = eventInformer.GetIndexer()
		handlers = append(handlers, watched{eventInformer, "probe Event", c.probeEventHandler(logger)})
	}
	if c.templates != nil {
		handlers = append(handlers, watched{inf.AnalysisTemplates, "AnalysisTemplate", c.templateHandler(logger, appv1.AnalysisTemplateKindNamespaced)})
		if inf.ClusterAnalysisTemplates != nil {
			handlers = append(handlers, watched{inf.ClusterAnalysisTemplates, "ClusterAnalysisTemplate", c.templateHandler(logger, appv1.AnalysisTemplateKindCluster)})
		}
	}
	for _, h := range handlers {
		if err := c.watch(h.informer, h.what, h.handler); err != nil {
			return nil, err
		}
	}
	return c, nil
}

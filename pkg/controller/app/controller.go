// Package app is the App controller: it keeps, for every App, the children its spec
// asks for (a Deployment, a Service, a PodDisruptionBudget, a route as an Ingress or an
// HTTPRoute, a HorizontalPodAutoscaler; during a canary rollout a canary Deployment and
// the Services of a split), written with server-side apply, and reports their state in
// the App's status conditions and in Events.
//
// controller.go wires the informers (each kind of child wires its own) and the worker
// loop (controller.Loop) with the App's retry policy; handlers.go maps informer events
// to queue keys; order.go orders the queue; metrics.go holds the App metrics. A key's
// sync, syncApp (sync.go), then runs these steps, each in its file:
//
//  1. the App (controller.go: getApp), and what the children read (sync.go: input),
//     with the ConfigMaps and Secrets the pods reference (config.go: a change rolls
//     them; configcopy.go: with versionedConfig, each version's copies of them);
//  2. the revision of the spec (revisions.go: for history and rollback), in parallel
//     with the children, or before them with spec.rollout;
//  3. with spec.rollout, the canary rollout, whose engine is pkg/rollout:
//     rolloutversion.go (the versions and their pod templates), rolloutobserve.go (what
//     is observed; the canary's pods are judged in pods.go), rolloutsync.go (syncRollout:
//     the next state, written to the status before any child is written for it; the plan
//     the children follow);
//  4. every kind of child of appChildren (sync.go), in parallel: what a kind of child
//     reads and returns is in child.go, each kind in its file in the order of the
//     table: child_deployment.go, child_service.go, child_budget.go, child_route.go
//     (one child of two shapes) with routehosts.go (which namespace holds a host),
//     child_canary.go and child_splitservice.go (a rollout's canary Deployment and the
//     Services an HTTPRoute splits its traffic between), child_autoscaler.go,
//     child_configcopy.go (the copies of versioned config: reported, pruned); each
//     writes through children.go (one child: prune, lookup, yield, write; before a
//     create, confirmLive: the App still exists), with claims.go (which App wins a
//     contested child name) and contest.go (pacing the repairs of a child another
//     writer keeps changing);
//  5. the contested children (contest.go), the first problem of the App's pods
//     (pods.go), the status computed from the children's outcomes and the conditions a
//     rollout implies (status.go), and the status written at once or coalesced
//     (statuswrite.go), after which a rollout's deferred Events are told (rolloutsync.go).
//
// ports.go and labels.go are leaves the children share. The condition types, reasons
// and labels users read are in the API package (pkg/apis/appcontroller/v1).
package app

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	autoscalinginformers "k8s.io/client-go/informers/autoscaling/v2"
	coreinformers "k8s.io/client-go/informers/core/v1"
	networkinginformers "k8s.io/client-go/informers/networking/v1"
	policyinformers "k8s.io/client-go/informers/policy/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/lru"
	gatewayclientset "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
	gatewayinformers "sigs.k8s.io/gateway-api/pkg/client/informers/externalversions/apis/v1"

	"github.com/app-controller/app-controller/pkg/analysis"
	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
	appclientset "github.com/app-controller/app-controller/pkg/generated/clientset/versioned"
	appinformers "github.com/app-controller/app-controller/pkg/generated/informers/externalversions/appcontroller/v1"
	applisters "github.com/app-controller/app-controller/pkg/generated/listers/appcontroller/v1"
)

// Informers are the informers the App controller reads. Deployments and Services watch
// only objects labelled as managed by app-controller (see controller.ManagedSelector);
// the Unmanaged ones are metadata-only informers of every other Deployment and Service,
// used to know which names are taken.
type Informers struct {
	Apps                 appinformers.AppInformer
	Deployments          appsinformers.DeploymentInformer
	Services             coreinformers.ServiceInformer
	UnmanagedDeployments informers.GenericInformer
	UnmanagedServices    informers.GenericInformer
	// Pods watches the pods labelled as managed by app-controller, trimmed to their
	// status summary (podhealth.TrimPod), to name in Ready what keeps them from being
	// ready (pods.go).
	Pods coreinformers.PodInformer
	// ProbeEvents watches the kubelet's Events about probes that do not pass
	// (podhealth.ProbeEventSelector), trimmed by podhealth.TrimProbeEvent, to add the
	// probe's output to ContainerNotReady (pods.go). Optional.
	ProbeEvents coreinformers.EventInformer
	// ConfigMaps and Secrets are metadata-only informers of every ConfigMap and Secret,
	// trimmed to identity, resourceVersion and controller reference
	// (controller.StripToVersion), to roll the pods of the Apps that reference one when
	// it changes (config.go) and to know the copies of versioned config
	// (configcopy.go). Secrets nil: a Secret's change rolls no pods and no Secret is
	// copied (--config-rollout-secrets=false).
	ConfigMaps, Secrets informers.GenericInformer
	// DisruptionBudgets watches the PodDisruptionBudgets labelled as managed by
	// app-controller; UnmanagedDisruptionBudgets the metadata of every other one.
	DisruptionBudgets          policyinformers.PodDisruptionBudgetInformer
	UnmanagedDisruptionBudgets informers.GenericInformer
	// Ingresses watches the Ingresses labelled as managed by app-controller (the routes
	// of Apps, and those of Services' ingress/* annotations, for host ownership);
	// UnmanagedIngresses the metadata of every other one.
	Ingresses          networkinginformers.IngressInformer
	UnmanagedIngresses informers.GenericInformer
	// HTTPRoutes watches the HTTPRoutes labelled as managed by app-controller (the
	// routes of Apps attached to Gateways); UnmanagedHTTPRoutes the metadata of every
	// other one. Both nil when the cluster does not serve the Gateway API: a route that
	// asks for an HTTPRoute is then refused (GatewayAPIUnavailable).
	HTTPRoutes          gatewayinformers.HTTPRouteInformer
	UnmanagedHTTPRoutes informers.GenericInformer
	// Revisions watches the ControllerRevisions labelled as managed by app-controller,
	// the revisions of Apps' specs, trimmed by TrimRevision (revisions.go).
	Revisions appsinformers.ControllerRevisionInformer
	// Autoscalers watches the HorizontalPodAutoscalers labelled as managed by
	// app-controller (spec.autoscaling); UnmanagedAutoscalers the metadata of every
	// other one.
	Autoscalers          autoscalinginformers.HorizontalPodAutoscalerInformer
	UnmanagedAutoscalers informers.GenericInformer
	// AnalysisTemplates and ClusterAnalysisTemplates watch the templates of the
	// rollouts' checks (templateRef), every one of the watched namespaces (not only the
	// Apps' shard: an App's check refers to any). Nil (the cluster serves no such CRD):
	// none is known, and a check that refers to one waits (AnalysisTemplateNotFound);
	// ClusterAnalysisTemplates alone nil (the controller may not watch them): a check
	// that refers to one waits, saying so.
	AnalysisTemplates, ClusterAnalysisTemplates cache.SharedIndexInformer
}

// Controller reconciles Apps.
type Controller struct {
	kubeClient kubernetes.Interface
	appClient  appclientset.Interface

	appLister  applisters.AppLister
	appSynced  cache.InformerSynced
	appIndexer cache.Indexer
	// apps holds the newest of the App cache and the controller's own status writes.
	apps *controller.WriteCache
	// statusPending holds, per App, since when a status write has been held back to
	// coalesce it with the next ones (see statusDelay).
	statusPending *pendingWrites

	// children are the kinds of child of an App (appChildren); deployments is the
	// Deployment's, whose cache holds the live Deployment (liveDeployment).
	children    []appChild
	deployments *deploymentChild
	// services is the Service's, route the route's: the canary rollout's Services and
	// weights use them (rolloutsync.go).
	services *serviceChild
	route    *routeChild
	// gatewayClient reads the Gateways and GatewayClasses of a canary's mirror
	// (child_routerouting.go); nil without the Gateway API.
	gatewayClient gatewayclientset.Interface
	// rolloutSpecs holds the specs of the stable revisions of rollouts (rolloutversion.go).
	rolloutSpecs *lru.Cache
	// pods is the pod cache, indexed by App (podAppIndex).
	pods cache.Indexer
	// probeEvents is the cache of the kubelet's Unhealthy Events, indexed by pod
	// (podEventIndex); nil without Informers.ProbeEvents.
	probeEvents cache.Indexer
	// configMaps and secrets are the metadata caches of ConfigMaps and Secrets;
	// configMapCopies and secretCopies the same with the copies the controller created
	// (configcopy.go), and copyHashes the copy hash of each object read for a copy.
	configMaps, secrets           cache.Indexer
	configMapCopies, secretCopies *controller.WriteCache
	copyHashes                    *lru.Cache
	// revisions records the revisions of Apps' specs.
	revisions *revisions

	// loop runs the workers. Its retry policy: MaxRetries attempts with backoff, then
	// ReconcileFailed in the App's conditions and a Warning Event; the next resync or
	// change of the App retries it.
	loop     *controller.Loop
	recorder record.EventRecorder
	clock    clock.PassiveClock
	// analyzer measures the rollouts' checks; notifier sends their notifications (nil:
	// none). rolloutanalysis.go.
	analyzer *analysis.Analyzer
	notifier *analysis.Notifier
	// templates finds the checks' templates in the template informers' caches.
	templates analysis.Templates
	// logger logs the event handlers; synced are the HasSynced of every informer read.
	logger klog.Logger
	synced []cache.InformerSynced

	// contest tracks the repairs of children that another writer keeps changing
	// (contest.go).
	contest *contestTracker
	// ownServiceAccount is Options.OwnServiceAccount.
	ownServiceAccount types.NamespacedName
}

// Options tune a Controller.
type Options struct {
	// MaxRetries defaults to MaxRetries.
	MaxRetries int
	// ShutdownTimeout defaults to controller.DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// Clock defaults to the real clock.
	Clock clock.PassiveClock
	// RateLimiter defaults to the client-go default controller rate limiter.
	RateLimiter workqueue.TypedRateLimiter[cache.ObjectName]
	// Contest paces the repairs of a child that another writer keeps changing; its zero
	// fields take the defaults.
	Contest ContestPolicy
	// SharedNamespaces may share route hosts among themselves (--ingress-shared-namespaces).
	SharedNamespaces []string
	// GatewayClient writes the HTTPRoutes of Informers.HTTPRoutes.
	GatewayClient gatewayclientset.Interface
	// DefaultGateway, if set, is the Gateway that a route without parentRefs, tls and
	// ingressClassName attaches to, as an HTTPRoute (--default-gateway).
	DefaultGateway *appv1.GatewayRef
	// OwnServiceAccount is the controller's own ServiceAccount: an App in its namespace
	// that would run its pods as it is refused (ServiceAccountRefused). Zero: none.
	OwnServiceAccount types.NamespacedName
	// Analyzer measures the checks of canary rollouts: Prometheus (nil: none,
	// --prometheus-url unset: a rollout that asks for a metric check is refused) and the
	// webhook gates. Nil: no Prometheus, webhooks through the default HTTP client.
	Analyzer *analysis.Analyzer
	// Notifier sends the rollouts' notifications (--notification-webhook-url-file);
	// nil: none.
	Notifier *analysis.Notifier
	// QueueName names the work queue (controller.LoopConfig.QueueName); "": ControllerName.
	QueueName string
}

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

// watch has h handle the events of informer, with the controller's logger; what names
// the informer in an error.
func (c *Controller) watch(informer cache.SharedIndexInformer, what string, h cache.ResourceEventHandler) error {
	if _, err := informer.AddEventHandlerWithOptions(h, cache.HandlerOptions{Logger: &c.logger}); err != nil {
		return fmt.Errorf("adding the %s event handler: %w", what, err)
	}
	return nil
}

// Run waits for the caches to sync, then runs workers until ctx ends. It then stops
// taking work and lets in-flight syncs finish within the shutdown timeout (see
// controller.RunWorkers), and sends their rollout notifications. While it runs,
// app_controller_apps is computed from its cache.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer appGauges.track(c.appLister, c.appSynced)()
	if c.notifier != nil {
		// The notifier outlives the workers: a transition that a sync in flight at the
		// stop writes is notified, and then what is queued (within its drain timeout).
		nctx, stop := context.WithCancel(context.WithoutCancel(ctx))
		done := make(chan struct{})
		go func() {
			defer close(done)
			c.notifier.Run(nctx)
		}()
		defer func() {
			stop()
			<-done
		}()
	}
	c.loop.Run(ctx, workers)
}

// appForEvent returns the cached App named key for an Event about it, or nil.
func (c *Controller) appForEvent(key cache.ObjectName) runtime.Object {
	app, err := c.appLister.Apps(key.Namespace).Get(key.Name)
	if err != nil {
		return nil
	}
	return app
}

// getApp returns the newest known state of an App: the informer's, or the controller's
// own last status write if the informer has not seen it yet.
func (c *Controller) getApp(key cache.ObjectName) (*appv1.App, bool, error) {
	obj, exists, err := c.apps.GetByKey(key.String())
	if err != nil || !exists {
		return nil, false, err
	}
	app, ok := obj.(*appv1.App)
	if !ok {
		return nil, false, fmt.Errorf("unexpected object %T in the App cache", obj)
	}
	return app, true, nil
}

// rolloutSpecCacheSize bounds the specs of stable revisions kept in memory: one per App
// in a rollout, read once (the revision cache keeps no data).
const rolloutSpecCacheSize = 1024

// newRolloutSpecs returns the cache of the specs of stable revisions, by
// "namespace/name" of their ControllerRevision (whose name is the hash of its data).
func newRolloutSpecs() *lru.Cache { return lru.New(rolloutSpecCacheSize) }

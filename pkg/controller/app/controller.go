// Package app is the App controller: it keeps, for every App, the children its spec
// asks for (a Deployment, a Service, a PodDisruptionBudget, a route as an Ingress or an
// HTTPRoute, a HorizontalPodAutoscaler; during a canary rollout a canary Deployment and
// the Services of a split), written with server-side apply, and reports their state in
// the App's status conditions and in Events.
//
// controller.go holds the Controller, which the methods of every file read, what it is
// given (Informers, Options) and Run; wiring.go wires it in NewController: the informers
// (each kind of child wires its own), the indexes, the event handlers and the worker
// loop (controller.Loop) with the App's retry policy, and holds the RBAC markers of what
// it reads and writes; handlers.go maps informer events to queue keys; order.go orders
// the queue; metrics.go holds the App metrics. A key's sync, syncApp (sync.go), then
// runs these steps, each in its file:
//
//  1. the App (controller.go: getApp), and what the children read (sync.go: input),
//     with the ConfigMaps and Secrets the pods reference (config.go: a change rolls
//     them; configcopy.go: with versionedConfig, each version's copies of them) and the
//     live Deployment (child_deployment.go: liveDeployment);
//  2. the revision of the spec (revisions.go: for history and rollback), in parallel
//     with the children, or before them with spec.rollout;
//  3. with spec.rollout, the canary rollout, whose engine is pkg/rollout:
//     rolloutversion.go (the versions and their pod templates), rolloutobserve.go (what
//     is observed; the canary's pods are judged in pods.go), rolloutsync.go (syncRollout:
//     the next state, written to the status before any child is written for it; the plan
//     the children follow);
//  4. every kind of child of appChildren (sync.go), in parallel: what a kind of child
//     reads and returns is in child.go, each kind in its file in the order of the table:
//     child_deployment.go, child_service.go, child_budget.go, child_route.go (one child
//     of two shapes) with routehosts.go (which namespace holds a host), child_canary.go
//     and child_splitservice.go (a rollout's canary Deployment and the Services an
//     HTTPRoute splits its traffic between), child_preview.go and child_previewroute.go
//     (a blue-green rollout's preview Service and its hosts' HTTPRoute),
//     child_autoscaler.go, child_configcopy.go (the copies of versioned config:
//     reported, pruned); each writes through children.go (one child: prune, lookup,
//     yield, write; before a create, confirmLive: the App still exists), with claims.go
//     (which App wins a contested child name) and contest.go (pacing the repairs of a
//     child another writer keeps changing);
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

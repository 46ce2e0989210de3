// Package ingress is the Service->Ingress controller: a Service annotated
// ingress/http: "true" gets an Ingress of the same name, controlled by the Service,
// routing a path prefix to the Service's first port. The Ingress is written with
// server-side apply, restored when edited or deleted, and deleted when the annotation
// goes; garbage collection deletes it with the Service. An Ingress of that name that the
// Service does not control is never touched.
//
// Files: controller.go wires informers and the worker loop (controller.Loop: 10
// attempts, then a ReconcileFailed Event and a retry at the next resync or change); handlers.go maps
// informer events to Service keys; sync.go reconciles one Service; desired.go reads the
// annotations and builds the Ingress.
package ingress

import (
	"context"
	"fmt"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	coreinformers "k8s.io/client-go/informers/core/v1"
	networkinginformers "k8s.io/client-go/informers/networking/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	gatewayinformers "sigs.k8s.io/gateway-api/pkg/client/informers/externalversions/apis/v1"

	"github.com/app-controller/app-controller/pkg/controller"
)

// Informers are the informers the controller reads: every Service and every Ingress.
type Informers struct {
	Services  coreinformers.ServiceInformer
	Ingresses networkinginformers.IngressInformer
	// HTTPRoutes, optional, watches the HTTPRoutes managed by app-controller (those of
	// Apps' routes), whose hosts count for host ownership like the Ingresses'.
	HTTPRoutes gatewayinformers.HTTPRouteInformer
}

// Options tune a Controller.
type Options struct {
	// IngressClass is the class of Ingresses whose Service sets no ingress/class; ""
	// leaves it to the cluster's default IngressClass.
	IngressClass string
	// MaxRetries defaults to MaxRetries.
	MaxRetries int
	// RateLimiter defaults to the client-go default controller rate limiter.
	RateLimiter workqueue.TypedRateLimiter[cache.ObjectName]
	// ShutdownTimeout bounds how long in-flight syncs may run after Run's context ends;
	// it defaults to controller.DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// SharedNamespaces may share hosts among themselves (hosts.go); every other
	// namespace holds the hosts it claimed first alone.
	SharedNamespaces []string
	// CatchAllNamespaces may have a catch-all rule (a Service without ingress/host);
	// "*": every namespace. nil (unset): every namespace; empty: none.
	CatchAllNamespaces []string
	// QueueName names the work queue (controller.LoopConfig.QueueName); "": ControllerName.
	QueueName string
}

// Controller reconciles the Ingresses of annotated Services.
type Controller struct {
	kubeClient kubernetes.Interface

	serviceLister corelisters.ServiceLister
	// ingresses holds the newest of the Ingress cache and the controller's own writes.
	ingresses *controller.WriteCache

	// loop runs the workers. Its retry policy: MaxRetries attempts with backoff, then a
	// ReconcileFailed Warning Event; the next resync or change retries it.
	loop     *controller.Loop
	recorder record.EventRecorder

	ingressClass string

	// serviceIndex and ingressIndex index Services and Ingresses by host (hosts.go);
	// ingressIndex is the write cache, so that an Ingress just created counts.
	serviceIndex cache.Indexer
	ingressIndex *controller.WriteCache
	// httpRouteIndex indexes the managed HTTPRoutes by host; nil without them.
	httpRouteIndex   cache.Indexer
	sharedNamespaces sets.Set[string]
	catchAll         sets.Set[string]
}

// RBAC of the Service->Ingress controller, generated into config/rbac/role.yaml by
// controller-gen (make generate). Services and Ingresses are listed and watched by the
// informers, with the HTTPRoutes of Apps' routes where the cluster serves them;
// Services are never written. Ingresses are written with server-side apply
// (patch; an apply that creates the Ingress is authorized as create too), read live
// after a create that conflicted (get) and deleted when the annotation goes. Their
// owner reference has blockOwnerDeletion=true, which the
// OwnerReferencesPermissionEnforcement admission plugin accepts only from a user who may
// update the Service's finalizers (and delete the Ingress). Events go through the
// recorder.
//
// +kubebuilder:rbac:groups="",resources=services,verbs=list;watch
// +kubebuilder:rbac:groups="",resources=services/finalizers,verbs=update
// +kubebuilder:rbac:groups=networking.k8s.io,resources=ingresses,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=httproutes,verbs=list;watch

// NewController wires a Controller to its client and informers and registers its event
// handlers. The informers must not have been started yet.
func NewController(ctx context.Context, kubeClient kubernetes.Interface, inf Informers,
	recorder record.EventRecorder, opts Options) (*Controller, error) {
	logger := klog.FromContext(ctx)
	if opts.MaxRetries <= 0 {
		opts.MaxRetries = MaxRetries
	}
	if opts.CatchAllNamespaces == nil {
		opts.CatchAllNamespaces = []string{"*"}
	}
	if errs := validateClass(opts.IngressClass); len(errs) > 0 {
		return nil, fmt.Errorf("--ingress-class %q: %v", opts.IngressClass, errs)
	}

	serviceInformer := inf.Services.Informer()
	ingressInformer := inf.Ingresses.Informer()
	indexed := map[string]cache.SharedIndexInformer{serviceKind.Kind: serviceInformer, "Ingress": ingressInformer}
	synced := []cache.InformerSynced{serviceInformer.HasSynced, ingressInformer.HasSynced}
	if inf.HTTPRoutes != nil {
		indexed["HTTPRoute"] = inf.HTTPRoutes.Informer()
		synced = append(synced, inf.HTTPRoutes.Informer().HasSynced)
	}
	for name, i := range indexed {
		if err := i.AddIndexers(cache.Indexers{hostIndex: indexByHost}); err != nil {
			return nil, fmt.Errorf("adding the host index to the %s informer: %w", name, err)
		}
	}
	c := &Controller{
		kubeClient:       kubeClient,
		serviceLister:    inf.Services.Lister(),
		ingresses:        controller.NewWriteCache(ingressInformer.GetIndexer(), 0, nil),
		recorder:         recorder,
		ingressClass:     opts.IngressClass,
		serviceIndex:     serviceInformer.GetIndexer(),
		sharedNamespaces: sets.New(opts.SharedNamespaces...),
		catchAll:         sets.New(opts.CatchAllNamespaces...),
	}
	c.ingressIndex = c.ingresses
	if inf.HTTPRoutes != nil {
		c.httpRouteIndex = inf.HTTPRoutes.Informer().GetIndexer()
	}
	c.loop = controller.NewLoop(controller.LoopConfig{
		Name:            ControllerName,
		QueueName:       opts.QueueName,
		LogKey:          "service",
		Sync:            c.syncService,
		Synced:          synced,
		Policy:          controller.RetryPolicy{MaxAttempts: opts.MaxRetries, RetryOnResync: true},
		RateLimiter:     opts.RateLimiter,
		ShutdownTimeout: opts.ShutdownTimeout,
		Recorder:        recorder,
		Object:          c.serviceForEvent,
		FailureMessage:  "Syncing the Ingress failed, will retry: %v",
	})

	if err := controller.AddEventHandler(serviceInformer, logger, "Service", c.serviceHandlers(logger)); err != nil {
		return nil, err
	}
	if err := controller.AddEventHandler(ingressInformer, logger, "Ingress", c.ingressHandlers(logger)); err != nil {
		return nil, err
	}
	if inf.HTTPRoutes != nil {
		// An App's HTTPRoute that lets a host go (deleted, or its hostnames changed)
		// may hand it to a waiting Service.
		if err := controller.AddEventHandler(inf.HTTPRoutes.Informer(), logger, "HTTPRoute", cache.ResourceEventHandlerFuncs{
			UpdateFunc: func(old, _ interface{}) { c.enqueueHostClaimants(hostBuckets(old)) },
			DeleteFunc: func(obj interface{}) { c.enqueueHostClaimants(hostBuckets(controller.ObjectFromTombstone(obj))) },
		}); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Run waits for the caches to sync, then runs workers until ctx ends. It then stops
// taking work and lets in-flight syncs finish within the shutdown timeout (see
// controller.RunWorkers).
func (c *Controller) Run(ctx context.Context, workers int) {
	c.loop.Run(ctx, workers, "defaultIngressClass", c.ingressClass)
}

// serviceForEvent returns the cached Service named key for an Event about it, or nil.
func (c *Controller) serviceForEvent(key cache.ObjectName) runtime.Object {
	svc, err := c.serviceLister.Services(key.Namespace).Get(key.Name)
	if err != nil {
		return nil
	}
	return svc
}

// getIngress returns the newest known state of the Ingress named key: the informer's,
// or the controller's own last write if the informer has not seen it yet.
func (c *Controller) getIngress(key cache.ObjectName) (*networkingv1.Ingress, error) {
	obj, exists, err := c.ingresses.GetByKey(key.String())
	if err != nil || !exists {
		return nil, err
	}
	ing, ok := obj.(*networkingv1.Ingress)
	if !ok {
		return nil, fmt.Errorf("unexpected object %T in the Ingress cache", obj)
	}
	return ing, nil
}

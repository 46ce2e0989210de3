// Package ingress is the Service->Ingress controller: a Service annotated
// ingress/http: "true" gets an Ingress of the same name, controlled by the Service,
// routing a path prefix to the Service's first port. The Ingress is written with
// server-side apply, restored when edited or deleted, and deleted when the annotation
// goes; garbage collection deletes it with the Service. An Ingress of that name that the
// Service does not control is never touched.
//
// Files: controller.go wires informers, queue and workers; handlers.go maps informer
// events to Service keys; sync.go reconciles one Service; desired.go reads the
// annotations and builds the Ingress.
package ingress

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	coreinformers "k8s.io/client-go/informers/core/v1"
	networkinginformers "k8s.io/client-go/informers/networking/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/app-controller/app-controller/pkg/controller"
)

// mutationCacheTTL is how long the controller prefers its own Ingress writes over an
// informer cache that has not caught up with them yet.
const mutationCacheTTL = time.Minute

// Informers are the informers the controller reads: every Service and every Ingress.
type Informers struct {
	Services  coreinformers.ServiceInformer
	Ingresses networkinginformers.IngressInformer
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
}

// Controller reconciles the Ingresses of annotated Services.
type Controller struct {
	kubeClient kubernetes.Interface

	serviceLister corelisters.ServiceLister
	// ingresses holds the newest of the Ingress cache and the controller's own writes.
	ingresses cache.MutationCache
	synced    []cache.InformerSynced

	queue    workqueue.TypedRateLimitingInterface[cache.ObjectName]
	recorder record.EventRecorder

	ingressClass string
	maxRetries   int

	// shutdownTimeout bounds how long in-flight syncs may run after Run's context ends.
	shutdownTimeout time.Duration
}

// RBAC of the Service->Ingress controller, generated into config/rbac/role.yaml by
// controller-gen (make generate). Services and Ingresses are listed and watched by the
// informers; Services are never written. Ingresses are written with server-side apply
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

// NewController wires a Controller to its client and informers and registers its event
// handlers. The informers must not have been started yet.
func NewController(ctx context.Context, kubeClient kubernetes.Interface, inf Informers,
	recorder record.EventRecorder, opts Options) (*Controller, error) {
	logger := klog.FromContext(ctx)
	if opts.MaxRetries <= 0 {
		opts.MaxRetries = MaxRetries
	}
	if opts.RateLimiter == nil {
		opts.RateLimiter = workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName]()
	}
	if errs := validateClass(opts.IngressClass); len(errs) > 0 {
		return nil, fmt.Errorf("--ingress-class %q: %v", opts.IngressClass, errs)
	}

	serviceInformer := inf.Services.Informer()
	ingressInformer := inf.Ingresses.Informer()
	c := &Controller{
		kubeClient:    kubeClient,
		serviceLister: inf.Services.Lister(),
		ingresses: cache.NewIntegerResourceVersionMutationCache(logger,
			ingressInformer.GetStore(), ingressInformer.GetIndexer(), mutationCacheTTL, false),
		synced: []cache.InformerSynced{serviceInformer.HasSynced, ingressInformer.HasSynced},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(opts.RateLimiter,
			workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{Name: ControllerName}),
		recorder:        recorder,
		ingressClass:    opts.IngressClass,
		maxRetries:      opts.MaxRetries,
		shutdownTimeout: opts.ShutdownTimeout,
	}

	// No delete handler for Services: garbage collection deletes their Ingresses.
	if _, err := serviceInformer.AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { c.addService(logger, obj) },
		UpdateFunc: func(old, cur interface{}) { c.updateService(logger, old, cur) },
	}, cache.HandlerOptions{Logger: &logger}); err != nil {
		return nil, fmt.Errorf("adding the Service event handler: %w", err)
	}
	if _, err := ingressInformer.AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { c.addIngress(logger, obj) },
		UpdateFunc: func(old, cur interface{}) { c.updateIngress(logger, old, cur) },
		DeleteFunc: func(obj interface{}) { c.deleteIngress(logger, obj) },
	}, cache.HandlerOptions{Logger: &logger}); err != nil {
		return nil, fmt.Errorf("adding the Ingress event handler: %w", err)
	}
	return c, nil
}

// Run waits for the caches to sync, then runs workers until ctx ends. It then stops
// taking work and lets in-flight syncs finish within the shutdown timeout (see
// controller.RunWorkers).
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx)

	logger.Info("Starting controller", "workers", workers, "defaultIngressClass", c.ingressClass)
	defer logger.Info("Stopped controller")

	if !cache.WaitForNamedCacheSyncWithContext(ctx, c.synced...) {
		c.queue.ShutDown()
		return
	}
	controller.RunWorkers(ctx, c.queue, workers, c.shutdownTimeout, c.process)
}

// process syncs the Service named key and handles the outcome.
func (c *Controller) process(ctx context.Context, key cache.ObjectName) {
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "service", klog.KRef(key.Namespace, key.Name))
	ctx = klog.NewContext(ctx, logger)
	c.handleErr(ctx, key, c.syncService(ctx, key))
}

// handleErr retries a failed Service with backoff, reporting the first failure of a
// streak in a Warning Event. After maxRetries failed attempts in a row it gives up until
// the Service or its Ingress changes again.
func (c *Controller) handleErr(ctx context.Context, key cache.ObjectName, err error) {
	if err == nil {
		c.queue.Forget(key)
		return
	}
	attempts := c.queue.NumRequeues(key) + 1
	if attempts == 1 {
		if svc, getErr := c.serviceLister.Services(key.Namespace).Get(key.Name); getErr == nil {
			c.recorder.Eventf(svc, corev1.EventTypeWarning, ReasonSyncFailed, "Syncing the Ingress failed, will retry: %v", err)
		}
	}
	if attempts < c.maxRetries {
		klog.FromContext(ctx).V(2).Info("Sync failed, retrying", "attempt", attempts, "err", err)
		c.queue.AddRateLimited(key)
		return
	}
	c.queue.Forget(key)
	utilruntime.HandleErrorWithContext(ctx, err, "Giving up on Service until it or its Ingress changes", "attempts", attempts)
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

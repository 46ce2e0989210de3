// Package nodelabel is the node labeler: nodes that match a rule of its configuration
// get the rule's labels. Labels are written with server-side apply under their own field
// manager, holding only metadata.labels and a hash annotation, so that the API server's
// ownership tracking removes exactly the labels the labeler applied when a node stops
// matching, and never a label someone else set. A label someone else already set to
// another value is left alone and reported.
//
// Files: config.go reads and validates the rules; rules.go compiles them and evaluates
// them against a node; controller.go wires the informer and the worker loop
// (controller.Loop, retried for as long as it fails); handlers.go maps node events to
// keys; sync.go reconciles one node.
package nodelabel

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/app-controller/app-controller/pkg/controller"
)

// Options tune a Controller.
type Options struct {
	// RateLimiter defaults to an exponential per-node backoff from BaseRetryDelay to
	// MaxRetryDelay.
	RateLimiter workqueue.TypedRateLimiter[cache.ObjectName]
	// ShutdownTimeout bounds how long in-flight syncs may run after Run's context ends;
	// it defaults to controller.DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
}

// Controller labels nodes by its rules.
type Controller struct {
	kubeClient kubernetes.Interface
	rules      Rules

	// nodes holds the newest of the node cache and the controller's own writes.
	nodes *controller.WriteCache

	// loop runs the workers. Its retry policy: retried with backoff up to MaxRetryDelay
	// for as long as it fails: a node's labels matter as long as the node exists.
	loop     *controller.Loop
	recorder record.EventRecorder

	heldLock sync.Mutex
	// held records, per node, the labels found set to another value by another field
	// manager, with the value they had then. They are left out of what the labeler
	// applies while they keep that value, so that the conflict is reported once rather
	// than on every sync.
	held map[string]map[string]heldLabel
}

// heldLabel is a label that another field manager holds: its value when the conflict
// was found.
type heldLabel struct {
	value   string
	present bool
}

// RBAC of the node labeler, generated into config/rbac/role.yaml by controller-gen (make
// generate). Nodes are listed and watched by the informer and labelled with server-side
// apply (patch). The labeler never creates a node, so it is not granted create: an apply
// to a node deleted meanwhile is refused and retried until the informer sees the delete.
// Events go through the recorder (Events about nodes land in namespace default).
//
// +kubebuilder:rbac:groups="",resources=nodes,verbs=list;watch;patch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// NewController wires a Controller to its client and node informer and registers its
// event handlers. config is validated and compiled first. The informer must not have been started.
func NewController(ctx context.Context, kubeClient kubernetes.Interface, nodeInformer coreinformers.NodeInformer,
	config *Config, recorder record.EventRecorder, opts Options) (*Controller, error) {
	logger := klog.FromContext(ctx)
	rules, err := config.Compile()
	if err != nil {
		return nil, fmt.Errorf("node label config: %w", err)
	}
	if opts.RateLimiter == nil {
		opts.RateLimiter = newRateLimiter()
	}

	informer := nodeInformer.Informer()
	c := &Controller{
		kubeClient: kubeClient,
		rules:      rules,
		nodes:      controller.NewWriteCache(informer.GetIndexer(), 0, nil),
		recorder:   recorder,
		held:       map[string]map[string]heldLabel{},
	}
	c.loop = controller.NewLoop(controller.LoopConfig{
		Name:            ControllerName,
		LogKey:          "node",
		Sync:            c.syncNode,
		Synced:          []cache.InformerSynced{informer.HasSynced},
		Policy:          controller.RetryPolicy{}, // no limit: retried for as long as it fails
		RateLimiter:     opts.RateLimiter,
		ShutdownTimeout: opts.ShutdownTimeout,
		Recorder:        recorder,
		Object:          c.nodeForEvent,
		FailureMessage:  "Labelling the node failed, will retry: %v",
	})
	if err := controller.AddEventHandler(informer, logger, "Node", c.nodeHandlers(logger)); err != nil {
		return nil, err
	}
	return c, nil
}

// newRateLimiter returns the default rate limiter: a per-node exponential backoff from
// BaseRetryDelay, capped at the seed's retry delay, MaxRetryDelay.
func newRateLimiter() workqueue.TypedRateLimiter[cache.ObjectName] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[cache.ObjectName](BaseRetryDelay, MaxRetryDelay)
}

// Run waits for the caches to sync, then runs workers until ctx ends. It then stops
// taking work and lets in-flight syncs finish within the shutdown timeout (see
// controller.RunWorkers).
func (c *Controller) Run(ctx context.Context, workers int) {
	c.loop.Run(ctx, workers, "rules", len(c.rules))
}

// nodeForEvent returns the node named key for an Event about it, or nil.
func (c *Controller) nodeForEvent(key cache.ObjectName) runtime.Object {
	node, err := c.getNode(key)
	if err != nil || node == nil {
		return nil
	}
	return node
}

// getNode returns the newest known state of the node named key, or nil if it does not
// exist.
func (c *Controller) getNode(key cache.ObjectName) (*corev1.Node, error) {
	obj, exists, err := c.nodes.GetByKey(key.Name)
	if err != nil || !exists {
		return nil, err
	}
	node, ok := obj.(*corev1.Node)
	if !ok {
		return nil, fmt.Errorf("unexpected object %T in the Node cache", obj)
	}
	return node, nil
}

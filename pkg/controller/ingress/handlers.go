package ingress

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/app-controller/app-controller/pkg/controller"
)

// serviceHandlers are the Service informer's handlers. Garbage collection deletes the
// Ingresses of deleted Services; a deleted Service's claim of a host is let go, though.
func (c *Controller) serviceHandlers(logger klog.Logger) cache.ResourceEventHandlerFuncs {
	return controller.Handlers[*corev1.Service]{
		Add:    c.addService,
		Update: c.updateService,
		Delete: func(_ klog.Logger, svc *corev1.Service, _ interface{}) { c.enqueueHostClaimants(hostBuckets(svc)) },
	}.Funcs(logger)
}

// ingressHandlers are the Ingress informer's handlers.
func (c *Controller) ingressHandlers(logger klog.Logger) cache.ResourceEventHandlerFuncs {
	return controller.Handlers[*networkingv1.Ingress]{Add: c.addIngress, Update: c.updateIngress, Delete: c.deleteIngress}.Funcs(logger)
}

// addService queues a new Service.
func (c *Controller) addService(logger klog.Logger, svc *corev1.Service) {
	logger.V(4).Info("Service added", "service", klog.KObj(svc))
	c.loop.Enqueue(cache.MetaObjectToName(svc))
}

// updateService queues a changed Service. Periodic resyncs (same resourceVersion) are
// dropped, except for a Service the controller gave up on: the resync is its retry.
func (c *Controller) updateService(logger klog.Logger, oldSvc, curSvc *corev1.Service) {
	if oldSvc.ResourceVersion == curSvc.ResourceVersion {
		if c.loop.Resync(cache.MetaObjectToName(curSvc)) {
			logger.V(4).Info("Retrying Service on resync", "service", klog.KObj(curSvc))
		}
		return
	}
	logger.V(4).Info("Service updated", "service", klog.KObj(curSvc))
	if old, cur := hostBuckets(oldSvc), hostBuckets(curSvc); !slices.Equal(old, cur) {
		c.enqueueHostClaimants(old) // the host it claimed may be free now
	}
	c.loop.Enqueue(cache.MetaObjectToName(curSvc))
}

// addIngress queues the Service that controls a new Ingress, and the Service of the same
// name: a foreign Ingress now holds the name that Service may ask for. Like every
// Ingress event, it first tells the write cache what the informer delivered.
func (c *Controller) addIngress(logger klog.Logger, ing *networkingv1.Ingress) {
	c.ingresses.Observed(ing)
	logger.V(4).Info("Ingress added", "ingress", klog.KObj(ing))
	c.enqueueServices(c.servicesForIngress(ing, true))
}

// updateIngress queues the Service that controls a changed Ingress, so that edits are
// undone. When the Ingress changed controller, the Services it was and is controlled by
// and the Service of its name are queued. Updates of foreign Ingresses that keep their
// controller are ignored: the Service's answer to them does not change.
func (c *Controller) updateIngress(logger klog.Logger, oldIng, curIng *networkingv1.Ingress) {
	if oldIng.ResourceVersion == curIng.ResourceVersion {
		return
	}
	c.ingresses.Observed(curIng)
	logger.V(4).Info("Ingress updated", "ingress", klog.KObj(curIng))
	oldRef, curRef := metav1.GetControllerOfNoCopy(oldIng), metav1.GetControllerOfNoCopy(curIng)
	if !controller.SameController(oldRef, curRef) {
		c.enqueueServices(c.servicesForIngress(oldIng, true))
	}
	c.enqueueServices(c.servicesForIngress(curIng, !controller.SameController(oldRef, curRef)))
	if old := hostBuckets(oldIng); !slices.Equal(old, hostBuckets(curIng)) {
		c.enqueueHostClaimants(old)
	}
}

// deleteIngress queues the Service that controlled a deleted Ingress, so that it is
// restored, and the Service of the same name, which may now take the freed name;
// delivered is what the informer delivered (ing or its tombstone).
func (c *Controller) deleteIngress(logger klog.Logger, ing *networkingv1.Ingress, delivered interface{}) {
	// Before the Service is queued: its sync must not see the controller's own write.
	c.ingresses.Deleted(delivered)
	logger.V(4).Info("Ingress deleted", "ingress", klog.KObj(ing))
	c.enqueueServices(c.servicesForIngress(ing, true))
	c.enqueueHostClaimants(hostBuckets(ing)) // a host let go goes to the next claim
}

// enqueueServices queues keys.
func (c *Controller) enqueueServices(keys []cache.ObjectName) {
	for _, key := range keys {
		c.loop.Enqueue(key)
	}
}

// servicesForIngress returns the keys of the Services an Ingress event concerns: the
// Service that controls ing (ControllerRef of kind Service, with a matching UID), and, if
// sameName, the existing Service whose name ing has.
func (c *Controller) servicesForIngress(ing *networkingv1.Ingress, sameName bool) []cache.ObjectName {
	var keys []cache.ObjectName
	if svc := c.resolveControllerRef(ing.Namespace, metav1.GetControllerOfNoCopy(ing)); svc != nil {
		keys = append(keys, cache.MetaObjectToName(svc))
	}
	if sameName {
		key := cache.MetaObjectToName(ing)
		if _, err := c.serviceLister.Services(key.Namespace).Get(key.Name); err == nil && (len(keys) == 0 || keys[0] != key) {
			keys = append(keys, key)
		}
	}
	return keys
}

// resolveControllerRef returns the Service that ref points to, or nil if ref is not a
// Service's or that Service no longer exists (a new Service of the same name has
// another UID).
func (c *Controller) resolveControllerRef(namespace string, ref *metav1.OwnerReference) *corev1.Service {
	svc, _ := controller.ResolveControllerRef(ref, serviceKind, c.serviceLister.Services(namespace).Get)
	return svc
}

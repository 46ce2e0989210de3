package nodelabel

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/app-controller/app-controller/pkg/controller"
)

// nodeHandlers are the node informer's handlers.
func (c *Controller) nodeHandlers(logger klog.Logger) cache.ResourceEventHandlerFuncs {
	return controller.Handlers[*corev1.Node]{Add: c.addNode, Update: c.updateNode, Delete: c.deleteNode}.Funcs(logger)
}

// addNode queues a new node.
func (c *Controller) addNode(logger klog.Logger, node *corev1.Node) {
	c.nodes.Observed(node)
	logger.V(4).Info("Node added", "node", klog.KObj(node))
	c.loop.Enqueue(cache.MetaObjectToName(node))
}

// updateNode queues a node whose labels, provider ID or applied-config hash changed:
// what the rules match on and what the labeler compares. Periodic resyncs and the
// frequent status-only updates (heartbeats) are skipped.
func (c *Controller) updateNode(logger klog.Logger, oldNode, curNode *corev1.Node) {
	if oldNode.ResourceVersion == curNode.ResourceVersion {
		return
	}
	c.nodes.Observed(curNode)
	if !relevantChange(oldNode, curNode) {
		return
	}
	logger.V(4).Info("Node updated", "node", klog.KObj(curNode))
	c.loop.Enqueue(cache.MetaObjectToName(curNode))
}

// deleteNode queues a deleted node, so that its sync forgets what was recorded about it;
// delivered is what the informer delivered (node or its tombstone).
func (c *Controller) deleteNode(logger klog.Logger, node *corev1.Node, delivered interface{}) {
	// Before the node is queued: its sync must not see the controller's own write.
	c.nodes.Deleted(delivered)
	logger.V(4).Info("Node deleted", "node", klog.KObj(node))
	c.loop.Enqueue(cache.MetaObjectToName(node))
}

// relevantChange reports whether a node update changed anything the labeler looks at.
func relevantChange(old, cur *corev1.Node) bool {
	return !maps.Equal(old.Labels, cur.Labels) ||
		old.Spec.ProviderID != cur.Spec.ProviderID ||
		old.Annotations[controller.AppliedConfigHashAnnotation] != cur.Annotations[controller.AppliedConfigHashAnnotation]
}

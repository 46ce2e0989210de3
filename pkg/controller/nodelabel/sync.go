package nodelabel

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/app-controller/app-controller/pkg/controller"
)

// labelFieldPrefix is how a server-side apply conflict names a label's field.
const labelFieldPrefix = ".metadata.labels."

// syncNode makes the labels the labeler applies to the node named key match the rules
// the node matches. It is level-triggered: it compares what the rules want with the
// cached node and writes only when they differ.
func (c *Controller) syncNode(ctx context.Context, key cache.ObjectName) (controller.Result, error) {
	logger := klog.FromContext(ctx)
	node, err := c.getNode(key)
	if err != nil {
		return controller.Result{}, fmt.Errorf("reading Node %s from the cache: %w", key.Name, err)
	}
	if node == nil {
		logger.V(4).Info("Node no longer exists")
		c.forgetHeld(key.Name)
		return controller.Result{}, nil
	}

	ev := c.rules.evaluate(node)
	want := c.withoutHeld(node, ev.labels)
	_, appliedBefore := node.Annotations[controller.AppliedConfigHashAnnotation]
	if len(want) == 0 && !appliedBefore {
		return controller.Result{}, nil // nothing to set, and nothing set before
	}
	desired, err := newNodeLabels(node, want)
	if err != nil {
		return controller.Result{}, fmt.Errorf("building the labels of Node %s: %w", node.Name, err)
	}
	if len(want) > 0 {
		upToDate, err := controller.UpToDate(metadataOf(node), desired)
		if err != nil {
			return controller.Result{}, fmt.Errorf("comparing the labels of Node %s with the desired state: %w", node.Name, err)
		}
		if upToDate {
			return controller.Result{}, nil
		}
	}

	// Rule conflicts are reported when they change what is written, not on every sync.
	for _, rc := range ev.conflicts {
		c.recorder.Eventf(node, corev1.EventTypeWarning, ReasonRuleConflict,
			"Rules %q and %q both match; they set label %q to %q and %q: the first rule, %q, wins",
			rc.winner, rc.loser, rc.key, rc.winnerValue, rc.loserValue, rc.winner)
	}
	return controller.Result{}, c.applyLabels(ctx, node, want, ev.matched)
}

// applyLabels applies want as the complete set of labels the labeler sets on node. It
// never forces: when another field manager set one of the labels to another value, the
// API server reports a conflict; the label is then left to that manager, recorded as
// held, reported in a Warning Event, and the others are applied without it.
func (c *Controller) applyLabels(ctx context.Context, node *corev1.Node, want map[string]string, rules []string) error {
	logger := klog.FromContext(ctx)
	want = maps.Clone(want)
	for {
		desired, err := newNodeLabels(node, want)
		if err != nil {
			return fmt.Errorf("building the labels of Node %s: %w", node.Name, err)
		}
		applied, err := c.kubeClient.CoreV1().Nodes().Apply(ctx, desired, metav1.ApplyOptions{FieldManager: FieldManager})
		if err == nil {
			applied.SetManagedFields(nil)
			c.nodes.Mutation(applied)
			if len(want) == 0 {
				logger.V(2).Info("Removed the labels the labeler had applied")
				c.recorder.Event(node, corev1.EventTypeNormal, ReasonLabelsRemoved, "No rule gives the node a label any more: removed every label the labeler had set")
			} else {
				logger.V(2).Info("Applied labels", "labels", want, "rules", rules)
				c.recorder.Eventf(node, corev1.EventTypeNormal, ReasonLabelsApplied, "Applied labels %s from rules %s",
					formatLabels(want), strings.Join(rules, ", "))
			}
			return nil
		}

		conflicts := labelConflicts(err)
		removed := false
		for _, key := range sortedKeys(conflicts) {
			if _, wanted := want[key]; !wanted {
				continue
			}
			delete(want, key)
			removed = true
			value, present := node.Labels[key]
			c.hold(node.Name, key, heldLabel{value: value, present: present})
			logger.V(2).Info("Label held by another field manager, leaving it alone", "label", key, "holder", conflicts[key])
			c.recorder.Eventf(node, corev1.EventTypeWarning, ReasonLabelConflict,
				"Label %q is set to another value by %s; leaving it alone", key, conflicts[key])
		}
		if !removed {
			// Not a conflict on a label we set: the node is gone, the cache is stale, or the
			// API server failed. The queue retries with backoff.
			return fmt.Errorf("applying the labels of Node %s: %w", node.Name, err)
		}
	}
}

// newNodeLabels returns the apply configuration holding exactly the labels the labeler
// sets on node and the hash of that configuration. It carries the node's UID, which makes
// the API server refuse the apply, rather than create a node, when the node is gone.
func newNodeLabels(node *corev1.Node, labels map[string]string) (*corev1ac.NodeApplyConfiguration, error) {
	cfg := corev1ac.Node(node.Name).WithUID(node.UID)
	if len(labels) == 0 {
		// Applying nothing releases every field the labeler owned, the hash included.
		return cfg, nil
	}
	cfg.WithLabels(labels)
	return controller.WithAppliedHash(cfg)
}

// metadataOf returns the part of node that the labeler compares with what it applies,
// without copying the cached maps, which must not be modified.
func metadataOf(node *corev1.Node) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name:        node.Name,
		UID:         node.UID,
		Labels:      node.Labels,
		Annotations: node.Annotations,
	}}
}

// labelConflicts returns the labels that a server-side apply error reports as owned by
// another field manager, each with the manager's description. It returns nil for any
// other error.
func labelConflicts(err error) map[string]string {
	var status apierrors.APIStatus
	if !apierrors.IsConflict(err) || !errors.As(err, &status) || status.Status().Details == nil {
		return nil
	}
	conflicts := map[string]string{}
	for _, cause := range status.Status().Details.Causes {
		if cause.Type != metav1.CauseTypeFieldManagerConflict || !strings.HasPrefix(cause.Field, labelFieldPrefix) {
			continue
		}
		conflicts[strings.TrimPrefix(cause.Field, labelFieldPrefix)] = strings.TrimPrefix(cause.Message, "conflict with ")
	}
	return conflicts
}

// withoutHeld returns want without the labels held by another field manager: those
// recorded as held that still have the value they had when the conflict was found. A
// held label whose value changed since is forgotten and tried again.
func (c *Controller) withoutHeld(node *corev1.Node, want map[string]string) map[string]string {
	c.heldLock.Lock()
	defer c.heldLock.Unlock()
	held := c.held[node.Name]
	if len(held) == 0 {
		return want
	}
	out := make(map[string]string, len(want))
	for key, value := range want {
		h, isHeld := held[key]
		if isHeld {
			current, present := node.Labels[key]
			if h == (heldLabel{value: current, present: present}) {
				continue
			}
			delete(held, key)
		}
		out[key] = value
	}
	for key := range held {
		if _, wanted := want[key]; !wanted {
			delete(held, key) // no rule wants it any more
		}
	}
	if len(held) == 0 {
		delete(c.held, node.Name)
	}
	return out
}

// hold records that another field manager holds label key on the named node.
func (c *Controller) hold(nodeName, key string, h heldLabel) {
	c.heldLock.Lock()
	defer c.heldLock.Unlock()
	if c.held[nodeName] == nil {
		c.held[nodeName] = map[string]heldLabel{}
	}
	c.held[nodeName][key] = h
}

// forgetHeld drops what was recorded about a deleted node.
func (c *Controller) forgetHeld(nodeName string) {
	c.heldLock.Lock()
	defer c.heldLock.Unlock()
	delete(c.held, nodeName)
}

// formatLabels renders labels as "k1=v1, k2=v2", sorted by key.
func formatLabels(labels map[string]string) string {
	parts := make([]string, 0, len(labels))
	for _, k := range sortedKeys(labels) {
		parts = append(parts, k+"="+labels[k])
	}
	return strings.Join(parts, ", ")
}

package app

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// readyToReport reports whether the App named key has a Deployment that rolled out and
// is available while the App does not say Ready at its generation: its next sync writes
// Ready. The App queue puts such keys first (controller.UrgentFirst), so that an App whose
// pods are ready says so without waiting behind every App created after it; without
// that, a thousand new Apps all turn Ready at the end, when the queue has given each its
// first sync. It reads only the caches (the queue calls it under its lock).
func (c *Controller) readyToReport(key cache.ObjectName) bool {
	app, exists, err := c.getApp(key)
	if err != nil || !exists || app.DeletionTimestamp != nil {
		return false
	}
	if ready := meta.FindStatusCondition(app.Status.Conditions, appv1.ConditionReady); ready != nil &&
		ready.Status == metav1.ConditionTrue && app.Status.ObservedGeneration == app.Generation {
		return false
	}
	d := c.liveDeployment(app)
	if d == nil {
		return false
	}
	r := deploymentRollout(d.Name, d, 0)
	return r.rolledOut && r.available
}

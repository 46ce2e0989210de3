package app

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
)

// syncApp makes the children of the App named key match its spec and writes what it
// observed to the App's status. It is level-triggered: it compares the desired state
// with the cached state of the world, whatever event queued it, and writes nothing when
// they agree.
func (c *Controller) syncApp(ctx context.Context, key cache.ObjectName) error {
	logger := klog.FromContext(ctx)
	start := c.clock.Now()
	defer func() {
		logger.V(4).Info("Finished syncing App", "duration", c.clock.Since(start))
	}()

	app, exists, err := c.getApp(key)
	if err != nil {
		return err
	}
	if !exists {
		logger.V(4).Info("App no longer exists")
		return nil
	}
	if app.DeletionTimestamp != nil {
		// The garbage collector deletes the children; recreating them would fight it.
		return nil
	}

	desiredDeployment, err := DesiredDeployment(app)
	if err != nil {
		return fmt.Errorf("building the Deployment of App %s: %w", key, err)
	}
	desiredService, err := DesiredService(app)
	if err != nil {
		return fmt.Errorf("building the Service of App %s: %w", key, err)
	}

	var deploymentName, serviceName string
	if t := app.Spec.DeploymentTemplate; t != nil {
		deploymentName = t.Name
	}
	if t := app.Spec.ServiceTemplate; t != nil {
		serviceName = t.Name
	}
	deployment, err := c.deployments.reconcile(ctx, app, deploymentName, desiredDeployment,
		c.claimants(claimKey("Deployment", app.Namespace, deploymentName)))
	if err != nil {
		return err
	}
	service, err := c.services.reconcile(ctx, app, serviceName, desiredService,
		c.claimants(claimKey("Service", app.Namespace, serviceName)))
	if err != nil {
		return err
	}

	status := computeStatus(app, deployment, service, metav1.NewTime(c.clock.Now()))
	c.reportContests(app, status)
	c.recordConflicts(app, status, []string{deployment.conflict, service.conflict}, []string{deploymentName, serviceName})
	if deployment.changed || service.changed {
		c.recorder.Event(app, corev1.EventTypeNormal, appv1.EventReasonSynced, appv1.EventMessageSynced)
	}
	return c.writeStatus(ctx, app, status)
}

// recordConflicts emits the seed's ErrResourceExists Warning for each child name held by
// something else, once per conflict rather than on every sync: only when the conflict is
// not already reported in the App's NamesAccepted condition.
func (c *Controller) recordConflicts(app *appv1.App, status *appv1.AppStatus, conflicts, names []string) {
	old := meta.FindStatusCondition(app.Status.Conditions, appv1.ConditionNamesAccepted)
	for i, conflict := range conflicts {
		if conflict == "" {
			continue
		}
		if old != nil && old.Status == metav1.ConditionFalse && strings.Contains(old.Message, conflict) {
			continue
		}
		c.recorder.Eventf(app, corev1.EventTypeWarning, appv1.EventReasonResourceExists, appv1.EventMessageResourceExists, names[i])
	}
}

// writeStatus writes status to app's status subresource, unless it equals what app
// already has. The controller is the only writer of an App's status and always writes
// all of it, so one JSON patch replaces it whole: no conflict on a stale resourceVersion,
// and no merge with what an earlier write set. (A server-side apply would have to own
// every nested field, and turns an object it empties, a Deployment status after a
// rename, into null, which the schema rejects.)
func (c *Controller) writeStatus(ctx context.Context, app *appv1.App, status *appv1.AppStatus) error {
	if equality.Semantic.DeepEqual(&app.Status, status) {
		return nil
	}
	patch, err := json.Marshal([]map[string]any{{"op": "add", "path": "/status", "value": status}})
	if err != nil {
		return fmt.Errorf("encoding the status of App %s/%s: %w", app.Namespace, app.Name, err)
	}
	updated, err := c.appClient.AppcontrollerV1().Apps(app.Namespace).Patch(ctx, app.Name, types.JSONPatchType, patch,
		metav1.PatchOptions{FieldManager: appv1.FieldManager}, "status")
	if err != nil {
		return fmt.Errorf("writing the status of App %s/%s: %w", app.Namespace, app.Name, err)
	}
	klog.FromContext(ctx).V(2).Info("Updated App status", "ready", conditionStatus(updated.Status.Conditions, appv1.ConditionReady))
	updated.SetManagedFields(nil)
	c.apps.Mutation(updated)
	return nil
}

// reportReconcileFailed records in the App's conditions that its retry budget ran out,
// with the last error (the loop emitted the ReconcileFailed Event).
func (c *Controller) reportReconcileFailed(ctx context.Context, key cache.ObjectName, attempts int, syncErr error) error {
	app, exists, err := c.getApp(key)
	if err != nil || !exists {
		return err
	}
	msg := controller.GaveUpMessage(attempts, true, syncErr)

	status := app.Status.DeepCopy()
	status.ObservedGeneration = app.Generation
	now := metav1.NewTime(c.clock.Now())
	setCondition(status, app, now, appv1.ConditionReady, metav1.ConditionFalse, appv1.ReasonReconcileFailed, msg)
	setCondition(status, app, now, appv1.ConditionStalled, metav1.ConditionTrue, appv1.ReasonReconcileFailed, msg)
	return c.writeStatus(ctx, app, status)
}

// conditionStatus returns the status of the condition of type t, or Unknown.
func conditionStatus(conditions []metav1.Condition, t string) metav1.ConditionStatus {
	if cond := meta.FindStatusCondition(conditions, t); cond != nil {
		return cond.Status
	}
	return metav1.ConditionUnknown
}

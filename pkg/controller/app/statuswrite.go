package app

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
)

// StatusCoalesceWindow is how long the controller holds back a status write that shows
// nothing kstatus would read differently, so that the writes of a rollout's steps
// coalesce into one: the first status of a new App or generation (kstatus reads the
// stale observedGeneration as InProgress meanwhile), and, at the same generation, a
// change of replica counts or messages only. A change of a condition's status or reason
// (Progressing, Ready, Stalled) is written at once; a held-back write is made at the
// latest one window after it was first held back, so a long rollout shows Progressing
// within a second of the sync that started it.
const StatusCoalesceWindow = time.Second

// StatusProgressWindow is how long a status write is held back during a rollout
// (Progressing=True) when only counts and messages change at the same generation: the
// conditions tools read are written at once, the replica counts at least every
// StatusProgressWindow (the Deployment shows them live). A rollout shorter than that
// costs two status writes, Progressing and Ready, whatever its number of steps.
const StatusProgressWindow = 30 * time.Second

// updateStatus writes status unless it equals app's, at once or, when coalescible says
// so, later: it then returns how long the write is held back, and the sync the App's
// Result queues for when the window ends writes the status it computes then.
func (c *Controller) updateStatus(ctx context.Context, key cache.ObjectName, app *appv1.App, status *appv1.AppStatus) (time.Duration, error) {
	if equality.Semantic.DeepEqual(&app.Status, status) {
		c.statusPending.clear(key)
		return 0, nil
	}
	cause := statusWriteChange
	if coalescible(app, status) {
		window := StatusCoalesceWindow
		if app.Status.ObservedGeneration == status.ObservedGeneration && conditionStatus(status.Conditions, appv1.ConditionProgressing) == metav1.ConditionTrue {
			window, cause = StatusProgressWindow, statusWriteProgress
		}
		if delay := c.statusPending.delay(key, c.clock.Now(), window); delay > 0 {
			klog.FromContext(ctx).V(4).Info("Holding back the status write to coalesce it", "delay", delay)
			return delay, nil
		}
	}
	if err := c.writeStatus(ctx, app, status, cause); err != nil {
		return 0, err
	}
	c.statusPending.clear(key)
	return 0, nil
}

// coalescible reports whether writing status over app's status may wait, because
// kstatus computes the same from what app shows now: either the App's status is of an
// older generation (a new App: -1), so kstatus reads InProgress, and the new status reads
// InProgress too (Reconciling=True); or the generation is the same and only counts,
// messages and the embedded child statuses differ, not a condition's status or reason.
func coalescible(app *appv1.App, status *appv1.AppStatus) bool {
	if app.Status.ObservedGeneration != status.ObservedGeneration {
		return conditionStatus(status.Conditions, appv1.ConditionReconciling) == metav1.ConditionTrue
	}
	return sameConditionStates(app.Status.Conditions, status.Conditions)
}

// sameConditionStates reports whether two condition lists have the same types, each
// with the same status and reason (messages and times aside).
func sameConditionStates(a, b []metav1.Condition) bool {
	if len(a) != len(b) {
		return false
	}
	for _, ca := range a {
		cb := meta.FindStatusCondition(b, ca.Type)
		if cb == nil || cb.Status != ca.Status || cb.Reason != ca.Reason || cb.ObservedGeneration != ca.ObservedGeneration {
			return false
		}
	}
	return true
}

// pendingWrites holds, per key, since when a write has been held back.
type pendingWrites struct {
	lock  sync.Mutex
	since map[cache.ObjectName]time.Time
}

func newPendingWrites() *pendingWrites {
	return &pendingWrites{since: map[cache.ObjectName]time.Time{}}
}

// delay returns how much longer the write of key may be held back, window after it was
// first held back; 0 means write now.
func (p *pendingWrites) delay(key cache.ObjectName, now time.Time, window time.Duration) time.Duration {
	p.lock.Lock()
	defer p.lock.Unlock()
	since, found := p.since[key]
	if !found {
		p.since[key] = now
		return window
	}
	if left := window - now.Sub(since); left > 0 {
		return left
	}
	return 0
}

// clear forgets the held-back write of key (written, no longer needed, or App gone).
func (p *pendingWrites) clear(key cache.ObjectName) {
	p.lock.Lock()
	defer p.lock.Unlock()
	delete(p.since, key)
}

// pending reports whether a write of key is held back (for tests).
func (p *pendingWrites) pending(key cache.ObjectName) bool {
	p.lock.Lock()
	defer p.lock.Unlock()
	_, found := p.since[key]
	return found
}

// The causes of a status write (app_controller_status_writes_total): a change of state
// (a condition, the generation, the rollout's state, what the children are), or only
// the progress of a rollout (replica counts and messages, StatusProgressWindow).
const (
	statusWriteChange   = "change"
	statusWriteProgress = "progress"
)

// writeStatus writes status to app's status subresource, unless it equals what app
// already has; cause is why (statusWriteChange, statusWriteProgress). The controller is
// the only writer of an App's status and always writes all of it, so one JSON patch
// replaces it whole: no conflict on a stale resourceVersion, and no merge with what an
// earlier write set. (A server-side apply would have to own
// every nested field, and turns an object it empties, a Deployment status after a
// rename, into null, which the schema rejects.)
func (c *Controller) writeStatus(ctx context.Context, app *appv1.App, status *appv1.AppStatus, cause string) error {
	if equality.Semantic.DeepEqual(&app.Status, status) {
		return nil
	}
	patch, err := json.Marshal([]map[string]any{patchAdd("/status", status)})
	if err != nil {
		return fmt.Errorf("encoding the status of App %s/%s: %w", app.Namespace, app.Name, err)
	}
	updated, err := c.appClient.AppcontrollerV1().Apps(app.Namespace).Patch(ctx, app.Name, types.JSONPatchType, patch,
		metav1.PatchOptions{FieldManager: appv1.FieldManager}, "status")
	switch {
	case apierrors.IsNotFound(err):
		// Deleted since the cache saw it: nothing to report, and no SyncFailed Event
		// about an App that is gone (syncApp ends on errAppGone).
		return fmt.Errorf("writing the status of App %s/%s: %w", app.Namespace, app.Name, errAppGone)
	case err != nil:
		return fmt.Errorf("writing the status of App %s/%s: %w", app.Namespace, app.Name, err)
	}
	statusWrites.WithLabelValues(cause).Inc()
	klog.FromContext(ctx).V(2).Info("Updated App status", "ready", conditionStatus(updated.Status.Conditions, appv1.ConditionReady), "cause", cause)
	_, _ = controller.StripWriteRecords(updated) // as the informer's transform
	c.apps.Mutation(updated)
	return nil
}

// patchAdd is the JSON patch (RFC 6902) operation that sets path to value.
func patchAdd(path string, value any) map[string]any {
	return map[string]any{"op": "add", "path": path, "value": value}
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
	return c.writeStatus(ctx, app, status, statusWriteChange)
}

// conditionStatus returns the status of the condition of type t, or Unknown.
func conditionStatus(conditions []metav1.Condition, t string) metav1.ConditionStatus {
	if cond := meta.FindStatusCondition(conditions, t); cond != nil {
		return cond.Status
	}
	return metav1.ConditionUnknown
}

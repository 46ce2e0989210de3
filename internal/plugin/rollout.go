package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// `kubectl app promote|abort|pause|resume` do not change the App's spec: each writes a
// request, the appcontroller.k8s.io/rollout-request annotation (appv1.RolloutRequest),
// naming the rollout it acts on (its canary's pod template hash, and the step a promote
// ends) and an id. The controller acts on a request once, and only if it names the
// current rollout and step, and records its id in status.rollout.lastRequest: a request
// re-applied from an old manifest, or one that the rollout overtook, does nothing. A
// GitOps tool leaves the annotation alone (it is not in the manifest), and the status
// the controller keeps is not in Git: re-applying the manifest neither undoes a promote
// nor restarts an aborted rollout. docs/progressive-delivery.md tells the whole story.

// RolloutRequestResult is what a rollout request asked for.
type RolloutRequestResult struct {
	Request appv1.RolloutRequest
	// Effect says in words what the controller will do.
	Effect string
}

// RequestRollout writes the request action on the rollout of the App namespace/name,
// with id now: the App must have a rollout the action applies to (an error says why
// not). It is a merge patch of the App's annotations guarded by its resourceVersion,
// with field manager kubectl-app, retried when the App changed in between (the request
// then names the step the App is at).
func RequestRollout(ctx context.Context, clients Clients, namespace, name string, action appv1.RolloutAction, now time.Time) (*RolloutRequestResult, error) {
	var res *RolloutRequestResult
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		app, err := getTypedApp(ctx, clients, namespace, name)
		if err != nil {
			return err
		}
		effect, err := requestEffect(app, action)
		if err != nil {
			return err
		}
		r := app.Status.Rollout
		req := appv1.RolloutRequest{
			Action: action, Canary: r.Canary.PodTemplateHash, Step: r.CurrentStepIndex,
			ID: now.UTC().Format(time.RFC3339Nano),
		}
		patch, err := json.Marshal(metadataPatch(map[string]string{appv1.RolloutRequestAnnotation: req.String()}, app.ResourceVersion))
		if err != nil {
			return err
		}
		_, err = clients.Apps.AppcontrollerV1().Apps(namespace).Patch(ctx, name, types.MergePatchType, patch,
			metav1.PatchOptions{FieldManager: FieldManager})
		if err != nil && !apierrors.IsConflict(err) {
			return &APIError{Err: err}
		}
		res = &RolloutRequestResult{Request: req, Effect: effect}
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// requestEffect says what action will do to app's rollout, or why it cannot.
func requestEffect(app *appv1.App, action appv1.RolloutAction) (string, error) {
	id := app.Namespace + "/" + app.Name
	if app.Spec.Rollout == nil || app.Spec.Rollout.Canary == nil && app.Spec.Rollout.BlueGreen == nil {
		return "", fmt.Errorf("App %s has no rollout strategy (spec.rollout): its changes roll out at once", id)
	}
	r := app.Status.Rollout
	switch {
	case r == nil:
		return "", fmt.Errorf("the controller has not reported the rollout of App %s yet (status.rollout)", id)
	case app.Status.ObservedGeneration != app.Generation:
		return "", fmt.Errorf("the controller has not observed the latest change of App %s yet (generation %d, observed %d): try again in a moment",
			id, app.Generation, app.Status.ObservedGeneration)
	case r.Canary == nil || r.Phase == appv1.RolloutHealthy || r.Phase == "":
		return "", fmt.Errorf("App %s has no rollout in progress (phase %s): nothing to %s", id, orNone(string(r.Phase)), action)
	}
	if app.Spec.Rollout.BlueGreen != nil {
		return blueGreenEffect(app, r, action)
	}
	steps := app.Spec.Rollout.Canary.Steps
	n := int32(len(steps))
	promoting := r.CurrentStepIndex >= n
	aborted := r.Phase == appv1.RolloutAborted
	at := fmt.Sprintf("step %d of %d", r.CurrentStepIndex+1, n)
	if !promoting {
		at += " (" + steps[r.CurrentStepIndex].String() + ")"
	}
	switch action {
	case appv1.RolloutActionPromote:
		switch {
		case promoting:
			return "", fmt.Errorf("the rollout of App %s is already being promoted", id)
		case aborted:
			return fmt.Sprintf("the aborted rollout starts again at step 1 of %d", n), nil
		case r.CurrentStepIndex == n-1:
			return at + " ends: the rollout is promoted", nil
		}
		return at + " ends", nil
	case appv1.RolloutActionPromoteFull:
		if promoting {
			return "", fmt.Errorf("the rollout of App %s is already being promoted", id)
		}
		return "the remaining steps are skipped: the rollout is promoted", nil
	case appv1.RolloutActionAbort:
		switch {
		case aborted:
			return "", fmt.Errorf("the rollout of App %s is already aborted: %s", id, r.AbortMessage)
		case promoting:
			return "", fmt.Errorf("the rollout of App %s is being promoted: its stable Deployment already rolls to the new version; go back with kubectl app rollback %s", id, app.Name)
		}
		return "all traffic goes back to the stable pods at " + at, nil
	case appv1.RolloutActionPause:
		switch {
		case aborted:
			return "", fmt.Errorf("the rollout of App %s is aborted: nothing to pause", id)
		case promoting:
			return "", fmt.Errorf("the rollout of App %s is being promoted: it can no longer be paused", id)
		case r.PausedByRequest:
			return "", fmt.Errorf("the rollout of App %s is already paused (kubectl app resume %s goes on)", id, app.Name)
		}
		return "the rollout holds at " + at, nil
	case appv1.RolloutActionResume:
		if !r.PausedByRequest {
			msg := fmt.Sprintf("the rollout of App %s is not paused by kubectl app pause", id)
			if !promoting && !aborted && steps[r.CurrentStepIndex].Pause != nil {
				msg += fmt.Sprintf(" (it waits at %s: kubectl app promote %s ends it)", at, app.Name)
			}
			return "", fmt.Errorf("%s", msg)
		}
		return "the rollout goes on from " + at, nil
	}
	return "", fmt.Errorf("unknown rollout action %q", action)
}

// orNone returns s, or noValue when it is empty.
func orNone(s string) string {
	if s == "" {
		return noValue
	}
	return s
}

// metadataPatch returns a JSON merge patch of an object's metadata that sets annotations,
// at resourceVersion unless it is empty (a newer object then refuses the patch).
func metadataPatch(annotations map[string]string, resourceVersion string) map[string]any {
	meta := map[string]any{"annotations": annotations}
	if resourceVersion != "" {
		meta["resourceVersion"] = resourceVersion
	}
	return map[string]any{"metadata": meta}
}

// RestartWithRollout restarts the pods of the App namespace/name through its canary
// rollout: it sets the App's own kubectl.kubernetes.io/restartedAt annotation to now
// (field manager kubectl-app), which the controller copies into the pod template: a
// change of the pod template, rolled out in steps like any other.
func RestartWithRollout(ctx context.Context, clients Clients, app *appv1.App, now time.Time) error {
	patch, err := json.Marshal(metadataPatch(map[string]string{appv1.RestartedAtAnnotation: now.Format(time.RFC3339)}, ""))
	if err != nil {
		return err
	}
	if _, err := clients.Apps.AppcontrollerV1().Apps(app.Namespace).Patch(ctx, app.Name, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: FieldManager}); err != nil {
		return &APIError{Err: err}
	}
	return nil
}

package plugin

import (
	"context"
	"fmt"
	"strings"
	"time"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// Action is a write the plugin makes on an App: one of the rollout requests (promote,
// promoteFull, abort, pause, resume), a restart or a rollback. The commands promote,
// abort, pause, resume, restart and rollback and the dashboard's buttons all run it
// through Act, so that a button does exactly what its command does.
type Action struct {
	// Kind is a rollout action (appv1.RolloutAction*), ActionRestart or ActionRollback.
	Kind string
	// Revision is the revision a rollback goes to; 0: the one before the current.
	Revision int64
}

// The actions that are not rollout requests.
const (
	ActionRestart  = "restart"
	ActionRollback = "rollback"
)

// Act makes the write a on the App namespace/name at now and returns the line the
// command prints about it ("app.appcontroller.k8s.io/web promote requested: ...").
// Its error says what was being done, or is the API server's refusal (*APIError: RBAC,
// a webhook, the resourceVersion guard) or an *AppNotFoundError.
func Act(ctx context.Context, clients Clients, namespace, name string, a Action, now time.Time) (string, error) {
	switch a.Kind {
	case ActionRestart:
		deployment, canary, err := Restart(ctx, clients, namespace, name, now)
		if err != nil {
			return "", describe(err, "restarting App %s/%s", namespace, name)
		}
		if canary {
			return fmt.Sprintf("app.appcontroller.k8s.io/%s restarted (a canary rollout rolls its pods: kubectl app status %s --watch)", name, name), nil
		}
		return fmt.Sprintf("app.appcontroller.k8s.io/%s restarted (Deployment %s rolls its pods)", name, deployment), nil
	case ActionRollback:
		if a.Revision < 0 {
			return "", fmt.Errorf("--to-revision must be a revision number, got %d", a.Revision)
		}
		res, err := Rollback(ctx, clients, namespace, name, a.Revision)
		if err != nil {
			return "", describe(err, "rolling back App %s/%s", namespace, name)
		}
		if len(res.Changes) == 0 {
			return fmt.Sprintf("app.appcontroller.k8s.io/%s skipped rollback (the spec already matches revision %d)", name, res.To.Number), nil
		}
		return fmt.Sprintf("app.appcontroller.k8s.io/%s rolled back to revision %d\n%s", name, res.To.Number,
			strings.TrimSuffix(formatChanges(res.Changes), "\n")), nil
	}
	action := appv1.RolloutAction(a.Kind)
	switch action {
	case appv1.RolloutActionPromote, appv1.RolloutActionPromoteFull, appv1.RolloutActionAbort,
		appv1.RolloutActionPause, appv1.RolloutActionResume:
	default:
		return "", fmt.Errorf("unknown action %q", a.Kind)
	}
	res, err := RequestRollout(ctx, clients, namespace, name, action, now)
	if err != nil {
		return "", describe(err, "requesting %s of the rollout of App %s/%s", action, namespace, name)
	}
	return fmt.Sprintf("app.appcontroller.k8s.io/%s %s requested: %s", name, action, res.Effect), nil
}

// ErrorText is the text the plugin shows for err: the API server's refusal as kubectl
// prints it ("Error from server (Forbidden): ..."), else "error: ...", without the final
// newline.
func ErrorText(err error) string {
	msg := kubectlMessage(err)
	return msg[:len(msg)-1]
}

package app

import (
	"context"
	"fmt"

	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// The preview Service of a blue-green rollout (spec.rollout.blueGreen, pkg/rollout's
// bluegreen.go): NAME-preview, with the ports of the App's Service, selecting the
// preview's pods (the canary Deployment's, by the track label) while the rollout runs,
// so that the new version can be tried before the switch. Claimed by name while the App
// has a blue-green strategy, labelled with the track "preview" (the App's Service and the
// canary's split Services never prune it), written through the App's Service reconciler.

// trackPreview is the track label of the preview Service.
const trackPreview = "preview"

// previewServiceChild is the preview Service of a blue-green rollout.
type previewServiceChild struct {
	c *Controller
}

// newPreviewServiceChild uses the Service child's reconciler (newServiceChild comes
// first in appChildren).
func newPreviewServiceChild(c *Controller, _ Informers, _ Options) (appChild, error) {
	if c.services == nil {
		return nil, fmt.Errorf("the preview Service of a blue-green rollout needs the App's Service child first in appChildren")
	}
	return &previewServiceChild{c: c}, nil
}

func (k *previewServiceChild) claim(app *appv1.App) string {
	if name := previewServiceName(app); name != "" {
		return claimKey("Service", app.Namespace, name)
	}
	return ""
}

// previewServiceName is the name of app's preview Service; "" without a blue-green
// strategy or a Service.
func previewServiceName(app *appv1.App) string {
	if app.Spec.Rollout == nil || app.Spec.Rollout.BlueGreen == nil || app.Spec.ServiceTemplate == nil {
		return ""
	}
	return app.Spec.ServiceTemplate.Name + appv1.PreviewSuffix
}

// sync writes the preview Service while the plan wants it, and deletes it otherwise.
func (k *previewServiceChild) sync(ctx context.Context, app *appv1.App, in *syncInput) (childOutcome, error) {
	name := ""
	var desired *corev1ac.ServiceApplyConfiguration
	if p := in.rollout; p != nil && p.PreviewService && previewServiceName(app) != "" {
		name = previewServiceName(app)
		selector := selectorLabels(app)
		selector[appv1.TrackLabel] = appv1.TrackCanary
		var err error
		if desired, err = splitService(app, name, trackPreview, selector); err != nil {
			return childOutcome{}, fmt.Errorf("building Service %s of App %s/%s: %w", name, app.Namespace, app.Name, err)
		}
	}
	res, err := k.c.services.reconcileWith(ctx, app, name, desired, k.claim(app), reconcileOptions{
		track: trackPreview, planned: true, pruneReason: "no blue-green rollout runs",
	})
	return res.outcome(), err
}

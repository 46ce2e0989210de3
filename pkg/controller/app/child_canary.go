package app

import (
	"context"
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// The canary Deployment of an App's rollout (spec.rollout, pkg/rollout) runs the pod
// template the rollout brings, beside the stable Deployment: named as the App's
// Deployment with "-canary", claimed by name while the App has a rollout strategy, its
// pods, selector and labels marked by the track label. It exists while the rollout plan
// wants it (rollout.Plan), with the plan's replicas; it is written through the App's
// Deployment reconciler (the same informer and own-writes cache), and neither prunes the
// other (reconcileOptions.track).

// canaryChild is the canary Deployment of the App's rollout.
type canaryChild struct {
	c *Controller
}

// newCanaryChild uses the Deployment child's reconciler (newDeploymentChild comes first
// in appChildren).
func newCanaryChild(c *Controller, _ Informers, _ Options) (appChild, error) {
	if c.deployments == nil {
		return nil, fmt.Errorf("the canary Deployment needs the App's Deployment child first in appChildren")
	}
	return &canaryChild{c: c}, nil
}

func (k *canaryChild) claim(app *appv1.App) string {
	if app.Spec.Rollout == nil {
		return ""
	}
	return claimKey("Deployment", app.Namespace, canaryName(app))
}

// sync writes the canary Deployment of the plan, leaves it as it is while the plan keeps
// it (a scale-down delay), and deletes it when the plan wants none.
func (k *canaryChild) sync(ctx context.Context, app *appv1.App, in *syncInput) (childOutcome, error) {
	d := k.c.deployments
	p := in.rollout
	if p != nil && p.KeepCanary {
		return childOutcome{name: canaryName(app), obj: k.c.liveCanary(app)}, nil
	}
	name := ""
	var desired *appsv1ac.DeploymentApplyConfiguration
	if p != nil && p.CanaryReplicas != nil {
		var err error
		if desired, err = canaryDeployment(app, p.canaryTemplate, *p.CanaryReplicas); err != nil {
			return childOutcome{}, fmt.Errorf("building the canary Deployment of App %s/%s: %w", app.Namespace, app.Name, err)
		}
		name = canaryName(app)
	}
	res, err := d.reconcileWith(ctx, app, name, desired, k.claim(app), reconcileOptions{
		track: appv1.TrackCanary, planned: true, pruneReason: "the canary of a rollout that ended",
	})
	return canaryOutcome(res), err
}

// canaryOutcome is what the App's status reads of res, the canary Deployment: its name
// conflict only (status.rollout says the rest).
func canaryOutcome(res childResult[*appsv1.Deployment]) childOutcome {
	return res.outcome()
}

// liveCanary returns the cached canary Deployment app controls, or nil.
func (c *Controller) liveCanary(app *appv1.App) *appsv1.Deployment {
	return c.deployments.controlled(app, canaryName(app))
}

// canaryName is the name of app's canary Deployment; "" without deploymentTemplate.
func canaryName(app *appv1.App) string {
	if t := app.Spec.DeploymentTemplate; t != nil {
		return t.Name + appv1.CanarySuffix
	}
	return ""
}

// canaryDeployment returns the canary Deployment of app: template, marked by the track
// label in its pods and selector, with replicas.
func canaryDeployment(app *appv1.App, template *corev1ac.PodTemplateSpecApplyConfiguration, replicas int32) (*appsv1ac.DeploymentApplyConfiguration, error) {
	// A copy: the template may be the stable Deployment's too.
	data, err := json.Marshal(template)
	if err != nil {
		return nil, fmt.Errorf("copying the canary's pod template: %w", err)
	}
	canary := &corev1ac.PodTemplateSpecApplyConfiguration{}
	if err := json.Unmarshal(data, canary); err != nil {
		return nil, fmt.Errorf("copying the canary's pod template: %w", err)
	}
	canary.WithLabels(map[string]string{appv1.TrackLabel: appv1.TrackCanary})
	selector := selectorLabels(app)
	selector[appv1.TrackLabel] = appv1.TrackCanary
	d, err := buildDeployment(app, canaryName(app), canary, selector, &replicas, "")
	if err != nil {
		return nil, err
	}
	// The label marks it among the App's Deployments (reconcileOptions.track); the
	// applied hash covers the rest, which the label does not change.
	return d.WithLabels(map[string]string{appv1.TrackLabel: appv1.TrackCanary}), nil
}

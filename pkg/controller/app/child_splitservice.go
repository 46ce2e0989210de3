package app

import (
	"context"
	"fmt"
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
)

// When an App's route is an HTTPRoute, its canary rollout (pkg/rollout) shares the
// traffic by weight between two more Services: NAME-stable, which selects the stable
// pods by the pod-template-hash of the stable Deployment's pods (they carry no track
// label: adding one would roll them), and NAME-canary, which selects the canary pods by
// the track label. Both have the ports of the App's Service, are claimed by name while
// the App has a rollout strategy, and exist while the rollout plan wants them
// (rollout.Plan). They are written through the App's Service reconciler (its ports and
// selector are the App's alone, serviceExclusivePatch).

// splitServiceChild is the stable or the canary Service of a rollout's split.
type splitServiceChild struct {
	c *Controller
	// suffix is appv1.StableSuffix or appv1.CanarySuffix.
	suffix string
}

// newStableServiceChild and newCanaryServiceChild use the Service child's reconciler
// (newServiceChild comes first in appChildren).
func newStableServiceChild(c *Controller, _ Informers, _ Options) (appChild, error) {
	return newSplitServiceChild(c, appv1.StableSuffix)
}

func newCanaryServiceChild(c *Controller, _ Informers, _ Options) (appChild, error) {
	return newSplitServiceChild(c, appv1.CanarySuffix)
}

func newSplitServiceChild(c *Controller, suffix string) (appChild, error) {
	if c.services == nil {
		return nil, fmt.Errorf("the Services of a rollout's split need the App's Service child first in appChildren")
	}
	return &splitServiceChild{c: c, suffix: suffix}, nil
}

func (k *splitServiceChild) claim(app *appv1.App) string {
	if app.Spec.Rollout == nil || app.Spec.ServiceTemplate == nil {
		return ""
	}
	return claimKey("Service", app.Namespace, app.Spec.ServiceTemplate.Name+k.suffix)
}

// sync writes the Service while the plan splits the traffic, and deletes it otherwise.
func (k *splitServiceChild) sync(ctx context.Context, app *appv1.App, in *syncInput) (childOutcome, error) {
	t := app.Spec.ServiceTemplate
	name := ""
	var desired *corev1ac.ServiceApplyConfiguration
	if t != nil {
		if p := in.rollout; p != nil && p.SplitServices && (k.suffix == appv1.CanarySuffix || p.StableHash != "") {
			name = t.Name + k.suffix
			var err error
			if desired, err = splitService(app, name, k.track(), k.selector(app, p)); err != nil {
				return childOutcome{}, fmt.Errorf("building Service %s of App %s/%s: %w", name, app.Namespace, app.Name, err)
			}
		}
	}
	res, err := k.c.services.reconcileWith(ctx, app, name, desired, k.claim(app), reconcileOptions{
		track: k.track(), planned: true, pruneReason: "the rollout no longer splits the traffic",
	})
	return res.outcome(), err
}

// track is the value of the track label of the Service: canary, or stable.
func (k *splitServiceChild) track() string {
	if k.suffix == appv1.CanarySuffix {
		return appv1.TrackCanary
	}
	return "stable"
}

// selector returns the labels the Service selects its pods by.
func (k *splitServiceChild) selector(app *appv1.App, p *rolloutPlan) map[string]string {
	s := selectorLabels(app)
	if k.suffix == appv1.CanarySuffix {
		s[appv1.TrackLabel] = appv1.TrackCanary
	} else {
		s[appsv1.DefaultDeploymentUniqueLabelKey] = p.StableHash
	}
	return s
}

// splitService returns the apply configuration of a Service of the rollout's split,
// named name, labelled with track, with the ports of the App's Service (node ports
// aside: it is ClusterIP), selecting its pods by selector.
func splitService(app *appv1.App, name, track string, selector map[string]string) (*corev1ac.ServiceApplyConfiguration, error) {
	spec := corev1ac.ServiceSpec().
		WithType(corev1.ServiceTypeClusterIP).
		WithSelector(selector)
	for _, p := range servicePorts(app) {
		spec.WithPorts(corev1ac.ServicePort().
			WithName(p.name).
			WithProtocol(p.protocol).
			WithPort(p.port).
			WithTargetPort(p.targetPort))
	}
	labels := maps.Clone(childLabels(app))
	labels[appv1.TrackLabel] = track
	return controller.WithAppliedHash(corev1ac.Service(name, app.Namespace).
		WithLabels(labels).
		WithOwnerReferences(controller.OwnerReference(app, appKind)).
		WithSpec(spec))
}

package app

import (
	"context"
	"fmt"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1ac "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
)

// The HTTPRoute of a blue-green rollout's preview hosts (spec.rollout.blueGreen.
// previewHosts): NAME-preview (NAME the App's, the name of its own HTTPRoute), attached
// to the Gateways of the App's route, with the route's paths, the preview hosts, and the
// preview Service (child_preview.go) as its one backend, so that the new version can be
// tried through the Gateway before the switch. It exists while the plan says
// (rollout.Plan.PreviewRoute: from the rollout's start to the end of its promotion, or
// until an aborted preview is scaled to 0), and only while the App's route is an
// HTTPRoute that is not refused. Claimed by name, labelled with the track "preview" (the
// App's route never prunes it, nor it the App's route), written through the route's
// HTTPRoute reconciler. A preview host held by another namespace keeps it from being
// written, never the App's route: RouteAccepted=False (HostConflict) names the host
// (child_route.go).

// previewRouteChild is the HTTPRoute of a blue-green rollout's preview hosts.
type previewRouteChild struct {
	c *Controller
}

// newPreviewRouteChild uses the route child's HTTPRoute reconciler (newRouteChild comes
// first in appChildren).
func newPreviewRouteChild(c *Controller, _ Informers, _ Options) (appChild, error) {
	if c.route == nil {
		return nil, fmt.Errorf("the preview's HTTPRoute of a blue-green rollout needs the App's route child first in appChildren")
	}
	return &previewRouteChild{c: c}, nil
}

func (k *previewRouteChild) claim(app *appv1.App) string {
	if name := previewRouteName(app); name != "" {
		return claimKey("HTTPRoute", app.Namespace, name)
	}
	return ""
}

// previewRouteName is the name of the HTTPRoute of app's preview hosts; "" without
// preview hosts, a route or a Service.
func previewRouteName(app *appv1.App) string {
	if len(previewHosts(app)) == 0 || app.Spec.Route == nil || previewServiceName(app) == "" {
		return ""
	}
	return app.Name + appv1.PreviewSuffix
}

// sync writes the preview's HTTPRoute while the plan wants it and the App's route is an
// HTTPRoute it may write, and deletes it otherwise.
func (k *previewRouteChild) sync(ctx context.Context, app *appv1.App, in *syncInput) (childOutcome, error) {
	r := k.c.route
	if r.httpRoutes == nil {
		return childOutcome{}, nil // no Gateway API: the App's route says so
	}
	name := ""
	var desired *gatewayv1ac.HTTPRouteApplyConfiguration
	if p, parents := in.rollout, r.parents(app); p != nil && p.PreviewRoute && previewRouteName(app) != "" && parents != nil {
		refused, err := r.refusal(app)
		if err != nil {
			return childOutcome{}, err
		}
		held, err := r.heldHost(app, previewRouteName(app), previewHosts(app))
		if err != nil {
			return childOutcome{}, err
		}
		if refused == "" && held == "" {
			// An App's route refused, or with no port to route to, gets no preview's
			// route either (RouteAccepted says why).
			if desired, err = desiredPreviewRoute(app, parents); err == nil {
				name = previewRouteName(app)
			}
		}
	}
	res, err := r.httpRoutes.reconcileWith(ctx, app, name, desired, k.claim(app), reconcileOptions{
		track: trackPreview, planned: true, pruneReason: "no blue-green rollout runs",
	})
	return res.outcome(), err
}

// desiredPreviewRoute returns the apply configuration of the HTTPRoute of app's preview
// hosts, attached to parents; an error when the App's Service has no port for the route
// (routePort).
func desiredPreviewRoute(app *appv1.App, parents []appv1.GatewayRef) (*gatewayv1ac.HTTPRouteApplyConfiguration, error) {
	port, err := routePort(app)
	if err != nil {
		return nil, err
	}
	rule := gatewayv1ac.HTTPRouteRule().WithBackendRefs(gatewayv1ac.HTTPBackendRef().
		WithName(gatewayv1.ObjectName(previewServiceName(app))).
		WithPort(port.port))
	withPathMatches(rule, routePaths(app.Spec.Route))
	labels := childLabels(app)
	labels[appv1.TrackLabel] = trackPreview
	route := gatewayv1ac.HTTPRoute(previewRouteName(app), app.Namespace).
		WithLabels(labels).
		WithOwnerReferences(controller.OwnerReference(app, appKind)).
		WithSpec(httpRouteSpec(parents, previewHosts(app)).WithRules(rule))
	return controller.WithAppliedHash(route)
}

package app

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
	"github.com/app-controller/app-controller/pkg/rollout"
)

// A blue-green rollout (spec.rollout.blueGreen) runs through the canary's sync
// (rolloutsync.go) with the engine's blue-green machine and plan (pkg/rollout,
// bluegreen.go). What is its own here: the App's Service, the active one, selects the
// stable pods or the preview's as the plan says (Plan.Active), and the sync observes
// whether its switch is in effect; the preview Service is child_preview.go.

// newPlan returns the plan of rollout state r: a blue-green one when bg is set, else
// the canary's of strategy s.
func newPlan(s *appv1.CanaryStrategy, bg *appv1.BlueGreenStrategy, r *appv1.RolloutStatus, l rollout.Live, now time.Time) rollout.Plan {
	if bg != nil {
		return rollout.NewBlueGreenPlan(bg, r, l, now)
	}
	return rollout.NewPlan(s, r, l, now)
}

// nextRollout returns the state that follows cur: the blue-green machine's when bg is
// set, else the canary's.
func nextRollout(s *appv1.CanaryStrategy, bg *appv1.BlueGreenStrategy, cur *appv1.RolloutStatus, o *rollout.Observation) (*appv1.RolloutStatus, []rollout.Note) {
	if bg != nil {
		return rollout.NextBlueGreen(bg, cur, o)
	}
	return rollout.Next(s, cur, o)
}

// activeSelector returns the selector of app's Service as cached; nil when there is
// none of the App's.
func (s *serviceChild) activeSelector(app *appv1.App) map[string]string {
	name := serviceName(app)
	if s == nil || name == "" {
		return nil
	}
	holder, err := s.lookup(app, name)
	if err != nil || holder.managed == nil || !holder.ours {
		return nil
	}
	return holder.managed.Spec.Selector
}

// activeOnPreview reports whether app's Service, as cached, selects the preview's pods.
func (c *Controller) activeOnPreview(app *appv1.App) bool {
	return c.services.activeSelector(app)[appv1.TrackLabel] == appv1.TrackCanary
}

// activeNarrowed reports whether app's Service, as cached, selects the stable or the
// preview pods alone (a blue-green rollout's selector): its way back to all the pods is
// a step of the rollout too.
func (s *serviceChild) activeNarrowed(app *appv1.App) bool {
	sel := s.activeSelector(app)
	_, stable := sel[appsv1.DefaultDeploymentUniqueLabelKey]
	_, preview := sel[appv1.TrackLabel]
	return stable || preview
}

// withActiveSelector narrows the selector of the App's Service desired to the pods the
// plan p makes active: the stable ones by their pod-template-hash, or the preview's by
// the track label (its applied hash computed again). It reports whether it did: the
// write is then a step of the rollout.
func withActiveSelector(desired *corev1ac.ServiceApplyConfiguration, p *rolloutPlan) (*corev1ac.ServiceApplyConfiguration, bool, error) {
	if desired == nil || desired.Spec == nil || p == nil {
		return desired, false, nil
	}
	switch {
	case p.Active == rollout.ActiveStable && p.StableHash != "":
		desired.Spec.WithSelector(map[string]string{appsv1.DefaultDeploymentUniqueLabelKey: p.StableHash})
	case p.Active == rollout.ActivePreview:
		desired.Spec.WithSelector(map[string]string{appv1.TrackLabel: appv1.TrackCanary})
	default:
		return desired, false, nil
	}
	delete(desired.Annotations, controller.AppliedConfigHashAnnotation)
	desired, err := controller.WithAppliedHash(desired)
	return desired, true, err
}

// promoting reports whether rollout state r of app is past its last step (a canary's)
// or stage (a blue-green rollout's): being promoted.
func promoting(app *appv1.App, r *appv1.RolloutStatus) bool {
	s, _ := rollout.Strategy(app.Spec.Rollout)
	return s != nil && r.CurrentStepIndex >= int32(len(s.Steps))
}

package soak

import (
	"context"
	"fmt"
	"slices"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/app-controller/app-controller/internal/plugin"
	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// The kinds of App of the run (appRecord.kind): most have no strategy (""); some roll
// their pod template out as a canary, some are autoscaled. The operations of the
// churn that are not about rollouts or autoscaling (image, env, routes, shard moves,
// rollbacks, break and fix, create and delete) take only Apps without either, so that
// the writes they cost keep the exact-write tests' figures.
const (
	// kindGate: a canary whose steps wait for kubectl app promote (gateSteps): the
	// driver walks it, with the plugin's promote, pause and resume.
	kindGate = "canary-gate"
	// kindTimed: a canary whose steps go on by themselves (timedSteps); its pods take
	// their env from a ConfigMap, which the churn changes during its rollouts.
	kindTimed = "canary-timed"
	// kindAutoscaled: an App with spec.autoscaling, turned off and on by the churn.
	kindAutoscaled = "autoscaled"
)

// appKind is the kind of the i-th App made at the setup: a tenth of them gate canaries
// twice over (i%10 = 1, 9), a tenth timed canaries (3), a tenth autoscaled (7); the
// routes are at i%5 = 0.
func appKind(i int) string {
	switch i % 10 {
	case 1, 9:
		return kindGate
	case 3:
		return kindTimed
	case 7:
		return kindAutoscaled
	}
	return ""
}

// Operations on the canaries and the autoscaled Apps.
const (
	// opCanary: a healthy new version (the next image): a gate canary walked through
	// its steps (promote at each pause; pause and resume every other time), a timed
	// one left to walk them.
	opCanary = "canary"
	// opCanaryCrash: a version whose canary pod cannot run (an image that does not
	// exist; on a real node, every other time, a container that exits at once): the
	// rollout aborts by itself, the App says RolloutAborted.
	opCanaryCrash = "canary-crash"
	// opCanaryAbort: a healthy version, aborted by kubectl app abort at its first pause.
	opCanaryAbort = "canary-abort"
	// opCanaryFix: an aborted rollout ended, in turn: a fast rollback (kubectl app
	// rollback to the stable revision), or the steps again (kubectl app promote, for a
	// version that was healthy) or a new healthy version (for one that was broken).
	opCanaryFix = "canary-fix"
	// opCanaryRollback: a healthy version rolled back (kubectl app rollback) at its
	// first pause: the fast rollback, no step.
	opCanaryRollback = "canary-rollback"
	// opCanaryConfig: a timed canary given a new image, and while it rolls its
	// ConfigMap changed: the steps restart toward the newest template.
	opCanaryConfig = "canary-config"
	// opAutoscale: autoscaling turned off (replicas back to 1) or on (replicas unset,
	// minReplicas 2: the HorizontalPodAutoscaler takes the count to 2).
	opAutoscale = "autoscale"
)

// unpinnedOps are the operations whose writes no exact-write test pins (their writes
// per change are reported, and must not grow).
var unpinnedOps = []string{opBreak, opFix, opCanary, opCanaryCrash, opCanaryAbort, opCanaryFix, opCanaryRollback, opCanaryConfig,
	opAutoscale, opConfigMapCanary, opConfigMapAutoscaled, opCanaryAnalysisFail}

// The kinds a ConfigMap change is recorded as on Apps with a strategy or autoscaling.
const (
	opConfigMapCanary     = "configmap-canary"
	opConfigMapAutoscaled = "configmap-autoscaled"
)

// gateSteps and timedSteps are the canaries' steps.
func gateSteps() []appv1.CanaryStep {
	return []appv1.CanaryStep{{SetWeight: ptr.To[int32](25)}, {Pause: &appv1.CanaryPause{}}, {SetWeight: ptr.To[int32](75)}, {Pause: &appv1.CanaryPause{}}}
}

func timedSteps() []appv1.CanaryStep {
	return []appv1.CanaryStep{{SetWeight: ptr.To[int32](50)}, {Pause: &appv1.CanaryPause{Duration: &metav1.Duration{Duration: 10 * time.Second}}}}
}

// canaryReplicas are the canaries' replicas: two, so that their serving floor (two
// less a Deployment's default maxUnavailable of 25%, rounded down: two) is above what
// the canary's pods alone serve at a step (one at 25% and 50%), and a stable side
// dropped too early shows (floor.go).
const canaryReplicas = 2

// canaryScaleDown is the canaries' scaleDownDelaySeconds: short, so that an App at
// rest at the end of the run has had its canary deleted.
const canaryScaleDown = 5

// autoscaling is the autoscaled Apps' spec.autoscaling: from 2 to 3 replicas at 50% of
// a CPU request of 10m, scaled down after 30 s of lower recommendations (not the 5
// minutes of the default) so that a run of minutes sees the load's falls (load.go). On
// kwok no metric exists: the HorizontalPodAutoscaler only keeps the count within its
// range (it scales a Deployment of 1 to 2) and reports ScalingActive False.
func autoscaling() *appv1.Autoscaling {
	return &appv1.Autoscaling{MinReplicas: ptr.To[int32](2), MaxReplicas: 3, CPU: &appv1.ResourceTarget{AverageUtilization: ptr.To[int32](50)},
		Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](autoscalingScaleDownWindow)}}}
}

// autoscalingScaleDownWindow is the autoscaled Apps' scale-down stabilization window,
// in seconds.
const autoscalingScaleDownWindow = 30

// shape gives app, the i-th App of the setup, its kind's strategy or autoscaling.
func shape(app *appv1.App, kind string) {
	switch kind {
	case kindGate, kindTimed:
		steps := gateSteps()
		if kind == kindTimed {
			steps = timedSteps()
		}
		app.Spec.Rollout = &appv1.Rollout{Canary: &appv1.CanaryStrategy{Steps: steps, ScaleDownDelaySeconds: ptr.To[int32](canaryScaleDown)}}
		app.Spec.DeploymentTemplate.Replicas = ptr.To[int32](canaryReplicas)
	case kindAutoscaled:
		app.Spec.Autoscaling = autoscaling()
		app.Spec.DeploymentTemplate.Replicas = nil
		app.Spec.DeploymentTemplate.Resources = &appv1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}}
	}
}

// steadyAutoscaled tells whether r is the live autoscaled App of the lowest key, whose
// autoscaling the churn never turns off: the invariants of a fault that takes the
// autoscalers' metrics away judge the Apps autoscaled through its whole window, and the
// toggles of a few autoscaled Apps would otherwise leave none. The caller holds w.mu.
func (w *world) steadyAutoscaled(r *appRecord) bool {
	if r.kind != kindAutoscaled || !r.deleted.IsZero() {
		return false
	}
	for _, o := range w.apps {
		if o.kind == kindAutoscaled && o.deleted.IsZero() && o.key() < r.key() {
			return false
		}
	}
	return true
}

// isCanary tells whether r rolls out as a canary.
func (r *appRecord) isCanary() bool { return r.kind == kindGate || r.kind == kindTimed }

// rolloutOf is r's status.rollout as last delivered (nil if none), and whether that
// status is of r's latest generation: the App delivered is of the generation the driver
// wrote last (or a later one), and its status observed it. (Right after the driver's
// write the informer still holds the App before it, whose status is of its own
// generation: an abort there is the rollout before, not this one.)
func rolloutOf(r *appRecord) (*appv1.RolloutStatus, bool) {
	if r.latest == nil {
		return nil, false
	}
	written := len(r.gens) == 0 || r.latest.Generation >= r.lastGen().generation
	return r.latest.Status.Rollout, written && r.latest.Status.ObservedGeneration == r.latest.Generation
}

// nextImage gives a the next good image (demoapp again for an analyzed canary) and its
// env var's next value: a pod template
// it never ran (an image alone cycles through three, and a template among the last
// rollbackWindow stable ones goes to the stable Deployment at once, without steps).
func (d *driver) nextImage(a *appv1.App) {
	setEnv(a, 1)
	t := a.Spec.DeploymentTemplate
	if analyzed(a) && d.images.analysis != nil {
		d.images.analysis.healthy(t) // the env var makes it new
		return
	}
	i := slices.Index(d.images.good, t.Image)
	t.Image = d.images.good[(i+1)%len(d.images.good)]
	t.Args = d.images.args
	t.PodAnnotations = nil
}

// opCanary gives a canary a healthy new version and, for a gate, walks it.
func (d *driver) opCanary(ctx context.Context) error {
	r := d.pickKind([]string{kindGate, kindTimed}, func(r *appRecord) bool { return !d.broken(r) })
	if r == nil {
		return errSkipped
	}
	defer d.release(r)
	if err := d.update(ctx, r, opCanary, func(_ *appRecord, a *appv1.App) { d.nextImage(a) }); err != nil {
		return err
	}
	if r.kind == kindGate {
		return d.walk(ctx, r, d.turn(opCanary+"-pause")%2 == 0, "")
	}
	return nil
}

// opCanaryCrash gives a canary a version whose pod cannot run.
func (d *driver) opCanaryCrash(ctx context.Context) error {
	r := d.pickKind([]string{kindGate, kindTimed}, func(r *appRecord) bool { return !d.broken(r) })
	if r == nil {
		return errSkipped
	}
	defer d.release(r)
	return d.update(ctx, r, opCanaryCrash, func(_ *appRecord, a *appv1.App) { d.breakPods(a) })
}

// opCanaryAbort gives a gate canary a healthy version and aborts it at its first pause.
func (d *driver) opCanaryAbort(ctx context.Context) error {
	return d.atFirstPause(ctx, opCanaryAbort, func(r *appRecord) error {
		if err := d.request(ctx, r, appv1.RolloutActionAbort); err != nil {
			return err
		}
		d.w.expectNow(r, appv1.ReasonRolloutAborted)
		return d.waitConverged(ctx, r)
	})
}

// opCanaryRollback gives a gate canary a healthy version and, at its first pause, rolls
// it back (kubectl app rollback): the stable revision, at once.
func (d *driver) opCanaryRollback(ctx context.Context) error {
	return d.atFirstPause(ctx, opCanaryRollback, func(r *appRecord) error {
		return d.rollback(ctx, r, opCanaryRollback)
	})
}

// atFirstPause picks a healthy gate canary, gives it the next image, waits until its
// rollout waits at its first pause and calls then.
func (d *driver) atFirstPause(ctx context.Context, op string, then func(*appRecord) error) error {
	return d.withNewImage(ctx, kindGate, op, "its first pause", func(ro *appv1.RolloutStatus) bool {
		return ro.Phase == appv1.RolloutPaused && ro.CurrentStepIndex == 1
	}, func(r *appRecord) error {
		d.linger()
		return then(r)
	})
}

// withNewImage picks a healthy canary of kind, gives it the next image (the change op),
// waits until its rollout is what reached says (what names it in errors), and calls
// then, before the App is released.
func (d *driver) withNewImage(ctx context.Context, kind, op, what string, reached func(*appv1.RolloutStatus) bool, then func(*appRecord) error) error {
	r := d.pickKind([]string{kind}, func(r *appRecord) bool { return !d.broken(r) })
	if r == nil {
		return errSkipped
	}
	defer d.release(r)
	if err := d.update(ctx, r, op, func(_ *appRecord, a *appv1.App) { d.nextImage(a) }); err != nil {
		return err
	}
	if err := d.waitRollout(ctx, r, what, reached); err != nil {
		return err
	}
	return then(r)
}

// opCanaryFix ends an aborted rollout: a fast rollback, or the steps again, or a new
// version, in turn.
func (d *driver) opCanaryFix(ctx context.Context) error {
	r := d.pickKind([]string{kindGate, kindTimed}, func(r *appRecord) bool {
		ro, _ := rolloutOf(r)
		return ro != nil && ro.Phase == appv1.RolloutAborted
	})
	if r == nil {
		return errSkipped
	}
	defer d.release(r)
	d.w.mu.Lock()
	broken := d.broken(r)
	aborted := ""
	if ro, _ := rolloutOf(r); ro != nil {
		aborted = canaryHash(ro)
	}
	d.w.mu.Unlock()
	switch {
	case d.turn(opCanaryFix)%2 == 0:
		return d.rollback(ctx, r, opCanaryFix)
	case broken:
		if err := d.update(ctx, r, opCanaryFix, func(_ *appRecord, a *appv1.App) { d.fixPods(a); d.nextImage(a) }); err != nil {
			return err
		}
	default:
		// kubectl app promote: the aborted rollout walks its steps again.
		d.w.expectNow(r, "")
		if err := d.request(ctx, r, appv1.RolloutActionPromote); err != nil {
			return err
		}
	}
	if r.kind == kindGate {
		return d.walk(ctx, r, false, aborted)
	}
	return nil
}

// rollback rolls r back to the revision before its current (kubectl app rollback) and
// waits until it converged.
func (d *driver) rollback(ctx context.Context, r *appRecord, op string) error {
	rolled, err := d.requestRollback(ctx, r, op)
	if err != nil {
		return err
	}
	if !rolled {
		return fmt.Errorf("rolling back App %s: its spec already is the previous revision's", r.key())
	}
	if r.kind == kindGate {
		return d.walk(ctx, r, false, "") // a template that never ran is a new rollout
	}
	return d.waitConverged(ctx, r)
}

// opCanaryConfig gives a timed canary a new image and, while it rolls, changes its
// ConfigMap (recorded for every App that references it).
func (d *driver) opCanaryConfig(ctx context.Context) error {
	return d.withNewImage(ctx, kindTimed, opCanaryConfig, "a rollout", func(ro *appv1.RolloutStatus) bool {
		return ro.Canary != nil && ro.Phase != appv1.RolloutAborted
	}, func(r *appRecord) error {
		d.w.mu.Lock()
		var cm string
		for _, e := range r.latest.Spec.DeploymentTemplate.EnvFrom {
			if e.ConfigMapRef != nil {
				cm = e.ConfigMapRef.Name
			}
		}
		d.w.mu.Unlock()
		if cm == "" {
			return fmt.Errorf("App %s references no ConfigMap", r.key())
		}
		return d.changeConfigMap(ctx, key(r.namespace, cm))
	})
}

// opAutoscale turns autoscaling off (replicas 1, in the same change) or on (replicas
// unset) on an autoscaled App, but the steady one (steadyAutoscaled).
func (d *driver) opAutoscale(ctx context.Context) error {
	r := d.pickKind([]string{kindAutoscaled}, func(r *appRecord) bool { return !d.w.steadyAutoscaled(r) })
	if r == nil {
		return errSkipped
	}
	defer d.release(r)
	return d.update(ctx, r, opAutoscale, func(_ *appRecord, a *appv1.App) {
		if a.Spec.Autoscaling != nil {
			a.Spec.Autoscaling = nil
			a.Spec.DeploymentTemplate.Replicas = ptr.To[int32](1)
			return
		}
		a.Spec.Autoscaling = autoscaling()
		a.Spec.DeploymentTemplate.Replicas = nil
	})
}

// walk drives a gate canary's rollout to its end: at each pause until promoted it
// lingers a moment (a person reading kubectl app status) and promotes (at the last
// pause of a canary with analysis, once a measurement of it passed); with
// pauseResume, at its last pause it first pauses and resumes it (kubectl app pause,
// resume). It returns once the App converged. An abort of the rollout whose canary is
// stale (the one aborted before the change or request that started this walk: a status
// of the new generation may still show it) is not this rollout's.
func (d *driver) walk(ctx context.Context, r *appRecord, pauseResume bool, stale string) error {
	for {
		d.w.mu.Lock()
		done := r.convergedNow()
		ro, current := rolloutOf(r)
		var steps int32
		if r.latest != nil && r.latest.Spec.Rollout != nil && r.latest.Spec.Rollout.Canary != nil {
			steps = int32(len(r.latest.Spec.Rollout.Canary.Steps))
		}
		withAnalysis := r.latest != nil && analyzed(r.latest)
		d.w.mu.Unlock()
		switch {
		case done:
			return nil
		case ro != nil && current && ro.Phase == appv1.RolloutAborted && (stale == "" || canaryHash(ro) != stale):
			return fmt.Errorf("walking the rollout of App %s: aborted (%s: %s)", r.key(), ro.AbortReason, ro.AbortMessage)
		case ro != nil && current && ro.Phase == appv1.RolloutPaused && ro.Canary != nil && ro.CurrentStepIndex < steps &&
			(!withAnalysis || ro.CurrentStepIndex < steps-1 || analysisPassed(ro)):
			// A canary with analysis is promoted at its last pause once its analysis
			// passed (a person reads it in kubectl app status first).
			d.linger()
			if pauseResume && ro.CurrentStepIndex == steps-1 && !ro.PausedByRequest {
				pauseResume = false
				if err := d.request(ctx, r, appv1.RolloutActionPause); err != nil {
					return err
				}
				d.linger()
				if err := d.request(ctx, r, appv1.RolloutActionResume); err != nil {
					return err
				}
				continue
			}
			if ro.PausedByRequest {
				if err := d.request(ctx, r, appv1.RolloutActionResume); err != nil {
					return err
				}
				continue
			}
			if err := d.request(ctx, r, appv1.RolloutActionPromote); err != nil {
				return err
			}
			continue
		}
		select {
		case <-ctx.Done():
			d.w.mu.Lock()
			state := describeState(r)
			d.w.mu.Unlock()
			return fmt.Errorf("walking the rollout of App %s: %w; %s", r.key(), ctx.Err(), state)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// linger waits from half a second to two, as a person between two commands.
func (d *driver) linger() {
	time.Sleep(500*time.Millisecond + time.Duration(d.intn(1500))*time.Millisecond)
}

// request makes the rollout request action on r (the plugin's RequestRollout, as
// kubectl app promote, abort, pause and resume do) and waits until the controller
// handled it (its id in status.rollout.lastRequest).
func (d *driver) request(ctx context.Context, r *appRecord, action appv1.RolloutAction) error {
	var res *plugin.RolloutRequestResult
	err := retryThroughFaults(ctx, func() error {
		var err error
		res, err = plugin.RequestRollout(ctx, d.plugin, r.namespace, r.name, action, time.Now())
		return err
	})
	if err != nil {
		return fmt.Errorf("kubectl app %s of App %s: %w", action, r.key(), err)
	}
	d.w.record(r, "request-"+string(action), time.Now())
	return d.waitRollout(ctx, r, "request "+res.Request.ID+" handled", func(ro *appv1.RolloutStatus) bool {
		return ro.LastRequest == res.Request.ID
	})
}

// waitRollout waits until r's status.rollout, of its latest generation, satisfies ok.
func (d *driver) waitRollout(ctx context.Context, r *appRecord, what string, ok func(*appv1.RolloutStatus) bool) error {
	for {
		d.w.mu.Lock()
		ro, current := rolloutOf(r)
		done := ro != nil && current && ok(ro)
		d.w.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			d.w.mu.Lock()
			state := describeState(r)
			d.w.mu.Unlock()
			return fmt.Errorf("waiting for %s of App %s: %w; %s", what, r.key(), ctx.Err(), state)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// get reads r's App, retrying through faults.
func (d *driver) get(ctx context.Context, r *appRecord) (*appv1.App, error) {
	var a *appv1.App
	err := retryThroughFaults(ctx, func() error {
		var err error
		a, err = d.apps.AppcontrollerV1().Apps(r.namespace).Get(ctx, r.name, metav1.GetOptions{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading App %s: %w", r.key(), err)
	}
	return a, nil
}

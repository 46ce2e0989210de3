package app

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
)

// appChildren is the table of the kinds of child an App has. syncApp syncs every kind
// of the table, in parallel; the status lists their name conflicts in this order.
// Adding a kind is an entry here and its file (child_*.go): a constructor that wires
// its informers, and an appChild.
var appChildren = []func(c *Controller, inf Informers, opts Options) (appChild, error){
	newDeploymentChild,
	newServiceChild,
	newBudgetChild,
	newRouteChild,
	newCanaryChild,
	newStableServiceChild,
	newCanaryServiceChild,
	newPreviewServiceChild,
	newPreviewRouteChild,
	newAutoscalerChild,
	newConfigCopyChild,
}

// syncApp makes the children of the App named key match its spec and writes what it
// observed to the App's status. It is level-triggered: it compares the desired state
// with the cached state of the world, whatever event queued it, and writes nothing when
// they agree. Its steps (the package comment names the file of each): the input the
// children read; the revision of the spec and every kind of child of appChildren, in
// parallel (with spec.rollout, the revision first, then the canary rollout's state,
// written before the children, and the plan they follow); then the contested children,
// the pods' first problem, the status computed from the children's outcomes and written
// or held back.
func (c *Controller) syncApp(ctx context.Context, key cache.ObjectName) (controller.Result, error) {
	logger := klog.FromContext(ctx)
	start := c.clock.Now()
	defer func() {
		logger.V(4).Info("Finished syncing App", "duration", c.clock.Since(start))
	}()

	app, exists, err := c.getApp(key)
	if err != nil {
		return controller.Result{}, err
	}
	if !exists {
		// deleteApp forgot what was held back for it.
		logger.V(4).Info("App no longer exists")
		return controller.Result{}, nil
	}
	if app.DeletionTimestamp != nil {
		// The garbage collector deletes the children; recreating them would fight it.
		return controller.Result{}, nil
	}
	if msg := c.refusedServiceAccount(app); msg != "" {
		held, err := c.refuse(ctx, key, app, appv1.ReasonServiceAccountRefused, msg)
		return controller.RequeueAfter(held), err
	}

	in, err := c.input(app)
	if err != nil {
		return controller.Result{}, err
	}
	ctx = c.withLiveCheck(ctx, app)
	res, err := c.syncWrites(ctx, key, app, in)
	if errors.Is(err, errAppGone) {
		// Deleted since the cache last saw it: the garbage collector is deleting its
		// children, and the informer's delete is on its way.
		logger.V(2).Info("App deleted meanwhile: nothing created or reported for it")
		return controller.Result{}, nil
	}
	return res, err
}

// syncWrites is syncApp's writes: the revision, the children and the status of app,
// whose children read in.
func (c *Controller) syncWrites(ctx context.Context, key cache.ObjectName, app *appv1.App, in *syncInput) (controller.Result, error) {
	// The children and the revision are independent: written in parallel, a new App
	// costs one round trip before its status rather than one per child. A canary
	// rollout names its versions by revision, and writes its state before the children
	// (rolloutsync.go): the revision comes first.
	var (
		revision       string
		revisionErr    error
		err            error
		rolloutRequeue time.Duration
		wg             sync.WaitGroup
	)
	if app.Spec.Rollout != nil {
		if revision, err = c.revisions.ensure(ctx, app); err != nil {
			return controller.Result{}, err
		}
		if app, in.rollout, rolloutRequeue, err = c.syncRollout(ctx, key, app, in, revision); err != nil {
			return controller.Result{}, err
		}
	} else {
		wg.Go(func() { revision, revisionErr = c.revisions.ensure(ctx, app) })
	}
	outcomes, err := c.syncChildren(ctx, app, in)
	wg.Wait()
	if err != nil {
		return controller.Result{}, err
	}
	if errors.Is(revisionErr, errAppGone) {
		return controller.Result{}, revisionErr
	}
	if in.rollout != nil && slices.ContainsFunc(outcomes, func(o childOutcome) bool { return o.changed }) {
		// A step's writes may complete it, and their echoes queue nothing (an HTTPRoute's
		// weights): the next sync looks.
		rolloutRequeue = controller.RequeueAfter(rolloutRequeue, rolloutRecheck).RequeueAfter
	}

	contests, contestRequeue := c.reportContests(app)
	now := metav1.NewTime(c.clock.Now())
	deployment := rolloutOf(outcomes)
	d, _ := deployment.obj.(*appsv1.Deployment)
	problem, podRecheck := c.podProblem(app, in.selector, d, now.Time)
	if p := in.config.problem; p != nil && d != nil {
		problem = p // what the pods wait for, before what they show of it
	}
	status := computeStatus(app, in.selector, deployment, outcomes, problem, now)
	c.reportChildren(app, status, outcomes, now)
	if revision != "" {
		status.CurrentRevision = revision
	}
	setContested(status, app, contests, now)
	status.Rollout = nil
	if p := in.rollout; p != nil {
		status.Rollout = p.state
		setRolloutConditions(status, app, now)
	}
	c.recordEvents(app, status, outcomes)
	held, err := c.updateStatus(ctx, key, app, status)
	if p := in.rollout; p != nil && held == 0 && err == nil {
		c.emitRolloutNotes(ctx, app, p.notes)
	}
	// A revision that could not be recorded does not hold back the children or the
	// status; the sync is retried for it.
	return controller.RequeueAfter(contestRequeue, held, podRecheck, rolloutRequeue, childRecheck(outcomes)), errors.Join(err, revisionErr)
}

// input computes what the children read: the pods' selector, their config, and the
// App's live Deployment with the config hashes it must carry.
func (c *Controller) input(app *appv1.App) (*syncInput, error) {
	config, err := c.podConfig(app)
	if err != nil {
		return nil, err
	}
	live := c.liveDeployment(app)
	return &syncInput{selector: selectorLabels(app), config: config, live: live, hashes: rolloutHashes(config.hash, live)}, nil
}

// syncChildren syncs every kind of child of app, in parallel, and returns their outcomes
// in the order of c.children, or the errors of those that failed.
func (c *Controller) syncChildren(ctx context.Context, app *appv1.App, in *syncInput) ([]childOutcome, error) {
	outcomes := make([]childOutcome, len(c.children))
	errs := make([]error, len(c.children))
	var wg sync.WaitGroup
	for i, child := range c.children {
		wg.Go(func() { outcomes[i], errs[i] = child.sync(ctx, app, in) })
	}
	wg.Wait()
	return outcomes, errors.Join(errs...)
}

// childRecheck returns the soonest recheck of outcomes, 0 if none asks for one.
func childRecheck(outcomes []childOutcome) time.Duration {
	var soonest time.Duration
	for _, o := range outcomes {
		if o.recheck > 0 && (soonest == 0 || o.recheck < soonest) {
			soonest = o.recheck
		}
	}
	return soonest
}

// rolloutOf returns the outcome of the App's Deployment among outcomes (rollout), or
// the zero outcome.
func rolloutOf(outcomes []childOutcome) childOutcome {
	for _, o := range outcomes {
		if o.rollout {
			return o
		}
	}
	return childOutcome{}
}

// refusedServiceAccount says why app may not have its pods run as the ServiceAccount it
// names, or "" when it may: the controller's own, in the controller's namespace, would
// hand any App there the controller's cluster-wide rights.
func (c *Controller) refusedServiceAccount(app *appv1.App) string {
	own, t := c.ownServiceAccount, app.Spec.DeploymentTemplate
	if own.Name == "" || t == nil || app.Namespace != own.Namespace {
		return ""
	}
	sa := t.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	if sa != own.Name {
		return ""
	}
	return fmt.Sprintf("deploymentTemplate.serviceAccountName %q is the controller's own ServiceAccount in namespace %q: an App may not run its pods with the controller's rights; name another ServiceAccount", sa, own.Namespace)
}

// refuse reports in app's status that the controller will not act on it, for reason
// (Ready False, Stalled True), with a Warning Event when that is new, and leaves its
// children as they are.
func (c *Controller) refuse(ctx context.Context, key cache.ObjectName, app *appv1.App, reason, msg string) (time.Duration, error) {
	now := metav1.NewTime(c.clock.Now())
	status := app.Status.DeepCopy()
	status.ObservedGeneration = app.Generation
	c.warnOnChange(app, appv1.ConditionReady, reason, msg)
	msg = controller.TruncateMessage(msg)
	setCondition(status, app, now, appv1.ConditionReady, metav1.ConditionFalse, reason, msg)
	setCondition(status, app, now, appv1.ConditionProgressing, metav1.ConditionFalse, reason, msg)
	setCondition(status, app, now, appv1.ConditionStalled, metav1.ConditionTrue, reason, msg)
	meta.RemoveStatusCondition(&status.Conditions, appv1.ConditionReconciling)
	return c.updateStatus(ctx, key, app, status)
}

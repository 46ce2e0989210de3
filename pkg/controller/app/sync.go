package app

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	newAutoscalerChild,
}

// appChild is one kind of child of an App. Its file says, once: the child's name, how
// its desired object is built, which App wins the name, and what the App's status says
// of it (childOutcome).
type appChild interface {
	// claim returns the claim index key ("Kind/namespace/name") of the name app gives
	// this child: the oldest App that claims it wins it (childReconciler.reconcile,
	// claims.go). "" when no other App can claim it (the route is named as its App) or
	// app asks for no such child.
	claim(app *appv1.App) string
	// sync makes app's child of this kind what app asks for, given what the steps before
	// the children computed (in), and says what it found. It runs in parallel with the
	// other kinds' sync: it reads in and the caches, never another child's outcome.
	sync(ctx context.Context, app *appv1.App, in *syncInput) (childOutcome, error) //nolint:revive // a method's name is only reached through a value, never in scope: it shadows no import
}

// syncInput is what syncApp computes before the children, for any child to read. A
// child whose desired state depends on another step (the config hash, the live
// Deployment, its rollout) reads it here; a new dependency is a field here, computed in
// input.
type syncInput struct {
	// selector are the labels that select the App's pods.
	selector map[string]string
	// config is the state of the ConfigMaps and Secrets the pods reference (config.go).
	config podConfig
	// live is the Deployment the App controls under the name its spec gives, as cached
	// (nil: none yet); deploymentRollout(live) tells how far its rollout is.
	live *appsv1.Deployment
	// hashes are the config hashes the App's Deployment carries (config.go).
	hashes configHashes
	// rollout is the plan of the App's canary rollout (rolloutsync.go): the stable
	// Deployment's template and replicas, the canary Deployment, the HTTPRoute's
	// weights; nil when the App has none.
	rollout *rolloutPlan
}

// childOutcome is what syncing one kind of child found, in the terms of the App's status.
type childOutcome struct {
	// name is the name the App wants for the child; "" when it asks for none.
	name string
	// obj is the child the App controls under name, nil if none.
	obj metav1.Object
	// conflict says why the name is not the App's (NamesAccepted=False, and the
	// ErrResourceExists Event naming name); "" when it is.
	conflict string
	// changed tells whether the sync wrote to the API server (the Synced Event).
	changed bool
	// rollout marks the App's Deployment: its rollout is what Progressing and Ready
	// report, and its pods' problems what Ready names (status.go, pods.go).
	rollout bool
	// readyNote, if not empty, is added to Ready's message when the App is Ready.
	readyNote string
	// conditions are the child's own conditions (none: it has none, or leaves them as they
	// are). A condition that is False, or Unknown and gatesReady, keeps the App from Ready.
	conditions []childCondition
	// recheck, if not 0, is when what the child reports changes by itself (a grace that
	// ends): the sync runs again then.
	recheck time.Duration
	// report sets the status fields that describe the child (status.serviceStatus,
	// status.route), to their zero value when there is no child.
	report func(status *appv1.AppStatus)
}

// childCondition is a condition of the App that a child reports (RouteAccepted).
type childCondition struct {
	conditionType string
	// status "" removes the condition: the App asks for no such child.
	status          metav1.ConditionStatus
	reason, message string
	// warn emits a Warning Event with the reason and message when the condition does not
	// say them yet: the user must act.
	warn bool
	// informational: Unknown does not keep the App from Ready (an autoscaler that has
	// not reported yet).
	informational bool
}

// syncApp makes the children of the App named key match its spec and writes what it
// observed to the App's status. It is level-triggered: it compares the desired state
// with the cached state of the world, whatever event queued it, and writes nothing when
// they agree. Its steps: the input the children read (config.go), the revision of the
// spec and every kind of child of appChildren (child_*.go, through children.go), in
// parallel (with spec.rollout, the revision first, then the canary rollout's state,
// written before the children, and the plan they follow: rolloutsync.go, on the engine
// of pkg/rollout); then the contested children (contest.go), the pods' first problem
// (pods.go), the status computed from the children's outcomes (status.go) and written or
// held back (statuswrite.go). The files it reads follow it in the order it calls them,
// none calling back into an earlier one (the package comment lists them).
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

// liveDeployment returns the cached Deployment app controls under the name its spec
// gives, or nil.
func (c *Controller) liveDeployment(app *appv1.App) *appsv1.Deployment {
	t := app.Spec.DeploymentTemplate
	if t == nil {
		return nil
	}
	return c.controlledDeployment(app, t.Name)
}

// controlledDeployment returns the cached Deployment name of app's namespace if app
// controls it, else nil.
func (c *Controller) controlledDeployment(app *appv1.App, name string) *appsv1.Deployment {
	obj, exists, err := c.deployments.managed.GetByKey(app.Namespace + "/" + name)
	if err != nil || !exists {
		return nil
	}
	d, ok := obj.(*appsv1.Deployment)
	if !ok || !controller.IsControlledBy(d, app) {
		return nil
	}
	return d
}

// errAppGone is the error of a write that would have created an object for an App the
// API server no longer has (confirmLive), or of the status write of such an App.
var errAppGone = errors.New("the App no longer exists")

// liveCheckKey is the context key of a sync's liveCheck.
type liveCheckKey struct{}

// liveCheck asks the API server, once per sync, whether the App still exists.
type liveCheck struct {
	once  sync.Once
	check func(ctx context.Context) error
	err   error
}

// withLiveCheck returns ctx carrying the check that app still exists (confirmLive).
func (c *Controller) withLiveCheck(ctx context.Context, app *appv1.App) context.Context {
	return context.WithValue(ctx, liveCheckKey{}, &liveCheck{check: func(ctx context.Context) error {
		live, err := c.appClient.AppcontrollerV1().Apps(app.Namespace).Get(ctx, app.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return errAppGone
		case err != nil:
			return fmt.Errorf("reading App %s/%s before creating an object for it: %w", app.Namespace, app.Name, err)
		case live.UID != app.UID || live.DeletionTimestamp != nil:
			return errAppGone
		}
		return nil
	}})
}

// confirmLive is called before a write that creates an object for an App (a child or a
// revision the caches do not have): it reads the App from the API server, once per
// sync, and returns errAppGone if the App is gone or being deleted. When an App is
// deleted, the garbage collector deletes its children, and their delete events can
// reach the controller before the App's own: the sync they queue still finds the App in
// the cache, and would create its children and revision again, to be collected again
// (the soak's audit log showed it, test/soak). A create is rare (a new App, a new
// child, a repair): the read costs one request then, and none at a resync.
func confirmLive(ctx context.Context) error {
	lc, ok := ctx.Value(liveCheckKey{}).(*liveCheck)
	if !ok {
		return nil
	}
	lc.once.Do(func() { lc.err = lc.check(ctx) })
	return lc.err
}

// getApp returns the newest known state of an App: the informer's, or the controller's
// own last status write if the informer has not seen it yet.
func (c *Controller) getApp(key cache.ObjectName) (*appv1.App, bool, error) {
	obj, exists, err := c.apps.GetByKey(key.String())
	if err != nil || !exists {
		return nil, false, err
	}
	app, ok := obj.(*appv1.App)
	if !ok {
		return nil, false, fmt.Errorf("unexpected object %T in the App cache", obj)
	}
	return app, true, nil
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

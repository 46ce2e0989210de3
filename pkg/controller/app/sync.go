package app

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
)

// syncApp makes the children of the App named key match its spec and writes what it
// observed to the App's status. It is level-triggered: it compares the desired state
// with the cached state of the world, whatever event queued it, and writes nothing when
// they agree. Its steps are in the files that follow in this order: config.go (the
// ConfigMaps and Secrets the pods reference, which roll them when they change),
// desired.go (what the App asks for), revisions.go (the revision of its spec), claims.go (who wins each child name), children.go (one child:
// prune, lookup, write), contest.go (children another writer keeps changing),
// status.go (the status computed) and statuswrite.go (the status written, or held back).
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

	config, err := c.podConfig(app)
	if err != nil {
		return controller.Result{}, err
	}
	want, err := desiredState(app, rolloutHashes(config.hash, c.liveDeployment(app)))
	if err != nil {
		return controller.Result{}, err
	}
	routeRefused, err := c.routeRefusal(app)
	if err != nil {
		return controller.Result{}, err
	}
	if routeRefused != "" {
		want.route, want.routeName = nil, "" // its Ingress, if any, goes
	}
	deploymentWinner := c.nameWinner(app, "Deployment", want.deploymentName)
	serviceWinner := c.nameWinner(app, "Service", want.serviceName)

	// The two children are independent: write them in parallel, so that a new App costs
	// one round trip before its status rather than two.
	// The revision of the App's spec too.
	// The PodDisruptionBudget shares the Deployment's name, so the App that wins the
	// Deployment's name wins the budget's.
	var (
		deployment    childResult[*appsv1.Deployment]
		budget        childResult[*policyv1.PodDisruptionBudget]
		route         childResult[*networkingv1.Ingress]
		deploymentErr error
		budgetErr     error
		routeErr      error
		revision      string
		revisionErr   error
		wg            sync.WaitGroup
	)
	wg.Go(func() {
		deployment, deploymentErr = c.deployments.reconcile(ctx, app, want.deploymentName, want.deployment, deploymentWinner)
	})
	wg.Go(func() {
		revision, revisionErr = c.revisions.ensure(ctx, app)
	})
	wg.Go(func() {
		budget, budgetErr = c.disruptionBudgets.reconcile(ctx, app, want.budgetName, want.disruptionBudget, deploymentWinner)
	})
	wg.Go(func() {
		// The route's Ingress is named as the App: no other App claims that name.
		route, routeErr = c.ingresses.reconcile(ctx, app, want.routeName, want.route, app)
	})
	service, serviceErr := c.services.reconcile(ctx, app, want.serviceName, want.service, serviceWinner)
	wg.Wait()
	routeInvalid := ""
	if apierrors.IsInvalid(routeErr) {
		// The API server refused the route's Ingress: the message names the field; a
		// change of the App queues it again.
		routeInvalid, routeErr = routeErr.Error(), nil
	}
	if err := errors.Join(deploymentErr, serviceErr, budgetErr, routeErr); err != nil {
		return controller.Result{}, err
	}

	contests, contestRequeue := c.reportContests(app)
	now := metav1.NewTime(c.clock.Now())
	problem, podRecheck := c.podProblem(app, want.selector, deployment.obj, now.Time)
	if p := configProblem(config.missing); p != nil && deployment.obj != nil {
		problem = p // what the pods wait for, before what they show of it
	}
	status := computeStatus(app, want.selector, deployment, service, problem, now, budget.conflict, route.conflict)
	c.setRouteStatus(app, status, route, routeRefused, routeInvalid, now)
	if revision != "" {
		status.CurrentRevision = revision
	}
	status.DisruptionBudget = ""
	if budget.obj != nil {
		status.DisruptionBudget = budget.name
	}
	setContested(status, app, contests, now)
	c.recordConflicts(app, status, []string{deployment.conflict, service.conflict, budget.conflict, route.conflict}, []string{want.deploymentName, want.serviceName, want.budgetName, want.routeName})
	c.recordConfigNotFound(app, status)
	if deployment.changed || service.changed || budget.changed || route.changed {
		c.recorder.Event(app, corev1.EventTypeNormal, appv1.EventReasonSynced, appv1.EventMessageSynced)
	}
	held, err := c.updateStatus(ctx, key, app, status)
	// A revision that could not be recorded does not hold back the children or the
	// status; the sync is retried for it.
	return controller.RequeueAfter(contestRequeue, held, podRecheck), errors.Join(err, revisionErr)
}

// liveDeployment returns the cached Deployment app controls under the name its spec
// gives, or nil.
func (c *Controller) liveDeployment(app *appv1.App) *appsv1.Deployment {
	t := app.Spec.DeploymentTemplate
	if t == nil {
		return nil
	}
	obj, exists, err := c.deployments.managed.GetByKey(app.Namespace + "/" + t.Name)
	if err != nil || !exists {
		return nil
	}
	d, ok := obj.(*appsv1.Deployment)
	if !ok || !controller.IsControlledBy(d, app) {
		return nil
	}
	return d
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

// setRouteStatus sets status.route and the RouteAccepted condition from what reconciling
// the route found: refused (a host held by another namespace, with a Warning Event when
// that is new), invalid (the API server's refusal) or routed. Without a route, both go.
func (c *Controller) setRouteStatus(app *appv1.App, status *appv1.AppStatus, route childResult[*networkingv1.Ingress], refused, invalid string, now metav1.Time) {
	status.Route = ""
	if app.Spec.Route == nil {
		meta.RemoveStatusCondition(&status.Conditions, appv1.ConditionRouteAccepted)
		return
	}
	set := func(s metav1.ConditionStatus, reason, msg string) {
		setCondition(status, app, now, appv1.ConditionRouteAccepted, s, reason, controller.TruncateMessage(msg))
	}
	switch {
	case refused != "":
		c.warnOnChange(app, appv1.ConditionRouteAccepted, appv1.ReasonHostConflict, refused)
		set(metav1.ConditionFalse, appv1.ReasonHostConflict, refused)
	case invalid != "":
		set(metav1.ConditionFalse, appv1.ReasonRouteRefused, invalid)
	case route.conflict != "":
		set(metav1.ConditionFalse, appv1.ReasonNameConflict, route.conflict)
	case route.obj != nil:
		status.Route = route.name
		hosts := make([]string, 0, len(app.Spec.Route.Hosts))
		for _, h := range app.Spec.Route.Hosts {
			hosts = append(hosts, string(h))
		}
		set(metav1.ConditionTrue, appv1.ReasonRouted, fmt.Sprintf("Ingress %q routes %s to Service %q", route.name, strings.Join(hosts, ", "), app.Spec.ServiceTemplate.Name))
	}
}

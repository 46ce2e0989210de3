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
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1ac "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"

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
	rr := routeResult{parents: c.routeParents(app)}
	if rr.refused, err = c.routeRefusal(app); err != nil {
		return controller.Result{}, err
	}
	var wantHTTPRoute *gatewayv1ac.HTTPRouteApplyConfiguration
	httpRouteName := ""
	if rr.refused != "" || rr.parents != nil {
		want.route, want.routeName = nil, "" // its Ingress, if any, goes
	}
	if rr.refused == "" && rr.parents != nil && c.httpRoutes != nil {
		if wantHTTPRoute, err = DesiredHTTPRoute(app, rr.parents); err != nil {
			rr.invalid = err.Error()
		} else {
			httpRouteName = app.Name
		}
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
		deploymentErr error
		budgetErr     error
		routeErr      error
		httpRouteErr  error
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
		// The route's Ingress or HTTPRoute is named as the App: no other App claims
		// that name. The one the route is not is pruned.
		rr.ingress, routeErr = c.ingresses.reconcile(ctx, app, want.routeName, want.route, app)
		if c.httpRoutes != nil {
			rr.httpRoute, httpRouteErr = c.httpRoutes.reconcile(ctx, app, httpRouteName, wantHTTPRoute, app)
		}
	})
	service, serviceErr := c.services.reconcile(ctx, app, want.serviceName, want.service, serviceWinner)
	wg.Wait()
	for _, err := range []*error{&routeErr, &httpRouteErr} {
		if apierrors.IsInvalid(*err) {
			// The API server refused the route's Ingress or HTTPRoute: the message
			// names the field; a change of the App queues it again.
			rr.invalid, *err = (*err).Error(), nil
		}
	}
	if err := errors.Join(deploymentErr, serviceErr, budgetErr, routeErr, httpRouteErr); err != nil {
		return controller.Result{}, err
	}

	contests, contestRequeue := c.reportContests(app)
	now := metav1.NewTime(c.clock.Now())
	problem, podRecheck := c.podProblem(app, want.selector, deployment.obj, now.Time)
	if p := configProblem(config.missing); p != nil && deployment.obj != nil {
		problem = p // what the pods wait for, before what they show of it
	}
	status := computeStatus(app, want.selector, deployment, service, problem, now, budget.conflict, rr.ingress.conflict, rr.httpRoute.conflict)
	c.setRouteStatus(app, status, rr, now)
	if revision != "" {
		status.CurrentRevision = revision
	}
	status.DisruptionBudget = ""
	if budget.obj != nil {
		status.DisruptionBudget = budget.name
	}
	setContested(status, app, contests, now)
	c.recordConflicts(app, status, []string{deployment.conflict, service.conflict, budget.conflict, rr.ingress.conflict, rr.httpRoute.conflict},
		[]string{want.deploymentName, want.serviceName, want.budgetName, want.routeName, httpRouteName})
	c.recordConfigNotFound(app, status)
	if deployment.changed || service.changed || budget.changed || rr.ingress.changed || rr.httpRoute.changed {
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

// routeResult is what reconciling an App's route found.
type routeResult struct {
	// parents are the Gateways the route attaches to as an HTTPRoute; nil: an Ingress.
	parents []appv1.GatewayRef
	// refused says which host is held by another namespace; invalid why the API server
	// (or the App's Service template) refuses the route's object.
	refused, invalid string
	ingress          childResult[*networkingv1.Ingress]
	httpRoute        childResult[*gatewayv1.HTTPRoute]
}

// setRouteStatus sets status.route and the RouteAccepted condition from what reconciling
// the route found: refused (a host held by another namespace, or a Gateway that did not
// accept the HTTPRoute, with a Warning Event when that is new), invalid (the API
// server's refusal), no Gateway API, a name conflict, waiting for a Gateway, or routed.
// A route not accepted keeps the App from Ready. Without a route, both go.
func (c *Controller) setRouteStatus(app *appv1.App, status *appv1.AppStatus, rr routeResult, now metav1.Time) {
	status.Route = ""
	r := app.Spec.Route
	if r == nil {
		meta.RemoveStatusCondition(&status.Conditions, appv1.ConditionRouteAccepted)
		return
	}
	set := func(s metav1.ConditionStatus, reason, msg string) {
		msg = controller.TruncateMessage(msg)
		setCondition(status, app, now, appv1.ConditionRouteAccepted, s, reason, msg)
		routeGatesReady(status, app, now, s, reason, msg)
	}
	hosts := make([]string, 0, len(r.Hosts))
	for _, h := range r.Hosts {
		hosts = append(hosts, string(h))
	}
	gateways := make([]string, 0, len(rr.parents))
	for _, p := range rr.parents {
		gateways = append(gateways, p.String(app.Namespace))
	}
	switch {
	case rr.refused != "":
		c.warnOnChange(app, appv1.ConditionRouteAccepted, appv1.ReasonHostConflict, rr.refused)
		set(metav1.ConditionFalse, appv1.ReasonHostConflict, rr.refused)
	case rr.invalid != "":
		set(metav1.ConditionFalse, appv1.ReasonRouteRefused, rr.invalid)
	case rr.parents != nil && c.httpRoutes == nil:
		set(metav1.ConditionFalse, appv1.ReasonGatewayAPIUnavailable, fmt.Sprintf(
			"the route attaches to Gateway %s, but the cluster did not serve gateway.networking.k8s.io/v1 HTTPRoutes when the controller started: install the Gateway API CRDs and restart the controller, or drop spec.route.parentRefs for an Ingress",
			strings.Join(gateways, ", ")))
	case rr.ingress.conflict != "" || rr.httpRoute.conflict != "":
		set(metav1.ConditionFalse, appv1.ReasonNameConflict, rr.ingress.conflict+rr.httpRoute.conflict)
	case rr.parents != nil && rr.httpRoute.obj != nil:
		status.Route = rr.httpRoute.name
		_, refused, pending := routeParentsStatus(rr.httpRoute.obj, app.Namespace, rr.parents)
		switch {
		case refused != "":
			c.warnOnChange(app, appv1.ConditionRouteAccepted, appv1.ReasonGatewayRefused, refused)
			set(metav1.ConditionFalse, appv1.ReasonGatewayRefused, refused)
		case pending != "":
			set(metav1.ConditionUnknown, appv1.ReasonRoutePending, pending)
		default:
			set(metav1.ConditionTrue, appv1.ReasonRouted, fmt.Sprintf("HTTPRoute %q, accepted by Gateway %s, routes %s to Service %q",
				rr.httpRoute.name, strings.Join(gateways, ", "), strings.Join(hosts, ", "), app.Spec.ServiceTemplate.Name))
		}
	case rr.ingress.obj != nil:
		status.Route = rr.ingress.name
		set(metav1.ConditionTrue, appv1.ReasonRouted, fmt.Sprintf("Ingress %q routes %s to Service %q", rr.ingress.name, strings.Join(hosts, ", "), app.Spec.ServiceTemplate.Name))
	}
}

// routeGatesReady makes an App whose route is not accepted (RouteAccepted s, for reason
// and msg) not Ready when it would be: Reconciling while a Gateway has not answered,
// Stalled when the route is refused (it waits for a change of the App, of the Gateway
// or of the namespace that holds a host).
func routeGatesReady(status *appv1.AppStatus, app *appv1.App, now metav1.Time, s metav1.ConditionStatus, reason, msg string) {
	if s == metav1.ConditionTrue || !meta.IsStatusConditionTrue(status.Conditions, appv1.ConditionReady) {
		return
	}
	setCondition(status, app, now, appv1.ConditionReady, metav1.ConditionFalse, reason, msg)
	if s == metav1.ConditionUnknown {
		setCondition(status, app, now, appv1.ConditionReconciling, metav1.ConditionTrue, reason, msg)
		return
	}
	setCondition(status, app, now, appv1.ConditionStalled, metav1.ConditionTrue, reason, msg)
}

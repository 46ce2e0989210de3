package app

import (
	"context"
	"errors"
	"fmt"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	autoscalingv2ac "k8s.io/client-go/applyconfigurations/autoscaling/v2"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1ac "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
)

// childObject is a kind of child an App has: *appsv1.Deployment, *corev1.Service,
// *policyv1.PodDisruptionBudget, *networkingv1.Ingress, *gatewayv1.HTTPRoute or
// *autoscalingv2.HorizontalPodAutoscaler.
type childObject interface {
	*appsv1.Deployment | *corev1.Service | *policyv1.PodDisruptionBudget | *networkingv1.Ingress | *gatewayv1.HTTPRoute |
		*autoscalingv2.HorizontalPodAutoscaler
	metav1.Object
	runtime.Object
}

// childApplyConfiguration is the apply configuration of a child kind.
type childApplyConfiguration interface {
	*appsv1ac.DeploymentApplyConfiguration | *corev1ac.ServiceApplyConfiguration | *policyv1ac.PodDisruptionBudgetApplyConfiguration |
		*networkingv1ac.IngressApplyConfiguration | *gatewayv1ac.HTTPRouteApplyConfiguration | *autoscalingv2ac.HorizontalPodAutoscalerApplyConfiguration
}

// childAPI is the part of a child kind's typed client (client-go's DeploymentInterface,
// ServiceInterface) the controller uses; A is the kind's apply configuration.
type childAPI[T childObject, A childApplyConfiguration] interface {
	Apply(ctx context.Context, desired A, opts metav1.ApplyOptions) (T, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error)
}

// childReconciler reconciles an App's child of one kind: T is the object, A its apply
// configuration.
type childReconciler[T childObject, A childApplyConfiguration] struct {
	kind string
	// managed holds the managed children (informer cache, newest of it and own writes).
	managed *controller.WriteCache
	// unmanaged holds the metadata of every other object of the kind.
	unmanaged cache.Indexer
	// client returns the kind's typed client for a namespace.
	client func(namespace string) childAPI[T, A]
	// empty returns the kind's apply configuration with only a name: applying it gives
	// back every field the controller alone owns (giveBack).
	empty func(name, namespace string) A
	// exclusivePatch, if set, returns a JSON patch that removes from live what others
	// added to the fields the App must own alone, or nil when there is nothing to remove.
	exclusivePatch func(live T, desired A) ([]byte, error)
	recorder       record.EventRecorder
	// trim is what the managed cache keeps of an object the controller wrote, as the
	// informer's transform does (controller.StripManagedFields unless the kind says
	// otherwise).
	trim func(obj metav1.Object)
	// contest paces the repairs of children that another writer keeps changing
	// (contest.go); nil: every drift is repaired at once.
	contest *contestTracker
	// apps is the App cache, whose claim index tells which App wins a name (claims.go).
	apps cache.Indexer
}

// newChildReconciler returns the reconciler of a kind of child whose managed objects
// managed watches (read through an own-writes cache) and the metadata of every other
// object of the kind unmanaged. It indexes both informers by controlling App, has their
// events queue the Apps concerned (childHandler, handlers.go) and adds them to c.synced.
// client is the kind's typed client (client-go's Deployments, Services); T, the
// object, must be given, the rest is inferred.
func newChildReconciler[T childObject, A childApplyConfiguration, C childAPI[T, A]](c *Controller, kind string, managed, unmanaged cache.SharedIndexInformer,
	client func(namespace string) C, empty func(name, namespace string) A) (*childReconciler[T, A], error) {
	k := &childReconciler[T, A]{
		kind:      kind,
		managed:   controller.NewWriteCache(managed.GetIndexer(), 0, c.clock),
		unmanaged: unmanaged.GetIndexer(),
		client:    func(namespace string) childAPI[T, A] { return client(namespace) },
		empty:     empty,
		trim:      func(obj metav1.Object) { obj.SetManagedFields(nil) },
		recorder:  c.recorder,
		contest:   c.contest,
		apps:      c.appIndexer,
	}
	for _, i := range []struct {
		informer cache.SharedIndexInformer
		writes   *controller.WriteCache
	}{{managed, k.managed}, {unmanaged, nil}} {
		if err := i.informer.AddIndexers(cache.Indexers{controllerIndex: indexByControllerUID}); err != nil {
			return nil, fmt.Errorf("adding the controller index to the %s informer: %w", kind, err)
		}
		if err := c.watch(i.informer, kind, c.childHandler(c.logger, kind, i.writes)); err != nil {
			return nil, err
		}
		c.synced = append(c.synced, i.informer.HasSynced)
	}
	childRepairs.WithLabelValues(kind).Add(0) // the series exists before the first repair
	return k, nil
}

// childResult is what reconciling one child found.
type childResult[T childObject] struct {
	// name is the name the App wants; "" when the App has no template for this kind.
	name string
	// obj is the child the App controls under that name, nil if none.
	obj T
	// conflict says why the name is not the App's; "" when it is.
	conflict string
	// changed tells whether the controller wrote to the API server.
	changed bool
}

// outcome returns r as the App's status reads it; the caller adds what is particular to
// its kind.
func (r childResult[T]) outcome() childOutcome {
	out := childOutcome{name: r.name, conflict: r.conflict, changed: r.changed}
	var none T
	if r.obj != none {
		out.obj = r.obj
	}
	return out
}

// nameHolder is what the caches know of the object holding a child name.
type nameHolder[T childObject] struct {
	// managed is the managed object of that name, nil if none.
	managed T
	// exists tells whether any object holds the name, managed or not.
	exists bool
	// ours tells whether the App controls it.
	ours bool
	// controller is its controller reference, nil if it has none or it is not known.
	controller *metav1.OwnerReference
}

// reconcile makes the App's child of this kind match desired (nil: no child wanted)
// under name: it prunes the children the App controls under other names, looks up who
// holds name, yields the name when another App that claims it (claim, "" when none can:
// claims.go) is older, never writes to an object the App does not control, then writes
// what differs.
func (k *childReconciler[T, A]) reconcile(ctx context.Context, app *appv1.App, name string, desired A, claim string) (childResult[T], error) {
	return k.reconcileWith(ctx, app, name, desired, claim, reconcileOptions{})
}

// reconcileOptions change how reconcileWith treats a child.
type reconcileOptions struct {
	// track is the value of the track label (appv1.TrackLabel) of the children this
	// entry of the children table reconciles: it prunes only those ("": the children
	// without the label). A canary rollout's Deployment and Services carry it, so the
	// App's own Deployment and Service and theirs never prune each other.
	track string
	// planned: the App's rollout changes the child from step to step at one generation
	// of the App: a write is a step, not a repair of drift (contest.go).
	planned bool
	// pruneReason says why a child under another name goes; "" says it was renamed or
	// removed in the App's spec.
	pruneReason string
}

// reconcileWith is reconcile with options.
func (k *childReconciler[T, A]) reconcileWith(ctx context.Context, app *appv1.App, name string, desired A, claim string, opts reconcileOptions) (childResult[T], error) {
	res := childResult[T]{name: name}
	pruned, err := k.prune(ctx, app, name, opts)
	res.changed = pruned
	if err != nil || name == "" {
		return res, err
	}

	holder, err := k.lookup(app, name)
	if err != nil {
		return res, err
	}
	if winner := nameWinner(k.apps, app, claim); winner.UID != app.UID {
		res.conflict = fmt.Sprintf("%s %q is also claimed by App %q, which is older", k.kind, name, winner.Name)
		if holder.managed != nil && holder.ours {
			// Give the name up to the older App.
			deleted, err := k.deleteOwned(ctx, app, holder.managed, "the name is claimed by older App "+winner.Name)
			res.changed = res.changed || deleted
			return res, err
		}
		return res, nil
	}
	if holder.exists && !holder.ours {
		res.conflict = k.describeHolder(name, holder.controller)
		return res, nil
	}

	obj, changed, conflict, err := k.write(ctx, app, name, holder, desired, opts.planned)
	res.obj, res.conflict = obj, conflict
	res.changed = res.changed || changed
	return res, err
}

// lookup returns what the caches know of the object named name in app's namespace.
func (k *childReconciler[T, A]) lookup(app *appv1.App, name string) (nameHolder[T], error) {
	key := cache.ObjectName{Namespace: app.Namespace, Name: name}.String()
	if obj, exists, err := k.managed.GetByKey(key); err != nil {
		return nameHolder[T]{}, fmt.Errorf("reading %s %s from the cache: %w", k.kind, key, err)
	} else if exists {
		managed, ok := obj.(T)
		if !ok {
			return nameHolder[T]{}, fmt.Errorf("unexpected object %T in the %s cache", obj, k.kind)
		}
		return nameHolder[T]{managed: managed, exists: true, ours: controller.IsControlledBy(managed, app),
			controller: metav1.GetControllerOfNoCopy(managed)}, nil
	}
	obj, exists, err := k.unmanaged.GetByKey(key)
	if err != nil {
		return nameHolder[T]{}, fmt.Errorf("reading %s %s from the cache: %w", k.kind, key, err)
	}
	if !exists {
		return nameHolder[T]{}, nil
	}
	meta, ok := obj.(metav1.Object)
	if !ok {
		return nameHolder[T]{exists: true}, nil
	}
	// The App's own child may be here if someone removed its managed-by label: applying
	// restores the label.
	return nameHolder[T]{exists: true, ours: controller.IsControlledBy(meta, app),
		controller: metav1.GetControllerOfNoCopy(meta)}, nil
}

// controlled returns the cached child named name in app's namespace (own writes
// included) if app controls it, else nil.
func (k *childReconciler[T, A]) controlled(app *appv1.App, name string) T {
	var none T
	obj, exists, err := k.managed.GetByKey(app.Namespace + "/" + name)
	if err != nil || !exists {
		return none
	}
	child, ok := obj.(T)
	if !ok || !controller.IsControlledBy(child, app) {
		return none
	}
	return child
}

// write makes the App's child named name, which holder describes and which is the
// App's or does not exist, match desired. It returns the child, whether it wrote, and a
// conflict when a create finds the name taken by an object the caches had not seen.
func (k *childReconciler[T, A]) write(ctx context.Context, app *appv1.App, name string, holder nameHolder[T], desired A, planned bool) (T, bool, string, error) {
	logger := klog.FromContext(ctx)
	var none T
	changed := false
	manager := "" // the other writer of a contested child (contest.go)
	if current := holder.managed; current != nil {
		upToDate, err := controller.UpToDate(current, desired)
		if err != nil {
			return none, false, "", fmt.Errorf("comparing %s %s/%s with the desired state: %w", k.kind, app.Namespace, name, err)
		}
		var exclusive []byte
		// A planned write that applies anyway takes back the fields it owns alone by
		// itself (server-side apply drops what it no longer sends); what someone else
		// added goes at the next sync, when the apply has nothing left to change.
		if k.exclusivePatch != nil && (upToDate || !planned) {
			if exclusive, err = k.exclusivePatch(current, desired); err != nil {
				return none, false, "", fmt.Errorf("comparing %s %s/%s with the desired state: %w", k.kind, app.Namespace, name, err)
			}
		}
		if upToDate && exclusive == nil {
			return current, false, "", nil
		}
		var wait bool
		if !planned {
			if wait, manager = k.gateRepair(ctx, app, name); wait {
				return current, false, "", nil // contested: the repair waits its backoff
			}
		}
		if exclusive != nil {
			// Server-side apply merges: it would keep what others added to these fields
			// (a Service port or selector key), which can even make the apply invalid.
			patched, err := k.client(app.Namespace).Patch(ctx, name, types.JSONPatchType, exclusive, metav1.PatchOptions{FieldManager: appv1.FieldManager})
			if err != nil {
				return none, false, "", fmt.Errorf("restoring the %s %s/%s fields the App owns alone: %w", k.kind, app.Namespace, name, err)
			}
			logger.V(2).Info("Removed foreign entries from owned fields", "kind", k.kind, "name", name)
			if upToDate {
				// Nothing else differed: the patch was the whole repair.
				if !planned {
					k.countRepair(app, name, holder, manager)
				}
				return k.remember(patched), true, "", nil
			}
			changed = true
		}
	}

	// Not known to exist: create it without force, so as not to take over the fields of
	// an object that a stale cache does not show yet.
	force := holder.exists
	if !holder.exists {
		if err := confirmLive(ctx); err != nil {
			return none, changed, "", err
		}
	}
	applied, err := k.client(app.Namespace).Apply(ctx, desired, metav1.ApplyOptions{FieldManager: appv1.FieldManager, Force: force})
	if err != nil {
		if !force {
			if conflict, found := k.liveHolder(ctx, app, name); found {
				return none, changed, conflict, nil
			}
		}
		return none, changed, "", fmt.Errorf("applying %s %s/%s: %w", k.kind, app.Namespace, name, err)
	}
	if !force && writtenByOthers(applied) {
		// The apply meant to create the child found an object the caches had not shown
		// yet, made by someone else, and merged into it without a conflict: give back
		// what it took, and leave the name to its holder.
		return none, true, k.giveBack(ctx, app, name, applied), nil
	}
	logger.V(2).Info("Applied child", "kind", k.kind, "name", name, "created", !holder.exists)
	if !planned {
		k.countRepair(app, name, holder, manager)
	}
	return k.remember(applied), true, "", nil
}

// writtenByOthers reports whether obj, just applied, carries fields another field
// manager wrote: it existed before the apply.
func writtenByOthers(obj metav1.Object) bool {
	for _, e := range obj.GetManagedFields() {
		if e.Manager != appv1.FieldManager && e.Subresource == "" {
			return true
		}
	}
	return false
}

// giveBack undoes an apply that merged into an object the App does not control: an
// empty apply configuration under the controller's field manager removes every field
// only it owns (its controller reference, its labels), and what the object's writer also
// set stays theirs. It returns the conflict to report.
func (k *childReconciler[T, A]) giveBack(ctx context.Context, app *appv1.App, name string, adopted T) string {
	logger := klog.FromContext(ctx)
	empty := k.empty(name, app.Namespace)
	if _, err := k.client(app.Namespace).Apply(ctx, empty, metav1.ApplyOptions{FieldManager: appv1.FieldManager}); err != nil {
		logger.Error(err, "Giving back the fields of an object the App does not control", "kind", k.kind, "name", name)
	} else {
		logger.V(2).Info("Gave back an object the App does not control", "kind", k.kind, "name", name)
	}
	owners := adopted.GetOwnerReferences()
	var other *metav1.OwnerReference
	for i := range owners {
		if owners[i].UID != app.UID && owners[i].Controller != nil && *owners[i].Controller {
			other = &owners[i]
		}
	}
	return k.describeHolder(name, other)
}

// remember records the controller's own write in the managed cache, so that a sync that
// runs before the informer sees it does not write again.
func (k *childReconciler[T, A]) remember(obj T) T {
	k.trim(obj)
	k.managed.Mutation(obj)
	return obj
}

// prune deletes the children of this kind of opts.track that app controls under any name
// but keep.
func (k *childReconciler[T, A]) prune(ctx context.Context, app *appv1.App, keep string, opts reconcileOptions) (bool, error) {
	var owned []interface{}
	for _, store := range []interface {
		ByIndex(indexName, indexedValue string) ([]interface{}, error)
	}{k.managed, k.unmanaged} {
		objs, err := store.ByIndex(controllerIndex, string(app.UID))
		if err != nil {
			return false, fmt.Errorf("listing the %ss of App %s: %w", k.kind, app.Name, err)
		}
		owned = append(owned, objs...)
	}
	changed := false
	for _, obj := range owned {
		meta, ok := obj.(metav1.Object)
		if !ok || meta.GetName() == keep || meta.GetLabels()[appv1.TrackLabel] != opts.track || meta.GetNamespace() != app.Namespace {
			continue
		}
		reason := opts.pruneReason
		switch {
		case reason != "":
		case keep == "":
			reason = "removed from the App's spec"
		default:
			reason = "renamed in the App's spec"
		}
		deleted, err := k.deleteOwned(ctx, app, meta, reason)
		changed = changed || deleted
		if err != nil {
			return changed, err
		}
	}
	return changed, nil
}

// deleteOwned deletes a child app controls. The UID precondition makes sure that an
// object created since under the same name is never deleted; the managed cache hides
// the deleted one until its informer delivers the deletion, so that it is deleted once.
func (k *childReconciler[T, A]) deleteOwned(ctx context.Context, app *appv1.App, obj metav1.Object, why string) (bool, error) {
	uid := obj.GetUID()
	err := k.client(obj.GetNamespace()).Delete(ctx, obj.GetName(), metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &uid},
	})
	switch {
	case apierrors.IsNotFound(err):
		k.managed.Deleting(obj) // already gone: the informer has yet to say so
		return false, nil
	case apierrors.IsConflict(err):
		return false, nil // replaced by an object that is not ours
	case err != nil:
		return false, fmt.Errorf("deleting %s %s/%s (%s): %w", k.kind, obj.GetNamespace(), obj.GetName(), why, err)
	}
	// Until the informer delivers the deletion, a sync no longer sees the object.
	k.managed.Deleting(obj)
	klog.FromContext(ctx).V(2).Info("Deleted child", "kind", k.kind, "name", obj.GetName(), "reason", why)
	k.recorder.Eventf(app, corev1.EventTypeNormal, appv1.EventReasonPruned, "Deleted %s %q: %s", k.kind, obj.GetName(), why)
	return true, nil
}

// liveHolder asks the API server, after a failed create, whether an object the App does
// not control holds the name (a cache that had not seen it yet).
func (k *childReconciler[T, A]) liveHolder(ctx context.Context, app *appv1.App, name string) (string, bool) {
	obj, err := k.client(app.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil || controller.IsControlledBy(obj, app) {
		return "", false
	}
	return k.describeHolder(name, metav1.GetControllerOfNoCopy(obj)), true
}

// describeHolder says who holds a child name, for the NamesAccepted condition.
func (k *childReconciler[T, A]) describeHolder(name string, ref *metav1.OwnerReference) string {
	if ref == nil {
		return fmt.Sprintf("%s %q already exists and is not managed by this App", k.kind, name)
	}
	return fmt.Sprintf("%s %q already exists and is controlled by %s %q", k.kind, name, ref.Kind, ref.Name)
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

package app

import (
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
)

// addApp queues a new App.
func (c *Controller) addApp(logger klog.Logger, obj interface{}) {
	app, ok := obj.(*appv1.App)
	if !ok {
		return
	}
	c.apps.Observed(app)
	logger.V(4).Info("App added", "app", klog.KObj(app))
	c.loop.Enqueue(cache.MetaObjectToName(app))
}

// updateApp queues a changed App, and the other Apps that claim a child name it claimed
// or claims now: a name it let go may be theirs now, and a name it now claims may have to
// be given up by a younger App that holds it.
//
// Periodic resyncs (same resourceVersion) queue every App: the resync is the safety net
// of a level-triggered controller (an event lost, a write that failed unseen), and it is
// cheap, since a sync of an App that is up to date reads caches and writes nothing.
// Updates that change only the App's status (most of them the controller's own status
// writes) are not queued: nothing the sync reads from the App changed.
func (c *Controller) updateApp(logger klog.Logger, old, cur interface{}) {
	oldApp, ok1 := old.(*appv1.App)
	curApp, ok2 := cur.(*appv1.App)
	if !ok1 || !ok2 {
		return
	}
	c.apps.Observed(curApp)
	key := cache.MetaObjectToName(curApp)
	if oldApp.ResourceVersion == curApp.ResourceVersion {
		logger.V(5).Info("Resync of App", "app", klog.KObj(curApp))
		c.loop.Enqueue(key)
		return
	}
	if statusOnly(oldApp, curApp) {
		return
	}
	logger.V(4).Info("App updated", "app", klog.KObj(curApp))
	c.loop.Enqueue(key)
	for _, claim := range sets.List(sets.New(c.claimKeys(oldApp)...).Insert(c.claimKeys(curApp)...)) {
		c.enqueueClaimants(claim, curApp.UID)
	}
}

// statusOnly reports whether an App update changed nothing the sync reads but the
// status: not the spec (generation), nor the metadata the children or the arbitration
// depend on.
func statusOnly(old, cur *appv1.App) bool {
	return old.Generation == cur.Generation &&
		old.UID == cur.UID &&
		old.DeletionTimestamp.Equal(cur.DeletionTimestamp) &&
		old.CreationTimestamp.Equal(&cur.CreationTimestamp) &&
		maps.Equal(old.Labels, cur.Labels) &&
		maps.Equal(old.Annotations, cur.Annotations) &&
		slices.Equal(old.Finalizers, cur.Finalizers) &&
		equality.Semantic.DeepEqual(old.OwnerReferences, cur.OwnerReferences)
}

// deleteApp queues a deleted App (its sync is a no-op) and the Apps waiting for the names
// it claimed.
func (c *Controller) deleteApp(logger klog.Logger, obj interface{}) {
	app, ok := controller.ObjectFromTombstone(obj).(*appv1.App)
	if !ok {
		return
	}
	c.apps.Deleted(obj)
	logger.V(4).Info("App deleted", "app", klog.KObj(app))
	key := cache.MetaObjectToName(app)
	c.loop.Forget(key)
	c.contest.forget(app.UID)
	c.revisions.forget(app.UID)
	c.statusPending.clear(key)
	c.loop.Enqueue(key)
	for _, claim := range c.claimKeys(app) {
		c.enqueueClaimants(claim, app.UID)
	}
}

// childHandler returns the event handler of a child informer of the given kind. Events
// queue the App that controls the child, never the child's own key. Adds and deletes
// also queue the Apps that claim the child's name: a delete may free the name for them.
// writes is the own-writes cache of a managed informer (typed, managed objects), nil for
// an informer of unmanaged metadata; it learns of every event before any App is queued.
func (c *Controller) childHandler(logger klog.Logger, kind string, writes *controller.WriteCache) cache.ResourceEventHandler {
	managed := writes != nil
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			if managed && writes.Observed(obj) {
				// The echo of the controller's own create: the sync that made it saw this
				// object in the API server's answer. Only the Apps that claim its name
				// must learn that it is taken.
				if o := controller.ObjectFromTombstone(obj); o != nil {
					var owner types.UID
					if ref := metav1.GetControllerOfNoCopy(o); ref != nil {
						owner = ref.UID
					}
					c.enqueueClaimants(claimKey(kind, o.GetNamespace(), o.GetName()), owner)
				}
				return
			}
			c.childChanged(logger, kind, "added", controller.ObjectFromTombstone(obj), true)
		},
		UpdateFunc: func(old, cur interface{}) {
			oldObj, curObj := controller.ObjectFromTombstone(old), controller.ObjectFromTombstone(cur)
			if oldObj == nil || curObj == nil || oldObj.GetResourceVersion() == curObj.GetResourceVersion() {
				return // periodic resync: the App's own resync re-examines it
			}
			echo := managed && writes.Observed(cur)
			oldRef, curRef := metav1.GetControllerOfNoCopy(oldObj), metav1.GetControllerOfNoCopy(curObj)
			ownerChanged := !controller.SameController(oldRef, curRef)
			if echo && !ownerChanged {
				return // the echo of the controller's own write, which its sync has seen
			}
			if ownerChanged {
				c.childChanged(logger, kind, "lost its controller", oldObj, true)
			}
			if managed || ownerChanged {
				c.childChanged(logger, kind, "updated", curObj, ownerChanged)
			}
		},
		DeleteFunc: func(obj interface{}) {
			if managed {
				writes.Deleted(obj)
			}
			c.childChanged(logger, kind, "deleted", controller.ObjectFromTombstone(obj), true)
		},
	}
}

// childChanged queues the App that controls obj and, if withClaimants, every App that
// claims obj's name.
func (c *Controller) childChanged(logger klog.Logger, kind, what string, obj metav1.Object, withClaimants bool) {
	if obj == nil {
		return
	}
	logger.V(4).Info("Child "+what, "kind", kind, "object", klog.KObj(obj))
	if app := c.resolveControllerRef(obj.GetNamespace(), metav1.GetControllerOfNoCopy(obj)); app != nil {
		c.loop.Enqueue(cache.MetaObjectToName(app))
	}
	if withClaimants {
		c.enqueueClaimants(claimKey(kind, obj.GetNamespace(), obj.GetName()), "")
	}
}

// resolveControllerRef returns the App that ref points to, or nil if ref is not an App's
// or that App no longer exists (a new App with the same name has another UID).
func (c *Controller) resolveControllerRef(namespace string, ref *metav1.OwnerReference) *appv1.App {
	app, _ := controller.ResolveControllerRef(ref, appKind, c.appLister.Apps(namespace).Get)
	return app
}

// enqueueClaimants queues every App that claims the child name claim, except skip.
func (c *Controller) enqueueClaimants(claim string, skip types.UID) {
	for _, app := range claimants(c.appIndexer, claim) {
		if app.UID != skip {
			c.loop.Enqueue(cache.MetaObjectToName(app))
		}
	}
}

// revisionHandler returns the event handler of the ControllerRevision informer: it
// keeps the own-writes cache current and queues the App whose revision was deleted (the
// current one is recreated).
func (c *Controller) revisionHandler(logger klog.Logger) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { c.revisions.cache.Observed(obj) },
		UpdateFunc: func(_, cur interface{}) { c.revisions.cache.Observed(cur) },
		DeleteFunc: func(obj interface{}) {
			c.revisions.cache.Deleted(obj)
			rev := controller.ObjectFromTombstone(obj)
			if rev == nil {
				return
			}
			if app := c.resolveControllerRef(rev.GetNamespace(), metav1.GetControllerOfNoCopy(rev)); app != nil {
				logger.V(4).Info("Revision deleted", "revision", klog.KObj(rev), "app", klog.KObj(app))
				c.loop.Enqueue(cache.MetaObjectToName(app))
			}
		},
	}
}

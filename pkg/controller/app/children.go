package app

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
)

// childObject is a kind of child an App has: *appsv1.Deployment or *corev1.Service.
type childObject interface {
	*appsv1.Deployment | *corev1.Service
	metav1.Object
	runtime.Object
}

// childAPI is the part of a child kind's typed client the controller uses. desired is
// the kind's apply configuration.
type childAPI[T childObject] interface {
	apply(ctx context.Context, desired any, force bool) (T, error)
	get(ctx context.Context, namespace, name string) (T, error)
	delete(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error
	// exclusivePatch returns a JSON patch that removes from live what others added to
	// the fields the App must own alone, or nil when there is nothing to remove.
	exclusivePatch(live T, desired any) ([]byte, error)
	patch(ctx context.Context, namespace, name string, jsonPatch []byte) (T, error)
}

// childClient reconciles one kind of child.
type childClient[T childObject] struct {
	kind string
	// managed holds the managed children (informer cache, newest of it and own writes).
	managed cache.MutationCache
	// unmanaged holds the metadata of every other object of the kind.
	unmanaged cache.Indexer
	client    childAPI[T]
	recorder  record.EventRecorder
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

// reconcile makes the App's child of this kind match desired (nil: no child wanted)
// under name. It deletes the children the App controls under other names, leaves alone
// any object it does not control, and gives a name claimed by several Apps to the oldest.
func (k *childClient[T]) reconcile(ctx context.Context, app *appv1.App, name string, desired any, claimants []*appv1.App) (childResult[T], error) {
	res := childResult[T]{name: name}

	pruned, err := k.prune(ctx, app, name)
	res.changed = pruned
	if err != nil {
		return res, err
	}
	if name == "" {
		return res, nil
	}

	key := cache.ObjectName{Namespace: app.Namespace, Name: name}.String()
	var current T
	if obj, exists, err := k.managed.GetByKey(key); err != nil {
		return res, fmt.Errorf("reading %s %s from the cache: %w", k.kind, key, err)
	} else if exists {
		current = obj.(T)
	}

	if winner := oldestApp(append(claimants, app)); winner.UID != app.UID {
		res.conflict = fmt.Sprintf("%s %q is also claimed by App %q, which is older", k.kind, name, winner.Name)
		if current != nil && isControlledBy(current, app) {
			// Give the name up to the older App.
			deleted, err := k.deleteOwned(ctx, app, current, "the name is claimed by older App "+winner.Name)
			res.changed = res.changed || deleted
			return res, err
		}
		return res, nil
	}

	force := true
	if current != nil {
		if !isControlledBy(current, app) {
			res.conflict = k.describeHolder(name, metav1.GetControllerOfNoCopy(current))
			return res, nil
		}
		upToDate, err := controller.UpToDate(current, desired)
		if err != nil {
			return res, fmt.Errorf("comparing %s %s with the desired state: %w", k.kind, key, err)
		}
		exclusive, err := k.client.exclusivePatch(current, desired)
		if err != nil {
			return res, fmt.Errorf("comparing %s %s with the desired state: %w", k.kind, key, err)
		}
		if upToDate && exclusive == nil {
			res.obj = current
			return res, nil
		}
		if exclusive != nil {
			// Server-side apply merges: it would keep what others added to these fields
			// (a Service port or selector key), which can even make the apply invalid.
			patched, err := k.client.patch(ctx, app.Namespace, name, exclusive)
			if err != nil {
				return res, fmt.Errorf("restoring the %s %s fields the App owns alone: %w", k.kind, key, err)
			}
			klog.FromContext(ctx).V(2).Info("Removed foreign entries from owned fields", "kind", k.kind, "name", name)
			res.changed = true
			if upToDate {
				// Nothing else differed: the patch was the whole repair.
				patched.SetManagedFields(nil)
				k.managed.Mutation(patched)
				res.obj = patched
				return res, nil
			}
		}
	} else if obj, exists, err := k.unmanaged.GetByKey(key); err != nil {
		return res, fmt.Errorf("reading %s %s from the cache: %w", k.kind, key, err)
	} else if exists {
		meta, ok := obj.(metav1.Object)
		if !ok || !isControlledBy(meta, app) {
			var ref *metav1.OwnerReference
			if ok {
				ref = metav1.GetControllerOfNoCopy(meta)
			}
			res.conflict = k.describeHolder(name, ref)
			return res, nil
		}
		// The App's own child, whose managed-by label was removed: applying restores it.
	} else {
		// Not known to exist: create it, without taking over fields of an object that a
		// stale cache does not show yet.
		force = false
	}

	applied, err := k.client.apply(ctx, desired, force)
	if err != nil {
		if !force {
			if holder, found := k.liveHolder(ctx, app, name); found {
				res.conflict = holder
				return res, nil
			}
		}
		return res, fmt.Errorf("applying %s %s: %w", k.kind, key, err)
	}
	klog.FromContext(ctx).V(2).Info("Applied child", "kind", k.kind, "name", name, "created", current == nil)
	applied.SetManagedFields(nil)
	k.managed.Mutation(applied)
	res.obj = applied
	res.changed = true
	return res, nil
}

// prune deletes the children of this kind that app controls under any name but keep.
func (k *childClient[T]) prune(ctx context.Context, app *appv1.App, keep string) (bool, error) {
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
		if !ok || meta.GetName() == keep || meta.GetNamespace() != app.Namespace {
			continue
		}
		reason := "renamed in the App's spec"
		if keep == "" {
			reason = "removed from the App's spec"
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
// object created since under the same name is never deleted.
func (k *childClient[T]) deleteOwned(ctx context.Context, app *appv1.App, obj metav1.Object, why string) (bool, error) {
	uid := obj.GetUID()
	err := k.client.delete(ctx, obj.GetNamespace(), obj.GetName(), metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &uid},
	})
	switch {
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return false, nil // already gone, or replaced by an object that is not ours
	case err != nil:
		return false, fmt.Errorf("deleting %s %s/%s (%s): %w", k.kind, obj.GetNamespace(), obj.GetName(), why, err)
	}
	klog.FromContext(ctx).V(2).Info("Deleted child", "kind", k.kind, "name", obj.GetName(), "reason", why)
	k.recorder.Eventf(app, corev1.EventTypeNormal, appv1.EventReasonPruned, "Deleted %s %q: %s", k.kind, obj.GetName(), why)
	return true, nil
}

// liveHolder asks the API server, after a failed create, whether an object the App does
// not control holds the name (a cache that had not seen it yet).
func (k *childClient[T]) liveHolder(ctx context.Context, app *appv1.App, name string) (string, bool) {
	obj, err := k.client.get(ctx, app.Namespace, name)
	if err != nil || isControlledBy(obj, app) {
		return "", false
	}
	return k.describeHolder(name, metav1.GetControllerOfNoCopy(obj)), true
}

// describeHolder says who holds a child name, for the NamesAccepted condition.
func (k *childClient[T]) describeHolder(name string, ref *metav1.OwnerReference) string {
	if ref == nil {
		return fmt.Sprintf("%s %q already exists and is not managed by this App", k.kind, name)
	}
	return fmt.Sprintf("%s %q already exists and is controlled by %s %q", k.kind, name, ref.Kind, ref.Name)
}

// isControlledBy reports whether obj's controller is app (UID included).
func isControlledBy(obj metav1.Object, app *appv1.App) bool {
	ref := metav1.GetControllerOfNoCopy(obj)
	return ref != nil && ref.UID == app.UID
}

// deploymentClient is the childAPI of Deployments. A Deployment's selector is immutable,
// and entries others add to its lists (a sidecar container, a label) do not break it:
// nothing is owned exclusively.

type deploymentClient struct{ kubernetes.Interface }

func (c deploymentClient) apply(ctx context.Context, desired any, force bool) (*appsv1.Deployment, error) {
	d := desired.(*appsv1ac.DeploymentApplyConfiguration)
	return c.AppsV1().Deployments(*d.Namespace).Apply(ctx, d, metav1.ApplyOptions{FieldManager: appv1.FieldManager, Force: force})
}

func (c deploymentClient) get(ctx context.Context, namespace, name string) (*appsv1.Deployment, error) {
	return c.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (c deploymentClient) delete(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error {
	return c.AppsV1().Deployments(namespace).Delete(ctx, name, opts)
}

func (deploymentClient) exclusivePatch(*appsv1.Deployment, any) ([]byte, error) { return nil, nil }

func (c deploymentClient) patch(ctx context.Context, namespace, name string, jsonPatch []byte) (*appsv1.Deployment, error) {
	return c.AppsV1().Deployments(namespace).Patch(ctx, name, types.JSONPatchType, jsonPatch, metav1.PatchOptions{FieldManager: appv1.FieldManager})
}

// serviceClient is the childAPI of Services.
type serviceClient struct{ kubernetes.Interface }

func (c serviceClient) apply(ctx context.Context, desired any, force bool) (*corev1.Service, error) {
	s := desired.(*corev1ac.ServiceApplyConfiguration)
	return c.CoreV1().Services(*s.Namespace).Apply(ctx, s, metav1.ApplyOptions{FieldManager: appv1.FieldManager, Force: force})
}

func (c serviceClient) get(ctx context.Context, namespace, name string) (*corev1.Service, error) {
	return c.CoreV1().Services(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (c serviceClient) delete(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error {
	return c.CoreV1().Services(namespace).Delete(ctx, name, opts)
}

func (c serviceClient) patch(ctx context.Context, namespace, name string, jsonPatch []byte) (*corev1.Service, error) {
	return c.CoreV1().Services(namespace).Patch(ctx, name, types.JSONPatchType, jsonPatch, metav1.PatchOptions{FieldManager: appv1.FieldManager})
}

// exclusivePatch: a Service's ports and selector decide where its traffic goes, so the
// App owns them alone. Server-side apply keeps a port or selector key that someone else
// added; worse, a port edited by hand becomes a second port with the App's port name,
// and every later apply is invalid. The patch replaces both with the App's, guarded by
// the resourceVersion, keeping the node ports already allocated.
func (serviceClient) exclusivePatch(live *corev1.Service, desired any) ([]byte, error) {
	want := &corev1.Service{}
	if err := controller.Convert(desired, want); err != nil {
		return nil, err
	}
	ports := make([]corev1.ServicePort, len(want.Spec.Ports))
	portsMatch := len(live.Spec.Ports) == len(want.Spec.Ports)
	for i, p := range want.Spec.Ports {
		ports[i] = p
		found := false
		for _, l := range live.Spec.Ports {
			if l.Name == p.Name && l.Port == p.Port && l.Protocol == p.Protocol {
				ports[i].NodePort = l.NodePort
				found = found || l.TargetPort == p.TargetPort
			}
		}
		portsMatch = portsMatch && found
	}
	if portsMatch && maps.Equal(live.Spec.Selector, want.Spec.Selector) {
		return nil, nil
	}
	return json.Marshal([]map[string]any{
		{"op": "test", "path": "/metadata/resourceVersion", "value": live.ResourceVersion},
		{"op": "add", "path": "/spec/selector", "value": want.Spec.Selector},
		{"op": "add", "path": "/spec/ports", "value": ports},
	})
}

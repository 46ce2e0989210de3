package app

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
)

// Every change of an App's spec is recorded as a revision: a ControllerRevision owned by
// the App, named NAME-HASH after the hash of its data, whose data is {"spec": ...} (the
// App's spec without revisionHistoryLimit) and whose revision number orders the
// history. The App's status names the current revision. A spec equal to an older
// revision's (a rollback) makes that revision current again under the next number, as
// StatefulSets do. At most spec.revisionHistoryLimit revisions are kept (10 by default),
// the oldest deleted first. `kubectl app history` lists them; `kubectl app rollback`
// writes one's spec back into the App.
//
// The revision cache holds only their metadata and numbers (TrimRevision): the
// controller never reads a revision's data back.

// DefaultRevisionHistoryLimit is how many revisions of an App are kept when
// spec.revisionHistoryLimit is unset.
const DefaultRevisionHistoryLimit = 10

// TrimRevision is the transform of the ControllerRevision informer: it drops the data
// and the managedFields, which the controller never reads.
func TrimRevision(obj interface{}) (interface{}, error) {
	if r, ok := obj.(*appsv1.ControllerRevision); ok {
		r.Data = runtime.RawExtension{}
		r.ManagedFields = nil
	}
	return obj, nil
}

// RevisionData returns the data of the revision that records spec, and its hash.
func RevisionData(spec *appv1.AppSpec) ([]byte, string, error) {
	s := spec.DeepCopy()
	s.RevisionHistoryLimit = nil
	data, err := json.Marshal(map[string]any{appv1.RevisionDataKey: s})
	if err != nil {
		return nil, "", fmt.Errorf("encoding the App's spec: %w", err)
	}
	sum := sha256.Sum256(data)
	return data, hex.EncodeToString(sum[:5]), nil
}

// revisions records the revisions of Apps.
type revisions struct {
	client kubernetes.Interface
	// cache holds the revisions (trimmed), indexed by controller UID, and the
	// controller's own writes.
	cache *controller.WriteCache

	lock sync.Mutex
	// highest is, per App, the highest revision number this process wrote: a revision
	// just created is not in the index until the informer delivers it.
	highest map[types.UID]int64
}

// ensure makes the revision that records app's current spec exist and be the newest,
// prunes the oldest beyond the history limit, and returns its name. It reads the
// revisions app controls once; each step below works on that list.
func (r *revisions) ensure(ctx context.Context, app *appv1.App) (string, error) {
	owned, ownedErr := r.owned(app)
	if name := app.Status.CurrentRevision; name != "" && app.Status.ObservedGeneration == app.Generation {
		if current := r.find(app, owned, name); current != nil {
			// Recorded at this generation. A revision beyond the limit may be left: one a
			// canary rollout needed when its last sync read it (prune keeps those). It
			// goes now, as the rollout is over or still needs it.
			if ownedErr != nil || len(owned) <= int(ptr.Deref(app.Spec.RevisionHistoryLimit, DefaultRevisionHistoryLimit)) {
				return name, ownedErr
			}
			return name, r.prune(ctx, app, owned, current)
		}
	}
	data, hash, err := RevisionData(&app.Spec)
	if err != nil {
		return "", err
	}
	if ownedErr != nil {
		return "", ownedErr
	}
	name := app.Name + "-" + hash
	next := r.next(app.UID, owned)
	changeCause := app.Annotations[appv1.ChangeCauseAnnotation]

	current := r.find(app, owned, name)
	switch {
	case current != nil && !controller.IsControlledBy(current, app):
		return "", fmt.Errorf("ControllerRevision %s/%s exists and is not controlled by App %s", app.Namespace, name, app.Name)
	case current == nil:
		if err := confirmLive(ctx); err != nil {
			return "", err
		}
		if current, err = r.create(ctx, app, name, data, next, changeCause); err != nil {
			return "", err
		}
		owned = append(owned, current)
	case current.Revision < next-1:
		// An older spec again (a rollback): its revision becomes the newest.
		if current, err = r.renumber(ctx, current, next, changeCause); err != nil {
			return "", err
		}
	}
	return name, r.prune(ctx, app, owned, current)
}

// find returns the revision name of app's namespace: among owned, the revisions app
// controls, else as cached (one another object controls); nil if there is none.
func (r *revisions) find(app *appv1.App, owned []*appsv1.ControllerRevision, name string) *appsv1.ControllerRevision {
	if rev := findRevision(owned, name); rev != nil {
		return rev
	}
	obj, exists, err := r.cache.GetByKey(app.Namespace + "/" + name)
	if err != nil || !exists {
		return nil
	}
	rev, _ := obj.(*appsv1.ControllerRevision)
	return rev
}

// owned returns the revisions app controls.
func (r *revisions) owned(app *appv1.App) ([]*appsv1.ControllerRevision, error) {
	objs, err := r.cache.ByIndex(controllerIndex, string(app.UID))
	if err != nil {
		return nil, fmt.Errorf("listing the revisions of App %s/%s: %w", app.Namespace, app.Name, err)
	}
	out := make([]*appsv1.ControllerRevision, 0, len(objs))
	for _, obj := range objs {
		if rev, ok := obj.(*appsv1.ControllerRevision); ok && rev.Namespace == app.Namespace {
			out = append(out, rev)
		}
	}
	return out, nil
}

// next returns the number of the App's next revision.
func (r *revisions) next(uid types.UID, owned []*appsv1.ControllerRevision) int64 {
	r.lock.Lock()
	highest := r.highest[uid]
	r.lock.Unlock()
	for _, rev := range owned {
		highest = max(highest, rev.Revision)
	}
	return highest + 1
}

// wrote records that the App's revision number n was written.
func (r *revisions) wrote(uid types.UID, n int64) {
	r.lock.Lock()
	defer r.lock.Unlock()
	r.highest[uid] = max(r.highest[uid], n)
}

// forget drops what is held for a deleted App.
func (r *revisions) forget(uid types.UID) {
	r.lock.Lock()
	defer r.lock.Unlock()
	delete(r.highest, uid)
}

// create creates the revision name of app.
func (r *revisions) create(ctx context.Context, app *appv1.App, name string, data []byte, number int64, changeCause string) (*appsv1.ControllerRevision, error) {
	rev := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       app.Namespace,
			Labels:          childLabels(app),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(app, appKind)},
		},
		Data:     runtime.RawExtension{Raw: data},
		Revision: number,
	}
	if changeCause != "" {
		rev.Annotations = map[string]string{appv1.ChangeCauseAnnotation: changeCause}
	}
	created, err := r.client.AppsV1().ControllerRevisions(app.Namespace).Create(ctx, rev, metav1.CreateOptions{FieldManager: appv1.FieldManager})
	if apierrors.IsAlreadyExists(err) {
		// The cache had not seen it: read it, and renumber it if it is older.
		live, getErr := r.client.AppsV1().ControllerRevisions(app.Namespace).Get(ctx, name, metav1.GetOptions{})
		if getErr != nil {
			return nil, fmt.Errorf("reading ControllerRevision %s/%s: %w", app.Namespace, name, getErr)
		}
		if !controller.IsControlledBy(live, app) {
			return nil, fmt.Errorf("ControllerRevision %s/%s exists and is not controlled by App %s", app.Namespace, name, app.Name)
		}
		r.remember(live)
		if live.Revision < number-1 {
			return r.renumber(ctx, live, number, changeCause)
		}
		return live, nil
	}
	if err != nil {
		return nil, fmt.Errorf("creating revision %d (ControllerRevision %s/%s) of App %s: %w", number, app.Namespace, name, app.Name, err)
	}
	klog.FromContext(ctx).V(2).Info("Recorded a revision of the App's spec", "revision", number, "name", name)
	r.wrote(app.UID, number)
	return r.remember(created), nil
}

// renumber makes rev the newest revision, number, with the App's change cause.
func (r *revisions) renumber(ctx context.Context, rev *appsv1.ControllerRevision, number int64, changeCause string) (*appsv1.ControllerRevision, error) {
	var cause any // null removes the annotation
	if changeCause != "" {
		cause = changeCause
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{
			"resourceVersion": rev.ResourceVersion,
			"annotations":     map[string]any{appv1.ChangeCauseAnnotation: cause},
		},
		"revision": number,
	})
	if err != nil {
		return nil, err
	}
	patched, err := r.client.AppsV1().ControllerRevisions(rev.Namespace).Patch(ctx, rev.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: appv1.FieldManager})
	if err != nil {
		return nil, fmt.Errorf("making ControllerRevision %s/%s revision %d: %w", rev.Namespace, rev.Name, number, err)
	}
	klog.FromContext(ctx).V(2).Info("Made an older revision of the App's spec current again", "revision", number, "name", rev.Name, "was", rev.Revision)
	if ref := metav1.GetControllerOfNoCopy(rev); ref != nil {
		r.wrote(ref.UID, number)
	}
	return r.remember(patched), nil
}

// remember records an own write in the cache, trimmed as the informer trims.
func (r *revisions) remember(rev *appsv1.ControllerRevision) *appsv1.ControllerRevision {
	rev = rev.DeepCopy()
	if _, err := TrimRevision(rev); err == nil {
		r.cache.Mutation(rev)
	}
	return rev
}

// prune deletes the oldest revisions of app beyond its history limit, never current,
// nor one its canary rollout needs.
func (r *revisions) prune(ctx context.Context, app *appv1.App, owned []*appsv1.ControllerRevision, current *appsv1.ControllerRevision) error {
	limit := int(ptr.Deref(app.Spec.RevisionHistoryLimit, DefaultRevisionHistoryLimit))
	if len(owned) <= limit {
		return nil
	}
	owned = slices.Clone(owned)
	slices.SortFunc(owned, func(a, b *appsv1.ControllerRevision) int {
		if a.Name == current.Name {
			return 1 // the current one last: never pruned
		}
		if b.Name == current.Name {
			return -1
		}
		return cmp.Compare(a.Revision, b.Revision)
	})
	for _, rev := range owned[:len(owned)-limit] {
		if rolloutNeeds(app, rev.Name) {
			continue // the stable Deployment's template is rebuilt from it (rolloutversion.go)
		}
		uid := rev.UID
		err := r.client.AppsV1().ControllerRevisions(rev.Namespace).Delete(ctx, rev.Name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &uid},
		})
		switch {
		case apierrors.IsNotFound(err):
			r.cache.Deleting(rev)
		case apierrors.IsConflict(err):
		case err != nil:
			return fmt.Errorf("deleting revision %d (ControllerRevision %s/%s) beyond the history limit of App %s: %w", rev.Revision, rev.Namespace, rev.Name, app.Name, err)
		default:
			// Listed no more until the informer delivers the deletion: deleted once.
			r.cache.Deleting(rev)
			klog.FromContext(ctx).V(2).Info("Deleted a revision beyond the history limit", "revision", rev.Revision, "name", rev.Name)
		}
	}
	return nil
}

// rolloutNeeds reports whether app's canary rollout names the revision name: its stable
// or canary version.
func rolloutNeeds(app *appv1.App, name string) bool {
	r := app.Status.Rollout
	return r != nil && (r.Stable != nil && r.Stable.Revision == name || r.Canary != nil && r.Canary.Revision == name)
}

// findRevision returns the revision named name, or nil.
func findRevision(revs []*appsv1.ControllerRevision, name string) *appsv1.ControllerRevision {
	for _, rev := range revs {
		if rev.Name == name {
			return rev
		}
	}
	return nil
}

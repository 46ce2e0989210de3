package app

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
)

// The copies of the pods' config as a kind of child (configcopy.go makes them before the
// rollout's children name them): what the App's status says of them, the stable
// version's copies recorded on its revision, and the pruning of those nothing names.

// configCopyChild is the copies of the ConfigMaps and Secrets of an App with
// spec.rollout.versionedConfig.
type configCopyChild struct {
	c *Controller
}

func newConfigCopyChild(c *Controller, _ Informers, _ Options) (appChild, error) {
	return &configCopyChild{c: c}, nil
}

// claim: a copy's name is a hash of its App's name and data, never claimed by another
// App; a name held by anything else is a conflict (configCopies.conflicts).
func (k *configCopyChild) claim(*appv1.App) string { return "" }

// sync reports the copies of in, records the stable version's on its revision and
// deletes the copies of app that nothing names any more.
func (k *configCopyChild) sync(ctx context.Context, app *appv1.App, in *syncInput) (childOutcome, error) {
	out := childOutcome{conditions: []childCondition{{conditionType: appv1.ConditionConfigVersioned}}}
	if cc := in.copies; cc != nil {
		out.conditions[0] = copiesCondition(cc)
		if len(cc.conflicts) > 0 {
			out.name, out.conflict = cc.conflictName, strings.Join(cc.conflicts, "; ")
		}
	}
	recorded, err := k.record(ctx, app, in)
	if err != nil {
		return out, err
	}
	pruned, err := k.prune(ctx, app, in)
	out.changed = recorded || pruned
	return out, err
}

// copiesCondition is the ConfigVersioned condition of what cc says.
func copiesCondition(cc *configCopies) childCondition {
	configMaps, secrets := 0, 0
	for k := range cc.current {
		if strings.HasPrefix(k, "Secret/") {
			secrets++
		} else {
			configMaps++
		}
	}
	copied := fmt.Sprintf("each version of the pods reads its own copy of %d ConfigMap(s) and %d Secret(s)", configMaps, secrets)
	if len(cc.secretsShared) == 0 {
		return childCondition{conditionType: appv1.ConditionConfigVersioned, status: metav1.ConditionTrue,
			reason: appv1.ReasonConfigCopied, message: copied}
	}
	names := make([]string, 0, len(cc.secretsShared))
	for _, n := range cc.secretsShared {
		names = append(names, fmt.Sprintf("%q", n))
	}
	return childCondition{conditionType: appv1.ConditionConfigVersioned, status: metav1.ConditionTrue,
		reason: appv1.ReasonSecretsNotCopied, warn: true,
		message: fmt.Sprintf("the controller is installed without access to Secrets (--config-rollout-secrets=false): "+
			"the pods read Secret %s directly, shared by every version; %s", strings.Join(names, ", "), copied)}
}

// record writes the stable version's copies on its revision (ConfigCopiesAnnotation),
// when they are not there yet: a rollback to that revision brings them back.
func (k *configCopyChild) record(ctx context.Context, app *appv1.App, in *syncInput) (bool, error) {
	if in.copies == nil || in.rollout == nil || in.rollout.state == nil || in.rollout.state.Stable == nil {
		return false, nil
	}
	v := in.rollout.state.Stable
	if v.Revision == "" || !strings.HasPrefix(v.ConfigHash, copiesPrefix) {
		return false, nil
	}
	obj, exists, err := k.c.revisions.cache.GetByKey(app.Namespace + "/" + v.Revision)
	if err != nil || !exists {
		return false, err
	}
	rev, ok := obj.(metav1.Object)
	if !ok || !controller.IsControlledBy(rev, app) || rev.GetAnnotations()[appv1.ConfigCopiesAnnotation] == v.ConfigHash {
		return false, nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"annotations": map[string]string{appv1.ConfigCopiesAnnotation: v.ConfigHash},
	}})
	if err != nil {
		return false, err
	}
	patched, err := k.c.kubeClient.AppsV1().ControllerRevisions(app.Namespace).Patch(ctx, v.Revision, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: appv1.FieldManager})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("recording the config copies of revision %s of App %s/%s: %w", v.Revision, app.Namespace, app.Name, err)
	}
	klog.FromContext(ctx).V(2).Info("Recorded the stable version's config copies on its revision", "revision", v.Revision)
	k.c.revisions.remember(patched)
	return true, nil
}

// prune deletes the copies app controls that no version of its rollout (stable, canary,
// the one asked for), no live Deployment of it and no kept revision names.
func (k *configCopyChild) prune(ctx context.Context, app *appv1.App, in *syncInput) (bool, error) {
	type ownedCopy struct {
		kind string
		obj  metav1.Object
	}
	var owned []ownedCopy
	for _, kind := range []string{kindConfigMap, kindSecret} {
		store := k.c.configStore(kind)
		if store == nil {
			continue
		}
		// The copies deleted by an earlier sync the informer has not delivered yet are
		// not listed (WriteCache.Deleting): they are not deleted twice.
		objs, err := store.ByIndex(controllerIndex, string(app.UID))
		if err != nil {
			return false, fmt.Errorf("listing the config copies of App %s/%s: %w", app.Namespace, app.Name, err)
		}
		for _, obj := range objs {
			if m, ok := obj.(metav1.Object); ok && m.GetNamespace() == app.Namespace {
				owned = append(owned, ownedCopy{kind: kind, obj: m})
			}
		}
	}
	if len(owned) == 0 {
		return false, nil
	}
	needed, err := k.needed(app, in)
	if err != nil {
		return false, err
	}
	pruned := false
	for _, o := range owned {
		kind, m := o.kind, o.obj
		uid := m.GetUID()
		if needed.Has(kind + "/" + m.GetName()) {
			continue
		}
		opts := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}
		var err error
		if kind == kindSecret {
			err = k.c.kubeClient.CoreV1().Secrets(app.Namespace).Delete(ctx, m.GetName(), opts)
		} else {
			err = k.c.kubeClient.CoreV1().ConfigMaps(app.Namespace).Delete(ctx, m.GetName(), opts)
		}
		switch {
		case apierrors.IsNotFound(err):
			k.c.configStore(kind).Deleting(m)
		case apierrors.IsConflict(err):
		case err != nil:
			return pruned, fmt.Errorf("deleting the config copy %s %s/%s of App %s: %w", kind, app.Namespace, m.GetName(), app.Name, err)
		default:
			klog.FromContext(ctx).V(2).Info("Deleted a config copy no version reads", "kind", kind, "copy", m.GetName())
			k.c.configStore(kind).Deleting(m)
			pruned = true
		}
	}
	return pruned, nil
}

// needed returns the "Kind/name" of the copies app's pods may still read: those of the
// rollout's versions and of the one asked for, of its live Deployments' pod templates and
// of its kept revisions.
func (k *configCopyChild) needed(app *appv1.App, in *syncInput) (sets.Set[string], error) {
	hashes := []string{}
	if in.copies != nil {
		hashes = append(hashes, in.copies.desired)
	}
	if p := in.rollout; p != nil && p.state != nil {
		for _, v := range []*appv1.RolloutVersion{p.state.Stable, p.state.Canary} {
			if v != nil {
				hashes = append(hashes, v.ConfigHash)
			}
		}
	}
	if r := app.Status.Rollout; r != nil {
		for _, v := range []*appv1.RolloutVersion{r.Stable, r.Canary} {
			if v != nil {
				hashes = append(hashes, v.ConfigHash)
			}
		}
	}
	if in.live != nil {
		hashes = append(hashes, in.live.Spec.Template.Annotations[appv1.ConfigHashAnnotation])
	}
	if d := k.c.liveCanary(app); d != nil {
		hashes = append(hashes, d.Spec.Template.Annotations[appv1.ConfigHashAnnotation])
	}
	revs, err := k.c.revisions.owned(app)
	if err != nil {
		return nil, err
	}
	for _, rev := range revs {
		hashes = append(hashes, rev.Annotations[appv1.ConfigCopiesAnnotation])
	}
	needed := sets.New[string]()
	for _, h := range hashes {
		if copies, ok := decodeCopies(h); ok {
			needed.Insert(copies.names()...)
		}
	}
	return needed, nil
}

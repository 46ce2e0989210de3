package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
)

// Config that belongs to a version (spec.rollout.versionedConfig). The controller keeps
// an immutable copy of each ConfigMap and Secret the pods reference, named NAME-HASH
// after the App, the source's kind, name and data (copyName), owned by the App and
// labelled as its child, and each version's pod template reads its own copies. A
// version's config hash then lists its copies, "copies:ConfigMap/web=3fa2c1d9e0,...":
// the pod template of any version is rebuilt from its revision's spec and that hash
// (desiredPodTemplate renames the references, withCopies), with no lookup. The sync:
//
//   - readCopies (before the rollout's versions): the hash of each referenced object's
//     data, read with one GET per new resourceVersion (copyHashes remembers the last),
//     the copies the App's current spec would read now, and the copies its current
//     revision last ran with (ConfigCopiesAnnotation): a rollback brings them back.
//   - desiredVersion picks one (rolloutversion.go); ensureCopies creates the missing
//     ones it names, before any Deployment names them.
//   - configCopyChild, beside the other children: reports the condition and the names
//     held by others, records the stable version's copies on its revision, and deletes
//     the copies that no version of the rollout, no live Deployment and no kept revision
//     names.
//
// An object that is missing, a Secret the controller may not read
// (--config-rollout-secrets=false) and a copy's name held by an object the App does not
// control are not copied: the pods read the object itself, as without versionedConfig.
// The data of a copied object is held only while it is copied, and never logged: logs,
// Events and conditions name kinds and names.

// copiesEnabled reports whether app's pods read copies of their config.
func copiesEnabled(app *appv1.App) bool {
	t := app.Spec.DeploymentTemplate
	return app.Spec.Rollout != nil && app.Spec.Rollout.VersionedConfig && t != nil &&
		t.ConfigChangePolicy != appv1.ConfigChangeIgnore
}

// copyName returns the name of the copy of the object source whose copy hash is hash:
// source-hash, source shortened to fit a name (253 characters).
func copyName(source, hash string) string {
	if room := validation.DNS1123SubdomainMaxLength - 1 - len(hash); len(source) > room {
		source = strings.TrimRight(source[:room], "-.")
	}
	return source + "-" + hash
}

// copyHash returns the hash that names the copy, for app, of the object kind/name of
// type typ with data and binaryData (a Secret's data is binaryData). The App's name is in
// it: two Apps that read one ConfigMap each have their copy.
func copyHash(app, kind, name, typ string, data map[string]string, binaryData map[string][]byte) (string, error) {
	b, err := json.Marshal(struct {
		App, Kind, Name, Type string
		Data                  map[string]string
		BinaryData            map[string][]byte
	}{app, kind, name, typ, data, binaryData})
	if err != nil {
		return "", fmt.Errorf("encoding the data of %s %s: %w", kind, name, err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:5]), nil
}

// versionCopies is the copies a version's pods read: the copy hash of each copied
// object, by "Kind/name" of the object (not copied: absent).
type versionCopies map[string]string

// encode returns the config hash of a version that reads copies c: "copies:" and the
// "Kind/name=hash" of each, sorted; "" when the pods reference nothing.
func (c versionCopies) encode(refs []configRef) string {
	if len(refs) == 0 {
		return ""
	}
	parts := make([]string, 0, len(c))
	for _, k := range slices.Sorted(maps.Keys(c)) {
		parts = append(parts, k+"="+c[k])
	}
	return copiesPrefix + strings.Join(parts, ",")
}

// decodeCopies returns the copies of a version's config hash; ok is false for a hash
// that is not of copies (a version without versionedConfig).
func decodeCopies(configHash string) (c versionCopies, ok bool) {
	rest, ok := strings.CutPrefix(configHash, copiesPrefix)
	if !ok {
		return nil, false
	}
	c = versionCopies{}
	for _, part := range strings.Split(rest, ",") {
		if k, h, found := strings.Cut(part, "="); found {
			c[k] = h
		}
	}
	return c, true
}

// names returns the "Kind/name" of each copy of c.
func (c versionCopies) names() []string {
	out := make([]string, 0, len(c))
	for k, h := range c {
		kind, name, _ := strings.Cut(k, "/")
		out = append(out, kind+"/"+copyName(name, h))
	}
	return out
}

// withCopies returns app with its pods' references to the objects of c renamed to their
// copies (a copy of app's spec; app is not changed).
func withCopies(app *appv1.App, c versionCopies) *appv1.App {
	if len(c) == 0 || app.Spec.DeploymentTemplate == nil {
		return app
	}
	out := *app
	t := app.Spec.DeploymentTemplate.DeepCopy()
	visitConfigRefs(t, func(kind string, name *string, _ *bool) {
		if h, ok := c[kind+"/"+*name]; ok {
			*name = copyName(*name, h)
		}
	})
	out.Spec.DeploymentTemplate = t
	return &out
}

// configCopies is what a sync of an App with versionedConfig knows of its copies
// (readCopies).
type configCopies struct {
	refs []configRef
	// current are the copies of the referenced objects as they are now; recorded those
	// the App's current revision last ran with (nil: none, or some cannot be had again).
	current, recorded versionCopies
	// desired is the config hash of the version the App asks for (desiredVersion).
	desired string
	// conflicts say which copies' names are held by objects the App does not control;
	// conflictName is the first of those names.
	conflicts    []string
	conflictName string
	// secretsShared are the Secrets not copied: the controller does not read Secrets.
	secretsShared []string
}

// copyHashEntry is what copyHashes remembers of an object: its copy hash at version.
type copyHashEntry struct {
	version, hash string
}

// readCopies returns what app's sync knows of its copies, refs being the objects its
// pods reference (podConfig) and revision its current revision: the copy hash of each
// referenced object (a GET when its resourceVersion is new to this process), and the
// copies' names held by others.
func (c *Controller) readCopies(ctx context.Context, app *appv1.App, refs []configRef, revision string) (*configCopies, error) {
	cc := &configCopies{refs: refs, current: versionCopies{}}
	for _, r := range cc.refs {
		if r.kind == kindSecret && c.secrets == nil {
			cc.secretsShared = append(cc.secretsShared, r.name)
			continue
		}
		hash, err := c.sourceHash(ctx, app, r)
		if err != nil {
			return nil, err
		}
		if hash == "" {
			continue // missing: read directly, the pods wait for it as without copies
		}
		name := copyName(r.name, hash)
		if held := c.copyHolder(app, r.kind, name); held != "" {
			cc.conflicts = append(cc.conflicts, held)
			if cc.conflictName == "" {
				cc.conflictName = name
			}
			continue
		}
		cc.current[r.kind+"/"+r.name] = hash
	}
	if revision == "" {
		return cc, nil
	}
	obj, exists, err := c.revisions.cache.GetByKey(app.Namespace + "/" + revision)
	if err != nil || !exists {
		return cc, err
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return cc, nil
	}
	if recorded, ok := decodeCopies(m.GetAnnotations()[appv1.ConfigCopiesAnnotation]); ok && c.canHave(app, recorded, cc.current) {
		cc.recorded = recorded
	}
	return cc, nil
}

// canHave reports whether every copy of want exists, controlled by app, or can be made
// from the objects as they are now (current).
func (c *Controller) canHave(app *appv1.App, want, current versionCopies) bool {
	for k, h := range want {
		kind, name, _ := strings.Cut(k, "/")
		if current[k] == h {
			continue
		}
		if obj := c.cachedConfig(app, kind, copyName(name, h)); obj == nil || !controller.IsControlledBy(obj, app) {
			return false
		}
	}
	return true
}

// cachedConfig returns the cached metadata of the ConfigMap or Secret name of app's
// namespace, or nil.
func (c *Controller) cachedConfig(app *appv1.App, kind, name string) metav1.Object {
	store := c.configStore(kind)
	if store == nil {
		return nil
	}
	obj, exists, err := store.GetByKey(app.Namespace + "/" + name)
	if err != nil || !exists {
		return nil
	}
	m, _ := obj.(metav1.Object)
	return m
}

// copyHolder says who holds the name of a copy when it is not app: "" when the name is
// free or app's.
func (c *Controller) copyHolder(app *appv1.App, kind, name string) string {
	obj := c.cachedConfig(app, kind, name)
	switch {
	case obj == nil, controller.IsControlledBy(obj, app):
		return ""
	case metav1.GetControllerOfNoCopy(obj) == nil:
		return fmt.Sprintf("%s %q already exists and is not managed by this App", kind, name)
	default:
		ref := metav1.GetControllerOfNoCopy(obj)
		return fmt.Sprintf("%s %q already exists and is controlled by %s %q", kind, name, ref.Kind, ref.Name)
	}
}

// sourceHash returns the copy hash of the object r of app as it is now: remembered by
// its UID and resourceVersion, else read; "" when it does not exist.
func (c *Controller) sourceHash(ctx context.Context, app *appv1.App, r configRef) (string, error) {
	m := c.cachedConfig(app, r.kind, r.name)
	if m == nil {
		return "", nil
	}
	key := r.kind + "/" + app.Namespace + "/" + r.name + "/" + app.Name
	version := string(m.GetUID()) + ":" + m.GetResourceVersion()
	if e, ok := c.copyHashes.Get(key); ok && e.(copyHashEntry).version == version {
		return e.(copyHashEntry).hash, nil
	}
	src, err := c.readSource(ctx, app, r)
	if err != nil || src == nil {
		return "", err
	}
	c.copyHashes.Add(key, copyHashEntry{version: string(src.GetUID()) + ":" + src.GetResourceVersion(), hash: src.hash})
	return src.hash, nil
}

// source is a ConfigMap or Secret read to be copied, with its copy hash.
type source struct {
	metav1.Object
	configMap *corev1.ConfigMap
	secret    *corev1.Secret
	hash      string
}

// readSource reads the object r of app's namespace; nil when it does not exist.
func (c *Controller) readSource(ctx context.Context, app *appv1.App, r configRef) (*source, error) {
	var (
		src *source
		err error
	)
	if r.kind == kindSecret {
		var s *corev1.Secret
		if s, err = c.kubeClient.CoreV1().Secrets(app.Namespace).Get(ctx, r.name, metav1.GetOptions{}); err == nil {
			src = &source{Object: s, secret: s}
			src.hash, err = copyHash(app.Name, r.kind, r.name, string(s.Type), nil, s.Data)
		}
	} else {
		var cm *corev1.ConfigMap
		if cm, err = c.kubeClient.CoreV1().ConfigMaps(app.Namespace).Get(ctx, r.name, metav1.GetOptions{}); err == nil {
			src = &source{Object: cm, configMap: cm}
			src.hash, err = copyHash(app.Name, r.kind, r.name, "", cm.Data, cm.BinaryData)
		}
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading %s %s/%s to copy it: %w", r.kind, app.Namespace, r.name, err)
	}
	return src, nil
}

// ensureCopies creates the copies of want, the config hash of the version app's pods
// are to run, that do not exist yet and can be made from the objects as they are now
// (cc.current); it reports whether it created one.
func (c *Controller) ensureCopies(ctx context.Context, app *appv1.App, want string, cc *configCopies) (bool, error) {
	copies, ok := decodeCopies(want)
	if !ok {
		return false, nil
	}
	created := false
	for _, k := range slices.Sorted(maps.Keys(copies)) {
		h := copies[k]
		kind, name, _ := strings.Cut(k, "/")
		if c.cachedConfig(app, kind, copyName(name, h)) != nil || cc.current[k] != h {
			continue // there (copyHolder kept a name held by another out of current), or cannot be made again
		}
		made, err := c.createCopy(ctx, app, configRef{kind: kind, name: name}, h)
		if err != nil {
			return created, err
		}
		created = created || made
	}
	return created, nil
}

// createCopy creates the copy, hash, of object r of app.
func (c *Controller) createCopy(ctx context.Context, app *appv1.App, r configRef, hash string) (bool, error) {
	src, err := c.readSource(ctx, app, r)
	if err != nil {
		return false, err
	}
	if src == nil || src.hash != hash {
		// Deleted or changed since its hash was read: the sync its event queues copies it.
		return false, fmt.Errorf("%s %s/%s changed while being copied", r.kind, app.Namespace, r.name)
	}
	if err := confirmLive(ctx); err != nil {
		return false, err
	}
	name := copyName(r.name, hash)
	meta := metav1.ObjectMeta{
		Name:            name,
		Namespace:       app.Namespace,
		Labels:          childLabels(app),
		Annotations:     map[string]string{appv1.ConfigCopyOfAnnotation: r.name},
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(app, appKind)},
	}
	opts := metav1.CreateOptions{FieldManager: appv1.FieldManager}
	var obj metav1.Object
	if src.secret != nil {
		obj, err = c.kubeClient.CoreV1().Secrets(app.Namespace).Create(ctx, &corev1.Secret{
			ObjectMeta: meta, Immutable: ptr.To(true), Type: src.secret.Type, Data: src.secret.Data,
		}, opts)
	} else {
		obj, err = c.kubeClient.CoreV1().ConfigMaps(app.Namespace).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: meta, Immutable: ptr.To(true), Data: src.configMap.Data, BinaryData: src.configMap.BinaryData,
		}, opts)
	}
	if apierrors.IsAlreadyExists(err) {
		// The cache had not seen it yet: the next sync reads whose it is (copyHolder).
		return false, fmt.Errorf("creating the copy %s %s/%s of %s: %w", r.kind, app.Namespace, name, r.name, err)
	}
	if err != nil {
		return false, fmt.Errorf("creating the copy %s %s/%s of %s: %w", r.kind, app.Namespace, name, r.name, err)
	}
	klog.FromContext(ctx).V(2).Info("Created a copy of the pods' config", "kind", r.kind, "source", r.name, "copy", name)
	c.configStore(r.kind).Mutation(&metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: r.kind},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: app.Namespace, UID: obj.GetUID(), ResourceVersion: obj.GetResourceVersion(),
			OwnerReferences: meta.OwnerReferences,
		},
	})
	return true, nil
}

package app

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
	"github.com/app-controller/app-controller/pkg/podhealth"
)

// The ConfigMaps and Secrets an App's pods reference roll the pods when they change
// (spec.deploymentTemplate.configChangePolicy). The controller needs to know that their
// data changed, not the data: it watches their metadata only, trimmed to identity,
// resourceVersion and controller reference (controller.StripToVersion), and a new
// resourceVersion is a change. (So a change of only a label or an annotation of the
// object rolls the pods too.) It reads the data of a ConfigMap or Secret only to copy it
// for an App with spec.rollout.versionedConfig (configcopy.go), and the names and versions
// it reads appear in no log, Event or status: the status names a missing object by kind
// and name.
//
// The versions of the referenced objects hash to a config hash. The Deployment carries,
// under appv1.ConfigHashAnnotation, the hash the controller last saw (on the Deployment)
// and the hash the pods were rolled for (on the pod template): a new hash rolls the pods.
// A Deployment without the first (written by a controller that did not follow config, or
// while the policy was Ignore) takes the current hash as its baseline without rolling:
// an upgrade rolls no pods, the next change does.

// configIndex indexes Apps by the ConfigMaps and Secrets their pods reference:
// "ConfigMap/namespace/name" and "Secret/namespace/name".
const configIndex = "app.appcontroller.k8s.io/config"

// The kinds of the objects an App's pods read their config from.
const (
	kindConfigMap = "ConfigMap"
	kindSecret    = "Secret"
)

// configRef is a ConfigMap or Secret an App's pods reference.
type configRef struct {
	kind, name string
	// optional: the pods start without it (every reference to it is optional).
	optional bool
}

// configRefs returns the ConfigMaps and Secrets t's pods reference (any container's env
// and envFrom, the volumes), sorted by kind and name, each once; optional only when every
// reference to it is.
func configRefs(t *appv1.DeploymentTemplate) []configRef {
	if t == nil {
		return nil
	}
	var refs []configRef
	visitConfigRefs(t, func(kind string, name *string, optional *bool) {
		if *name != "" {
			refs = append(refs, configRef{kind: kind, name: *name, optional: ptr.Deref(optional, false)})
		}
	})
	slices.SortFunc(refs, func(a, b configRef) int {
		if c := strings.Compare(a.kind, b.kind); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	// One entry per object, optional only if every reference is.
	out := refs[:0]
	for _, r := range refs {
		if n := len(out); n > 0 && out[n-1].kind == r.kind && out[n-1].name == r.name {
			out[n-1].optional = out[n-1].optional && r.optional
			continue
		}
		out = append(out, r)
	}
	return out
}

// visitConfigRefs calls visit with each reference to a ConfigMap or Secret of t's pods:
// the App's container's env and envFrom, then its sidecars' and init containers', then
// the volumes. name points into t: versioned config renames the references to copies
// (configcopy.go).
func visitConfigRefs(t *appv1.DeploymentTemplate, visit func(kind string, name *string, optional *bool)) {
	n := 1 + len(t.Sidecars) + len(t.InitContainers)
	envs, envFroms := make([][]corev1.EnvVar, 0, n), make([][]corev1.EnvFromSource, 0, n)
	envs, envFroms = append(envs, t.Env), append(envFroms, t.EnvFrom)
	for _, c := range slices.Concat(t.Sidecars, t.InitContainers) {
		envs, envFroms = append(envs, c.Env), append(envFroms, c.EnvFrom)
	}
	for _, env := range envs {
		for i := range env {
			if v := env[i].ValueFrom; v != nil {
				if r := v.ConfigMapKeyRef; r != nil {
					visit(kindConfigMap, &r.Name, r.Optional)
				}
				if r := v.SecretKeyRef; r != nil {
					visit(kindSecret, &r.Name, r.Optional)
				}
			}
		}
	}
	for _, envFrom := range envFroms {
		for i := range envFrom {
			if r := envFrom[i].ConfigMapRef; r != nil {
				visit(kindConfigMap, &r.Name, r.Optional)
			}
			if r := envFrom[i].SecretRef; r != nil {
				visit(kindSecret, &r.Name, r.Optional)
			}
		}
	}
	for i := range t.Volumes {
		if s := t.Volumes[i].ConfigMap; s != nil {
			visit(kindConfigMap, &s.Name, s.Optional)
		}
		if s := t.Volumes[i].Secret; s != nil {
			visit(kindSecret, &s.SecretName, s.Optional)
		}
	}
}

// indexByConfig is the configIndex function.
func indexByConfig(obj interface{}) ([]string, error) {
	app, ok := obj.(*appv1.App)
	if !ok {
		return nil, nil
	}
	refs := configRefs(app.Spec.DeploymentTemplate)
	keys := make([]string, 0, len(refs))
	for _, r := range refs {
		keys = append(keys, configKey(r.kind, app.Namespace, r.name))
	}
	return keys, nil
}

// configKey is the configIndex key of a ConfigMap or Secret.
func configKey(kind, namespace, name string) string {
	return kind + "/" + namespace + "/" + name
}

// configHandler returns the event handler of the metadata informer of kind (ConfigMap or
// Secret): it queues the Apps whose pods reference an object that was added, changed
// (a new resourceVersion) or deleted.
func (c *Controller) configHandler(logger klog.Logger, kind string) cache.ResourceEventHandler {
	changed := func(what string, obj metav1.Object) {
		if obj == nil {
			return
		}
		c.enqueueReferrers(logger, configIndex, configKey(kind, obj.GetNamespace(), obj.GetName()), "Referenced "+kind+" "+what)
	}
	copies := c.configStore(kind)
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			copies.Observed(obj)
			changed("added", controller.ObjectFromTombstone(obj))
		},
		UpdateFunc: func(old, cur interface{}) {
			o, n := controller.ObjectFromTombstone(old), controller.ObjectFromTombstone(cur)
			if o == nil || n == nil || o.GetResourceVersion() == n.GetResourceVersion() {
				return // periodic resync
			}
			copies.Observed(cur)
			changed("changed", n)
		},
		DeleteFunc: func(obj interface{}) {
			copies.Deleted(obj)
			o := controller.ObjectFromTombstone(obj)
			changed("deleted", o)
			if o == nil {
				return
			}
			if ref := controller.ControllerOfKind(o, appKind); ref != nil {
				// A copy of an App's config (configcopy.go): the App makes it again if a
				// version still reads it.
				c.loop.Enqueue(cache.ObjectName{Namespace: o.GetNamespace(), Name: ref.Name})
			}
		},
	}
}

// enqueueReferrers queues the Apps that the App cache's index lists under key, logging
// msg with each App and keysAndValues.
func (c *Controller) enqueueReferrers(logger klog.Logger, index, key, msg string, keysAndValues ...any) {
	apps, err := c.appIndexer.ByIndex(index, key)
	if err != nil {
		return
	}
	for _, a := range apps {
		if app, ok := a.(*appv1.App); ok {
			if v := logger.V(4); v.Enabled() {
				v.Info(msg, append([]any{"app", klog.KObj(app)}, keysAndValues...)...)
			}
			c.loop.Enqueue(cache.MetaObjectToName(app))
		}
	}
}

// podConfig is what the ConfigMaps and Secrets of an App's pods are now.
type podConfig struct {
	// refs are the ConfigMaps and Secrets the pods reference (configRefs).
	refs []configRef
	// hash of the referenced objects' versions; "" when the pods reference none or the
	// App ignores their changes.
	hash string
	// missing are the referenced objects, not optional, that do not exist.
	missing []configRef
	// problem is what missing makes for the pods (they wait for it); nil if nothing is
	// missing.
	problem *podhealth.Problem
}

// podConfig returns the state of the ConfigMaps and Secrets app's pods reference, read
// from the metadata caches.
func (c *Controller) podConfig(app *appv1.App) (podConfig, error) {
	t := app.Spec.DeploymentTemplate
	refs := configRefs(t)
	if len(refs) == 0 {
		return podConfig{}, nil
	}
	cfg := podConfig{refs: refs}
	h := sha256.New()
	for _, r := range refs {
		store := c.configMaps
		if r.kind == kindSecret {
			if c.secrets == nil {
				continue // Secrets not followed (Informers.Secrets nil)
			}
			store = c.secrets
		}
		key := app.Namespace + "/" + r.name
		obj, exists, err := store.GetByKey(key)
		if err != nil {
			return podConfig{}, fmt.Errorf("reading %s %s from the cache: %w", r.kind, key, err)
		}
		version := ""
		if m, ok := obj.(metav1.Object); ok && exists {
			// The UID too: an object deleted and created again is a change even if the
			// new one has the same data.
			version = string(m.GetUID()) + ":" + m.GetResourceVersion()
		} else if !r.optional {
			cfg.missing = append(cfg.missing, r)
		}
		fmt.Fprintf(h, "%s/%s=%s\n", r.kind, r.name, version)
	}
	if t.ConfigChangePolicy != appv1.ConfigChangeIgnore {
		cfg.hash = hex.EncodeToString(h.Sum(nil)[:10])
	}
	cfg.problem = configProblem(cfg.missing)
	return cfg, nil
}

// configHashes are the values of appv1.ConfigHashAnnotation the App's Deployment should
// carry: on the Deployment (seen) and on its pod template (pods). "": none.
type configHashes struct {
	seen, pods string
}

// copiesPrefix starts the config hash of a version that reads copies of its config
// (configcopy.go).
const copiesPrefix = "copies:"

// rolloutHashes returns the config hashes of the Deployment of an App whose pod config
// hash is now current ("" when the pods reference no config or the App ignores its
// changes), given the Deployment live now (nil if none). The pods roll only when the
// hash the controller saw last differs from current.
func rolloutHashes(current string, live *appsv1.Deployment) configHashes {
	livePods := ""
	if live != nil {
		livePods = live.Spec.Template.Annotations[appv1.ConfigHashAnnotation]
	}
	if strings.HasPrefix(livePods, copiesPrefix) {
		// Copies of a version of spec.rollout.versionedConfig, which the App no longer
		// has: the pods read the objects again (configcopy.go).
		return configHashes{seen: current, pods: current}
	}
	switch {
	case current == "":
		// Nothing to follow: the pods keep what they have, so that ignoring changes or
		// dropping the last reference rolls nothing by itself.
		return configHashes{pods: livePods}
	case live == nil:
		return configHashes{seen: current, pods: current}
	}
	seen, known := live.Annotations[appv1.ConfigHashAnnotation]
	if !known || seen == current {
		// A baseline (a Deployment written before the controller followed config), or
		// nothing changed since the last write.
		return configHashes{seen: current, pods: livePods}
	}
	return configHashes{seen: current, pods: current}
}

// configProblem returns the problem that missing config makes for the App's pods, or
// nil.
func configProblem(missing []configRef) *podhealth.Problem {
	if len(missing) == 0 {
		return nil
	}
	names := make([]string, 0, len(missing))
	for _, r := range missing {
		names = append(names, fmt.Sprintf("%s %q", r.kind, r.name))
	}
	verb := "does"
	if len(names) > 1 {
		verb = "do"
	}
	return &podhealth.Problem{
		Reason:  appv1.ReasonConfigNotFound,
		Message: fmt.Sprintf("%s, referenced by the pods, %s not exist: the pods wait for it", strings.Join(names, " and "), verb),
	}
}

// configStore returns the metadata cache of kind; nil for Secrets that are not watched.
func (c *Controller) configStore(kind string) *controller.WriteCache {
	if kind == kindSecret {
		return c.secretCopies
	}
	return c.configMapCopies
}

package app

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
)

func TestCopyName(t *testing.T) {
	for _, tc := range []struct{ source, want string }{
		{"settings", "settings-0123456789"},
		{strings.Repeat("a", 242), strings.Repeat("a", 242) + "-0123456789"},
		{strings.Repeat("a", 243), strings.Repeat("a", 242) + "-0123456789"},
		// Shortened to a name that does not end in a dash or a dot.
		{strings.Repeat("a", 241) + "-.b", strings.Repeat("a", 241) + "-0123456789"},
	} {
		got := copyName(tc.source, "0123456789")
		if got != tc.want {
			t.Errorf("copyName(%q) = %q, want %q", tc.source, got, tc.want)
		}
		if errs := validation.IsDNS1123Subdomain(got); len(errs) > 0 {
			t.Errorf("copyName(%q) = %q: not a name: %v", tc.source, got, errs)
		}
	}
}

func TestCopyHash(t *testing.T) {
	base, err := copyHash("web", "ConfigMap", "settings", "", map[string]string{"a": "1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(base) != 10 {
		t.Errorf("hash %q: want 10 hex characters", base)
	}
	again, _ := copyHash("web", "ConfigMap", "settings", "", map[string]string{"a": "1"}, nil)
	if again != base {
		t.Errorf("the same data hashes to %q and %q", base, again)
	}
	for name, args := range map[string]struct {
		app, kind, name, typ string
		data                 map[string]string
		binary               map[string][]byte
	}{
		"another value":    {"web", "ConfigMap", "settings", "", map[string]string{"a": "2"}, nil},
		"another key":      {"web", "ConfigMap", "settings", "", map[string]string{"b": "1"}, nil},
		"binaryData":       {"web", "ConfigMap", "settings", "", map[string]string{"a": "1"}, map[string][]byte{"c": {1}}},
		"another App":      {"api", "ConfigMap", "settings", "", map[string]string{"a": "1"}, nil},
		"another name":     {"web", "ConfigMap", "other", "", map[string]string{"a": "1"}, nil},
		"a Secret":         {"web", "Secret", "settings", "", map[string]string{"a": "1"}, nil},
		"a type of Secret": {"web", "ConfigMap", "settings", "kubernetes.io/tls", map[string]string{"a": "1"}, nil},
	} {
		h, err := copyHash(args.app, args.kind, args.name, args.typ, args.data, args.binary)
		if err != nil || h == base {
			t.Errorf("%s: hash %q (%v), want one other than %q", name, h, err, base)
		}
	}
}

func TestVersionCopies(t *testing.T) {
	refs := []configRef{{kind: "ConfigMap", name: "files"}, {kind: "ConfigMap", name: "settings"}, {kind: "Secret", name: "creds"}}
	c := versionCopies{"Secret/creds": "cccccccccc", "ConfigMap/settings": "aaaaaaaaaa"}
	h := c.encode(refs)
	if want := "copies:ConfigMap/settings=aaaaaaaaaa,Secret/creds=cccccccccc"; h != want {
		t.Errorf("encode = %q, want %q", h, want)
	}
	back, ok := decodeCopies(h)
	if !ok || len(back) != 2 || back["Secret/creds"] != "cccccccccc" || back["ConfigMap/settings"] != "aaaaaaaaaa" {
		t.Errorf("decodeCopies(%q) = %v, %v", h, back, ok)
	}
	if names := back.names(); !sameMultiset(names, []string{"ConfigMap/settings-aaaaaaaaaa", "Secret/creds-cccccccccc"}) {
		t.Errorf("names = %q", names)
	}
	// Nothing copied (every object missing): still a version of copies, reading none.
	if h := (versionCopies{}).encode(refs); h != copiesPrefix {
		t.Errorf("encode of none = %q", h)
	}
	if back, ok := decodeCopies(copiesPrefix); !ok || len(back) != 0 {
		t.Errorf("decodeCopies(%q) = %v, %v", copiesPrefix, back, ok)
	}
	// No reference at all: no config hash, as without versionedConfig.
	if h := c.encode(nil); h != "" {
		t.Errorf("encode without references = %q", h)
	}
	// The config hash of a version without versionedConfig.
	if _, ok := decodeCopies("0a1b2c3d4e5f60718293"); ok {
		t.Error("a plain config hash decoded as copies")
	}
}

// copiesApp is configApp with every kind of reference the controller follows: a
// sidecar's env key of a ConfigMap, an init container's envFrom of a Secret, a Secret
// volume, and one reference not copied (optional, to a missing ConfigMap).
func copiesApp(name string) *appv1.App {
	app := configApp(name)
	t := app.Spec.DeploymentTemplate
	t.Env = append(t.Env, corev1.EnvVar{Name: "MODE", ValueFrom: &corev1.EnvVarSource{
		ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}, Key: "mode"}}})
	t.EnvFrom = append(t.EnvFrom, corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}}},
		corev1.EnvFromSource{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "extra"}, Optional: ptr.To(true)}})
	t.Volumes = append(t.Volumes, appv1.Volume{Name: "tls", Secret: &corev1.SecretVolumeSource{SecretName: "creds"}})
	t.Sidecars = []appv1.Container{{Name: "proxy", Image: "proxy", Env: []corev1.EnvVar{{Name: "LEVEL", ValueFrom: &corev1.EnvVarSource{
		ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "files"}, Key: "level"}}}}}}
	t.InitContainers = []appv1.Container{{Name: "init", Image: "init", EnvFrom: []corev1.EnvFromSource{
		{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}}}}}}
	app.Spec.Rollout = &appv1.Rollout{Canary: canaryStrategy(), VersionedConfig: true}
	return app
}

// TestWithCopies renames every kind of reference to the copies of a version, in the pod
// template the controller builds, and leaves the others and the App as they are.
func TestWithCopies(t *testing.T) {
	app := copiesApp("web")
	before := app.DeepCopy()
	c := versionCopies{"ConfigMap/settings": "aaaaaaaaaa", "ConfigMap/files": "bbbbbbbbbb", "Secret/creds": "cccccccccc"}
	template, err := desiredPodTemplate(app, c.encode(configRefs(app.Spec.DeploymentTemplate)), "")
	if err != nil {
		t.Fatal(err)
	}
	if !apiequality.Semantic.DeepEqual(app, before) {
		t.Error("desiredPodTemplate changed the App")
	}
	var spec corev1.PodSpec
	if b, err := json.Marshal(template.Spec); err != nil || json.Unmarshal(b, &spec) != nil {
		t.Fatalf("converting the pod spec: %v", err)
	}
	var got []string
	for _, ctr := range slices.Concat(spec.Containers, spec.InitContainers) {
		for _, e := range ctr.Env {
			if v := e.ValueFrom; v != nil && v.ConfigMapKeyRef != nil {
				got = append(got, ctr.Name+" env ConfigMap "+v.ConfigMapKeyRef.Name)
			}
			if v := e.ValueFrom; v != nil && v.SecretKeyRef != nil {
				got = append(got, ctr.Name+" env Secret "+v.SecretKeyRef.Name)
			}
		}
		for _, e := range ctr.EnvFrom {
			if e.ConfigMapRef != nil {
				got = append(got, ctr.Name+" envFrom ConfigMap "+e.ConfigMapRef.Name)
			}
			if e.SecretRef != nil {
				got = append(got, ctr.Name+" envFrom Secret "+e.SecretRef.Name)
			}
		}
	}
	for _, v := range spec.Volumes {
		switch {
		case v.ConfigMap != nil:
			got = append(got, "volume ConfigMap "+v.ConfigMap.Name)
		case v.Secret != nil:
			got = append(got, "volume Secret "+v.Secret.SecretName)
		}
	}
	want := []string{
		"app-deploy-container env Secret creds-cccccccccc",
		"app-deploy-container env ConfigMap settings-aaaaaaaaaa",
		"app-deploy-container envFrom ConfigMap settings-aaaaaaaaaa",
		"app-deploy-container envFrom Secret creds-cccccccccc",
		"app-deploy-container envFrom ConfigMap extra", // not copied: read directly
		"proxy env ConfigMap files-bbbbbbbbbb",
		"init envFrom Secret creds-cccccccccc",
		"volume ConfigMap files-bbbbbbbbbb",
		"volume Secret creds-cccccccccc",
	}
	if !sameMultiset(got, want) {
		t.Errorf("references %q\nwant %q", got, want)
	}
	if h := template.Annotations[appv1.ConfigHashAnnotation]; !strings.HasPrefix(h, copiesPrefix) {
		t.Errorf("config hash %q: want the copies", h)
	}
	// Without copies in the hash, the references are the objects'.
	plain, err := desiredPodTemplate(app, "0a1b2c", "")
	if err != nil {
		t.Fatal(err)
	}
	if n := *plain.Spec.Volumes[0].ConfigMap.Name; n != "files" {
		t.Errorf("volume of a plain config hash reads %q", n)
	}
}

func TestCopiesVersion(t *testing.T) {
	refs := []configRef{{kind: "ConfigMap", name: "settings"}}
	now := versionCopies{"ConfigMap/settings": "2222222222"}
	old := versionCopies{"ConfigMap/settings": "1111111111"}
	state := func(stable, canary *appv1.RolloutVersion) *appv1.RolloutStatus {
		return &appv1.RolloutStatus{Stable: stable, Canary: canary}
	}
	v := func(rev string, c versionCopies) *appv1.RolloutVersion {
		return &appv1.RolloutVersion{Revision: rev, ConfigHash: c.encode(refs)}
	}
	for _, tc := range []struct {
		name     string
		recorded versionCopies
		cur      *appv1.RolloutStatus
		revision string
		changed  bool
		want     versionCopies
	}{
		{"a new App: the objects as they are", nil, nil, "r1", true, now},
		{"the objects changed: as they are", old, state(v("r1", old), nil), "r1", true, now},
		{"nothing changed: the stable's copies", nil, state(v("r1", old), nil), "r1", false, old},
		{"nothing changed during a rollout: the canary's", nil, state(v("r1", old), v("r1", now)), "r1", false, now},
		{"a new spec: the objects as they are", nil, state(v("r1", old), nil), "r2", false, now},
		{"a rollback to r0: its recorded copies", old, state(v("r1", now), nil), "r0", false, old},
		{"a rollback and a change of the objects: as they are", old, state(v("r1", now), nil), "r0", true, now},
		{"versionedConfig just added: as they are", nil, state(&appv1.RolloutVersion{Revision: "r1", ConfigHash: "0a1b2c"}, nil), "r1", false, now},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cc := &configCopies{refs: refs, current: now, recorded: tc.recorded}
			if got, want := copiesVersion(cc, tc.revision, tc.cur, tc.changed), tc.want.encode(refs); got != want {
				t.Errorf("copiesVersion = %q, want %q", got, want)
			}
		})
	}
}

// copiesFixture returns a fixture with the objects copiesApp reads (but extra) in the
// fake API server with their data, and their metadata in the caches.
func copiesFixture(t *testing.T) *fixture {
	f := newFixture(t)
	for _, obj := range []*corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "tcs", Name: "settings", UID: "settings-uid", ResourceVersion: "1"}, Data: map[string]string{"mode": "fast"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "tcs", Name: "files", UID: "files-uid", ResourceVersion: "2"}, Data: map[string]string{"level": "info"}},
	} {
		if err := f.kubeClient.Tracker().Add(obj); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.kubeClient.Tracker().Add(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "tcs", Name: "creds", UID: "creds-uid", ResourceVersion: "3"},
		Data: map[string][]byte{"password": []byte("s3cret")}}); err != nil {
		t.Fatal(err)
	}
	f.configCatchUp()
	return f
}

// configCatchUp gives the ConfigMap and Secret metadata caches what the fake API server
// holds, as the informers' transform keeps it.
func (f *fixture) configCatchUp() {
	f.t.Helper()
	for _, kind := range []string{"ConfigMap", "Secret"} {
		gvr := corev1.SchemeGroupVersion.WithResource(strings.ToLower(kind) + "s")
		list, err := f.kubeClient.Tracker().List(gvr, corev1.SchemeGroupVersion.WithKind(kind), "")
		if err != nil {
			f.t.Fatal(err)
		}
		items, _ := meta.ExtractList(list)
		var objs []interface{}
		for _, item := range items {
			var om metav1.ObjectMeta
			switch o := item.(type) {
			case *corev1.ConfigMap:
				om = o.ObjectMeta
			case *corev1.Secret:
				om = o.ObjectMeta
			}
			obj, _ := controller.StripToVersion(&metav1.PartialObjectMetadata{
				TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: kind}, ObjectMeta: *om.DeepCopy()})
			objs = append(objs, obj)
		}
		store := f.inf.ConfigMaps.Informer().GetIndexer()
		if kind == "Secret" {
			store = f.inf.Secrets.Informer().GetIndexer()
		}
		if err := store.Replace(objs, ""); err != nil {
			f.t.Fatal(err)
		}
	}
}

// copiesWorld returns a world of a new App web of 4 replicas with a canary strategy and
// versionedConfig, reading copiesApp's objects.
func copiesWorld(t *testing.T) *world {
	t.Helper()
	f := copiesFixture(t)
	app := copiesApp("web")
	app.Spec.DeploymentTemplate.Replicas = ptr.To[int32](4)
	f.addApps(app)
	return newWorld(t, f, app)
}

// setData changes the data of the ConfigMap name in the fake API server, at resource
// version rv, and the caches see it.
func (w *world) setData(name, rv string, data map[string]string) {
	w.t.Helper()
	gvr := corev1.SchemeGroupVersion.WithResource("configmaps")
	obj, err := w.f.kubeClient.Tracker().Get(gvr, "tcs", name)
	if err != nil {
		w.t.Fatal(err)
	}
	cm := obj.(*corev1.ConfigMap).DeepCopy()
	cm.Data, cm.ResourceVersion = data, rv
	if err := w.f.kubeClient.Tracker().Update(gvr, cm, "tcs"); err != nil {
		w.t.Fatal(err)
	}
	w.f.configCatchUp()
}

// volumeOf returns the ConfigMap the volume files of the Deployment name reads.
func (w *world) volumeOf(name string) string {
	w.t.Helper()
	d := w.f.liveDeploymentOf(name)
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == "files" {
			return v.ConfigMap.Name
		}
	}
	return ""
}

// configMaps returns the names of the ConfigMaps the fake API server holds.
func (w *world) configMaps() []string {
	list, _ := w.f.kubeClient.CoreV1().ConfigMaps("tcs").List(w.f.ctx, metav1.ListOptions{})
	var out []string
	for _, cm := range list.Items {
		out = append(out, cm.Name)
	}
	return out
}

// copyOf returns the copy name of the fake API server, nil if none.
func (w *world) copyOf(kind, name string) metav1.Object {
	w.t.Helper()
	var obj metav1.Object
	var err error
	if kind == "Secret" {
		obj, err = w.f.kubeClient.CoreV1().Secrets("tcs").Get(w.f.ctx, name, metav1.GetOptions{})
	} else {
		obj, err = w.f.kubeClient.CoreV1().ConfigMaps("tcs").Get(w.f.ctx, name, metav1.GetOptions{})
	}
	if err != nil {
		return nil
	}
	return obj
}

// TestVersionedConfigRollout walks a config change through a canary and pins each
// sync's writes: a new App copies each object once; a change of one ConfigMap creates
// its one new copy and rewrites only the canary's template (the stable Deployment gets
// its seen hash, not a new template); an abort leaves the stable as it was; the data
// changed back ends the rollout at once, and the copy no version reads is deleted.
func TestVersionedConfigRollout(t *testing.T) {
	w := copiesWorld(t)
	w.step("a new App: the revision, a copy of each object, the children", []string{
		"create controllerrevisions web-<rev>",
		"create configmaps files-5a606591c5", "create configmaps settings-0c1c0e36d6", "create secrets creds-77b68fcbb8",
		"patch deployments web-deploy", "patch services web-service",
		"patch controllerrevisions web-<rev>", // the stable version's copies recorded
	}, "")
	for _, c := range []struct{ kind, name string }{{"ConfigMap", "files-5a606591c5"}, {"ConfigMap", "settings-0c1c0e36d6"}, {"Secret", "creds-77b68fcbb8"}} {
		obj := w.copyOf(c.kind, c.name)
		if obj == nil {
			t.Fatalf("no copy %s %s", c.kind, c.name)
		}
		immutable := false
		switch o := obj.(type) {
		case *corev1.ConfigMap:
			immutable = ptr.Deref(o.Immutable, false)
		case *corev1.Secret:
			immutable = ptr.Deref(o.Immutable, false) && string(o.Data["password"]) == "s3cret"
		}
		if !immutable || !controller.IsControlledBy(obj, w.app()) || obj.GetLabels()[appv1.ManagedByLabel] != appv1.ManagedByValue ||
			obj.GetAnnotations()[appv1.ConfigCopyOfAnnotation] == "" {
			t.Errorf("copy %s %s: immutable (with the data) %v, owners %v, labels %v, annotations %v", c.kind, c.name, immutable,
				obj.GetOwnerReferences(), obj.GetLabels(), obj.GetAnnotations())
		}
	}
	if v := w.volumeOf("web-deploy"); v != "files-5a606591c5" {
		t.Errorf("the stable reads %s", v)
	}
	w.f.configCatchUp()
	w.deploymentSettles("web-deploy", "aaaa")
	w.step("settled: the status", []string{"patch apps/status web"}, "Healthy 0")
	if c := meta.FindStatusCondition(w.app().Status.Conditions, appv1.ConditionConfigVersioned); c == nil || c.Reason != appv1.ReasonConfigCopied ||
		c.Message != "each version of the pods reads its own copy of 2 ConfigMap(s) and 1 Secret(s)" {
		t.Errorf("ConfigVersioned = %+v", c)
	}
	w.step("a resync", nil, "Healthy 0")

	stable := w.f.liveDeploymentOf("web-deploy").Spec.Template
	w.setData("files", "20", map[string]string{"level": "debug"})
	w.step("files changed: its new copy, the canary, the stable's seen hash", []string{
		"create configmaps files-6bb9f3321d", "patch apps/status web",
		"patch deployments web-deploy-canary", "patch deployments web-deploy",
	}, "Progressing 0")
	if !apiequality.Semantic.DeepEqual(w.f.liveDeploymentOf("web-deploy").Spec.Template, stable) {
		t.Error("the stable Deployment's pod template changed")
	}
	if v := w.volumeOf("web-deploy-canary"); v != "files-6bb9f3321d" {
		t.Errorf("the canary reads %s", v)
	}
	w.f.configCatchUp()
	w.step("a resync", nil, "Progressing 0")

	w.request(appv1.RolloutActionAbort, "abort-1")
	w.step("kubectl app abort: the canary scaled to 0, the stable untouched", []string{
		"patch apps/status web", "patch deployments web-deploy-canary",
	}, "Aborted 0")
	if !apiequality.Semantic.DeepEqual(w.f.liveDeploymentOf("web-deploy").Spec.Template, stable) {
		t.Error("the abort changed the stable Deployment's pod template")
	}
	w.step("a resync", nil, "Aborted 0")

	w.setData("files", "21", map[string]string{"level": "info"})
	// The state first, then the sync's status with the conditions (as a fast rollback
	// without copies); the stable Deployment's write is its seen hash.
	w.step("the data changed back: the stable's copies again, the rollout ends", []string{
		"patch apps/status web", "delete deployments web-deploy-canary", "patch deployments web-deploy", "patch apps/status web",
	}, "Healthy 0")
	w.f.configCatchUp()
	w.step("the copy no version reads is deleted", []string{"delete configmaps files-6bb9f3321d"}, "Healthy 0")
	w.step("the informer has not seen the deletion yet: not deleted again", nil, "Healthy 0")
	if !apiequality.Semantic.DeepEqual(w.f.liveDeploymentOf("web-deploy").Spec.Template, stable) {
		t.Error("the stable Deployment's pod template changed")
	}
	w.f.configCatchUp()
	w.step("at rest", nil, "Healthy 0")
	if got := w.configMaps(); !sameMultiset(got, []string{"files", "settings", "files-5a606591c5", "settings-0c1c0e36d6"}) {
		t.Errorf("ConfigMaps %q", got)
	}
	// The Secret's data is in no Event and no condition.
	for _, e := range w.events {
		if strings.Contains(e, "s3cret") {
			t.Errorf("Event %q", e)
		}
	}
	for _, c := range w.app().Status.Conditions {
		if strings.Contains(c.Message, "s3cret") {
			t.Errorf("condition %+v", c)
		}
	}
}

// drive syncs the App until its rollout is Healthy with no canary left, the Deployments
// settling after each sync, and fails after ten syncs.
func (w *world) drive(what string) {
	w.t.Helper()
	for range 10 {
		if err := w.f.syncOnce(w.key.Namespace, w.key.Name); err != nil {
			w.t.Fatalf("%s: %v", what, err)
		}
		w.events = append(w.events, w.f.events()...)
		w.f.catchUp()
		w.f.configCatchUp()
		if err := w.f.inf.Apps.Informer().GetIndexer().Update(w.app()); err != nil {
			w.t.Fatal(err)
		}
		for _, name := range []string{"web-deploy", "web-deploy-canary"} {
			if w.deploymentReplicas(name) >= 0 {
				w.deploymentSettles(name, "bbbb")
			}
		}
		if r := w.app().Status.Rollout; r != nil && r.Phase == appv1.RolloutHealthy && r.Canary == nil {
			return
		}
	}
	w.t.Fatalf("%s: rollout %+v after ten syncs", what, w.app().Status.Rollout)
}

// TestVersionedConfigRollback changes the image and a ConfigMap at once, promotes, and
// rolls the spec back: the old code comes back with the old copies, at once (the
// version is in the rollback window), and both versions' copies are kept while their
// revisions are.
func TestVersionedConfigRollback(t *testing.T) {
	w := copiesWorld(t)
	w.drive("a new App")
	oldSpec := w.app().Spec.DeepCopy()
	w.setData("files", "20", map[string]string{"level": "debug"})
	w.edit(true, func(a *appv1.App) { a.Spec.DeploymentTemplate.Image = "nginx:2" })
	w.step("image and files changed: a rollout", []string{
		"create controllerrevisions web-<rev>", "create configmaps files-6bb9f3321d", "patch apps/status web",
		"patch deployments web-deploy-canary", "patch deployments web-deploy",
	}, "Progressing 0")
	w.request(appv1.RolloutActionPromoteFull, "promote-1")
	w.drive("promoted")
	if w.image("web-deploy") != "nginx:2" || w.volumeOf("web-deploy") != "files-6bb9f3321d" {
		t.Fatalf("promoted stable: %s reading %s", w.image("web-deploy"), w.volumeOf("web-deploy"))
	}
	w.f.configCatchUp()
	w.step("at rest", nil, "Healthy 0")
	if got := w.configMaps(); !sameMultiset(got, []string{"files", "settings", "files-5a606591c5", "files-6bb9f3321d", "settings-0c1c0e36d6"}) {
		t.Errorf("ConfigMaps %q: want both versions' copies, as both revisions are kept", got)
	}

	w.edit(true, func(a *appv1.App) { a.Spec = *oldSpec })
	w.step("the spec rolled back: the old code and its copies to the stable at once", []string{
		"patch controllerrevisions web-<rev>", "patch apps/status web", "patch deployments web-deploy",
	}, "Healthy 0")
	if w.image("web-deploy") != "nginx" || w.volumeOf("web-deploy") != "files-5a606591c5" {
		t.Errorf("rolled back stable: %s reading %s, want nginx reading files-5a606591c5", w.image("web-deploy"), w.volumeOf("web-deploy"))
	}

	// Revisions pruned to one: the copies only the pruned one names go with it, once the
	// canary Deployment that ran them is gone too (scaleDownDelaySeconds).
	w.edit(true, func(a *appv1.App) { a.Spec.RevisionHistoryLimit = ptr.To[int32](1) })
	w.drive("history limit 1")
	w.f.configCatchUp()
	w.drive("history limit 1")
	if got := w.configMaps(); !slices.Contains(got, "files-6bb9f3321d") {
		t.Errorf("ConfigMaps %q: the copy the canary Deployment still reads was deleted", got)
	}
	w.at(time.Hour)
	w.drive("the canary deleted")
	w.f.configCatchUp()
	w.drive("the canary deleted")
	if got := w.configMaps(); !sameMultiset(got, []string{"files", "settings", "files-5a606591c5", "settings-0c1c0e36d6"}) {
		t.Errorf("ConfigMaps %q after the pruning of the other revision", got)
	}
}

// TestVersionedConfigSecretsNotWatched: with --config-rollout-secrets=false the
// ConfigMaps are copied, the Secret is read directly, and the App says so (a True
// condition and a Warning Event once).
func TestVersionedConfigSecretsNotWatched(t *testing.T) {
	w := copiesWorld(t)
	w.f.c.secrets, w.f.c.secretCopies = nil, nil
	w.drive("a new App")
	if w.copyOf("Secret", "creds-77b68fcbb8") != nil {
		t.Error("the Secret was copied")
	}
	d := w.f.liveDeploymentOf("web-deploy")
	if got := d.Spec.Template.Spec.Containers[0].Env[0].ValueFrom.SecretKeyRef.Name; got != "creds" {
		t.Errorf("the pods read Secret %s, want creds", got)
	}
	if v := w.volumeOf("web-deploy"); v != "files-5a606591c5" {
		t.Errorf("the pods read ConfigMap %s", v)
	}
	c := meta.FindStatusCondition(w.app().Status.Conditions, appv1.ConditionConfigVersioned)
	want := `the controller is installed without access to Secrets (--config-rollout-secrets=false): the pods read Secret "creds" directly, shared by every version; each version of the pods reads its own copy of 2 ConfigMap(s) and 0 Secret(s)`
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != appv1.ReasonSecretsNotCopied || c.Message != want {
		t.Errorf("ConfigVersioned = %+v", c)
	}
	if n := slices.IndexFunc(w.events, func(e string) bool { return strings.HasPrefix(e, "Warning SecretsNotCopied ") }); n < 0 {
		t.Errorf("events %q: want the Warning SecretsNotCopied", w.events)
	}
	if ready := meta.FindStatusCondition(w.app().Status.Conditions, appv1.ConditionReady); ready == nil || ready.Status != metav1.ConditionTrue {
		t.Errorf("Ready = %+v", ready)
	}
}

// TestVersionedConfigNameClash: a copy's name held by a ConfigMap the App does not
// control is never written; the pods read the object itself, and the App says so.
func TestVersionedConfigNameClash(t *testing.T) {
	w := copiesWorld(t)
	if err := w.f.kubeClient.Tracker().Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "tcs", Name: "files-5a606591c5", UID: "theirs"},
		Data: map[string]string{"level": "theirs"}}); err != nil {
		t.Fatal(err)
	}
	w.f.configCatchUp()
	w.drive("a new App")
	if v := w.volumeOf("web-deploy"); v != "files" {
		t.Errorf("the pods read %s, want files itself", v)
	}
	if cm := w.copyOf("ConfigMap", "files-5a606591c5").(*corev1.ConfigMap); cm.Data["level"] != "theirs" || len(cm.OwnerReferences) != 0 {
		t.Errorf("the ConfigMap of the clash was written: %+v", cm)
	}
	c := meta.FindStatusCondition(w.app().Status.Conditions, appv1.ConditionNamesAccepted)
	if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, `ConfigMap "files-5a606591c5" already exists and is not managed by this App`) {
		t.Errorf("NamesAccepted = %+v", c)
	}
	if n := slices.IndexFunc(w.events, func(e string) bool { return strings.HasPrefix(e, "Warning ErrResourceExists") }); n < 0 {
		t.Errorf("events %q: want ErrResourceExists", w.events)
	}
}

package app

import (
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
	"github.com/app-controller/app-controller/pkg/controller/controllertest"
)

// configObject returns the metadata of a ConfigMap or Secret as the metadata informer
// keeps it (controller.StripToVersion).
func configObject(kind, name, rv string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{Kind: kind, APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "tcs", Name: name, UID: types.UID(name + "-uid"), ResourceVersion: rv},
	}
}

// setConfig adds or replaces the metadata of ConfigMaps and Secrets in the caches and,
// as the informer would, runs the event handler.
func (f *fixture) setConfig(objs ...*metav1.PartialObjectMetadata) {
	f.t.Helper()
	for _, o := range objs {
		i := f.inf.ConfigMaps.Informer().GetIndexer()
		if o.Kind == "Secret" {
			i = f.inf.Secrets.Informer().GetIndexer()
		}
		old, exists, _ := i.Get(o)
		if err := i.Add(o); err != nil {
			f.t.Fatal(err)
		}
		h := f.c.configHandler(klog.FromContext(f.ctx), o.Kind)
		if exists {
			h.OnUpdate(old, o)
		} else {
			h.OnAdd(o, false)
		}
	}
}

// configApp returns a new App whose pods read the ConfigMap settings (envFrom), the
// Secret creds (an env key) and the ConfigMap files (a volume).
func configApp(name string) *appv1.App {
	app := newApp(name, testNow.Add(-time.Hour))
	t := app.Spec.DeploymentTemplate
	t.EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}}
	t.Env = []corev1.EnvVar{{Name: "PASSWORD", ValueFrom: &corev1.EnvVarSource{
		SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "password"}}}}
	t.Volumes = []appv1.Volume{{Name: "files", ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "files"}}}}
	return app
}

// liveDeploymentOf returns the Deployment the fake API server holds.
func (f *fixture) liveDeploymentOf(name string) *appsv1.Deployment {
	f.t.Helper()
	obj, err := f.kubeClient.Tracker().Get(appsv1.SchemeGroupVersion.WithResource("deployments"), "tcs", name)
	if err != nil {
		f.t.Fatalf("getting Deployment %s: %v", name, err)
	}
	return obj.(*appsv1.Deployment)
}

// writeNames returns the writes of the last sync as "verb resource[/subresource]".
func (f *fixture) writeNames() []string {
	var out []string
	for _, a := range f.writes() {
		d := describe(a)
		s := d.verb + " " + d.resource
		if d.subresource != "" {
			s += "/" + d.subresource
		}
		out = append(out, s)
	}
	return out
}

// createdWithConfig returns a fixture where app has been created with its ConfigMaps
// and Secret, and its children and revision are in the caches.
func createdWithConfig(t *testing.T, app *appv1.App) *fixture {
	t.Helper()
	f := newFixture(t)
	f.addApps(app)
	f.setConfig(configObject("ConfigMap", "settings", "1"), configObject("Secret", "creds", "2"), configObject("ConfigMap", "files", "3"))
	if err := f.sync(app.Namespace, app.Name); err != nil {
		t.Fatal(err)
	}
	f.catchUp()
	f.events()
	return f
}

func TestConfigRollout(t *testing.T) {
	t.Run("a new Deployment carries the hash on itself and its pod template", func(t *testing.T) {
		app := configApp("web")
		f := createdWithConfig(t, app)
		d := f.liveDeploymentOf("web-deploy")
		seen, pods := d.Annotations[appv1.ConfigHashAnnotation], d.Spec.Template.Annotations[appv1.ConfigHashAnnotation]
		if seen == "" || seen != pods {
			t.Fatalf("config hashes: Deployment %q, pod template %q; want the same, set", seen, pods)
		}
		// Nothing changed: nothing written.
		f.mustSync("web")
		if w := f.writeNames(); len(w) != 0 {
			t.Errorf("second sync wrote %q, want nothing", w)
		}
	})

	for _, tc := range []struct {
		name    string
		changed *metav1.PartialObjectMetadata
	}{
		{"a ConfigMap of envFrom changed", configObject("ConfigMap", "settings", "10")},
		{"a Secret of an env key changed", configObject("Secret", "creds", "11")},
		{"a ConfigMap of a volume changed", configObject("ConfigMap", "files", "12")},
		{"a ConfigMap deleted and created again", &metav1.PartialObjectMetadata{
			TypeMeta:   metav1.TypeMeta{Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "tcs", Name: "settings", UID: "new-uid", ResourceVersion: "30"},
		}},
	} {
		t.Run(tc.name+": the pods roll, one Deployment write and its Event", func(t *testing.T) {
			app := configApp("web")
			f := createdWithConfig(t, app)
			before := f.liveDeploymentOf("web-deploy").Spec.Template.Annotations[appv1.ConfigHashAnnotation]
			queued(f.c)
			f.setConfig(tc.changed)
			if got := queued(f.c); !got.Has("tcs/web") || got.Len() != 1 {
				t.Errorf("the change queued %v, want the App", got.UnsortedList())
			}
			if err := f.syncOnce("tcs", "web"); err != nil {
				t.Fatal(err)
			}
			if w := f.writeNames(); !slices.Equal(w, []string{"patch deployments"}) {
				t.Errorf("writes %q, want the Deployment", w)
			}
			if ev := f.events(); !slices.Equal(ev, []string{"Normal Synced App synced successfully"}) {
				t.Errorf("events %q", ev)
			}
			d := f.liveDeploymentOf("web-deploy")
			after := d.Spec.Template.Annotations[appv1.ConfigHashAnnotation]
			if after == before || after != d.Annotations[appv1.ConfigHashAnnotation] {
				t.Errorf("pod template hash %q -> %q (Deployment %q): want a new hash on both", before, after, d.Annotations[appv1.ConfigHashAnnotation])
			}
		})
	}

	t.Run("an unrelated ConfigMap changed: nothing queued, nothing written", func(t *testing.T) {
		f := createdWithConfig(t, configApp("web"))
		queued(f.c)
		f.setConfig(configObject("ConfigMap", "other", "1"))
		f.setConfig(configObject("ConfigMap", "other", "2"))
		if got := queued(f.c); got.Len() != 0 {
			t.Errorf("queued %v, want nothing", got.UnsortedList())
		}
		f.mustSync("web")
		if w := f.writeNames(); len(w) != 0 {
			t.Errorf("writes %q, want none", w)
		}
	})

	t.Run("configChangePolicy Ignore: a change rolls nothing", func(t *testing.T) {
		app := configApp("web")
		app.Spec.DeploymentTemplate.ConfigChangePolicy = appv1.ConfigChangeIgnore
		f := createdWithConfig(t, app)
		d := f.liveDeploymentOf("web-deploy")
		if _, set := d.Spec.Template.Annotations[appv1.ConfigHashAnnotation]; set {
			t.Errorf("pod template carries a config hash under Ignore")
		}
		f.setConfig(configObject("ConfigMap", "settings", "10"))
		f.mustSync("web")
		if w := f.writeNames(); len(w) != 0 {
			t.Errorf("writes %q, want none", w)
		}
	})

	t.Run("upgrade: a Deployment from the previous controller is not rolled, the next change is", func(t *testing.T) {
		app := configApp("web")
		f := newFixture(t)
		// As the previous controller left it: no config hash anywhere, status synced.
		f.addDeployments(liveDeployment(t, app))
		f.addServices(liveService(t, app))
		app = syncedAppWith(t, app)
		f.addApps(app)
		f.setConfig(configObject("ConfigMap", "settings", "1"), configObject("Secret", "creds", "2"), configObject("ConfigMap", "files", "3"))
		previous := f.liveDeploymentOf("web-deploy").Spec.Template.DeepCopy()
		f.mustSync("web")
		if w := f.writeNames(); !sameMultiset(w, []string{"patch deployments", "patch apps/status"}) {
			t.Errorf("upgrade writes %q, want the Deployment (its own annotation only) and the status", w)
		}
		d := f.liveDeploymentOf("web-deploy")
		if _, set := d.Spec.Template.Annotations[appv1.ConfigHashAnnotation]; set || !equalTemplates(t, previous, &d.Spec.Template) {
			t.Errorf("the upgrade changed the pod template (a rollout): %v", d.Spec.Template.Annotations)
		}
		if d.Annotations[appv1.ConfigHashAnnotation] == "" {
			t.Errorf("the Deployment has no baseline hash")
		}
		f.catchUp()
		f.events()
		f.setConfig(configObject("ConfigMap", "settings", "10"))
		f.mustSync("web")
		d = f.liveDeploymentOf("web-deploy")
		if d.Spec.Template.Annotations[appv1.ConfigHashAnnotation] != d.Annotations[appv1.ConfigHashAnnotation] {
			t.Errorf("the change after the upgrade did not roll the pods: %v", d.Spec.Template.Annotations)
		}
	})

	t.Run("kubectl rollout restart by hand: not undone", func(t *testing.T) {
		f := createdWithConfig(t, configApp("web"))
		d := f.liveDeploymentOf("web-deploy").DeepCopy()
		d.Spec.Template.Annotations[appv1.RestartedAtAnnotation] = "2026-11-24T10:00:00Z"
		d.ResourceVersion = "999"
		if err := f.kubeClient.Tracker().Update(appsv1.SchemeGroupVersion.WithResource("deployments"), d, "tcs"); err != nil {
			t.Fatal(err)
		}
		f.catchUp()
		f.mustSync("web")
		if w := f.writeNames(); len(w) != 0 {
			t.Errorf("writes %q after a restart by hand, want none", w)
		}
	})
}

// syncedAppWith returns app with the status a previous sync left, without touching f.
func syncedAppWith(t *testing.T, app *appv1.App) *appv1.App {
	t.Helper()
	app = app.DeepCopy()
	app.Status.ObservedGeneration = app.Generation
	return app
}

// equalTemplates compares two pod templates field by field.
func equalTemplates(t *testing.T, a, b *corev1.PodTemplateSpec) bool {
	t.Helper()
	ok, err := controller.UpToDate(a, b)
	if err != nil {
		t.Fatal(err)
	}
	back, err := controller.UpToDate(b, a)
	if err != nil {
		t.Fatal(err)
	}
	return ok && back
}

func TestConfigNotFound(t *testing.T) {
	app := configApp("web")
	f := newFixture(t)
	f.addApps(app)
	f.setConfig(configObject("Secret", "creds", "2"), configObject("ConfigMap", "files", "3"))
	f.mustSync("web")
	f.catchUp()
	ready := meta.FindStatusCondition(f.appNow("web").Status.Conditions, appv1.ConditionReady)
	want := `ConfigMap "settings", referenced by the pods, does not exist: the pods wait for it`
	if ready == nil || ready.Reason != appv1.ReasonConfigNotFound || ready.Message != want {
		t.Fatalf("Ready = %+v, want ConfigNotFound: %s", ready, want)
	}
	if ev := f.events(); !slices.Contains(ev, "Warning ConfigNotFound "+want) {
		t.Errorf("events %q, want the ConfigNotFound Warning", ev)
	}
	// Reported once: a sync with nothing changed emits no Event again.
	f.deploymentRolledOut("web-deploy")
	f.mustSync("web")
	if ev := f.events(); len(ev) != 0 {
		t.Errorf("events %q on a sync with nothing new", ev)
	}
	if c := meta.FindStatusCondition(f.appNow("web").Status.Conditions, appv1.ConditionReady); c.Reason != appv1.ReasonConfigNotFound {
		t.Errorf("Ready = %+v, want ConfigNotFound while it is missing", c)
	}

	// Created: the pods roll (they may have started already without it) and the App
	// becomes Ready when they are.
	f.setConfig(configObject("ConfigMap", "settings", "20"))
	f.mustSync("web")
	f.catchUp()
	f.deploymentRolledOut("web-deploy")
	f.mustSync("web")
	if c := meta.FindStatusCondition(f.appNow("web").Status.Conditions, appv1.ConditionReady); c.Status != metav1.ConditionTrue {
		t.Errorf("Ready = %+v once the ConfigMap exists", c)
	}

	// An optional reference is never missing.
	opt := configApp("opt")
	opt.Spec.DeploymentTemplate.EnvFrom[0].ConfigMapRef.Optional = ptr.To(true)
	if cfg, err := f.c.podConfig(opt); err != nil || len(cfg.missing) != 0 {
		t.Errorf("optional ConfigMap reported missing: %+v, %v", cfg.missing, err)
	}
}

// appNow returns the App as the controller sees it now.
func (f *fixture) appNow(name string) *appv1.App {
	f.t.Helper()
	app, exists, err := f.c.getApp(cache.ObjectName{Namespace: "tcs", Name: name})
	if err != nil || !exists {
		f.t.Fatalf("App %s: %v", name, err)
	}
	return app
}

// deploymentRolledOut makes the fake Deployment report every replica updated and
// available at its current generation, in the API server and the cache.
func (f *fixture) deploymentRolledOut(name string) {
	f.t.Helper()
	d := f.liveDeploymentOf(name).DeepCopy()
	want := ptr.Deref(d.Spec.Replicas, 1)
	d.Status = appsv1.DeploymentStatus{
		ObservedGeneration: d.Generation, Replicas: want, UpdatedReplicas: want, ReadyReplicas: want, AvailableReplicas: want,
		Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"}},
	}
	if err := f.kubeClient.Tracker().Update(appsv1.SchemeGroupVersion.WithResource("deployments"), d, "tcs"); err != nil {
		f.t.Fatal(err)
	}
	f.catchUp()
}

func TestConfigRefs(t *testing.T) {
	app := configApp("web")
	app.Spec.DeploymentTemplate.EnvFrom = append(app.Spec.DeploymentTemplate.EnvFrom,
		corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Optional: ptr.To(true)}},
		corev1.EnvFromSource{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "extra"}, Optional: ptr.To(true)}})
	app.Spec.DeploymentTemplate.Volumes = append(app.Spec.DeploymentTemplate.Volumes,
		appv1.Volume{Name: "tls", Secret: &corev1.SecretVolumeSource{SecretName: "tls"}},
		appv1.Volume{Name: "scratch", EmptyDir: &corev1.EmptyDirVolumeSource{}})
	var got []string
	for _, r := range configRefs(app.Spec.DeploymentTemplate) {
		got = append(got, r.kind+"/"+r.name+map[bool]string{true: "?", false: ""}[r.optional])
	}
	// creds: required by env, optional by envFrom: required.
	want := []string{"ConfigMap/extra?", "ConfigMap/files", "ConfigMap/settings", "Secret/creds", "Secret/tls"}
	if !slices.Equal(got, want) {
		t.Errorf("configRefs = %q, want %q", got, want)
	}
	keys, _ := indexByConfig(app)
	if !slices.Contains(keys, "Secret/tcs/tls") || len(keys) != 5 {
		t.Errorf("index keys %q", keys)
	}
	if refs := configRefs(nil); refs != nil {
		t.Errorf("no template: %v", refs)
	}
	if p := configProblem([]configRef{{kind: "ConfigMap", name: "a"}, {kind: "Secret", name: "b"}}); p == nil || !strings.Contains(p.Message, `ConfigMap "a" and Secret "b", referenced by the pods, do not exist`) {
		t.Errorf("configProblem = %+v", p)
	}
}

func TestStripToVersion(t *testing.T) {
	in := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Namespace: "ns", Name: "n", UID: "u", ResourceVersion: "7",
		Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{...}"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
		OwnerReferences: []metav1.OwnerReference{{Kind: "Other", Name: "o", UID: "o"},
			{APIVersion: "appcontroller.k8s.io/v1", Kind: "App", Name: "web", UID: "w", Controller: ptr.To(true)}},
	}}
	out, err := controller.StripToVersion(in)
	if err != nil {
		t.Fatal(err)
	}
	m := out.(*metav1.PartialObjectMetadata)
	if m.Labels != nil || m.Annotations != nil || m.ManagedFields != nil || m.Name != "n" || m.ResourceVersion != "7" || m.UID != "u" {
		t.Errorf("StripToVersion kept %+v", m.ObjectMeta)
	}
	// The controller reference only: a copy of an App's config is known by it.
	if len(m.OwnerReferences) != 1 || m.OwnerReferences[0].UID != "w" {
		t.Errorf("StripToVersion kept the owners %+v", m.OwnerReferences)
	}
	controllertest.Seed(t, newFixture(t).inf.ConfigMaps.Informer().GetIndexer(), nil, m)
}

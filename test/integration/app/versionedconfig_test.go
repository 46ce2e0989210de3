package app

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
	"github.com/app-controller/app-controller/pkg/controllermanager"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// Config that belongs to a version (spec.rollout.versionedConfig) on the real API server:
// the copies created once, immutable, owned and labelled; a config change walks the
// canary with the stable Deployment's spec never written; a change during the canary, an
// abort, the data changed back, a rollback of code and config together; the copies
// pruned and collected with the App; Secrets not watched.

// configAppOf returns an App of 4 replicas reading the ConfigMap settings (a volume and
// an env key) and the Secret creds (envFrom), with a canary of 25% then a pause until
// promoted, and versionedConfig.
func configAppOf(ns string) *appv1.App {
	app := rolloutApp(ns, "web", 4, setWeight(25), pause(0))
	app.Spec.Rollout.VersionedConfig = true
	t := app.Spec.DeploymentTemplate
	t.Volumes = []appv1.Volume{{Name: "settings", ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}}
	t.VolumeMounts = []appv1.VolumeMount{{Name: "settings", MountPath: "/etc/settings"}}
	t.Env = []corev1.EnvVar{{Name: "LEVEL", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}, Key: "level"}}}}
	t.EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}}}}
	return app
}

// setSettings writes the data of the ConfigMap settings (created if needed).
func (c clients) setSettings(t *testing.T, ns, level string) {
	t.Helper()
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns}, Data: map[string]string{"level": level}}
	if _, err := c.Kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		_, err = edit(t, c.Kube.CoreV1().ConfigMaps(ns), "ConfigMap", "settings", func(cm *corev1.ConfigMap) { cm.Data = map[string]string{"level": level} })
		if err != nil {
			t.Fatal(err)
		}
	} else if err != nil {
		t.Fatal(err)
	}
}

// copies returns the names of the ConfigMaps (or Secrets) labelled as children of web.
func (c clients) copies(t *testing.T, ns, kind string) []string {
	t.Helper()
	opts := metav1.ListOptions{LabelSelector: appv1.InstanceLabel + "=web"}
	var names []string
	if kind == "Secret" {
		list, err := c.Kube.CoreV1().Secrets(ns).List(context.Background(), opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range list.Items {
			names = append(names, s.Name)
		}
	} else {
		list, err := c.Kube.CoreV1().ConfigMaps(ns).List(context.Background(), opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, cm := range list.Items {
			names = append(names, cm.Name)
		}
	}
	slices.Sort(names)
	return names
}

// settingsVolume returns the ConfigMap the Deployment's settings volume reads, and the
// Deployment.
func (c clients) settingsVolume(t *testing.T, ns, name string) (string, *appsv1.Deployment) {
	t.Helper()
	d, err := c.Kube.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return "", nil
	}
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.ConfigMap != nil {
			return v.ConfigMap.Name, d
		}
	}
	return "", d
}

// count returns how many of writes are of method to a path that contains path.
func count(writes []string, method, path string) int {
	n := 0
	for _, w := range writes {
		if strings.HasPrefix(w, method+" ") && strings.Contains(w, path) {
			n++
		}
	}
	return n
}

func TestVersionedConfig(t *testing.T) {
	c := newClients(t)
	m := startManager(t, time.Second)
	ns := framework.Namespace(t)
	ctx := context.Background()
	c.setSettings(t, ns, "good")
	if _, err := c.Kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: ns},
		Data: map[string][]byte{"PASSWORD": []byte("s3cret")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.Create(t, configAppOf(ns))
	app := c.WaitReady(t, ns, "web")
	c.WaitRollout(t, ns, "web", appv1.RolloutHealthy, 0)
	writes := m.WritesIn(ns)
	if n, s := count(writes, "POST", "/configmaps"), count(writes, "POST", "/secrets"); n != 1 || s != 1 {
		t.Errorf("a new App: %d ConfigMap and %d Secret creates, want one copy of each: %q", n, s, writes)
	}
	good := c.copies(t, ns, "ConfigMap")
	if len(good) != 1 || !strings.HasPrefix(good[0], "settings-") {
		t.Fatalf("copies %q", good)
	}
	secrets := c.copies(t, ns, "Secret")
	for _, cp := range []struct {
		kind, name string
		get        func() (metav1.Object, *bool, string, error)
	}{
		{"ConfigMap", good[0], func() (metav1.Object, *bool, string, error) {
			cm, err := c.Kube.CoreV1().ConfigMaps(ns).Get(ctx, good[0], metav1.GetOptions{})
			if err != nil {
				return nil, nil, "", err
			}
			return cm, cm.Immutable, cm.Data["level"], nil
		}},
		{"Secret", strings.Join(secrets, ","), func() (metav1.Object, *bool, string, error) {
			s, err := c.Kube.CoreV1().Secrets(ns).Get(ctx, strings.Join(secrets, ","), metav1.GetOptions{})
			if err != nil {
				return nil, nil, "", err
			}
			return s, s.Immutable, string(s.Data["PASSWORD"]), nil
		}},
	} {
		obj, immutable, data, err := cp.get()
		if err != nil {
			t.Fatalf("the copy %s %s: %v", cp.kind, cp.name, err)
		}
		if !ptr.Deref(immutable, false) || !controller.IsControlledBy(obj, app) || (data != "good" && data != "s3cret") ||
			obj.GetLabels()[appv1.ManagedByLabel] != appv1.ManagedByValue {
			t.Errorf("the copy %s %s: immutable %v, data %q, owners %v, labels %v", cp.kind, cp.name, immutable, data, obj.GetOwnerReferences(), obj.GetLabels())
		}
	}
	// Immutable: the API server refuses a change of a copy's data.
	if _, err := edit(t, c.Kube.CoreV1().ConfigMaps(ns), "ConfigMap", good[0], func(cm *corev1.ConfigMap) { cm.Data["level"] = "edited" }); !apierrors.IsInvalid(err) {
		t.Errorf("editing the copy's data: %v, want Invalid", err)
	}
	if v, _ := c.settingsVolume(t, ns, "web-deploy"); v != good[0] {
		t.Errorf("the stable reads %s, want %s", v, good[0])
	}
	if cond := framework.AppCondition(c.GetApp(t, ns, "web"), appv1.ConditionConfigVersioned); cond != "True/"+appv1.ReasonConfigCopied {
		t.Errorf("ConfigVersioned %s", cond)
	}
	quiet(t, m, ns, "at rest", 2*time.Second)

	// A config change walks the canary; the stable Deployment's spec is never written
	// (its generation stays), its pods stay.
	c.waitSettled(t, ns)
	_, stable := c.settingsVolume(t, ns, "web-deploy")
	stablePods := podHashes(t, c, ns, "web")
	before := len(m.WritesIn(ns))
	c.setSettings(t, ns, "bad")
	c.WaitRollout(t, ns, "web", appv1.RolloutPaused, 1)
	writes = m.WritesIn(ns)[before:]
	bad := slices.DeleteFunc(c.copies(t, ns, "ConfigMap"), func(n string) bool { return n == good[0] })
	if n, s := count(writes, "POST", "/configmaps"), count(writes, "POST", "/secrets"); n != 1 || s != 0 || len(bad) != 1 {
		t.Errorf("a ConfigMap changed: %d ConfigMap and %d Secret creates (copies %q), want the one new copy: %q", n, s, bad, writes)
	}
	if v, d := c.settingsVolume(t, ns, "web-deploy-canary"); len(bad) != 1 || v != bad[0] || d == nil {
		t.Errorf("the canary reads %s, want %q", v, bad)
	}
	checkStable := func(what string) {
		t.Helper()
		v, d := c.settingsVolume(t, ns, "web-deploy")
		if v != good[0] || d.Spec.Template.Annotations[appv1.ConfigHashAnnotation] != stable.Spec.Template.Annotations[appv1.ConfigHashAnnotation] {
			t.Errorf("%s: the stable reads %s, its template's config %q (was %q)", what, v,
				d.Spec.Template.Annotations[appv1.ConfigHashAnnotation], stable.Spec.Template.Annotations[appv1.ConfigHashAnnotation])
		}
		// Scaled by the replica split, never rolled: its pods are all of its one
		// ReplicaSet, as before.
		if now := podHashes(t, c, ns, "web"); !slices.Equal(now, stablePods) {
			t.Errorf("%s: stable pods of ReplicaSets %q, were of %q", what, now, stablePods)
		}
	}
	t.Logf("the config change's writes: %q", writes)
	checkStable("the config change at its pause")

	// A second change during the canary: its copy, the canary's template; the first
	// change's copy, which no version reads any more, deleted.
	before = len(m.WritesIn(ns))
	c.setSettings(t, ns, "worse")
	framework.Eventually(t, converge, func() (bool, error) {
		v, _ := c.settingsVolume(t, ns, "web-deploy-canary")
		return v != bad[0] && v != "", nil
	})
	c.WaitRollout(t, ns, "web", appv1.RolloutPaused, 1)
	framework.Eventually(t, converge, func() (bool, error) { return len(c.copies(t, ns, "ConfigMap")) == 2, nil })
	writes = m.WritesIn(ns)[before:]
	if n, d := count(writes, "POST", "/configmaps"), count(writes, "DELETE", "/configmaps/"+bad[0]); n != 1 || d != 1 {
		t.Errorf("a change during the canary: %d copies created, %d of the first change's deleted, want 1 and 1: %q", n, d, writes)
	}
	t.Logf("a change during the canary's writes: %q", writes)
	checkStable("a change during the canary")

	// An abort: the stable untouched.
	framework.RequestRollout(t, c.App, c.Kube, ns, "web", appv1.RolloutActionAbort)
	c.WaitRollout(t, ns, "web", appv1.RolloutAborted, 1)
	checkStable("aborted")

	// The data changed back: the stable's copy again, the rollout ends at once, and the
	// canary's copy goes.
	c.setSettings(t, ns, "good")
	c.WaitRollout(t, ns, "web", appv1.RolloutHealthy, 0)
	framework.Eventually(t, converge, func() (bool, error) {
		return slices.Equal(c.copies(t, ns, "ConfigMap"), good), nil
	})
	checkStable("the data changed back")
	c.WaitReady(t, ns, "web")

	// Code and config changed together, promoted; then the spec rolled back: the old code
	// reads the old copy again, at once (the version is in the rollback window).
	c.waitSettled(t, ns)
	c.Update(t, ns, "web", func(a *appv1.App) { a.Spec.DeploymentTemplate.Image = "nginx:2" })
	c.WaitRollout(t, ns, "web", appv1.RolloutPaused, 1)
	c.setSettings(t, ns, "new")
	framework.Eventually(t, converge, func() (bool, error) {
		v, d := c.settingsVolume(t, ns, "web-deploy-canary")
		return d != nil && v != good[0] && d.Spec.Template.Spec.Containers[0].Image == "nginx:2", nil
	})
	c.WaitRollout(t, ns, "web", appv1.RolloutPaused, 1)
	framework.RequestRollout(t, c.App, c.Kube, ns, "web", appv1.RolloutActionPromoteFull)
	framework.Eventually(t, converge, func() (bool, error) {
		app := c.GetApp(t, ns, "web")
		v, d := c.settingsVolume(t, ns, "web-deploy")
		return app.Status.Rollout.Phase == appv1.RolloutHealthy && d != nil && d.Spec.Template.Spec.Containers[0].Image == "nginx:2" && v != good[0], nil
	})
	c.WaitReady(t, ns, "web")
	if got := c.copies(t, ns, "ConfigMap"); len(got) != 2 {
		t.Errorf("copies %q: want both revisions' copies", got)
	}
	c.waitSettled(t, ns)
	c.Update(t, ns, "web", func(a *appv1.App) { a.Spec.DeploymentTemplate.Image = "nginx:1" })
	framework.Eventually(t, converge, func() (bool, error) {
		v, d := c.settingsVolume(t, ns, "web-deploy")
		app := c.GetApp(t, ns, "web")
		return app.Status.ObservedGeneration == app.Generation && d.Spec.Template.Spec.Containers[0].Image == "nginx:1" && v == good[0], nil
	})
	if r := c.GetApp(t, ns, "web").Status.Rollout; r.Phase != appv1.RolloutHealthy || r.Canary != nil {
		t.Errorf("the rollback walked steps: %+v", r)
	}
	if events := strings.Join(c.Events(t, ns, "App", "web"), "\n"); !strings.Contains(events, "RolloutRolledBack") || strings.Contains(events, "s3cret") {
		t.Errorf("Events:\n%s", events)
	}

	// The App deleted: the garbage collector deletes the copies.
	c.Delete(t, ns, "web")
	framework.Eventually(t, converge, func() (bool, error) {
		return len(c.copies(t, ns, "ConfigMap")) == 0 && len(c.copies(t, ns, "Secret")) == 0, nil
	})
	if cm, err := c.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "settings", metav1.GetOptions{}); err != nil || cm.Data["level"] != "new" {
		t.Errorf("the App's own ConfigMap: %v %v", cm, err)
	}
}

// waitSettled waits until the stable Deployment web-deploy is rolled out at its
// generation: a change made while it rolls goes to it directly, without the steps.
func (c clients) waitSettled(t *testing.T, ns string) {
	t.Helper()
	c.WaitDeployment(t, ns, "web-deploy", func(d *appsv1.Deployment) bool {
		r := ptr.Deref(d.Spec.Replicas, 1)
		return d.Status.ObservedGeneration == d.Generation && d.Status.Replicas == r && d.Status.UpdatedReplicas == r && d.Status.AvailableReplicas == r
	})
}

// podHashes returns the pod-template-hash labels of the App's pods that are not of the
// canary track, each once.
func podHashes(t *testing.T, c clients, ns, app string) []string {
	t.Helper()
	pods, err := c.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: appv1.InstanceLabel + "=" + app})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range pods.Items {
		if h := p.Labels[appsv1.DefaultDeploymentUniqueLabelKey]; p.Labels[appv1.TrackLabel] != appv1.TrackCanary && !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	slices.Sort(out)
	return out
}

// TestVersionedConfigSecretsNotWatched: a controller installed without access to
// Secrets (--config-rollout-secrets=false, the chart's configRollout.secrets false)
// copies the ConfigMaps, reads the Secret directly and says so.
func TestVersionedConfigSecretsNotWatched(t *testing.T) {
	c := newClients(t)
	opts := controllermanager.NewOptions()
	opts.ResyncPeriod = time.Second
	opts.ConfigRolloutSecrets = false
	m := startManagerWith(t, opts)
	ns := framework.Namespace(t)
	c.setSettings(t, ns, "good")
	if _, err := c.Kube.CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: ns},
		Data: map[string][]byte{"PASSWORD": []byte("s3cret")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.Create(t, configAppOf(ns))
	c.WaitReady(t, ns, "web")
	c.WaitCondition(t, ns, "web", appv1.ConditionConfigVersioned, "True/"+appv1.ReasonSecretsNotCopied)
	if got := c.copies(t, ns, "Secret"); len(got) != 0 {
		t.Errorf("Secrets copied: %q", got)
	}
	if got := c.copies(t, ns, "ConfigMap"); len(got) != 1 {
		t.Errorf("ConfigMap copies %q", got)
	}
	if count(m.WritesIn(ns), "POST", "/secrets") != 0 {
		t.Errorf("writes %q", m.WritesIn(ns))
	}
	d := c.WaitDeployment(t, ns, "web-deploy", func(*appsv1.Deployment) bool { return true })
	if r := d.Spec.Template.Spec.Containers[0].EnvFrom[0].SecretRef; r == nil || r.Name != "creds" {
		t.Errorf("envFrom %+v, want Secret creds itself", d.Spec.Template.Spec.Containers[0].EnvFrom)
	}
	if events := strings.Join(c.Events(t, ns, "App", "web"), "\n"); !strings.Contains(events, appv1.ReasonSecretsNotCopied) {
		t.Errorf("no %s Event among\n%s", appv1.ReasonSecretsNotCopied, events)
	}
}

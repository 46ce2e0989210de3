package app

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/app-controller/app-controller/internal/plugin"
	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// rollWithin bounds how long after a change of a ConfigMap or Secret the App's pods
// must start to roll (a new ReplicaSet).
const rollWithin = 5 * time.Second

// replicaSetsOf returns the names of the ReplicaSets of the App's Deployment.
func (c clients) replicaSetsOf(t *testing.T, ns, app string) []string {
	t.Helper()
	list, err := c.Kube.AppsV1().ReplicaSets(ns).List(context.Background(), metav1.ListOptions{LabelSelector: appv1.InstanceLabel + "=" + app})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, rs := range list.Items {
		names = append(names, rs.Name)
	}
	slices.Sort(names)
	return names
}

// waitNewReplicaSet waits until the App's Deployment has a ReplicaSet not in before,
// and returns how long it took from start.
func (c clients) waitNewReplicaSet(t *testing.T, ns, app string, before []string, start time.Time) time.Duration {
	t.Helper()
	framework.Eventually(t, converge, func() (bool, error) {
		for _, rs := range c.replicaSetsOf(t, ns, app) {
			if !slices.Contains(before, rs) {
				return true, nil
			}
		}
		return false, nil
	})
	return time.Since(start)
}

// TestConfigRollouts changes the ConfigMaps and Secrets that Apps' pods reference and
// checks that the pods roll within rollWithin, that an App ignoring config changes and
// an unrelated ConfigMap write nothing, and that a missing ConfigMap is reported until
// it exists.
func TestConfigRollouts(t *testing.T) {
	c := newClients(t)
	m := startManager(t, 0)
	ns := framework.Namespace(t)
	ctx := context.Background()
	cms, secrets := c.Kube.CoreV1().ConfigMaps(ns), c.Kube.CoreV1().Secrets(ns)
	for _, name := range []string{"settings", "unrelated"} {
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"MODE": "a"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds"}, StringData: map[string]string{"password": "a"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	withConfig := func(app *appv1.App) *appv1.App {
		d := app.Spec.DeploymentTemplate
		d.EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}}
		d.Env = []corev1.EnvVar{{Name: "PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "password"}}}}
		return app
	}
	c.Create(t, withConfig(newApp(ns, "web", "nginx", 1)))
	quiet := withConfig(newApp(ns, "quiet", "nginx", 1))
	quiet.Spec.DeploymentTemplate.ConfigChangePolicy = appv1.ConfigChangeIgnore
	c.Create(t, quiet)
	c.WaitReady(t, ns, "web")
	c.WaitReady(t, ns, "quiet")
	quietSets := c.replicaSetsOf(t, ns, "quiet")
	mark := len(m.WritesIn(ns))

	for _, change := range []struct {
		what  string
		apply func() error
	}{
		{"ConfigMap settings changed", func() error {
			_, err := cms.Patch(ctx, "settings", types.MergePatchType, []byte(`{"data":{"MODE":"b"}}`), metav1.PatchOptions{})
			return err
		}},
		{"Secret creds changed", func() error {
			_, err := secrets.Patch(ctx, "creds", types.MergePatchType, []byte(`{"stringData":{"password":"b"}}`), metav1.PatchOptions{})
			return err
		}},
	} {
		before := c.replicaSetsOf(t, ns, "web")
		start := time.Now()
		if err := change.apply(); err != nil {
			t.Fatal(err)
		}
		took := c.waitNewReplicaSet(t, ns, "web", before, start)
		t.Logf("%s: a new ReplicaSet of web after %v", change.what, took.Round(time.Millisecond))
		if took > rollWithin {
			t.Errorf("%s: the pods rolled after %v, want within %v", change.what, took, rollWithin)
		}
		c.WaitReady(t, ns, "web")
	}

	// The App that ignores config changes: no new ReplicaSet, no write to its Deployment.
	if got := c.replicaSetsOf(t, ns, "quiet"); !slices.Equal(got, quietSets) {
		t.Errorf("App quiet (configChangePolicy Ignore) rolled: ReplicaSets %v, were %v", got, quietSets)
	}
	for _, w := range m.WritesIn(ns)[mark:] {
		if strings.Contains(w, "/deployments/quiet-deploy") {
			t.Errorf("App quiet's Deployment written after the config changes: %s", w)
		}
	}

	// An unrelated ConfigMap: nothing written (once the rollouts above have settled).
	before := m.waitQuiet(t, ns)
	if _, err := cms.Patch(ctx, "unrelated", types.MergePatchType, []byte(`{"data":{"MODE":"b"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // time to react, if it wrongly would
	if after := m.WritesIn(ns)[before:]; len(after) != 0 {
		t.Errorf("an unrelated ConfigMap changed; the controller wrote %q", after)
	}

	// A ConfigMap that does not exist yet: reported, then Ready once it exists.
	waits := newApp(ns, "waits", "nginx", 1)
	waits.Spec.DeploymentTemplate.EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "later"}}}}
	c.Create(t, waits)
	app := c.WaitCondition(t, ns, "waits", appv1.ConditionReady, "False/ConfigNotFound")
	t.Logf("Ready: %s", readyMessage(app))
	if !strings.Contains(readyMessage(app), `ConfigMap "later", referenced by the pods, does not exist`) {
		t.Errorf("Ready message %q does not name the missing ConfigMap", readyMessage(app))
	}
	if ev := c.Events(t, ns, "App", "waits"); !slices.ContainsFunc(ev, func(e string) bool { return strings.Contains(e, "ConfigNotFound") }) {
		t.Errorf("no ConfigNotFound Event: %q", ev)
	}
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "later"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.WaitReady(t, ns, "waits")
}

// waitQuiet waits until the controller has written nothing in namespace ns for 2 s, and
// returns how many writes it made there.
func (m *manager) waitQuiet(t *testing.T, ns string) int {
	t.Helper()
	deadline := time.Now().Add(converge)
	n := len(m.WritesIn(ns))
	for time.Now().Before(deadline) {
		time.Sleep(2 * time.Second)
		now := len(m.WritesIn(ns))
		if now == n {
			return n
		}
		n = now
	}
	t.Fatalf("the controller kept writing in namespace %s for %v", ns, converge)
	return 0
}

// readyMessage returns the message of the App's Ready condition.
func readyMessage(app *appv1.App) string {
	for _, cond := range app.Status.Conditions {
		if cond.Type == appv1.ConditionReady {
			return cond.Message
		}
	}
	return ""
}

// revisionsOf returns the App's revisions by number.
func (c clients) revisionsOf(t *testing.T, ns, app string) map[int64]appsv1.ControllerRevision {
	t.Helper()
	list, err := c.Kube.AppsV1().ControllerRevisions(ns).List(context.Background(), metav1.ListOptions{LabelSelector: appv1.InstanceLabel + "=" + app})
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]appsv1.ControllerRevision{}
	for _, r := range list.Items {
		out[r.Revision] = r
	}
	return out
}

// revisionImage returns the image recorded in a revision.
func revisionImage(t *testing.T, r appsv1.ControllerRevision) string {
	t.Helper()
	var data struct {
		Spec appv1.AppSpec `json:"spec"`
	}
	if err := json.Unmarshal(r.Data.Raw, &data); err != nil {
		t.Fatal(err)
	}
	return data.Spec.DeploymentTemplate.Image
}

// TestRevisionsRollbackRestart records revisions of an App's spec, rolls it back to
// revision 1 and restarts it (with kubectl-app's functions and as kubectl rollout restart
// does), prunes revisions beyond the history limit, and checks that a restarted
// controller writes nothing.
func TestRevisionsRollbackRestart(t *testing.T) {
	c := newClients(t)
	m := startManager(t, 0)
	ns := framework.Namespace(t)
	ctx := context.Background()
	pc := plugin.Clients{Apps: c.App, Kube: c.Kube}

	app := newApp(ns, "web", "nginx:1", 1)
	app.Annotations = map[string]string{appv1.ChangeCauseAnnotation: "first release"}
	c.Create(t, app)
	c.WaitReady(t, ns, "web")
	c.Update(t, ns, "web", func(a *appv1.App) {
		a.Spec.DeploymentTemplate.Image = "nginx:2"
		a.Annotations[appv1.ChangeCauseAnnotation] = "image nginx:2"
	})
	c.WaitDeployment(t, ns, "web-deploy", func(d *appsv1.Deployment) bool {
		return d.Spec.Template.Spec.Containers[0].Image == "nginx:2"
	})
	c.WaitReady(t, ns, "web")
	var revs map[int64]appsv1.ControllerRevision
	framework.Eventually(t, converge, func() (bool, error) {
		revs = c.revisionsOf(t, ns, "web")
		return len(revs) == 2, nil
	})
	if revisionImage(t, revs[1]) != "nginx:1" || revisionImage(t, revs[2]) != "nginx:2" || revs[1].Annotations[appv1.ChangeCauseAnnotation] != "first release" {
		t.Errorf("revisions 1 and 2: %s (%q), %s", revisionImage(t, revs[1]), revs[1].Annotations, revisionImage(t, revs[2]))
	}
	if cur := c.GetApp(t, ns, "web").Status.CurrentRevision; cur != revs[2].Name {
		t.Errorf("status.currentRevision %q, want %q", cur, revs[2].Name)
	}

	// Rollback to revision 1: the image comes back, revision 1 becomes revision 3.
	res, err := plugin.Rollback(ctx, pc, ns, "web", 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("rollback to revision 1: %q", res.Changes)
	c.WaitDeployment(t, ns, "web-deploy", func(d *appsv1.Deployment) bool {
		return d.Spec.Template.Spec.Containers[0].Image == "nginx:1"
	})
	framework.Eventually(t, converge, func() (bool, error) {
		revs = c.revisionsOf(t, ns, "web")
		return len(revs) == 2 && revs[3].Name != "" && revisionImage(t, revs[3]) == "nginx:1", nil
	})
	c.WaitReady(t, ns, "web")

	// Restart by the plugin, then by hand as kubectl rollout restart does: each rolls the
	// pods, and the controller leaves the annotation alone.
	for _, restart := range []struct {
		how string
		do  func() error
	}{
		{"kubectl app restart", func() error { _, _, err := plugin.Restart(ctx, pc, ns, "web", time.Now()); return err }},
		{"kubectl rollout restart", func() error {
			patch := `{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":"` + time.Now().Add(time.Second).Format(time.RFC3339Nano) + `"}}}}}`
			_, err := c.Kube.AppsV1().Deployments(ns).Patch(ctx, "web-deploy", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "kubectl-rollout"})
			return err
		}},
	} {
		before := c.replicaSetsOf(t, ns, "web")
		writes := len(m.WritesIn(ns))
		if err := restart.do(); err != nil {
			t.Fatalf("%s: %v", restart.how, err)
		}
		c.waitNewReplicaSet(t, ns, "web", before, time.Now())
		c.WaitReady(t, ns, "web")
		time.Sleep(time.Second) // time to undo it, if it wrongly would
		for _, w := range m.WritesIn(ns)[writes:] {
			if strings.Contains(w, "/deployments/") {
				t.Errorf("%s: the controller wrote the Deployment: %s", restart.how, w)
			}
		}
		d, err := c.Kube.AppsV1().Deployments(ns).Get(ctx, "web-deploy", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if d.Spec.Template.Annotations[appv1.RestartedAtAnnotation] == "" {
			t.Errorf("%s: the restartedAt annotation is gone", restart.how)
		}
	}

	// The history limit: 2 revisions kept.
	c.Update(t, ns, "web", func(a *appv1.App) { a.Spec.RevisionHistoryLimit = ptr.To[int32](2) })
	for _, image := range []string{"nginx:3", "nginx:4"} {
		c.Update(t, ns, "web", func(a *appv1.App) { a.Spec.DeploymentTemplate.Image = image })
		c.WaitReady(t, ns, "web")
	}
	framework.Eventually(t, converge, func() (bool, error) {
		revs = c.revisionsOf(t, ns, "web")
		return len(revs) == 2 && revs[5].Name != "" && revs[4].Name != "", nil
	})

	// A new controller: nothing to write.
	c.WaitReady(t, ns, "web")
	if err := m.Run.Stop(t); err != nil {
		t.Fatal(err)
	}
	m2 := startManager(t, 0)
	time.Sleep(3 * time.Second) // the caches sync and every App is synced once
	var writes []string
	for _, w := range m2.WritesIn(ns) {
		if !strings.Contains(w, "/events") {
			writes = append(writes, w)
		}
	}
	if len(writes) != 0 {
		t.Errorf("a restarted controller wrote %q", writes)
	}
}

package plugin

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// lifecycleFakes returns fakes holding the App web at image nginx:2 (revision 2,
// current) with an earlier revision 1 at nginx:1, and its Deployment.
func lifecycleFakes(t *testing.T) fakes {
	t.Helper()
	f := newFakes(t, nil)
	ctx := context.Background()
	app := &appv1.App{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "web", UID: "web-uid",
			Annotations: map[string]string{appv1.ChangeCauseAnnotation: "image nginx:2"}},
		Spec: appv1.AppSpec{
			DeploymentTemplate:   &appv1.DeploymentTemplate{Name: "web", Image: "nginx:2", Replicas: ptr.To[int32](2)},
			RevisionHistoryLimit: ptr.To[int32](5),
		},
		Status: appv1.AppStatus{CurrentRevision: "web-2222222222"},
	}
	if _, err := f.apps.AppcontrollerV1().Apps(testNamespace).Create(ctx, app, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	owner := []metav1.OwnerReference{{APIVersion: "appcontroller.k8s.io/v1", Kind: "App", Name: "web", UID: "web-uid", Controller: ptr.To(true)}}
	labels := map[string]string{appv1.InstanceLabel: "web", appv1.ManagedByLabel: appv1.ManagedByValue}
	for n, image := range map[int64]string{1: "nginx:1", 2: "nginx:2"} {
		spec := appv1.AppSpec{DeploymentTemplate: &appv1.DeploymentTemplate{Name: "web", Image: image, Replicas: ptr.To[int32](2)}}
		data, _ := json.Marshal(map[string]any{"spec": spec})
		cr := &appsv1.ControllerRevision{
			ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "web-" + strings.Repeat(string(rune('0'+n)), 10),
				Labels: labels, OwnerReferences: owner, CreationTimestamp: metav1.NewTime(testNow.Add(-time.Duration(3-n) * time.Hour))},
			Revision: n,
		}
		cr.Data.Raw = data
		if n == 1 {
			cr.Annotations = map[string]string{appv1.ChangeCauseAnnotation: "first release"}
		}
		if _, err := f.kube.AppsV1().ControllerRevisions(testNamespace).Create(ctx, cr, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "web", OwnerReferences: owner}}
	if _, err := f.kube.AppsV1().Deployments(testNamespace).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestHistory(t *testing.T) {
	r := runWith(t, lifecycleFakes(t), "history", "web", "-n", testNamespace)
	want := `REVISION      AGE    IMAGE     CHANGE-CAUSE
1             120m   nginx:1   first release
2 (current)   60m    nginx:2   <none>
`
	if r.code != 0 || r.stdout != want {
		t.Errorf("history: code %d\n%s\nwant\n%s%s", r.code, r.stdout, want, r.stderr)
	}
	r = runWith(t, lifecycleFakes(t), "history", "web", "-n", testNamespace, "--revision", "1")
	if r.code != 0 || !strings.Contains(r.stdout, "image: nginx:1") || !strings.Contains(r.stdout, "changeCause: first release") {
		t.Errorf("history --revision 1: code %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runWith(t, lifecycleFakes(t), "history", "web", "-n", testNamespace, "--revision", "7")
	if r.code != ExitError || !strings.Contains(r.stderr, "has no revision 7") {
		t.Errorf("history --revision 7: code %d %s", r.code, r.stderr)
	}
	r = runWith(t, lifecycleFakes(t), "history", "nope", "-n", testNamespace)
	if r.code != ExitError || !strings.Contains(r.stderr, `App "nope" not found`) {
		t.Errorf("history of a missing App: code %d %s", r.code, r.stderr)
	}
}

func TestRollback(t *testing.T) {
	f := lifecycleFakes(t)
	r := runWith(t, f, "rollback", "web", "-n", testNamespace)
	want := "app.appcontroller.k8s.io/web rolled back to revision 1\n" +
		`  spec.deploymentTemplate.image: "nginx:2" -> "nginx:1"` + "\n"
	if r.code != 0 || r.stdout != want {
		t.Errorf("rollback: code %d\n%s\nwant\n%s%s", r.code, r.stdout, want, r.stderr)
	}
	app, err := f.apps.AppcontrollerV1().Apps(testNamespace).Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if app.Spec.DeploymentTemplate.Image != "nginx:1" || ptr.Deref(app.Spec.RevisionHistoryLimit, 0) != 5 ||
		app.Annotations[appv1.ChangeCauseAnnotation] != "first release" {
		t.Errorf("after the rollback: image %s, history limit %v, change cause %q", app.Spec.DeploymentTemplate.Image,
			app.Spec.RevisionHistoryLimit, app.Annotations[appv1.ChangeCauseAnnotation])
	}
	// Again to revision 1: nothing to write.
	r = runWith(t, f, "rollback", "web", "-n", testNamespace, "--to-revision", "1")
	if r.code != 0 || !strings.Contains(r.stdout, "skipped rollback (the spec already matches revision 1)") {
		t.Errorf("second rollback: code %d %s%s", r.code, r.stdout, r.stderr)
	}
	r = runWith(t, f, "rollback", "web", "-n", testNamespace, "--to-revision", "9")
	if r.code != ExitError || !strings.Contains(r.stderr, "has no revision 9") {
		t.Errorf("rollback to a missing revision: code %d %s", r.code, r.stderr)
	}
}

func TestRestart(t *testing.T) {
	f := lifecycleFakes(t)
	r := runWith(t, f, "restart", "web", "-n", testNamespace)
	if r.code != 0 || r.stdout != "app.appcontroller.k8s.io/web restarted (Deployment web rolls its pods)\n" {
		t.Errorf("restart: code %d %s%s", r.code, r.stdout, r.stderr)
	}
	d, err := f.kube.AppsV1().Deployments(testNamespace).Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Spec.Template.Annotations[appv1.RestartedAtAnnotation]; got != testNow.Format(time.RFC3339) {
		t.Errorf("restartedAt = %q, want %q", got, testNow.Format(time.RFC3339))
	}
	// A Deployment the App does not control is not touched.
	d.OwnerReferences = nil
	if _, err := f.kube.AppsV1().Deployments(testNamespace).Update(context.Background(), d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r = runWith(t, f, "restart", "web", "-n", testNamespace)
	if r.code != ExitError || !strings.Contains(r.stderr, "is not controlled by App web") {
		t.Errorf("restart of a foreign Deployment: code %d %s", r.code, r.stderr)
	}
}

package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	appfake "github.com/app-controller/app-controller/pkg/generated/clientset/versioned/fake"
)

// TestWriteWhoseAnswerWasLost checks that a change of an App's spec the API server
// applied but whose answer was lost (a timeout while it restarts) is made once and
// recorded at the generation it wrote. Made again, a rollback finds nothing to change
// (the controller has not recorded the new spec as the current revision yet) and leaves
// the generation unrecorded (the soak then waits for the one before); a toggle
// (autoscaling on and off) undoes itself.
func TestWriteWhoseAnswerWasLost(t *testing.T) {
	for _, tc := range []struct {
		name  string
		write func(*driver, *appRecord) error
		want  func(*appv1.App) bool
	}{
		{"rollback", func(d *driver, r *appRecord) error {
			rolled, err := d.requestRollback(context.Background(), r, opRollback)
			if err == nil && !rolled {
				return fmt.Errorf("not rolled back")
			}
			return err
		}, func(a *appv1.App) bool { return a.Spec.DeploymentTemplate.Image == "v1" }},
		{"toggle", func(d *driver, r *appRecord) error {
			return d.update(context.Background(), r, opAutoscale, func(_ *appRecord, a *appv1.App) {
				if a.Spec.Autoscaling != nil {
					a.Spec.Autoscaling = nil
				} else {
					a.Spec.Autoscaling = autoscaling()
				}
			})
		}, func(a *appv1.App) bool { return a.Spec.Autoscaling != nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, r, apps, updates := lostAnswerDriver(t)
			if err := tc.write(d, r); err != nil {
				t.Fatal(err)
			}
			got, err := apps.AppcontrollerV1().Apps(r.namespace).Get(context.Background(), r.name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if last := r.lastGen().generation; *updates != 1 || got.Generation != 5 || last != 5 || !tc.want(got) {
				t.Errorf("after the change: %d updates, the App at generation %d (changed as asked: %v), the driver's last generation %d; want 1 update, generation 5 recorded",
					*updates, got.Generation, tc.want(got), last)
			}
		})
	}
}

// lostAnswerDriver returns a driver of fake clients that holds App ns/a at generation 4
// (image v2, its revisions v1 and v2, v2 current), whose first update is applied and
// answered with a timeout, and the count of updates.
func lostAnswerDriver(t *testing.T) (*driver, *appRecord, *appfake.Clientset, *int) {
	specV1, specV2 := app("a", 1, "v1", 1, metav1.ConditionTrue, "").Spec, app("a", 1, "v2", 1, metav1.ConditionTrue, "").Spec
	a := app("a", 4, "v2", 4, metav1.ConditionTrue, appv1.ReasonAvailable)
	a.Status.CurrentRevision = "a-2"
	revision := func(n int64, spec appv1.AppSpec) *appsv1.ControllerRevision {
		data, err := json.Marshal(map[string]appv1.AppSpec{appv1.RevisionDataKey: spec})
		if err != nil {
			t.Fatal(err)
		}
		return &appsv1.ControllerRevision{
			ObjectMeta: metav1.ObjectMeta{
				Name: fmt.Sprintf("%s-%d", a.Name, n), Namespace: a.Namespace,
				Labels:          map[string]string{appv1.InstanceLabel: a.Name, appv1.ManagedByLabel: appv1.ManagedByValue},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "appcontroller.k8s.io/v1", Kind: "App", Name: a.Name, UID: a.UID, Controller: ptr.To(true)}},
			},
			Revision: n, Data: runtime.RawExtension{Raw: data},
		}
	}
	kube := kubefake.NewClientset(revision(1, specV1), revision(2, specV2))
	apps := appfake.NewClientset(a)
	updates := 0
	apps.PrependReactor("update", "apps", func(action k8stesting.Action) (bool, runtime.Object, error) {
		updates++
		obj := action.(k8stesting.UpdateAction).GetObject().(*appv1.App).DeepCopy()
		obj.Generation++ // as the API server does for a change of the spec
		if err := apps.Tracker().Update(action.GetResource(), obj, obj.Namespace); err != nil {
			return true, nil, err
		}
		if updates == 1 {
			return true, nil, apierrors.NewTimeoutError("the answer was lost", 1)
		}
		return true, obj, nil
	})

	w := newWorld()
	r := &appRecord{namespace: a.Namespace, name: a.Name}
	w.apps[r.key()] = r
	w.wrote(r, app("a", 3, "v1", 3, metav1.ConditionTrue, ""), opCreate, "", t0)
	w.wrote(r, a, opImage, "", t0)
	return newDriver(&Config{}, w, kube, apps, images{good: []string{"v1", "v2"}}), r, apps, &updates
}

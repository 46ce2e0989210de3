package app

import (
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

func TestOwnServiceAccountRefused(t *testing.T) {
	own := types.NamespacedName{Namespace: "tcs", Name: "app-controller"}
	for _, tc := range []struct {
		name      string
		namespace string
		sa        string
		own       types.NamespacedName
		refused   bool
	}{
		{"the controller's ServiceAccount in its namespace", "tcs", "app-controller", own, true},
		{"the namespace's default, which the controller runs as", "tcs", "", types.NamespacedName{Namespace: "tcs", Name: "default"}, true},
		{"another ServiceAccount of the controller's namespace", "tcs", "web", own, false},
		{"a ServiceAccount of the same name elsewhere", "other", "app-controller", own, false},
		{"outside a pod: nothing known, nothing refused", "tcs", "app-controller", types.NamespacedName{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.c.ownServiceAccount = tc.own
			app := newApp("web", testNow.Add(-time.Hour))
			app.Namespace = tc.namespace
			app.Spec.DeploymentTemplate.ServiceAccountName = tc.sa
			f.addApps(app)
			if err := f.sync(tc.namespace, "web"); err != nil {
				t.Fatal(err)
			}
			w := f.writeNames()
			if !tc.refused {
				if !slices.Contains(w, "patch deployments") {
					t.Errorf("writes %q, want the Deployment written", w)
				}
				return
			}
			if !slices.Equal(w, []string{"patch apps/status"}) {
				t.Errorf("writes %q, want only the status", w)
			}
			got, _, _ := f.c.getApp(nameOf(app))
			ready := meta.FindStatusCondition(got.Status.Conditions, appv1.ConditionReady)
			stalled := meta.FindStatusCondition(got.Status.Conditions, appv1.ConditionStalled)
			if ready == nil || ready.Reason != appv1.ReasonServiceAccountRefused || stalled == nil || stalled.Status != "True" {
				t.Errorf("conditions %+v, want Ready False and Stalled True, ServiceAccountRefused", got.Status.Conditions)
			}
			if ev := f.events(); len(ev) != 1 || !slices.ContainsFunc(ev, func(e string) bool { return e == "Warning ServiceAccountRefused "+ready.Message }) {
				t.Errorf("events %q", ev)
			}
			// Nothing new: nothing written, no Event again.
			if err := f.sync(tc.namespace, "web"); err != nil {
				t.Fatal(err)
			}
			if w := f.writeNames(); len(w) != 0 {
				t.Errorf("second sync wrote %q", w)
			}
			if ev := f.events(); len(ev) != 0 {
				t.Errorf("second sync recorded %q", ev)
			}
		})
	}
}

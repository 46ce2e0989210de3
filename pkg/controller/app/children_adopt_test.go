package app

import (
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// TestNoAdoptionOnCreate is the adoption race: a Deployment of the App's child name,
// made by someone else after the caches were read (the API server has it, the caches do
// not) and holding no field that conflicts with the App's. The apply meant to create the
// child merges into it; the controller sees the other writer's fields in the answer,
// gives back what it took (its controller reference is gone again) and reports the name
// as taken.
func TestNoAdoptionOnCreate(t *testing.T) {
	app := newApp("web", testNow.Add(-time.Hour))
	f := newFixture(t)
	f.addApps(app)
	foreign := liveDeployment(t, app) // the same fields, as if copied from the App's
	foreign.OwnerReferences = nil
	foreign.Annotations = nil
	foreign.UID = "foreign-uid"
	foreign.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl-create", Operation: metav1.ManagedFieldsOperationUpdate,
		APIVersion: "apps/v1", FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:replicas":{}}}`)}}
	if err := f.kubeClient.Tracker().Add(foreign); err != nil {
		t.Fatal(err)
	}
	f.mustSync("web")
	applies := 0
	for _, w := range f.writeNames() {
		if w == "patch deployments" {
			applies++
		}
	}
	if applies != 2 {
		t.Errorf("writes %q, want the create-apply and the give-back", f.writeNames())
	}
	live := f.liveDeploymentOf(app.Spec.DeploymentTemplate.Name)
	if metav1.GetControllerOfNoCopy(live) != nil {
		t.Errorf("the foreign Deployment kept a controller reference: %+v", live.OwnerReferences)
	}
	got := f.appNow("web")
	c := meta.FindStatusCondition(got.Status.Conditions, appv1.ConditionNamesAccepted)
	if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, `Deployment "web-deploy" already exists and is not managed by this App`) {
		t.Errorf("NamesAccepted = %+v, want False naming the Deployment", c)
	}
	if ev := f.events(); !slices.ContainsFunc(ev, func(e string) bool { return strings.HasPrefix(e, "Warning ErrResourceExists") }) {
		t.Errorf("events %q, want ErrResourceExists", ev)
	}
}

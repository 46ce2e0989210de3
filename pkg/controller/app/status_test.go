package app

import (
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller/controllertest"
	"github.com/app-controller/app-controller/pkg/podhealth"
)

func TestComputeStatus(t *testing.T) {
	now := metav1.NewTime(testNow)
	app := newApp("test-app", testNow.Add(-time.Hour))

	rolledOut := liveDeployment(t, app)
	newGeneration := rolledOut.DeepCopy()
	newGeneration.Generation = 2
	updating := rolledOut.DeepCopy()
	updating.Status.UpdatedReplicas = 1
	oldPending := rolledOut.DeepCopy()
	oldPending.Status.Replicas = 3
	availableFalse := rolledOut.DeepCopy()
	availableFalse.Status.Conditions[0].Status = corev1.ConditionFalse
	availableFalse.Status.Conditions[0].Message = "Deployment does not have minimum availability."
	unavailable := rolledOut.DeepCopy()
	unavailable.Status.AvailableReplicas = 1
	unavailable.Status.Conditions[0].Status = corev1.ConditionFalse
	unavailable.Status.Conditions[0].Message = "Deployment does not have minimum availability."
	stuck := updating.DeepCopy()
	stuck.Status.Conditions[1] = appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded", Message: "ReplicaSet has timed out progressing."}
	svc := liveService(t, app)

	tests := []struct {
		name       string
		app        *appv1.App
		deployment childResult[*appsv1.Deployment]
		service    childResult[*corev1.Service]
		want       map[string]string // condition type -> "Status/Reason"; "" = absent
		wantKstat  kstatus.Status
	}{
		{
			name:       "rolled out and Service present: Ready, kstatus Current",
			deployment: childResult[*appsv1.Deployment]{name: "test-app-deploy", obj: rolledOut},
			service:    childResult[*corev1.Service]{name: "test-app-service", obj: svc},
			want: map[string]string{appv1.ConditionReady: "True/Available", appv1.ConditionProgressing: "False/RolloutComplete",
				appv1.ConditionNamesAccepted: "True/NoConflicts", appv1.ConditionReconciling: "", appv1.ConditionStalled: ""},
			wantKstat: kstatus.CurrentStatus,
		},
		{
			name:       "deployment controller has not seen the new generation",
			deployment: childResult[*appsv1.Deployment]{name: "test-app-deploy", obj: newGeneration},
			service:    childResult[*corev1.Service]{name: "test-app-service", obj: svc},
			want:       map[string]string{appv1.ConditionReady: "False/RollingOut", appv1.ConditionProgressing: "True/RollingOut", appv1.ConditionReconciling: "True/RollingOut"},
			wantKstat:  kstatus.InProgressStatus,
		},
		{
			name:       "replicas being updated: InProgress",
			deployment: childResult[*appsv1.Deployment]{name: "test-app-deploy", obj: updating},
			service:    childResult[*corev1.Service]{name: "test-app-service", obj: svc},
			want:       map[string]string{appv1.ConditionReady: "False/RollingOut", appv1.ConditionReconciling: "True/RollingOut"},
			wantKstat:  kstatus.InProgressStatus,
		},
		{
			name:       "old replicas still terminating",
			deployment: childResult[*appsv1.Deployment]{name: "test-app-deploy", obj: oldPending},
			service:    childResult[*corev1.Service]{name: "test-app-service", obj: svc},
			want:       map[string]string{appv1.ConditionReady: "False/RollingOut"},
			wantKstat:  kstatus.InProgressStatus,
		},
		{
			name:       "rolled out but unavailable",
			deployment: childResult[*appsv1.Deployment]{name: "test-app-deploy", obj: unavailable},
			service:    childResult[*corev1.Service]{name: "test-app-service", obj: svc},
			want:       map[string]string{appv1.ConditionReady: "False/RollingOut"},
			wantKstat:  kstatus.InProgressStatus,
		},
		{
			name:       "rolled out, counts complete, Available condition False: Reconciling, kstatus InProgress",
			deployment: childResult[*appsv1.Deployment]{name: "test-app-deploy", obj: availableFalse},
			service:    childResult[*corev1.Service]{name: "test-app-service", obj: svc},
			want: map[string]string{appv1.ConditionReady: "False/DeploymentUnavailable", appv1.ConditionProgressing: "False/RolloutComplete",
				appv1.ConditionReconciling: "True/DeploymentUnavailable", appv1.ConditionStalled: ""},
			wantKstat: kstatus.InProgressStatus,
		},
		{
			name:       "progress deadline exceeded: Stalled, kstatus Failed",
			deployment: childResult[*appsv1.Deployment]{name: "test-app-deploy", obj: stuck},
			service:    childResult[*corev1.Service]{name: "test-app-service", obj: svc},
			want: map[string]string{appv1.ConditionReady: "False/ProgressDeadlineExceeded", appv1.ConditionProgressing: "False/ProgressDeadlineExceeded",
				appv1.ConditionStalled: "True/ProgressDeadlineExceeded", appv1.ConditionReconciling: ""},
			wantKstat: kstatus.FailedStatus,
		},
		{
			name:       "name conflict: Stalled, kstatus Failed",
			deployment: childResult[*appsv1.Deployment]{name: "test-app-deploy", conflict: `Deployment "test-app-deploy" already exists and is not managed by this App`},
			service:    childResult[*corev1.Service]{name: "test-app-service", obj: svc},
			want: map[string]string{appv1.ConditionNamesAccepted: "False/NameConflict", appv1.ConditionReady: "False/NameConflict",
				appv1.ConditionStalled: "True/NameConflict"},
			wantKstat: kstatus.FailedStatus,
		},
		{
			name:      "Service-only App",
			app:       func() *appv1.App { a := app.DeepCopy(); a.Spec.DeploymentTemplate = nil; return a }(),
			service:   childResult[*corev1.Service]{name: "test-app-service", obj: svc},
			want:      map[string]string{appv1.ConditionReady: "True/Available", appv1.ConditionProgressing: "False/RolloutComplete"},
			wantKstat: kstatus.CurrentStatus,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := app
			if tc.app != nil {
				a = tc.app
			}
			st := statusOf(a, selectorLabels(a), tc.deployment, tc.service, nil, now)
			for typ, want := range tc.want {
				got := ""
				if c := meta.FindStatusCondition(st.Conditions, typ); c != nil {
					got = string(c.Status) + "/" + c.Reason
					if c.ObservedGeneration != a.Generation {
						t.Errorf("condition %s observedGeneration = %d, want %d", typ, c.ObservedGeneration, a.Generation)
					}
				}
				if got != want {
					t.Errorf("condition %s = %q, want %q", typ, got, want)
				}
			}
			// The scale subresource's selector: the App's pods, whatever the children's state.
			if want := "app.kubernetes.io/instance=" + a.Name + ",app.kubernetes.io/name=" + a.Name; st.Selector != want {
				t.Errorf("selector = %q, want %q", st.Selector, want)
			}
			if st.ObservedGeneration != a.Generation {
				t.Errorf("observedGeneration = %d, want %d", st.ObservedGeneration, a.Generation)
			}
			if tc.deployment.obj != nil && st.DeploymentStatus.AvailableReplicas != tc.deployment.obj.Status.AvailableReplicas {
				t.Errorf("deploymentStatus not copied from the Deployment")
			}
			withStatus := a.DeepCopy()
			withStatus.Status = *st
			if got := controllertest.KStatus(t, withStatus); got != tc.wantKstat {
				t.Errorf("kstatus = %s, want %s", got, tc.wantKstat)
			}
		})
	}
}

// TestComputeStatusKeepsTransitionTime checks that an unchanged condition keeps its
// lastTransitionTime, so that a resync computes an identical status and writes nothing.
func TestComputeStatusKeepsTransitionTime(t *testing.T) {
	app := newApp("test-app", testNow)
	dep := childResult[*appsv1.Deployment]{name: "test-app-deploy", obj: liveDeployment(t, app)}
	svc := childResult[*corev1.Service]{name: "test-app-service", obj: liveService(t, app)}
	first := statusOf(app, selectorLabels(app), dep, svc, nil, metav1.NewTime(testNow))
	app.Status = *first
	second := statusOf(app, selectorLabels(app), dep, svc, nil, metav1.NewTime(testNow.Add(time.Hour)))
	for _, c := range second.Conditions {
		if !c.LastTransitionTime.Time.Equal(testNow) {
			t.Errorf("condition %s transition time moved to %s", c.Type, c.LastTransitionTime)
		}
	}
}

// TestKstatusGenerationNotObserved checks that an App whose spec changed since the last
// status is InProgress for kstatus, whatever its conditions say.
func TestKstatusGenerationNotObserved(t *testing.T) {
	app := newApp("test-app", testNow)
	dep := childResult[*appsv1.Deployment]{name: "test-app-deploy", obj: liveDeployment(t, app)}
	svc := childResult[*corev1.Service]{name: "test-app-service", obj: liveService(t, app)}
	app.Status = *statusOf(app, selectorLabels(app), dep, svc, nil, metav1.NewTime(testNow))
	app.Generation = 2
	if got := controllertest.KStatus(t, app); got != kstatus.InProgressStatus {
		t.Errorf("kstatus = %s, want InProgress", got)
	}
}

// TestDefaultedStatus checks that an App as the API server creates it, with the schema's
// default status (observedGeneration -1), gets its observedGeneration written by the
// first sync, and that the next sync writes nothing.
func TestDefaultedStatus(t *testing.T) {
	f := newFixture(t)
	app := newApp("test-app", testNow)
	app.Status.ObservedGeneration = -1
	f.addApps(app)
	f.addDeployments(liveDeployment(t, app))
	f.addServices(liveService(t, app))
	if err := f.sync(app.Namespace, app.Name); err != nil {
		t.Fatal(err)
	}
	if w := f.writes(); len(w) != 2 || describe(w[0]) != (action{"create", "controllerrevisions", "", "test-app-<rev>"}) || w[1].GetSubresource() != "status" {
		t.Fatalf("first sync wrote %v, want the first revision and the status", w)
	}
	synced, _, _ := f.c.getApp(nameOf(app))
	if synced.Status.ObservedGeneration != app.Generation {
		t.Errorf("observedGeneration = %d, want %d", synced.Status.ObservedGeneration, app.Generation)
	}
	if err := f.sync(app.Namespace, app.Name); err != nil {
		t.Fatal(err)
	}
	if w := f.writes(); len(w) != 0 {
		t.Errorf("second sync wrote %v, want nothing", w)
	}
}

// TestReplicaFailureInReadyMessage: pods refused by admission (the Deployment's
// ReplicaFailure condition) make Ready=False carry the refusal, while replicas are
// missing; once every replica is available a stale ReplicaFailure no longer matters.
func TestReplicaFailureInReadyMessage(t *testing.T) {
	app := newApp("test-app", testNow)
	refusal := "pods \"test-app-deploy-1\" is forbidden: exceeded quota: no-pods, requested: pods=1, used: pods=0, limited: pods=0"
	svc := childResult[*corev1.Service]{name: "test-app-service", obj: liveService(t, app)}
	tests := []struct {
		name      string
		available int32
		wantReady string
		wantMsg   string
	}{
		{name: "no pod: the refusal", available: 0, wantReady: "False/RollingOut", wantMsg: refusal},
		{name: "every replica available: Ready", available: 2, wantReady: "True/Available"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := liveDeployment(t, app)
			d.Status.AvailableReplicas = tt.available
			d.Status.UpdatedReplicas, d.Status.Replicas = tt.available, tt.available
			d.Status.Conditions = append(d.Status.Conditions, appsv1.DeploymentCondition{
				Type: appsv1.DeploymentReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate", Message: refusal})
			if *d.Spec.Replicas != 2 {
				t.Fatalf("fixture has %d replicas, the test assumes 2", *d.Spec.Replicas)
			}
			st := statusOf(app, selectorLabels(app), childResult[*appsv1.Deployment]{name: "test-app-deploy", obj: d}, svc, nil, metav1.NewTime(testNow))
			c := meta.FindStatusCondition(st.Conditions, appv1.ConditionReady)
			if got := string(c.Status) + "/" + c.Reason; got != tt.wantReady {
				t.Errorf("Ready = %s, want %s", got, tt.wantReady)
			}
			if !strings.Contains(c.Message, tt.wantMsg) {
				t.Errorf("Ready message %q does not carry %q", c.Message, tt.wantMsg)
			}
		})
	}
}

// TestTerminatingReplicasLeftOut checks that the old pods still stopping after a rollout
// do not reach the App's status: their count changes once more after every rollout and
// would cost a status write for nothing the App is about.
func TestTerminatingReplicasLeftOut(t *testing.T) {
	app := newApp("test-app", testNow)
	d := liveDeployment(t, app)
	d.Status.TerminatingReplicas = ptr.To[int32](1)
	st := statusOf(app, selectorLabels(app), childResult[*appsv1.Deployment]{name: d.Name, obj: d}, childResult[*corev1.Service]{}, nil, metav1.NewTime(testNow))
	if st.DeploymentStatus == nil || st.DeploymentStatus.TerminatingReplicas != nil || st.DeploymentStatus.AvailableReplicas != 2 {
		t.Errorf("deploymentStatus = %+v, want the Deployment's status without terminatingReplicas", st.DeploymentStatus)
	}
	if d.Status.TerminatingReplicas == nil {
		t.Errorf("computeStatus changed the cached Deployment")
	}
}

// statusOf is computeStatus for an App whose Deployment and Service were found as dep
// and svc.
func statusOf(app *appv1.App, selector map[string]string, dep childResult[*appsv1.Deployment], svc childResult[*corev1.Service], problem *podhealth.Problem, now metav1.Time) *appv1.AppStatus {
	return computeStatus(app, selector, deploymentOutcome(dep), []childOutcome{deploymentOutcome(dep), serviceOutcome(svc)}, problem, now)
}

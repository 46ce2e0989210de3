package api

import (
	"context"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// TestRolloutValidation checks that the API server refuses a bad spec.rollout with a
// message that names the field, and accepts the valid shapes (strictly: no field
// dropped).
func TestRolloutValidation(t *testing.T) {
	ns := framework.Namespace(t)
	dyn := framework.DynamicClient(t)
	steps := func(s string) string { return podsSpec + "rollout: {canary: {steps: [" + s + "]}}" }
	tooMany := strings.TrimSuffix(strings.Repeat("{setWeight: 1}, ", 33), ", ")

	invalid := []refusedSpec{
		{"no deploymentTemplate (CEL)", "serviceTemplate: {name: web}\nrollout: {canary: {steps: [{setWeight: 20}]}}",
			[]string{"spec.rollout", "rollout requires deploymentTemplate"}},
		{"no replicas and no HTTPRoute to split by (CEL)", "deploymentTemplate: {name: web, image: nginx}\nserviceTemplate: {name: web}\nrollout: {canary: {steps: [{setWeight: 20}]}}",
			[]string{"spec.rollout", "set deploymentTemplate.replicas"}},
		{"no replicas and an Ingress route (CEL)", "deploymentTemplate: {name: web, image: nginx}\nserviceTemplate: {name: web}\nroute: {hosts: [web.example.com]}\nrollout: {canary: {steps: [{setWeight: 20}]}}",
			[]string{"spec.rollout", "splits the traffic by replicas"}},
		{"no strategy (CEL)", podsSpec + "rollout: {}", []string{"spec.rollout", "set exactly one of canary and blueGreen"}},
		{"no steps", podsSpec + "rollout: {canary: {}}", []string{"spec.rollout.canary.steps: Required value"}},
		{"empty steps", steps(""), []string{"spec.rollout.canary.steps", "at least 1 items"}},
		{"too many steps", steps(tooMany), []string{"spec.rollout.canary.steps", "at most 32 items"}},
		{"weight above 100", steps("{setWeight: 101}"), []string{"spec.rollout.canary.steps[0].setWeight", "less than or equal to 100"}},
		{"weight below 0", steps("{setWeight: -5}"), []string{"spec.rollout.canary.steps[0].setWeight", "greater than or equal to 0"}},
		{"weights that go down (CEL)", steps("{setWeight: 50}, {pause: {}}, {setWeight: 20}"),
			[]string{"spec.rollout.canary.steps", "the setWeight values must not go down"}},
		{"a step with both (CEL)", steps("{setWeight: 10, pause: {duration: 1m}}"),
			[]string{"spec.rollout.canary.steps[0]", "each step sets exactly one of setWeight, pause, analysis, setHeaderRoute and setMirrorRoute"}},
		{"an empty step (CEL)", steps("{setWeight: 10}, {}"),
			[]string{"spec.rollout.canary.steps[1]", "each step sets exactly one of setWeight, pause, analysis, setHeaderRoute and setMirrorRoute"}},
		{"a pause of 0s: no way out but promote, by accident (CEL)", steps("{setWeight: 10}, {pause: {duration: 0s}}"),
			[]string{"spec.rollout.canary.steps[1].pause.duration", "must be from 1s to 24h", "leave duration out"}},
		{"a pause longer than a day (CEL)", steps("{pause: {duration: 25h}}"),
			[]string{"spec.rollout.canary.steps[0].pause.duration", "must be from 1s to 24h"}},
		{"a pause that is not a duration (CEL)", steps("{pause: {duration: soon}}"),
			[]string{"spec.rollout.canary.steps[0].pause.duration", "in whole units"}},
		{"a pause in fractions (CEL)", steps("{pause: {duration: 1.5h}}"),
			[]string{"spec.rollout.canary.steps[0].pause.duration", "in whole units"}},
		{"a negative pause (CEL)", steps("{pause: {duration: -1m}}"),
			[]string{"spec.rollout.canary.steps[0].pause.duration", "must be from 1s to 24h"}},
		{"a Service name too long for its canary's (CEL)", "deploymentTemplate: {name: web, image: nginx, replicas: 2}\nserviceTemplate: {name: " + strings.Repeat("s", 57) + "}\nrollout: {canary: {steps: [{setWeight: 20}]}}",
			[]string{"spec.serviceTemplate.name", "at most 56 characters with a rollout"}},
		{"negative scale-down delay", podsSpec + "rollout: {canary: {steps: [{setWeight: 20}], scaleDownDelaySeconds: -1}}",
			[]string{"spec.rollout.canary.scaleDownDelaySeconds", "greater than or equal to 0"}},
		{"abort scale-down delay too long", podsSpec + "rollout: {canary: {steps: [{setWeight: 20}], abortScaleDownDelaySeconds: 86401}}",
			[]string{"spec.rollout.canary.abortScaleDownDelaySeconds", "less than or equal to 86400"}},
		{"progress deadline too short", podsSpec + "rollout: {canary: {steps: [{setWeight: 20}], progressDeadlineSeconds: 5}}",
			[]string{"spec.rollout.canary.progressDeadlineSeconds", "greater than or equal to 10"}},
		{"ready deadline too short", podsSpec + "rollout: {canary: {steps: [{setWeight: 20}], readyDeadlineSeconds: 1}}",
			[]string{"spec.rollout.canary.readyDeadlineSeconds", "greater than or equal to 10"}},
		{"rollback window too wide", podsSpec + "rollout: {canary: {steps: [{setWeight: 20}], rollbackWindow: 11}}",
			[]string{"spec.rollout.canary.rollbackWindow", "less than or equal to 10"}},
		{"versionedConfig with configChangePolicy Ignore (CEL)", "deploymentTemplate: {name: web, image: nginx, replicas: 4, configChangePolicy: Ignore}\nrollout: {versionedConfig: true, canary: {steps: [{setWeight: 20}]}}",
			[]string{"spec.rollout.versionedConfig", "configChangePolicy Ignore turns off"}},
	}
	assertRefused(t, dyn, ns, "invalid-rollout", invalid)

	valid := []acceptedSpec{
		{"the issue's steps, by replicas", steps("{setWeight: 25}, {pause: {}}, {setWeight: 100}")},
		{"one replica and no Gateway: one extra canary pod", "deploymentTemplate: {name: web, image: nginx, replicas: 1}\nrollout: {canary: {steps: [{setWeight: 20}, {pause: {duration: 30s}}]}}"},
		{"an HTTPRoute split, the replicas left to an autoscaler", gatewaySpec + "rollout: {canary: {steps: [{setWeight: 10}, {pause: {duration: 1h30m}}, {setWeight: 50}, {pause: {}}]}}"},
		{"weight 0 first, weights repeated, a last indefinite pause", steps("{setWeight: 0}, {pause: {duration: 1s}}, {setWeight: 20}, {setWeight: 20}, {pause: {duration: 24h}}, {setWeight: 100}, {pause: {}}")},
		{"32 steps and every option", podsSpec + "rollout: {canary: {steps: [" + strings.TrimSuffix(strings.Repeat("{setWeight: 1}, ", 32), ", ") +
			"], scaleDownDelaySeconds: 0, abortScaleDownDelaySeconds: 86400, progressDeadlineSeconds: 10, readyDeadlineSeconds: 3600, rollbackWindow: 0}}"},
		{"no replicas and no HTTPRoute, autoscaled: the autoscaler's count is split", "deploymentTemplate: {name: web, image: nginx, resources: {requests: {cpu: 100m}}}\nautoscaling: {maxReplicas: 5, cpu: {averageUtilization: 50}}\nrollout: {canary: {steps: [{setWeight: 20}]}}"},
		{"versionedConfig, configChangePolicy Rollout", "deploymentTemplate: {name: web, image: nginx, replicas: 4, configChangePolicy: Rollout}\nrollout: {versionedConfig: true, canary: {steps: [{setWeight: 20}]}}"},
		{"versionedConfig false with Ignore", "deploymentTemplate: {name: web, image: nginx, replicas: 4, configChangePolicy: Ignore}\nrollout: {versionedConfig: false, canary: {steps: [{setWeight: 20}]}}"},
		{"a Service name of 56 characters", "deploymentTemplate: {name: web, image: nginx, replicas: 2}\nserviceTemplate: {name: " + strings.Repeat("s", 56) + "}\nrollout: {canary: {steps: [{setWeight: 20}]}}"},
	}
	assertAccepted(t, dyn, ns, "valid-rollout", valid)
}

// TestRolloutDefaults checks the defaults of spec.rollout.canary, and that the status
// subresource takes status.rollout and refuses a phase it does not know.
func TestRolloutDefaults(t *testing.T) {
	ns := framework.Namespace(t)
	apps := appClient(t).AppcontrollerV1().Apps(ns)
	ctx := context.Background()
	app, err := apps.Create(ctx, &appv1.App{
		ObjectMeta: metav1.ObjectMeta{Name: "canary"},
		Spec: appv1.AppSpec{
			DeploymentTemplate: &appv1.DeploymentTemplate{Name: "web", Image: "nginx", Replicas: ptr.To[int32](4)},
			Rollout: &appv1.Rollout{Canary: &appv1.CanaryStrategy{Steps: []appv1.CanaryStep{
				{SetWeight: ptr.To[int32](25)}, {Pause: &appv1.CanaryPause{Duration: &metav1.Duration{Duration: 90_000_000_000}}},
			}}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := app.Spec.Rollout.Canary
	got := []int32{*c.ScaleDownDelaySeconds, *c.AbortScaleDownDelaySeconds, *c.ProgressDeadlineSeconds, *c.ReadyDeadlineSeconds, *c.RollbackWindow}
	if want := []int32{30, 30, 600, 120, 3}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("defaults (scaleDownDelaySeconds, abortScaleDownDelaySeconds, progressDeadlineSeconds, readyDeadlineSeconds, rollbackWindow) = %v, want %v", got, want)
	}
	if d := c.Steps[1].Pause.Duration; d.Duration.String() != "1m30s" {
		t.Errorf("pause duration = %s, want 1m30s", d.Duration)
	}

	app.Status.ObservedGeneration = app.Generation
	app.Status.Rollout = &appv1.RolloutStatus{
		Phase: appv1.RolloutPaused, CurrentStepIndex: 1, CanaryWeight: 25,
		Stable: &appv1.RolloutVersion{Revision: "canary-1", PodTemplateHash: "a"},
		Canary: &appv1.RolloutVersion{Revision: "canary-2", PodTemplateHash: "b"},
	}
	if app, err = apps.UpdateStatus(ctx, app, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("writing status.rollout: %v", err)
	}
	if r := app.Status.Rollout; r == nil || r.Phase != appv1.RolloutPaused || r.Canary.Revision != "canary-2" {
		t.Errorf("status.rollout = %+v", r)
	}
	app.Status.Rollout.Phase = "Done"
	_, err = apps.UpdateStatus(ctx, app, metav1.UpdateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "status.rollout.phase") {
		t.Errorf("a status with an unknown rollout phase: %v, want Invalid naming status.rollout.phase", err)
	}
}

// The specs the validation tests build on: an App of four replicas with a Service (a
// canary split by replicas), and one without replicas whose route is an HTTPRoute to the
// Gateway public (a canary split by the route's weights).
const (
	podsSpec    = "deploymentTemplate: {name: web, image: nginx, replicas: 4}\nserviceTemplate: {name: web}\n"
	gatewaySpec = "deploymentTemplate: {name: web, image: nginx}\nserviceTemplate: {name: web}\nroute: {hosts: [web.example.com], parentRefs: [{name: public}]}\n"
)

// refusedSpec is a case of the validation tests: an App's spec, as YAML, that the API
// server must refuse, and what its error must contain.
type refusedSpec struct {
	name string
	spec string
	want []string
}

// acceptedSpec is an App's spec, as YAML, that the API server must accept strictly.
type acceptedSpec struct{ name, spec string }

// assertRefused creates an App of each spec (named prefix-INDEX) in ns, in a subtest
// NAME, and fails the subtest unless the API server refuses it as Invalid or BadRequest
// with an error that contains each of want.
func assertRefused(t *testing.T, dyn dynamic.Interface, ns, prefix string, specs []refusedSpec) {
	t.Helper()
	for i, tc := range specs {
		t.Run(tc.name, func(t *testing.T) {
			err := createSpec(t, dyn, ns, fmt.Sprintf("%s-%d", prefix, i), tc.spec)
			if err == nil {
				t.Fatalf("created an invalid App:\n%s", tc.spec)
			}
			t.Logf("refused: %v", err)
			if !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err) {
				t.Errorf("error %v is neither Invalid nor BadRequest", err)
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
}

// assertAccepted creates an App of each spec (named prefix-INDEX) in ns, in a subtest
// "valid NAME", and fails the subtest if the API server refuses it.
func assertAccepted(t *testing.T, dyn dynamic.Interface, ns, prefix string, specs []acceptedSpec) {
	t.Helper()
	for i, tc := range specs {
		t.Run("valid "+tc.name, func(t *testing.T) {
			if err := createSpec(t, dyn, ns, fmt.Sprintf("%s-%d", prefix, i), tc.spec); err != nil {
				t.Errorf("the valid App was rejected: %v", err)
			}
		})
	}
}

// createSpec creates the App name in ns with the spec given as YAML, sent as
// unstructured JSON (so that every value, zeros included, reaches the server as
// written) with strict field validation, and returns the server's error.
func createSpec(t *testing.T, dyn dynamic.Interface, ns, name, spec string) error {
	t.Helper()
	var s map[string]any
	if err := yaml.Unmarshal([]byte(spec), &s); err != nil {
		t.Fatalf("test spec: %v", err)
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "appcontroller.k8s.io/v1", "kind": "App",
		"metadata": map[string]any{"name": name}, "spec": s,
	}}
	_, err := dyn.Resource(appsGVR).Namespace(ns).Create(context.Background(), obj, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict})
	return err
}

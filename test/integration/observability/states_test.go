package observability

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/test/gitops"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// updateGolden makes TestHealth write the Apps it captures to test/gitops/testdata, the
// inputs of the unit tests of the health checks.
const updateGolden = "APP_CONTROLLER_UPDATE_GOLDEN"

const (
	goldenDir     = "../../gitops/testdata"
	healthScript  = "../../../config/argocd/health.lua"
	holdFinalizer = "test.appcontroller.k8s.io/hold"
)

var appsResource = schema.GroupVersionResource{Group: appv1.GroupName, Version: "v1", Resource: "apps"}

// TestHealth puts Apps in each state the controller reports (created before the
// controller saw it, rolling out, Ready, name conflict, retry budget exhausted, being
// deleted) and checks that kstatus reads the expected status and that the Argo CD health
// check (config/argocd/health.lua) agrees with it.
func TestHealth(t *testing.T) {
	ctx := context.Background()
	kube := framework.Client(t)
	dyn := framework.DynamicClient(t)
	ns := framework.Namespace(t)
	// A namespace where neither pods nor Services can be created: rollouts never finish
	// and Service writes fail until the retry budget runs out.
	quotaNS := framework.Namespace(t)
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "nothing", Namespace: quotaNS},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
			corev1.ResourcePods: resource.MustParse("0"), corev1.ResourceServices: resource.MustParse("0")}},
	}
	if _, err := kube.CoreV1().ResourceQuotas(quotaNS).Create(ctx, quota, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, converge, func() (bool, error) {
		q, err := kube.CoreV1().ResourceQuotas(quotaNS).Get(ctx, "nothing", metav1.GetOptions{})
		return err == nil && q.Status.Hard != nil, nil
	})
	// A Deployment the App "conflict" wants the name of.
	taken := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "taken", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "taken"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "taken"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
			},
		},
	}
	if _, err := kube.AppsV1().Deployments(ns).Create(ctx, taken, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	create := func(namespace, name, deployment string, service bool, finalizers ...string) {
		t.Helper()
		spec := map[string]any{"deploymentTemplate": map[string]any{"name": deployment, "image": "nginx", "replicas": int64(1)}}
		if service {
			spec["serviceTemplate"] = map[string]any{"name": name + "-svc"}
		}
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": appv1.GroupVersion.String(), "kind": "App",
			"metadata": map[string]any{"name": name, "namespace": namespace},
			"spec":     spec,
		}}
		obj.SetFinalizers(finalizers)
		if _, err := dyn.Resource(appsResource).Namespace(namespace).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating App %s: %v", name, err)
		}
	}
	get := func(namespace, name string) map[string]any {
		t.Helper()
		obj, err := dyn.Resource(appsResource).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		obj.SetManagedFields(nil)
		return obj.Object
	}
	// check asserts the kstatus status of the App and that the Lua check agrees, and
	// writes it as a golden file when asked.
	check := func(state string, obj map[string]any, want status.Status) {
		t.Helper()
		got, err := gitops.Kstatus(obj)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s: kstatus %s, want %s", state, got, want)
		}
		argo, err := gitops.RunArgoHealth(healthScript, obj)
		if err != nil {
			t.Fatal(err)
		}
		if argo.Status != gitops.ArgoFor(got) {
			t.Errorf("%s: Argo CD health %s (%s), kstatus %s", state, argo.Status, argo.Message, got)
		}
		t.Logf("%s: kstatus %s, Argo CD %s: %s", state, got, argo.Status, argo.Message)
		if os.Getenv(updateGolden) != "" {
			data, err := json.MarshalIndent(obj, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(goldenDir, state+".json"), append(data, '\n'), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	// waitFor waits until the App's condition has the status and reason.
	waitFor := func(namespace, name, conditionType, want string) map[string]any {
		t.Helper()
		var obj map[string]any
		framework.Eventually(t, converge, func() (bool, error) {
			obj = get(namespace, name)
			conditions, _, _ := unstructured.NestedSlice(obj, "status", "conditions")
			for _, c := range conditions {
				c, _ := c.(map[string]any)
				if c["type"] == conditionType && c["status"].(string)+"/"+c["reason"].(string) == want {
					return true, nil
				}
			}
			return false, nil
		})
		return obj
	}

	// The controller is not running yet: the App has only the schema's default status.
	create(ns, "web", "web", true)
	created := get(ns, "web")
	if g, found, _ := unstructured.NestedInt64(created, "status", "observedGeneration"); !found || g != -1 {
		t.Errorf("a new App's status.observedGeneration = %d (found %v), want the default -1", g, found)
	}
	check("created", created, status.InProgressStatus)

	create(ns, "conflict", "taken", false)
	create(ns, "leaving", "leaving", false, holdFinalizer)
	create(quotaNS, "rolling", "rolling", false)
	create(quotaNS, "exhausted", "exhausted", true)

	framework.StartAppController(t, framework.Config(t), nil)

	check("ready", waitFor(ns, "web", appv1.ConditionReady, "True/"+appv1.ReasonAvailable), status.CurrentStatus)
	check("progressing", waitFor(quotaNS, "rolling", appv1.ConditionReconciling, "True/"+appv1.ReasonRollingOut), status.InProgressStatus)
	check("name-conflict", waitFor(ns, "conflict", appv1.ConditionStalled, "True/"+appv1.ReasonNameConflict), status.FailedStatus)
	check("retries-exhausted", waitFor(quotaNS, "exhausted", appv1.ConditionReady, "False/"+appv1.ReasonReconcileFailed), status.FailedStatus)

	waitFor(ns, "leaving", appv1.ConditionReady, "True/"+appv1.ReasonAvailable)
	if err := dyn.Resource(appsResource).Namespace(ns).Delete(ctx, "leaving", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	check("deleting", get(ns, "leaving"), status.TerminatingStatus)
	patch := []byte(`[{"op": "remove", "path": "/metadata/finalizers"}]`)
	if _, err := dyn.Resource(appsResource).Namespace(ns).Patch(ctx, "leaving", types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

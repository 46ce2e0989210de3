package cluster

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/app-controller/app-controller/internal/localcluster"
	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	chart "github.com/app-controller/app-controller/test/chart"
	"github.com/app-controller/app-controller/test/integration/framework"
)

const (
	releaseName = "app-controller"
	// labelKey and labelValue are what the node label rule of the install gives kwok nodes.
	labelKey   = "chart-test.example.com/labelled"
	labelValue = "yes"
	converge   = 90 * time.Second
)

// helmConfig returns a Helm action configuration for the test cluster's admin, in ns.
func helmConfig(t *testing.T, ns string) *action.Configuration {
	t.Helper()
	kubeconfig := framework.Cluster().Kubeconfig
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig, flags.Namespace = &kubeconfig, &ns
	cfg := &action.Configuration{}
	if err := cfg.Init(flags, ns, "secret", t.Logf); err != nil {
		t.Fatalf("initializing Helm: %v", err)
	}
	return cfg
}

// crdNames are the CRDs the chart installs (config/crd/bases).
var crdNames = []string{"apps.appcontroller.k8s.io", "analysistemplates.appcontroller.k8s.io", "clusteranalysistemplates.appcontroller.k8s.io"}

// adoptCRD lets the release take over the CRDs that the test framework installed (as
// make install would have): Helm adopts an object that carries its ownership metadata.
func adoptCRD(t *testing.T, ns string) {
	t.Helper()
	a := newApplier(t)
	for _, name := range crdNames {
		crd := &unstructured.Unstructured{}
		crd.SetAPIVersion("apiextensions.k8s.io/v1")
		crd.SetKind("CustomResourceDefinition")
		crd.SetName(name)
		res, err := a.resource(crd, "")
		if err != nil {
			t.Fatal(err)
		}
		patch := `{"metadata":{"labels":{"app.kubernetes.io/managed-by":"Helm"},"annotations":{"meta.helm.sh/release-name":"` +
			releaseName + `","meta.helm.sh/release-namespace":"` + ns + `"}}}`
		if _, err := res.Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatalf("adopting the CRD %s: %v", name, err)
		}
	}
}

// TestInstallRunUninstall installs the chart with its default values plus a node label
// rule, runs the controller binary with a token of the chart's ServiceAccount (so with
// exactly the chart's RBAC: ClusterRole, leader election Role) and the arguments and rules
// of the chart's Deployment and ConfigMap, and checks that the example Apps become Ready,
// that an annotated Service gets its Ingress and that the node gets its label, with no
// request refused. helm uninstall then removes everything but the CRD.
func TestInstallRunUninstall(t *testing.T) {
	ns := framework.Namespace(t)
	admin := framework.Client(t)
	ctx := context.Background()
	a := newApplier(t)
	adoptCRD(t, ns)

	chrt, err := chart.Load()
	if err != nil {
		t.Fatal(err)
	}
	cfg := helmConfig(t, ns)
	install := action.NewInstall(cfg)
	install.ReleaseName, install.Namespace = releaseName, ns
	// Wait until the Deployment is available: kwok runs its pods as fakes.
	install.Wait, install.Timeout = true, 2*time.Minute
	vals := map[string]any{"nodeLabelRules": []any{map[string]any{
		"name":   "chart-test",
		"match":  map[string]any{"providerIDPrefix": "kwok://"},
		"labels": map[string]any{labelKey: labelValue},
	}}}
	rel, err := install.Run(chrt, vals)
	if err != nil {
		t.Fatalf("helm install: %v", err)
	}
	if rel.Info.Status != release.StatusDeployed {
		t.Fatalf("release status %s, want deployed", rel.Info.Status)
	}
	installed, err := chart.Decode([]byte(rel.Manifest))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("installed %d objects", len(installed))

	// The FlowSchema names a priority level the API server has (not Dangling).
	fsName := releaseName + "-leader-election"
	framework.Eventually(t, time.Minute, func() (bool, error) {
		fs, err := admin.FlowcontrolV1().FlowSchemas().Get(ctx, fsName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range fs.Status.Conditions {
			if c.Type == "Dangling" {
				t.Logf("FlowSchema %s: Dangling=%s (%s)", fsName, c.Status, c.Message)
				return c.Status == "False", nil
			}
		}
		return false, nil
	})

	// The controller binary, as the chart's ServiceAccount.
	deployment := findObject(t, installed, "Deployment", releaseName)
	args := containerArgs(t, deployment)
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	cm, err := admin.CoreV1().ConfigMaps(ns).Get(ctx, releaseName+"-node-label-rules", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(rules, []byte(cm.Data["rules.yaml"]), 0o600); err != nil {
		t.Fatal(err)
	}
	args = framework.LocalArgs(args, rules)
	if !slices.Contains(args, "--leader-elect") {
		t.Fatalf("args %v: want leader election, as the chart's default", args)
	}
	t.Cleanup(func() { removeNodeLabel(t) })
	logs := framework.RunController(t, ns, append(args, "--kubeconfig="+framework.ServiceAccountKubeconfig(t, ns, releaseName)))

	// The seed's example Apps become Ready.
	apps := framework.AppClient(t)
	examples := applyExamples(t, a)
	for _, ex := range examples {
		framework.Eventually(t, converge, func() (bool, error) {
			app, err := apps.AppcontrollerV1().Apps(ex.GetNamespace()).Get(ctx, ex.GetName(), metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return app.Status.ObservedGeneration == app.Generation &&
				apimeta.IsStatusConditionTrue(app.Status.Conditions, "Ready"), nil
		})
	}

	// An annotated Service gets its Ingress.
	_, err = admin.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "shop", Annotations: map[string]string{"ingress/http": "true"}},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, converge, func() (bool, error) {
		_, err := admin.NetworkingV1().Ingresses(ns).Get(ctx, "shop", metav1.GetOptions{})
		return err == nil, nil
	})

	// The node gets the label of the chart's rule.
	framework.Eventually(t, converge, func() (bool, error) {
		node, err := admin.CoreV1().Nodes().Get(ctx, localcluster.DefaultNodeName, metav1.GetOptions{})
		return err == nil && node.Labels[labelKey] == labelValue, nil
	})

	// The leader holds the Lease in the release namespace (the chart's Role).
	framework.Eventually(t, converge, func() (bool, error) {
		lease, err := admin.CoordinationV1().Leases(ns).Get(ctx, "app-controller", metav1.GetOptions{})
		return err == nil && lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "", nil
	})

	out := logs()
	for _, bad := range []string{"forbidden", "Forbidden"} {
		if strings.Contains(out, bad) {
			t.Errorf("the controller was refused something under the chart's RBAC:\n%s", framework.GrepLines(out, bad))
		}
	}

	// helm uninstall: everything goes but the CRD (helm.sh/resource-policy: keep).
	deleteExamples(t, a, examples)
	uninstall := action.NewUninstall(helmConfig(t, ns))
	uninstall.Wait, uninstall.Timeout = true, 2*time.Minute
	resp, err := uninstall.Run(releaseName)
	if err != nil {
		t.Fatalf("helm uninstall: %v", err)
	}
	t.Logf("helm uninstall: %s", resp.Info)
	for _, obj := range installed {
		exists, err := a.exists(ctx, obj, ns)
		if err != nil {
			t.Fatal(err)
		}
		keep := obj.GetKind() == "CustomResourceDefinition"
		if exists != keep {
			t.Errorf("after helm uninstall, %s %s exists: %v, want %v", obj.GetKind(), obj.GetName(), exists, keep)
		}
	}
}

// findObject returns the object of that kind and name among objs.
func findObject(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, obj := range objs {
		if obj.GetKind() == kind && obj.GetName() == name {
			return obj
		}
	}
	t.Fatalf("no %s %s installed", kind, name)
	return nil
}

// containerArgs returns the arguments of the Deployment's only container.
func containerArgs(t *testing.T, d *unstructured.Unstructured) []string {
	t.Helper()
	containers, _, err := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if err != nil || len(containers) != 1 {
		t.Fatalf("Deployment %s: containers %v (%v), want one", d.GetName(), containers, err)
	}
	args, _, err := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
	if err != nil {
		t.Fatal(err)
	}
	return args
}

// applyExamples creates the namespaces of artifacts/example and applies its Apps.
func applyExamples(t *testing.T, a *applier) []*unstructured.Unstructured {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(framework.RepoRoot(t), "artifacts", "example", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no example in artifacts/example (%v)", err)
	}
	ctx := context.Background()
	admin := framework.Client(t)
	var apps []*unstructured.Unstructured
	for _, file := range files {
		for _, obj := range decodeFile(t, file) {
			if obj.GetKind() != "App" || obj.GetAPIVersion() != appv1.GroupVersion.String() {
				t.Fatalf("%s: %s %s, want Apps only", file, obj.GetAPIVersion(), obj.GetKind())
			}
			_, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: obj.GetNamespace()}}, metav1.CreateOptions{})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
			if _, err := a.apply(ctx, obj, "", false); err != nil {
				t.Fatal(err)
			}
			apps = append(apps, obj)
		}
	}
	return apps
}

// deleteExamples deletes the example Apps (garbage collection takes their children).
func deleteExamples(t *testing.T, a *applier, apps []*unstructured.Unstructured) {
	t.Helper()
	for _, app := range apps {
		res, err := a.resource(app, "")
		if err != nil {
			t.Fatal(err)
		}
		if err := res.Delete(context.Background(), app.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting App %s/%s: %v", app.GetNamespace(), app.GetName(), err)
		}
	}
}

// removeNodeLabel removes the label of the chart's rule from the node, as the admin,
// after the controller stopped.
func removeNodeLabel(t *testing.T) {
	t.Helper()
	patch := `{"metadata":{"labels":{"` + labelKey + `":null}}}`
	_, err := framework.Client(t).CoreV1().Nodes().Patch(context.Background(), localcluster.DefaultNodeName, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		t.Errorf("removing label %s from node %s: %v", labelKey, localcluster.DefaultNodeName, err)
	}
}

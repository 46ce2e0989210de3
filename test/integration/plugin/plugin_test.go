package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller/appfixture"
	ingressctrl "github.com/app-controller/app-controller/pkg/controller/ingress"
	appclientset "github.com/app-controller/app-controller/pkg/generated/clientset/versioned"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// TestKubectlApp builds kubectl-app once and runs its commands against Apps the App
// controller reconciles: a healthy one with an Ingress, one in a name conflict, and one
// that does not exist.
func TestKubectlApp(t *testing.T) {
	plugin := buildPlugin(t)
	startManager(t)
	kube := framework.Client(t)
	apps := framework.AppClient(t)

	t.Run("golden outputs", func(t *testing.T) { checkGoldens(t, plugin, apps, kube) })

	t.Run("healthy App with an Ingress", func(t *testing.T) {
		ns := framework.Namespace(t)
		ctx := context.Background()
		createApp(t, apps, newApp(ns, "web", "web-deploy", 2))

		// Annotate the Service the App controller created, as `kubectl annotate` would.
		framework.Eventually(t, converge, func() (bool, error) {
			_, err := kube.CoreV1().Services(ns).Get(ctx, "web-svc", metav1.GetOptions{})
			return err == nil, nil
		})
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{ingressctrl.AnnotationHTTP: "true"}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kube.CoreV1().Services(ns).Patch(ctx, "web-svc", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatalf("annotating Service web-svc: %v", err)
		}

		waitAppCondition(t, apps, ns, "web", appv1.ConditionReady, "True/Available")
		framework.Eventually(t, converge, func() (bool, error) {
			_, err := kube.NetworkingV1().Ingresses(ns).Get(ctx, "web-svc", metav1.GetOptions{})
			return err == nil, nil
		})
		waitEndpointSlice(t, kube, ns, "web-svc")

		r := plugin.run(t, "tree", "web", "-n", ns)
		if r.code != 0 {
			t.Fatalf("tree: exit code %d, want 0", r.code)
		}
		if r.stderr != "" {
			t.Errorf("tree wrote warnings: %s", r.stderr)
		}
		lines := parseTree(t, r.stdout)
		checkHealthyTree(t, lines, r.stdout)

		r = plugin.run(t, "status", "web", "-n", ns)
		if r.code != 0 {
			t.Errorf("status of a Ready App: exit code %d, want 0", r.code)
		}
		for _, want := range []string{
			"Ready:", "True, Available",
			"Deployment:", "web-deploy (image nginx): 2 desired, 2 updated, 2 ready, 2 available",
			"Service:", "web-svc: ClusterIP", "ports http 8080/TCP -> 8080",
			"CONDITION", "Ready", "NamesAccepted", "True", "NoConflicts",
		} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("status output does not contain %q", want)
			}
		}

		r = plugin.run(t, "list", "-n", ns)
		if r.code != 0 || !containsFields(r.stdout, "web", "True", "Available", "2/2") {
			t.Errorf("list: exit code %d, want 0 and a line 'web True Available 2/2'", r.code)
		}
		r = plugin.run(t, "list", "-A")
		if r.code != 0 || !containsFields(r.stdout, ns, "web", "True", "Available", "2/2") {
			t.Errorf("list -A: exit code %d, want 0 and a line '%s web True Available 2/2'", r.code, ns)
		}
	})

	t.Run("App in a name conflict", func(t *testing.T) {
		ns := framework.Namespace(t)
		ctx := context.Background()
		foreign := framework.ForeignDeployment(ns, "clash-deploy", 1, map[string]string{"team": "other"})
		if _, err := kube.AppsV1().Deployments(ns).Create(ctx, foreign, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating the foreign Deployment: %v", err)
		}
		createApp(t, apps, newApp(ns, "clash", "clash-deploy", 2))
		waitAppCondition(t, apps, ns, "clash", appv1.ConditionNamesAccepted, "False/NameConflict")

		r := plugin.run(t, "status", "clash", "-n", ns)
		if r.code != 1 {
			t.Errorf("status of an App in conflict: exit code %d, want 1", r.code)
		}
		if !strings.Contains(r.stdout, "False, NameConflict") || !strings.Contains(r.stdout, `Deployment "clash-deploy" already exists`) {
			t.Errorf("status does not report the conflict")
		}

		r = plugin.run(t, "tree", "clash", "-n", ns)
		if r.code != 0 {
			t.Fatalf("tree: exit code %d, want 0", r.code)
		}
		lines := parseTree(t, r.stdout)
		app := lines[0]
		if app.object != "App/clash" || app.health != "Failed" || !strings.HasPrefix(app.message, "NameConflict:") {
			t.Errorf("App line %+v, want App/clash Failed NameConflict: ...", app)
		}
		found := false
		for _, l := range lines {
			if l.object == "Deployment/clash-deploy" {
				found = true
				if l.health != "Conflict" || l.parent != "App/clash" || !strings.Contains(l.message, "does not control") {
					t.Errorf("Deployment line %+v, want a Conflict under the App", l)
				}
			}
			if strings.HasPrefix(l.object, "ReplicaSet/") || strings.HasPrefix(l.object, "Pod/") {
				t.Errorf("the foreign Deployment's %s is in the App's tree", l.object)
			}
		}
		if !found {
			t.Errorf("the tree does not show the conflicting Deployment name")
		}
	})

	t.Run("missing App", func(t *testing.T) {
		ns := framework.Namespace(t)
		want := fmt.Sprintf(`error: App "nope" not found in namespace %q`, ns)
		for _, command := range []string{"status", "tree"} {
			r := plugin.run(t, command, "nope", "-n", ns)
			if r.code != 2 {
				t.Errorf("%s of a missing App: exit code %d, want 2", command, r.code)
			}
			if strings.TrimSpace(r.stderr) != want || r.stdout != "" {
				t.Errorf("%s of a missing App: stdout %q, stderr %q; want no output and %q", command, r.stdout, r.stderr, want)
			}
		}
	})
}

// checkHealthyTree checks the tree of the healthy App web: its Deployment, one
// ReplicaSet, two Pods, its Service, an EndpointSlice and the Ingress, each under its
// owner, every line Ready.
func checkHealthyTree(t *testing.T, lines []treeLine, out string) {
	t.Helper()
	count := map[string]int{}
	var rs string
	for _, l := range lines {
		kind, _, _ := strings.Cut(l.object, "/")
		count[kind]++
		if l.health != "Ready" {
			t.Errorf("%s is %s (%s), want Ready", l.object, l.health, l.message)
		}
		wantParent := map[string]string{
			"App": "", "Deployment": "App/web", "Service": "App/web",
			"ReplicaSet": "Deployment/web-deploy", "Pod": rs,
			"EndpointSlice": "Service/web-svc", "Ingress": "Service/web-svc",
			"ControllerRevision": "App/web",
		}
		parent, known := wantParent[kind]
		if !known {
			t.Errorf("unexpected object %s in the tree", l.object)
			continue
		}
		if l.parent != parent {
			t.Errorf("%s hangs from %q, want %q", l.object, l.parent, parent)
		}
		if kind == "ReplicaSet" {
			rs = l.object
		}
	}
	if lines[0].object != "App/web" || !strings.HasPrefix(lines[0].message, "Available:") {
		t.Errorf("first line %+v, want App/web with its Ready reason Available", lines[0])
	}
	want := map[string]int{"App": 1, "ControllerRevision": 1, "Deployment": 1, "ReplicaSet": 1, "Pod": 2, "Service": 1, "Ingress": 1}
	for kind, n := range want {
		if count[kind] != n {
			t.Errorf("%d %s lines, want %d", count[kind], kind, n)
		}
	}
	if count["EndpointSlice"] < 1 {
		t.Errorf("no EndpointSlice in the tree")
	}
	if t.Failed() {
		t.Logf("tree:\n%s", out)
	}
}

// newApp returns an App with a Deployment of the given name and replicas and a Service
// named NAME-svc.
func newApp(ns, name, deployment string, replicas int32) *appv1.App {
	app := appfixture.NewApp(ns, name, "nginx", replicas)
	app.Spec.DeploymentTemplate.Name = deployment
	return app
}

// createApp creates the App or fails the test.
func createApp(t *testing.T, client appclientset.Interface, app *appv1.App) {
	t.Helper()
	if _, err := client.AppcontrollerV1().Apps(app.Namespace).Create(context.Background(), app, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating App %s: %v", app.Name, err)
	}
}

// waitAppCondition waits until the App's condition is "Status/Reason" at the App's
// current generation.
func waitAppCondition(t *testing.T, client appclientset.Interface, ns, name, conditionType, want string) {
	t.Helper()
	framework.Eventually(t, converge, func() (bool, error) {
		app, err := client.AppcontrollerV1().Apps(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		c := meta.FindStatusCondition(app.Status.Conditions, conditionType)
		return c != nil && c.ObservedGeneration == app.Generation && string(c.Status)+"/"+c.Reason == want, nil
	})
}

// waitEndpointSlice waits until the endpointslice controller made a slice for the
// Service, and logs how many endpoints it has.
func waitEndpointSlice(t *testing.T, kube kubernetes.Interface, ns, service string) {
	t.Helper()
	var slices []discoveryv1.EndpointSlice
	framework.Eventually(t, converge, func() (bool, error) {
		list, err := kube.DiscoveryV1().EndpointSlices(ns).List(context.Background(), metav1.ListOptions{
			LabelSelector: discoveryv1.LabelServiceName + "=" + service,
		})
		if err != nil {
			return false, err
		}
		slices = list.Items
		return len(slices) > 0, nil
	})
	for _, s := range slices {
		t.Logf("EndpointSlice %s has %d endpoints", s.Name, len(s.Endpoints))
	}
}

// containsFields tells whether a line of out has exactly the given leading fields.
func containsFields(out string, fields ...string) bool {
	for line := range strings.SplitSeq(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= len(fields) && strings.Join(f[:len(fields)], " ") == strings.Join(fields, " ") {
			return true
		}
	}
	return false
}

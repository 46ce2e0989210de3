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
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/yaml"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller/controllertest"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// TestSeedExamplesConverge runs the seed's two examples: their Deployments become
// Available with the right images and replicas, each Service selects only its own App's
// pods, and both Apps report Ready (also to kstatus and kubectl wait).
func TestSeedExamplesConverge(t *testing.T) {
	c := newClients(t)
	startManager(t, 30*time.Second)
	ctx := context.Background()

	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tcs"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Kube.CoreV1().Namespaces().Delete(context.Background(), "tcs", metav1.DeleteOptions{}) })
	for _, file := range []string{"test_app.yaml", "test_app_2.yaml"} {
		app := &appv1.App{}
		if err := yaml.UnmarshalStrict(framework.RepoFile(t, "artifacts", "example", file), app); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		c.Create(t, app)
	}

	for _, want := range []struct {
		app, deploy, image, service string
		replicas                    int32
	}{
		{"test-app", "app-deploy", "nginx", "app-service", 2},
		{"test-app-2", "app-deploy-test", "tomcat", "app-service-test", 3},
	} {
		app := c.WaitReady(t, "tcs", want.app)
		d := c.WaitDeployment(t, "tcs", want.deploy, func(d *appsv1.Deployment) bool { return d.Status.AvailableReplicas == want.replicas })
		if img := d.Spec.Template.Spec.Containers[0].Image; img != want.image || *d.Spec.Replicas != want.replicas {
			t.Errorf("Deployment %s: image %s replicas %d, want %s %d", want.deploy, img, *d.Spec.Replicas, want.image, want.replicas)
		}
		if ref := metav1.GetControllerOf(d); ref == nil || ref.UID != app.UID {
			t.Errorf("Deployment %s is not controlled by App %s: %v", want.deploy, want.app, d.OwnerReferences)
		}
		if app.Status.DeploymentStatus == nil || app.Status.DeploymentStatus.AvailableReplicas != want.replicas || app.Status.ServiceStatus == nil {
			t.Errorf("App %s status = %+v", want.app, app.Status)
		}
		if got := controllertest.KStatus(t, app); got != kstatus.CurrentStatus {
			t.Errorf("App %s kstatus = %s, want Current", want.app, got)
		}

		// The Service's endpoints are exactly the App's own pods.
		pods, err := c.Kube.CoreV1().Pods("tcs").List(ctx, metav1.ListOptions{LabelSelector: appv1.InstanceLabel + "=" + want.app})
		if err != nil {
			t.Fatal(err)
		}
		wantIPs := sets.New[string]()
		for _, p := range pods.Items {
			if !strings.HasPrefix(p.Name, want.deploy+"-") {
				t.Errorf("pod %s selected by App %s's labels", p.Name, want.app)
			}
			wantIPs.Insert(p.Status.PodIP)
		}
		if wantIPs.Len() != int(want.replicas) {
			t.Errorf("App %s has %d pod IPs, want %d", want.app, wantIPs.Len(), want.replicas)
		}
		framework.Eventually(t, converge, func() (bool, error) {
			slices, err := c.Kube.DiscoveryV1().EndpointSlices("tcs").List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + want.service})
			if err != nil {
				return false, err
			}
			got := sets.New[string]()
			for _, s := range slices.Items {
				for _, e := range s.Endpoints {
					got.Insert(e.Addresses...)
				}
			}
			return got.Equal(wantIPs), nil
		})
	}

	// kubectl wait works on the Ready condition.
	framework.Kubectl(t, "wait", "--for=condition=Ready", "--timeout=30s", "-n", "tcs", "app/test-app", "app/test-app-2")
	if events := c.Events(t, "tcs", "App", "test-app"); !slices.Contains(events, "Normal Synced App synced successfully") {
		t.Errorf("events of test-app = %q, want the Synced event", events)
	}
}

// TestRolloutAndDrift changes the image and replicas, then edits, scales and deletes the
// children behind the controller's back: every owned field comes back, event-driven.
func TestRolloutAndDrift(t *testing.T) {
	// A long resync: repairs must come from watch events, not from resyncs.
	c, ns := readyWeb(t, 2)
	ctx := context.Background()

	// Image and replica changes roll out.
	c.Update(t, ns, "web", func(a *appv1.App) {
		a.Spec.DeploymentTemplate.Image = "nginx:1.27"
		a.Spec.DeploymentTemplate.Replicas = ptr.To[int32](3)
	})
	app := c.WaitReady(t, ns, "web")
	d, err := c.Kube.AppsV1().Deployments(ns).Get(ctx, "web-deploy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Spec.Template.Spec.Containers[0].Image != "nginx:1.27" || d.Status.AvailableReplicas != 3 || d.Status.UpdatedReplicas != 3 {
		t.Errorf("after rollout: image %s, available %d, updated %d", d.Spec.Template.Spec.Containers[0].Image, d.Status.AvailableReplicas, d.Status.UpdatedReplicas)
	}
	if app.Status.DeploymentStatus.AvailableReplicas != 3 {
		t.Errorf("App status availableReplicas = %d, want 3", app.Status.DeploymentStatus.AvailableReplicas)
	}

	// Scaled and re-imaged by hand: put back.
	if _, err := c.editDeployment(t, ns, "web-deploy", func(d *appsv1.Deployment) {
		d.Spec.Replicas = ptr.To[int32](7)
		d.Spec.Template.Spec.Containers[0].Image = "httpd"
	}); err != nil {
		t.Fatalf("scaling and re-imaging the Deployment by hand: %v", err)
	}
	c.WaitDeployment(t, ns, "web-deploy", func(d *appsv1.Deployment) bool {
		return *d.Spec.Replicas == 3 && d.Spec.Template.Spec.Containers[0].Image == "nginx:1.27"
	})

	// Service port and selector edited: put back.
	svc := c.editService(t, ns, "web-svc", func(s *corev1.Service) {
		s.Spec.Ports[0].Port = 9999
		s.Spec.Selector = map[string]string{"app": "something-else"}
	})
	framework.Eventually(t, converge, func() (bool, error) {
		s, err := c.Kube.CoreV1().Services(ns).Get(ctx, "web-svc", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return s.Spec.Ports[0].Port == 8080 && s.Spec.Selector[appv1.InstanceLabel] == "web" && s.Spec.Selector["app"] == "", nil
	})

	// Deleted children come back.
	oldDeployUID, oldSvcUID := d.UID, svc.UID
	if err := c.Kube.AppsV1().Deployments(ns).Delete(ctx, "web-deploy", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Kube.CoreV1().Services(ns).Delete(ctx, "web-svc", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.WaitDeployment(t, ns, "web-deploy", func(d *appsv1.Deployment) bool { return d.UID != oldDeployUID })
	framework.Eventually(t, converge, func() (bool, error) {
		s, err := c.Kube.CoreV1().Services(ns).Get(ctx, "web-svc", metav1.GetOptions{})
		return err == nil && s.UID != oldSvcUID, nil
	})
	c.WaitReady(t, ns, "web")
}

// TestRenamePrunes renames the Deployment and removes the Service template: the children
// the App controlled under the old names are deleted.
func TestRenamePrunes(t *testing.T) {
	c, ns := readyWeb(t, 1)

	c.Update(t, ns, "web", func(a *appv1.App) {
		a.Spec.DeploymentTemplate.Name = "web-renamed"
		a.Spec.ServiceTemplate = nil
	})
	c.waitWebGone(t, ns, "old Deployment")
	c.WaitDeployment(t, ns, "web-renamed", func(d *appsv1.Deployment) bool { return d.Status.AvailableReplicas == 1 })
	app := c.WaitReady(t, ns, "web")
	if app.Status.ServiceStatus != nil {
		t.Errorf("serviceStatus = %+v after the Service template was removed", app.Status.ServiceStatus)
	}
	for _, e := range c.Events(t, ns, "App", "web") {
		if strings.HasPrefix(e, "Warning") {
			t.Errorf("the rename caused a failure: %s", e)
		}
	}
}

// TestForeignDeploymentLeftAlone gives the App a Deployment name that a Deployment it does
// not control already holds: that Deployment stays byte-for-byte unchanged while the App
// reports the conflict, and the App takes the name as soon as it is released.
func TestForeignDeploymentLeftAlone(t *testing.T) {
	c, ns := eventDriven(t)
	ctx := context.Background()

	foreign := framework.ForeignDeployment(ns, "taken", 1, map[string]string{"team": "other"})
	if _, err := c.Kube.AppsV1().Deployments(ns).Create(ctx, foreign, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Let the deployment controller settle, so that only the App controller could change it.
	before := c.WaitDeployment(t, ns, "taken", func(d *appsv1.Deployment) bool { return d.Status.AvailableReplicas == 1 })

	app := newApp(ns, "web", "nginx", 1)
	app.Spec.DeploymentTemplate.Name = "taken"
	c.Create(t, app)
	got := c.WaitCondition(t, ns, "web", appv1.ConditionNamesAccepted, "False/NameConflict")
	if msg := conditionMessage(got, appv1.ConditionNamesAccepted); !strings.Contains(msg, `Deployment "taken" already exists`) {
		t.Errorf("NamesAccepted message %q does not name the holder", msg)
	}
	if controllertest.KStatus(t, got) != kstatus.FailedStatus {
		t.Errorf("kstatus of a conflicting App = %s, want Failed", controllertest.KStatus(t, got))
	}
	framework.Eventually(t, converge, func() (bool, error) {
		return slices.Contains(c.Events(t, ns, "App", "web"),
			`Warning ErrResourceExists Resource "taken" already exists and is not managed by App`), nil
	})
	// The Service, which has no conflict, is created meanwhile.
	if _, err := c.Kube.CoreV1().Services(ns).Get(ctx, "web-svc", metav1.GetOptions{}); err != nil {
		t.Errorf("Service of the conflicting App: %v", err)
	}
	// Poke the App a few times: each sync sees the conflict again and must not write.
	for i := range 3 {
		c.Update(t, ns, "web", func(a *appv1.App) { a.Annotations = map[string]string{"poke": string(rune('a' + i))} })
	}
	time.Sleep(2 * time.Second)
	after, err := c.Kube.AppsV1().Deployments(ns).Get(ctx, "taken", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if b, a := mustJSON(t, before), mustJSON(t, after); b != a {
		t.Errorf("the foreign Deployment changed:\nbefore %s\nafter  %s", b, a)
	}

	// Released: the App takes the name, within seconds rather than after a backoff.
	if err := c.Kube.AppsV1().Deployments(ns).Delete(ctx, "taken", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	webApp := c.GetApp(t, ns, "web")
	framework.Eventually(t, 5*time.Second, func() (bool, error) {
		d, err := c.Kube.AppsV1().Deployments(ns).Get(ctx, "taken", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		ref := metav1.GetControllerOf(d)
		return ref != nil && ref.UID == webApp.UID, nil
	})
	t.Logf("the App took the released name after %s", time.Since(released).Round(time.Millisecond))
	c.WaitReady(t, ns, "web")
}

// TestContendedName has two Apps claim one Deployment name: the older wins, whichever
// holds it, and the younger gets it when the older lets go.
func TestContendedName(t *testing.T) {
	c, ns := eventDriven(t)
	ctx := context.Background()

	older := c.Create(t, newApp(ns, "older", "nginx", 1))
	time.Sleep(1100 * time.Millisecond) // creation timestamps have a resolution of one second
	younger := newApp(ns, "younger", "httpd", 1)
	younger.Spec.DeploymentTemplate.Name = "shared"
	younger = c.Create(t, younger)
	c.WaitReady(t, ns, "younger")
	c.WaitReady(t, ns, "older")

	// The older App now claims the name the younger holds: the younger gives it up.
	c.Update(t, ns, "older", func(a *appv1.App) { a.Spec.DeploymentTemplate.Name = "shared" })
	c.WaitDeployment(t, ns, "shared", func(d *appsv1.Deployment) bool {
		ref := metav1.GetControllerOf(d)
		return ref != nil && ref.UID == older.UID && d.Spec.Template.Spec.Containers[0].Image == "nginx"
	})
	c.WaitReady(t, ns, "older")
	got := c.WaitCondition(t, ns, "younger", appv1.ConditionNamesAccepted, "False/NameConflict")
	if msg := conditionMessage(got, appv1.ConditionNamesAccepted); !strings.Contains(msg, `claimed by App "older"`) {
		t.Errorf("younger's NamesAccepted message = %q", msg)
	}
	if _, err := c.Kube.AppsV1().Deployments(ns).Get(ctx, "older-deploy", metav1.GetOptions{}); err == nil {
		// The older App's previous Deployment is pruned.
		waitGone(t, "older-deploy", func() error {
			_, err := c.Kube.AppsV1().Deployments(ns).Get(ctx, "older-deploy", metav1.GetOptions{})
			return err
		})
	}

	// The older App lets go: the younger gets the name.
	c.Update(t, ns, "older", func(a *appv1.App) { a.Spec.DeploymentTemplate.Name = "older-deploy" })
	c.WaitDeployment(t, ns, "shared", func(d *appsv1.Deployment) bool {
		ref := metav1.GetControllerOf(d)
		return ref != nil && ref.UID == younger.UID && d.Spec.Template.Spec.Containers[0].Image == "httpd"
	})
	c.WaitReady(t, ns, "younger")
	c.WaitReady(t, ns, "older")
}

// TestGarbageCollection deletes an App: kube-controller-manager's garbage collector
// deletes its children.
func TestGarbageCollection(t *testing.T) {
	c, ns := readyWeb(t, 1)
	c.Delete(t, ns, "web")
	c.waitWebGone(t, ns, "Deployment")
}

// TestIdleMakesNoWrites lets the controller run for more than two resync periods with
// nothing changing: it makes no write at all (no apply, no status, no event).
func TestIdleMakesNoWrites(t *testing.T) {
	c := newClients(t)
	const resync = 2 * time.Second
	m := startManager(t, resync)
	ns := framework.Namespace(t)
	c.Create(t, newApp(ns, "web", "nginx", 2))
	app := newApp(ns, "svc-only", "", 0)
	app.Spec.DeploymentTemplate = nil
	c.Create(t, app)
	c.WaitReady(t, ns, "web")
	c.WaitReady(t, ns, "svc-only")
	time.Sleep(resync) // let the last status write's own watch event be processed

	// Count only this namespace: earlier tests' namespaces may still be torn down.
	before := m.WritesIn(ns)
	time.Sleep(2*resync + resync/2)
	if after := m.WritesIn(ns); len(after) != len(before) {
		t.Errorf("the controller made %d writes while nothing changed: %q", len(after)-len(before), after[len(before):])
	}
	if len(before) == 0 {
		t.Error("the write counter counted nothing: the test would pass vacuously")
	}
}

// TestRolloutInProgress checks what kstatus sees while an App rolls out.
func TestRolloutInProgress(t *testing.T) {
	c, ns := eventDriven(t)
	app := newApp(ns, "web", "nginx", 2)
	// A rollout that cannot finish: no node has 1000 CPUs, so the pods stay Pending, and
	// the App names the scheduler's reason (kstatus InProgress for 5 minutes: a cluster
	// autoscaler may add a node).
	app.Spec.DeploymentTemplate.Resources = &appv1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: mustQuantity(t, "1000")}}
	c.Create(t, app)
	got := c.WaitCondition(t, ns, "web", appv1.ConditionReconciling, "True/"+appv1.ReasonUnschedulable)
	if framework.AppCondition(got, appv1.ConditionReady) != "False/"+appv1.ReasonUnschedulable || controllertest.KStatus(t, got) != kstatus.InProgressStatus ||
		!strings.Contains(conditionMessage(got, appv1.ConditionReady), "Insufficient cpu") {
		t.Errorf("rolling out: Ready %s %q, kstatus %s; want False/Unschedulable naming Insufficient cpu, InProgress",
			framework.AppCondition(got, appv1.ConditionReady), conditionMessage(got, appv1.ConditionReady), controllertest.KStatus(t, got))
	}
	if framework.AppCondition(got, appv1.ConditionProgressing) != "True/RollingOut" {
		t.Errorf("Progressing %s, want True/RollingOut (the Deployment's view)", framework.AppCondition(got, appv1.ConditionProgressing))
	}
}

func conditionMessage(app *appv1.App, conditionType string) string {
	for _, c := range app.Status.Conditions {
		if c.Type == conditionType {
			return c.Message
		}
	}
	return ""
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

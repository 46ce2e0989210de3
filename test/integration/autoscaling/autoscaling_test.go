package autoscaling

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	appctrl "github.com/app-controller/app-controller/pkg/controller/app"
	"github.com/app-controller/app-controller/pkg/controller/appfixture"
	"github.com/app-controller/app-controller/pkg/controllermanager"
	"github.com/app-controller/app-controller/test/gitops"
	"github.com/app-controller/app-controller/test/harness"
	"github.com/app-controller/app-controller/test/integration/apptest"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// converge bounds how long the controller and the cluster may take to converge.
const converge = 60 * time.Second

// clients are the admin's clients (not the controller's) and their waits on an App
// (apptest.Clients), with this package's helpers as methods.
type clients struct{ apptest.Clients }

// setUp returns the clients and a new namespace, and runs the App controller (only) as
// controllerUser, with the given resync period, until the test ends.
func setUp(t *testing.T, resync time.Duration) (clients, string) {
	t.Helper()
	c := clients{apptest.NewClients(t)}
	ns := framework.Namespace(t)
	opts := controllermanager.NewOptions()
	opts.ResyncPeriod = resync
	framework.StartAppController(t, framework.UserConfig(t, controllerUser), opts)
	return c, ns
}

// update applies mutate to the latest App and updates it, retrying on conflicts.
func (c clients) update(t *testing.T, ns, name string, mutate func(*appv1.App)) *appv1.App {
	t.Helper()
	var updated *appv1.App
	framework.Eventually(t, converge, func() (bool, error) {
		app, err := c.App.AppcontrollerV1().Apps(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		mutate(app)
		updated, err = c.App.AppcontrollerV1().Apps(ns).Update(context.Background(), app, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	})
	return updated
}

// waitObserved waits until the controller has reported on generation of the App and
// check passes on it.
func (c clients) waitObserved(t *testing.T, ns, name string, generation int64, check func(*appv1.App) bool) *appv1.App {
	t.Helper()
	var app *appv1.App
	framework.Eventually(t, converge, func() (bool, error) {
		var err error
		app, err = c.App.AppcontrollerV1().Apps(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return app.Status.ObservedGeneration >= generation && check(app), nil
	})
	return app
}

// waitAutoscaler waits until the HorizontalPodAutoscaler exists and passes check.
func (c clients) waitAutoscaler(t *testing.T, ns, name string, check func(*autoscalingv2.HorizontalPodAutoscaler) bool) *autoscalingv2.HorizontalPodAutoscaler {
	t.Helper()
	return framework.WaitFor(t, converge, c.Kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get, name, check)
}

// replicasOwners returns the field managers that own the Deployment's spec.replicas,
// each with its operation and subresource ("kubectl-scale Update scale").
func replicasOwners(d *appsv1.Deployment) []string {
	var out []string
	for _, e := range d.ManagedFields {
		if e.FieldsV1 != nil && strings.Contains(string(e.FieldsV1.GetRawBytes()), `"f:replicas"`) && strings.Contains(string(e.FieldsV1.GetRawBytes()), `"f:spec"`) {
			out = append(out, strings.TrimSpace(e.Manager+" "+string(e.Operation)+" "+e.Subresource))
		}
	}
	slices.Sort(out)
	return out
}

// replicasWatch records spec.replicas of every event of a watch on one Deployment.
type replicasWatch struct {
	w      watch.Interface
	done   chan struct{}
	mu     sync.Mutex
	events []string
	counts []int32
}

// watchReplicas watches the Deployment name from resourceVersion on.
func watchReplicas(t *testing.T, c clients, ns, name, resourceVersion string) *replicasWatch {
	t.Helper()
	w, err := c.Kube.AppsV1().Deployments(ns).Watch(context.Background(), metav1.ListOptions{
		FieldSelector: "metadata.name=" + name, ResourceVersion: resourceVersion,
	})
	if err != nil {
		t.Fatal(err)
	}
	rw := &replicasWatch{w: w, done: make(chan struct{})}
	go func() {
		defer close(rw.done)
		for ev := range w.ResultChan() {
			d, ok := ev.Object.(*appsv1.Deployment)
			if !ok {
				continue
			}
			rw.mu.Lock()
			n := ptr.Deref(d.Spec.Replicas, 1)
			rw.counts = append(rw.counts, n)
			rw.events = append(rw.events, fmt.Sprintf("%s rv %s replicas %d", ev.Type, d.ResourceVersion, n))
			rw.mu.Unlock()
		}
	}()
	t.Cleanup(rw.stop)
	return rw
}

// stop ends the watch and waits for its last event.
func (rw *replicasWatch) stop() {
	rw.w.Stop()
	<-rw.done
}

// TestReplicasNeverReset turns autoscaling on for an App whose Deployment runs 3 pods,
// lets another writer scale it to 4 as the HPA does, changes the pod template, and turns
// autoscaling off with replicas unset, with a watch on the Deployment from before the
// first change: every event of the watch, each a write of the Deployment however short
// lived, carries 3 or 4 replicas, never 1 or any other count; the controller owns the
// count until the other writer takes it, not after; the HPA is written when autoscaling
// is turned on and pruned when it is turned off.
func TestReplicasNeverReset(t *testing.T) {
	c, ns := setUp(t, 10*time.Minute) // events, not resyncs
	ctx := context.Background()
	app := appfixture.NewApp(ns, "web", "nginx", 3)
	c.Create(t, app)
	c.waitObserved(t, ns, "web", 1, func(a *appv1.App) bool {
		return framework.AppCondition(a, appv1.ConditionReady) == "True/"+appv1.ReasonAvailable
	})
	deploy := c.WaitDeployment(t, ns, "web-deploy", func(d *appsv1.Deployment) bool { return ptr.Deref(d.Spec.Replicas, 1) == 3 })
	rw := watchReplicas(t, c, ns, "web-deploy", deploy.ResourceVersion)

	// Autoscaling on, 2 to 5, the count at 3: the HPA is written, the Deployment is not.
	_, mark := auditedWrites(t, 0, ns)
	updated := c.update(t, ns, "web", func(a *appv1.App) {
		a.Spec.Autoscaling = &appv1.Autoscaling{MinReplicas: ptr.To[int32](2), MaxReplicas: 5,
			CPU: &appv1.ResourceTarget{AverageValue: ptr.To(resource.MustParse("100m"))}}
	})
	got := c.waitObserved(t, ns, "web", updated.Generation, func(a *appv1.App) bool { return a.Status.Autoscaling != nil })
	hpa := c.waitAutoscaler(t, ns, "web-deploy", func(*autoscalingv2.HorizontalPodAutoscaler) bool { return true })
	if !metav1.IsControlledBy(hpa, got) || hpa.Spec.ScaleTargetRef.Name != "web-deploy" || ptr.Deref(hpa.Spec.MinReplicas, 0) != 2 || hpa.Spec.MaxReplicas != 5 {
		t.Errorf("HPA %+v %+v: want controlled by the App, targeting web-deploy, 2 to 5", hpa.OwnerReferences, hpa.Spec)
	}
	if writes, _ := auditedWrites(t, mark, ns, "deployments"); len(writes) != 0 {
		t.Errorf("turning autoscaling on wrote the Deployment: %q", writes)
	}
	d, err := c.Kube.AppsV1().Deployments(ns).Get(ctx, "web-deploy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if owners := replicasOwners(d); !slices.Equal(owners, []string{appv1.FieldManager + " Apply"}) {
		t.Errorf("before another writer, spec.replicas owned by %q, want the controller's apply", owners)
	}

	// Another writer takes the count, as the HPA does: an update of the scale subresource.
	framework.Kubectl(t, "-n", ns, "scale", "deployment/web-deploy", "--replicas=4")
	d = c.WaitDeployment(t, ns, "web-deploy", func(d *appsv1.Deployment) bool { return ptr.Deref(d.Spec.Replicas, 1) == 4 })
	if owners := replicasOwners(d); slices.ContainsFunc(owners, func(o string) bool { return strings.HasPrefix(o, appv1.FieldManager) }) || len(owners) != 1 {
		t.Errorf("after kubectl scale, spec.replicas owned by %q, want kubectl's update of the scale subresource alone", owners)
	}

	// A template change: applied without the count.
	updated = c.update(t, ns, "web", func(a *appv1.App) { a.Spec.DeploymentTemplate.Image = "nginx:2" })
	c.waitObserved(t, ns, "web", updated.Generation, func(*appv1.App) bool { return true })
	d = c.WaitDeployment(t, ns, "web-deploy", func(d *appsv1.Deployment) bool {
		return d.Spec.Template.Spec.Containers[0].Image == "nginx:2"
	})
	if n := ptr.Deref(d.Spec.Replicas, 1); n != 4 {
		t.Errorf("after the template change the Deployment's replicas %d, want 4", n)
	}

	// Autoscaling off, replicas unset: the HPA goes, the count stays.
	updated = c.update(t, ns, "web", func(a *appv1.App) {
		a.Spec.Autoscaling = nil
		a.Spec.DeploymentTemplate.Replicas = nil
	})
	got = c.waitObserved(t, ns, "web", updated.Generation, func(a *appv1.App) bool {
		return a.Status.Autoscaling == nil && framework.AppCondition(a, appv1.ConditionScalingActive) == ""
	})
	framework.Eventually(t, converge, func() (bool, error) {
		_, err := c.Kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "web-deploy", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	framework.WaitEvent(t, c.Kube, ns, "App", "web", "Normal "+appv1.EventReasonAutoscalingRemoved+
		" Deleted the HorizontalPodAutoscaler of the removed spec.autoscaling: replicas stay at 4", converge)
	// Turning autoscaling off wrote nothing to the Deployment: a last template change
	// shows, by its own event, that the watch is still delivering.
	updated = c.update(t, ns, "web", func(a *appv1.App) { a.Spec.DeploymentTemplate.Image = "nginx:3" })
	c.WaitDeployment(t, ns, "web-deploy", func(d *appsv1.Deployment) bool {
		return d.Spec.Template.Spec.Containers[0].Image == "nginx:3"
	})
	c.waitObserved(t, ns, "web", updated.Generation, func(*appv1.App) bool { return true })

	rw.stop()
	rw.mu.Lock()
	defer rw.mu.Unlock()
	t.Logf("%d events of the Deployment: %q", len(rw.events), rw.events)
	// Turning autoscaling on wrote nothing: the first event is the other writer's 4.
	if len(rw.counts) == 0 || rw.counts[0] != 4 {
		t.Fatalf("the watch saw counts %v, want the other writer's 4 first", rw.counts)
	}
	for i, n := range rw.counts {
		if n != 3 && n != 4 {
			t.Errorf("event %d of the Deployment carries %d replicas (%s), want 3 or 4", i, n, rw.events[i])
		}
		if i > 0 && n < rw.counts[i-1] {
			t.Errorf("event %d of the Deployment goes back from %d to %d replicas", i, rw.counts[i-1], n)
		}
	}
	if n := ptr.Deref(got.Spec.DeploymentTemplate.Replicas, 0); n != 0 {
		t.Errorf("the App's replicas %d, want unset", n)
	}
}

// auditedWrites returns the writes of the controller's user to resource ("deployments",
// "horizontalpodautoscalers", any subresource) in namespace ns, from the audit log's
// events at index mark on, and the log's length.
func auditedWrites(t *testing.T, mark int, ns string, resources ...string) ([]string, int) {
	t.Helper()
	var out []string
	i := -1
	err := harness.NewAuditLog(framework.Cluster().AuditLogPath).Read(func(ev harness.AuditEvent) error {
		i++
		if i < mark || !ev.IsWrite() || ev.Stage != "ResponseComplete" || ev.User.Username != controllerUser || ev.ObjectRef == nil {
			return nil
		}
		if ev.ObjectRef.Namespace == ns && slices.Contains(resources, ev.ObjectRef.Resource) {
			out = append(out, ev.Verb+" "+ev.Resource()+" "+ev.ObjectRef.Name)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("reading the audit log: %v", err)
	}
	return out, i + 1
}

// reconciles returns how many syncs the App controllers of this process have made
// (controller_runtime_reconcile_total of controller app, every result).
func reconciles(t *testing.T) float64 {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == appctrl.ControllerName {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}

// TestNoWritesAfterAnotherWriterScaled creates an autoscaled App, scales its Deployment
// as the HPA does (kubectl scale deployment: an update of the scale subresource), then
// lets the controller resync the App ten times: the API server's audit log shows not one
// write of the controller's user to the Deployment or the HPA meanwhile, and the count
// is still the other writer's.
func TestNoWritesAfterAnotherWriterScaled(t *testing.T) {
	const resync = time.Second
	c, ns := setUp(t, resync)
	ctx := context.Background()
	app := appfixture.WithAutoscaling(appfixture.NewApp(ns, "web", "nginx", 2), 1, 5, 50, "100m")
	c.Create(t, app)
	c.waitAutoscaler(t, ns, "web-deploy", func(*autoscalingv2.HorizontalPodAutoscaler) bool { return true })
	c.WaitDeployment(t, ns, "web-deploy", func(d *appsv1.Deployment) bool { return ptr.Deref(d.Spec.Replicas, 1) == 2 })
	created, _ := auditedWrites(t, 0, ns, "deployments", "horizontalpodautoscalers")
	if len(created) != 2 {
		t.Errorf("the controller's writes at creation %q, want one apply of the Deployment and one of the HPA", created)
	}

	framework.Kubectl(t, "-n", ns, "scale", "deployment/web-deploy", "--replicas=4")
	c.waitObserved(t, ns, "web", 1, func(a *appv1.App) bool {
		return a.Status.DeploymentStatus != nil && a.Status.DeploymentStatus.Replicas == 4
	})
	_, mark := auditedWrites(t, 0, ns)
	before, start := reconciles(t), time.Now()
	// Ten resyncs of the App: ten resync periods, and at least ten syncs (the HPA's and
	// the Deployment's events may add some).
	time.Sleep(10 * resync)
	framework.Eventually(t, converge, func() (bool, error) { return reconciles(t) >= before+10, nil })
	time.Sleep(resync) // the last sync's writes, if any, reach the audit log
	t.Logf("%.0f syncs in %s", reconciles(t)-before, time.Since(start).Round(time.Millisecond))
	writes, _ := auditedWrites(t, mark, ns, "deployments", "horizontalpodautoscalers")
	all, _ := auditedWrites(t, mark, ns, "deployments", "horizontalpodautoscalers", "apps", "events", "replicasets", "services", "controllerrevisions")
	t.Logf("the controller's writes meanwhile: %q", all)
	if len(writes) != 0 {
		t.Errorf("the controller wrote %d times to the Deployment or the HPA after another writer scaled: %q", len(writes), writes)
	}
	d, err := c.Kube.AppsV1().Deployments(ns).Get(ctx, "web-deploy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := ptr.Deref(d.Spec.Replicas, 1); n != 4 {
		t.Errorf("the Deployment's replicas %d after the resyncs, want 4", n)
	}
}

// TestAutoscalerNameAndDrift checks that the HPA's name is claimed as the other
// children's are (a foreign HPA holding it is a name conflict, left untouched), and that
// an edit of the App's HPA is repaired.
func TestAutoscalerNameAndDrift(t *testing.T) {
	c, ns := setUp(t, 10*time.Minute)
	ctx := context.Background()
	// A user's HPA of another Deployment, under the name the App's HPA would take.
	foreign, err := c.Kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "taken-deploy"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "elsewhere"},
			MaxReplicas:    2,
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	taken := appfixture.WithAutoscaling(appfixture.NewApp(ns, "taken", "nginx", 1), 1, 3, 50, "100m")
	c.Create(t, taken)
	got := c.waitObserved(t, ns, "taken", 1, func(a *appv1.App) bool {
		return framework.AppCondition(a, appv1.ConditionNamesAccepted) == "False/"+appv1.ReasonNameConflict
	})
	if msg := meta.FindStatusCondition(got.Status.Conditions, appv1.ConditionNamesAccepted).Message; !strings.Contains(msg, `HorizontalPodAutoscaler "taken-deploy" already exists`) {
		t.Errorf("NamesAccepted says %q, want the HorizontalPodAutoscaler named", msg)
	}
	// The HPA controller writes the foreign HPA's status; its spec and metadata stay.
	if now, err := c.Kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "taken-deploy", metav1.GetOptions{}); err != nil || !equalSpec(now, foreign) {
		t.Errorf("the foreign HPA was changed (%v): %+v", err, now)
	}
	if writes, _ := auditedWrites(t, 0, ns, "horizontalpodautoscalers"); len(writes) != 0 {
		t.Errorf("the controller wrote to the foreign HPA: %q", writes)
	}

	app := appfixture.WithAutoscaling(appfixture.NewApp(ns, "web", "nginx", 1), 1, 3, 50, "100m")
	c.Create(t, app)
	c.waitAutoscaler(t, ns, "web-deploy", func(*autoscalingv2.HorizontalPodAutoscaler) bool { return true })
	framework.Kubectl(t, "-n", ns, "patch", "hpa", "web-deploy", "--type=merge", "-p", `{"spec":{"maxReplicas":9}}`)
	c.waitAutoscaler(t, ns, "web-deploy", func(h *autoscalingv2.HorizontalPodAutoscaler) bool { return h.Spec.MaxReplicas == 3 })
}

// equalSpec reports whether two HPAs have the same spec, labels and owners.
func equalSpec(a, b *autoscalingv2.HorizontalPodAutoscaler) bool {
	return equality.Semantic.DeepEqual(a.Spec, b.Spec) && equality.Semantic.DeepEqual(a.Labels, b.Labels) &&
		equality.Semantic.DeepEqual(a.OwnerReferences, b.OwnerReferences)
}

// TestHealthOfAutoscaledApps puts autoscaled Apps in the states the autoscaler's
// verdicts make on a cluster without a metrics API (kwok's) and checks what kstatus and
// the shipped Argo CD health check read: Ready while the autoscaler has not computed a
// count (ScalingActive Unknown, pending: Current, Healthy); Stalled at once when a
// utilization target names a resource the container does not request (ScalingActive
// False, MissingResourceRequest: Failed, Degraded), never InProgress. With
// APP_CONTROLLER_UPDATE_GOLDEN set, the Apps are written to test/gitops/testdata, which
// test/gitops checks again in make unit.
func TestHealthOfAutoscaledApps(t *testing.T) {
	c, ns := setUp(t, 10*time.Minute)
	pending := appfixture.WithAutoscaling(appfixture.NewApp(ns, "pending", "nginx", 1), 1, 3, 50, "100m")
	missing := appfixture.WithAutoscaling(appfixture.NewApp(ns, "missing", "nginx", 1), 1, 3, 50, "100m")
	missing.Spec.DeploymentTemplate.Resources = nil
	for _, app := range []*appv1.App{pending, missing} {
		c.Create(t, app)
	}
	for _, tc := range []struct {
		name, state, scalingActive, ready string
		wantKstatus                       string
		wantArgo                          string
	}{
		{"pending", "autoscaling-pending", "Unknown/" + appv1.ReasonAutoscalerPending, "True/" + appv1.ReasonAvailable, "Current", gitops.Healthy},
		{"missing", "autoscaling-missing-request", "False/" + appv1.ReasonMissingResourceRequest, "False/" + appv1.ReasonMissingResourceRequest, "Failed", gitops.Degraded},
	} {
		app := c.waitObserved(t, ns, tc.name, 1, func(a *appv1.App) bool {
			return framework.AppCondition(a, appv1.ConditionScalingActive) == tc.scalingActive && framework.AppCondition(a, appv1.ConditionReady) == tc.ready
		})
		r, err := gitops.Read(healthScript, app)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: kstatus %s, Argo CD %s: %s", tc.state, r.Kstatus, r.Argo.Status, r.Argo.Message)
		if string(r.Kstatus) != tc.wantKstatus || r.Argo.Status != tc.wantArgo {
			t.Errorf("%s: kstatus %s, Argo CD %s; want %s, %s", tc.state, r.Kstatus, r.Argo.Status, tc.wantKstatus, tc.wantArgo)
		}
		if os.Getenv(updateGolden) != "" {
			if err := gitops.WriteCapture(filepath.Join(goldenDir, tc.state+".json"), r.JSON, ns, "NAMESPACE"); err != nil {
				t.Fatal(err)
			}
		}
	}
	framework.WaitEvent(t, c.Kube, ns, "App", "missing", "Warning "+appv1.ReasonMissingResourceRequest+" autoscaling.cpu.averageUtilization", converge)
}

const (
	healthScript = "../../../config/argocd/health.lua"
	goldenDir    = "../../gitops/testdata"
	// updateGolden makes TestHealthOfAutoscaledApps write the Apps it captures to
	// goldenDir.
	updateGolden = "APP_CONTROLLER_UPDATE_GOLDEN"
)

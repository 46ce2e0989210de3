package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	core "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
	"github.com/app-controller/app-controller/pkg/controller/controllertest"
)

// withAutoscaling sets app's spec.autoscaling: lowest to highest replicas (lowest 0:
// unset) at a CPU utilization of 50%, and gives its container a CPU request.
func withAutoscaling(app *appv1.App, lowest, highest int32) {
	app.Spec.Autoscaling = &appv1.Autoscaling{MaxReplicas: highest, CPU: &appv1.ResourceTarget{AverageUtilization: ptr.To[int32](50)}}
	if lowest > 0 {
		app.Spec.Autoscaling.MinReplicas = ptr.To(lowest)
	}
	app.Spec.DeploymentTemplate.Resources = &appv1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m")}}
}

func TestDesiredAutoscaler(t *testing.T) {
	app := newApp("web", testNow)
	if hpa, err := DesiredAutoscaler(app); err != nil || hpa != nil {
		t.Fatalf("without spec.autoscaling: %v, %v; want nil", hpa, err)
	}
	app.Spec.Autoscaling = &appv1.Autoscaling{
		MaxReplicas: 10,
		CPU:         &appv1.ResourceTarget{AverageUtilization: ptr.To[int32](60)},
		Memory:      &appv1.ResourceTarget{AverageValue: ptr.To(resource.MustParse("300Mi"))},
		Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{
			StabilizationWindowSeconds: ptr.To[int32](0),
			Policies:                   []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PercentScalingPolicy, Value: 50, PeriodSeconds: 60}},
		}},
	}
	desired, err := DesiredAutoscaler(app)
	if err != nil {
		t.Fatal(err)
	}
	var got autoscalingv2.HorizontalPodAutoscaler
	if err := controller.Convert(desired, &got); err != nil {
		t.Fatal(err)
	}
	want := autoscalingv2.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web-deploy"},
		MinReplicas:    ptr.To[int32](1), // the default
		MaxReplicas:    10,
		Metrics: []autoscalingv2.MetricSpec{
			{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU,
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](60)}}},
			{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceMemory,
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("300Mi"))}}},
		},
		Behavior: app.Spec.Autoscaling.Behavior,
	}
	if !equality.Semantic.DeepEqual(got.Spec, want) {
		t.Errorf("spec %+v\nwant %+v", got.Spec, want)
	}
	if got.Name != "web-deploy" || got.Namespace != "tcs" || !metav1.IsControlledBy(&got, app) || got.Labels[appv1.ManagedByLabel] != appv1.ManagedByValue ||
		got.Annotations[controller.AppliedConfigHashAnnotation] == "" {
		t.Errorf("metadata %+v: want web-deploy in tcs, controlled by the App, labelled as managed, with the applied-config hash", got.ObjectMeta)
	}
}

// handover drives an App through spec changes and other writers of its Deployment's
// replica count, on a fixture whose fake API server keeps managedFields as a real one
// does (an Update by another field manager takes the fields it changes).
type handover struct {
	t   *testing.T
	f   *fixture
	app *appv1.App
	rv  int
}

func newHandover(t *testing.T, app *appv1.App) *handover {
	f := newFixture(t)
	f.addApps(app)
	h := &handover{t: t, f: f, app: app}
	// The API server's optimistic concurrency, which the fake one lacks: an apply that
	// carries a resourceVersion other than the object's is refused.
	f.kubeClient.PrependReactor("patch", "deployments", func(a core.Action) (bool, runtime.Object, error) {
		p := a.(core.PatchAction)
		var sent struct {
			Metadata struct{ ResourceVersion string } `json:"metadata"`
		}
		if p.GetPatchType() != types.ApplyPatchType || json.Unmarshal(p.GetPatch(), &sent) != nil || sent.Metadata.ResourceVersion == "" {
			return false, nil, nil
		}
		live, err := f.kubeClient.Tracker().Get(appsv1.SchemeGroupVersion.WithResource("deployments"), p.GetNamespace(), p.GetName())
		if err == nil && live.(*appsv1.Deployment).ResourceVersion != sent.Metadata.ResourceVersion {
			return true, nil, apierrors.NewConflict(appsv1.Resource("deployments"), p.GetName(),
				errors.New("the object has been modified; please apply your changes to the latest version and try again"))
		}
		return false, nil, nil
	})
	return h
}

// stamp gives the stored Deployment a new resourceVersion, as the API server gives
// every write (the fake one does not).
func (h *handover) stamp() {
	h.t.Helper()
	gvr := appsv1.SchemeGroupVersion.WithResource("deployments")
	obj, err := h.f.kubeClient.Tracker().Get(gvr, h.app.Namespace, h.app.Spec.DeploymentTemplate.Name)
	if err != nil {
		return // not created
	}
	d := obj.(*appsv1.Deployment).DeepCopy()
	h.rv++
	d.ResourceVersion = fmt.Sprint(h.rv)
	if err := h.f.kubeClient.Tracker().Update(gvr, d, h.app.Namespace); err != nil {
		h.t.Fatal(err)
	}
}

// change makes the next generation of the App, mutated.
func (h *handover) change(mutate func(*appv1.App)) {
	// The App as the API server holds it, its status the controller's last.
	if cur, exists, _ := h.f.c.getApp(nameOf(h.app)); exists {
		h.app = cur
	}
	h.app = h.app.DeepCopy()
	mutate(h.app)
	h.app.Generation++
	// Newer than the controller's own status writes, which the App cache also holds.
	h.f.statusRV++
	h.app.ResourceVersion = fmt.Sprint(h.f.statusRV)
	h.f.addApps(h.app)
}

// sync runs one sync and returns its writes, "verb resource"; the informers then catch
// up.
func (h *handover) sync() []string {
	h.t.Helper()
	if err := h.f.syncOnce(h.app.Namespace, h.app.Name); err != nil {
		h.t.Fatalf("syncApp: %v", err)
	}
	var writes []string
	for _, a := range h.f.writes() {
		d := describe(a)
		if d.subresource == "status" {
			continue // the App's status: not what a handover is about
		}
		writes = append(writes, d.verb+" "+d.resource)
	}
	h.stamp()
	h.f.catchUp()
	return writes
}

// scale sets the Deployment's replicas as field manager manager would with an update
// (the HPA through the scale subresource, kubectl scale), and lets the informers see it.
func (h *handover) scale(manager string, replicas int32) {
	h.t.Helper()
	client := h.f.kubeClient.AppsV1().Deployments(h.app.Namespace)
	d, err := client.Get(context.Background(), h.app.Spec.DeploymentTemplate.Name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	d.Spec.Replicas = ptr.To(replicas)
	if _, err := client.Update(context.Background(), d, metav1.UpdateOptions{FieldManager: manager}); err != nil {
		h.t.Fatal(err)
	}
	h.stamp()
	h.f.catchUp()
}

// deployment returns the Deployment as the API server holds it.
func (h *handover) deployment() *appsv1.Deployment {
	h.t.Helper()
	d, err := h.f.kubeClient.AppsV1().Deployments(h.app.Namespace).Get(context.Background(), h.app.Spec.DeploymentTemplate.Name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return d
}

// replicasOwners returns the field managers that own the Deployment's spec.replicas.
func replicasOwners(d *appsv1.Deployment) []string {
	var out []string
	for _, e := range d.ManagedFields {
		if e.FieldsV1 != nil && strings.Contains(string(e.FieldsV1.GetRawBytes()), `"f:replicas"`) {
			out = append(out, e.Manager)
		}
	}
	slices.Sort(out)
	return out
}

// appliedDeployment returns the Deployment apply configuration the last sync sent, as a
// Deployment, or nil when it sent none.
func appliedDeployment(t *testing.T, f *fixture) *appsv1.Deployment {
	t.Helper()
	for _, a := range f.kubeClient.Actions() {
		p, ok := a.(core.PatchAction)
		if !ok || a.GetResource().Resource != "deployments" || a.GetVerb() != "patch" {
			continue
		}
		d := &appsv1.Deployment{}
		if err := json.Unmarshal(p.GetPatch(), d); err != nil {
			t.Fatalf("decoding the Deployment's apply configuration: %v", err)
		}
		return d
	}
	return nil
}

// applied says what an apply configuration of the Deployment carries of the count:
// "replicas N", "replicas N at resourceVersion RV", "no replicas", or "not applied".
func applied(d *appsv1.Deployment) string {
	switch {
	case d == nil:
		return "not applied"
	case d.Spec.Replicas == nil:
		return "no replicas"
	case d.ResourceVersion != "":
		return fmt.Sprintf("replicas %d at its resourceVersion", *d.Spec.Replicas)
	}
	return fmt.Sprintf("replicas %d", *d.Spec.Replicas)
}

// TestReplicaHandover pins, for each case of docs/autoscaling.md's handover table, the
// exact writes of a sync, what the Deployment's apply configuration carries of the
// count, the count the API server then holds and who owns it: the controller never
// resets the count, never writes it once another writer holds it, and takes it back
// only when the App dictates it.
func TestReplicaHandover(t *testing.T) {
	image := func(app *appv1.App) { app.Spec.DeploymentTemplate.Image = "nginx:2" }
	tests := []struct {
		name string
		// app is the App created; before runs on the created world (nil: nothing).
		app    func() *appv1.App
		before func(h *handover)
		// change is the App's next generation (nil: a resync of the same App).
		change       func(app *appv1.App)
		wantWrites   []string
		wantApplied  string
		wantReplicas int32
		wantOwners   []string
		wantEvents   []string
	}{
		{
			name:         "created with autoscaling: the starting size is deploymentTemplate.replicas",
			app:          func() *appv1.App { a := newAPIApp("web", 2); withAutoscaling(a, 1, 5); return a },
			wantWrites:   []string{"patch deployments", "patch services", "patch horizontalpodautoscalers", "create controllerrevisions"},
			wantApplied:  "replicas 2",
			wantReplicas: 2, wantOwners: []string{appv1.FieldManager},
			wantEvents: []string{"Normal Synced App synced successfully"},
		},
		{
			name: "created with autoscaling, replicas unset: the starting size is minReplicas",
			app: func() *appv1.App {
				a := newAPIApp("web", 1)
				a.Spec.DeploymentTemplate.Replicas = nil
				withAutoscaling(a, 3, 5)
				return a
			},
			wantWrites:   []string{"patch deployments", "patch services", "patch horizontalpodautoscalers", "create controllerrevisions"},
			wantApplied:  "replicas 3",
			wantReplicas: 3, wantOwners: []string{appv1.FieldManager},
			wantEvents: []string{"Normal Synced App synced successfully"},
		},
		{
			name:         "at rest, the controller still alone holding the count: nothing written",
			app:          func() *appv1.App { a := newAPIApp("web", 2); withAutoscaling(a, 1, 5); return a },
			before:       func(h *handover) { h.sync() },
			wantApplied:  "not applied",
			wantReplicas: 2, wantOwners: []string{appv1.FieldManager},
		},
		{
			name: "at rest after the HPA scaled: nothing written",
			app:  func() *appv1.App { a := newAPIApp("web", 2); withAutoscaling(a, 1, 5); return a },
			before: func(h *handover) {
				h.sync()
				h.scale("kube-controller-manager", 4)
			},
			wantApplied:  "not applied",
			wantReplicas: 4, wantOwners: []string{"kube-controller-manager"},
		},
		{
			name: "a template change after the HPA scaled: applied without the count",
			app:  func() *appv1.App { a := newAPIApp("web", 2); withAutoscaling(a, 1, 5); return a },
			before: func(h *handover) {
				h.sync()
				h.scale("kube-controller-manager", 4)
			},
			change:       image,
			wantWrites:   []string{"patch deployments", "create controllerrevisions"},
			wantApplied:  "no replicas",
			wantReplicas: 4, wantOwners: []string{"kube-controller-manager"},
			wantEvents: []string{"Normal Synced App synced successfully"},
		},
		{
			name:         "a template change while the controller alone holds the count: the live count, at its resourceVersion",
			app:          func() *appv1.App { a := newAPIApp("web", 2); withAutoscaling(a, 1, 5); return a },
			before:       func(h *handover) { h.sync() },
			change:       image,
			wantWrites:   []string{"patch deployments", "create controllerrevisions"},
			wantApplied:  "replicas 2 at its resourceVersion",
			wantReplicas: 2, wantOwners: []string{appv1.FieldManager},
			wantEvents: []string{"Normal Synced App synced successfully"},
		},
		{
			name:         "autoscaling turned on for a Deployment at 3: the HPA only, the Deployment not written",
			app:          func() *appv1.App { return newAPIApp("web", 3) },
			before:       func(h *handover) { h.sync() },
			change:       func(app *appv1.App) { withAutoscalingKeepResources(app, 2, 5) },
			wantWrites:   []string{"patch horizontalpodautoscalers", "create controllerrevisions"},
			wantApplied:  "not applied",
			wantReplicas: 3, wantOwners: []string{appv1.FieldManager},
			wantEvents: []string{"Normal Synced App synced successfully"},
		},
		{
			name: "autoscaling turned off, replicas unset: the HPA deleted, the count stays",
			app: func() *appv1.App {
				a := newAPIApp("web", 1)
				a.Spec.DeploymentTemplate.Replicas = nil
				withAutoscaling(a, 1, 5)
				return a
			},
			before: func(h *handover) {
				h.sync()
				h.scale("kube-controller-manager", 4)
			},
			change:       func(app *appv1.App) { app.Spec.Autoscaling = nil },
			wantWrites:   []string{"delete horizontalpodautoscalers", "create controllerrevisions"},
			wantApplied:  "not applied",
			wantReplicas: 4, wantOwners: []string{"kube-controller-manager"},
			wantEvents: []string{
				"Normal Pruned Deleted HorizontalPodAutoscaler \"web-deploy\": removed from the App's spec",
				"Normal AutoscalingRemoved Deleted the HorizontalPodAutoscaler of the removed spec.autoscaling: replicas stay at 4",
				"Normal Synced App synced successfully",
			},
		},
		{
			name: "autoscaling turned off with replicas 5: the App takes the count back",
			app:  func() *appv1.App { a := newAPIApp("web", 2); withAutoscaling(a, 1, 5); return a },
			before: func(h *handover) {
				h.sync()
				h.scale("kube-controller-manager", 4)
			},
			change: func(app *appv1.App) {
				app.Spec.Autoscaling = nil
				app.Spec.DeploymentTemplate.Replicas = ptr.To[int32](5)
			},
			wantWrites:   []string{"patch deployments", "delete horizontalpodautoscalers", "create controllerrevisions"},
			wantApplied:  "replicas 5",
			wantReplicas: 5, wantOwners: []string{appv1.FieldManager},
			wantEvents: []string{
				"Normal Pruned Deleted HorizontalPodAutoscaler \"web-deploy\": removed from the App's spec",
				"Normal AutoscalingRemoved Deleted the HorizontalPodAutoscaler of the removed spec.autoscaling: replicas 4 -> 5 (deploymentTemplate.replicas)",
				"Normal Synced App synced successfully",
			},
		},
		{
			name:         "replicas: 3 removed, no autoscaling: the count stays 3 (it went to 1)",
			app:          func() *appv1.App { return newAPIApp("web", 3) },
			before:       func(h *handover) { h.sync() },
			change:       func(app *appv1.App) { app.Spec.DeploymentTemplate.Replicas = nil },
			wantWrites:   []string{"patch deployments", "create controllerrevisions"},
			wantApplied:  "replicas 3 at its resourceVersion",
			wantReplicas: 3, wantOwners: []string{appv1.FieldManager},
			wantEvents: []string{"Normal Synced App synced successfully"},
		},
		{
			name: "replicas unset, scaled by kubectl, then a template change: the count is kubectl's",
			app: func() *appv1.App {
				a := newAPIApp("web", 1)
				a.Spec.DeploymentTemplate.Replicas = nil
				return a
			},
			before: func(h *handover) {
				h.sync()
				h.scale("kubectl", 4)
			},
			change:       image,
			wantWrites:   []string{"patch deployments", "create controllerrevisions"},
			wantApplied:  "no replicas",
			wantReplicas: 4, wantOwners: []string{"kubectl"},
			wantEvents: []string{"Normal Synced App synced successfully"},
		},
		{
			name: "replicas set, scaled by kubectl: the App's count is applied back (as before)",
			app:  func() *appv1.App { return newAPIApp("web", 3) },
			before: func(h *handover) {
				h.sync()
				h.scale("kubectl", 4)
			},
			wantWrites:   []string{"patch deployments"},
			wantApplied:  "replicas 3",
			wantReplicas: 3, wantOwners: []string{appv1.FieldManager},
			wantEvents: []string{"Normal Synced App synced successfully"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHandover(t, tc.app())
			if tc.before != nil {
				tc.before(h)
				h.f.events() // drained: the Events of the setup are not the case's
			}
			if tc.change != nil {
				h.change(tc.change)
			}
			writes := h.sync()
			if !sameMultiset(writes, tc.wantWrites) {
				t.Errorf("writes %q, want %q", writes, tc.wantWrites)
			}
			if got := applied(appliedDeployment(t, h.f)); got != tc.wantApplied {
				t.Errorf("the Deployment's apply configuration: %s, want %s", got, tc.wantApplied)
			}
			d := h.deployment()
			if got := ptr.Deref(d.Spec.Replicas, 1); got != tc.wantReplicas {
				t.Errorf("the Deployment's replicas %d, want %d", got, tc.wantReplicas)
			}
			if got := replicasOwners(d); !slices.Equal(got, tc.wantOwners) {
				t.Errorf("spec.replicas owned by %q, want %q", got, tc.wantOwners)
			}
			if got := h.f.events(); !sameMultiset(got, tc.wantEvents) {
				t.Errorf("events %q, want %q", got, tc.wantEvents)
			}
			// Ten resyncs later: no write at all.
			for i := range 10 {
				if writes := h.sync(); len(writes) != 0 {
					t.Fatalf("resync %d wrote %q", i+1, writes)
				}
			}
			if got := ptr.Deref(h.deployment().Spec.Replicas, 1); got != tc.wantReplicas {
				t.Errorf("after 10 resyncs the Deployment's replicas %d, want %d", got, tc.wantReplicas)
			}
		})
	}
}

// withAutoscalingKeepResources sets spec.autoscaling as withAutoscaling does, with a CPU
// value target, so that the App's resources are unchanged.
func withAutoscalingKeepResources(app *appv1.App, lowest, highest int32) {
	app.Spec.Autoscaling = &appv1.Autoscaling{MinReplicas: ptr.To(lowest), MaxReplicas: highest,
		CPU: &appv1.ResourceTarget{AverageValue: ptr.To(resource.MustParse("100m"))}}
}

// TestReplicaHandoverRace checks the one race of the handover: an apply built from a
// cache that has not seen the HPA's write yet carries the old resourceVersion, so the
// API server refuses it rather than forcing the old count back; the retry, from a cache
// that has caught up, leaves the count out.
func TestReplicaHandoverRace(t *testing.T) {
	app := newAPIApp("web", 2)
	withAutoscaling(app, 1, 5)
	h := newHandover(t, app)
	h.sync()
	// The HPA scales to 4; the informer has not delivered it.
	client := h.f.kubeClient.AppsV1().Deployments(app.Namespace)
	d := h.deployment()
	d.Spec.Replicas = ptr.To[int32](4)
	d.ResourceVersion = "the HPA's write"
	if _, err := client.Update(context.Background(), d, metav1.UpdateOptions{FieldManager: "kube-controller-manager"}); err != nil {
		t.Fatal(err)
	}
	h.change(func(app *appv1.App) { app.Spec.DeploymentTemplate.Image = "nginx:2" })
	err := h.f.syncOnce(app.Namespace, app.Name)
	if err == nil || !strings.Contains(err.Error(), "the object has been modified") {
		t.Fatalf("sync from a stale cache: %v, want the conflict of the resourceVersion", err)
	}
	if got := applied(appliedDeployment(t, h.f)); got != "replicas 2 at its resourceVersion" {
		t.Errorf("the refused apply: %s", got)
	}
	if got := *h.deployment().Spec.Replicas; got != 4 {
		t.Fatalf("after the refused apply the Deployment's replicas %d, want 4", got)
	}
	h.f.catchUp()
	writes := h.sync()
	// The refused sync recorded the revision (in parallel with the children).
	if want := []string{"patch deployments"}; !sameMultiset(writes, want) {
		t.Errorf("the retry wrote %q, want %q", writes, want)
	}
	if got := applied(appliedDeployment(t, h.f)); got != "no replicas" {
		t.Errorf("the retry's apply: %s, want no replicas", got)
	}
	if got := *h.deployment().Spec.Replicas; got != 4 {
		t.Errorf("the Deployment's replicas %d, want 4", got)
	}
}

// TestStripManagedFieldsButReplicas checks what the Deployment cache keeps of
// managedFields: the entries that own spec.replicas, cut down to it.
func TestStripManagedFieldsButReplicas(t *testing.T) {
	app := newAPIApp("web", 2)
	withAutoscaling(app, 1, 5)
	h := newHandover(t, app)
	h.sync()
	d := h.deployment()
	obj, _ := controller.StripManagedFieldsButReplicas(d.DeepCopy())
	trimmed := obj.(*appsv1.Deployment)
	if len(trimmed.ManagedFields) != 1 || string(trimmed.ManagedFields[0].FieldsV1.GetRawBytes()) != `{"f:spec":{"f:replicas":{}}}` ||
		trimmed.ManagedFields[0].Manager != appv1.FieldManager {
		t.Errorf("trimmed managedFields %+v, want the controller's entry cut down to spec.replicas", trimmed.ManagedFields)
	}
	if !controller.OwnsReplicasAlone(d, appv1.FieldManager) || !controller.OwnsReplicasAlone(trimmed, appv1.FieldManager) {
		t.Errorf("OwnsReplicasAlone: false, want true, of the whole and the trimmed object")
	}
	h.scale("kube-controller-manager", 4)
	d = h.deployment()
	if n := len(d.ManagedFields); n != 2 {
		t.Fatalf("%d managedFields entries after the HPA's write, want 2 (the controller's, the HPA's)", n)
	}
	obj, _ = controller.StripManagedFieldsButReplicas(d.DeepCopy())
	trimmed = obj.(*appsv1.Deployment)
	if len(trimmed.ManagedFields) != 1 || trimmed.ManagedFields[0].Manager != "kube-controller-manager" {
		t.Errorf("trimmed managedFields %+v, want the HPA's entry alone", trimmed.ManagedFields)
	}
	if controller.OwnsReplicasAlone(d, appv1.FieldManager) || controller.OwnsReplicasAlone(trimmed, appv1.FieldManager) {
		t.Errorf("OwnsReplicasAlone after the HPA's write: true, want false")
	}
}

// hpaReports sets the status the HPA controller reports for the App's HPA: its
// conditions, each (type, status, reason) since the time given.
func (h *handover) hpaReports(current, desired int32, conditions ...autoscalingv2.HorizontalPodAutoscalerCondition) {
	h.t.Helper()
	gvr := autoscalingv2.SchemeGroupVersion.WithResource("horizontalpodautoscalers")
	obj, err := h.f.kubeClient.Tracker().Get(gvr, h.app.Namespace, h.app.Spec.DeploymentTemplate.Name)
	if err != nil {
		h.t.Fatal(err)
	}
	hpa := obj.(*autoscalingv2.HorizontalPodAutoscaler).DeepCopy()
	hpa.Status = autoscalingv2.HorizontalPodAutoscalerStatus{CurrentReplicas: current, DesiredReplicas: desired, Conditions: conditions}
	if err := h.f.kubeClient.Tracker().Update(gvr, hpa, h.app.Namespace); err != nil {
		h.t.Fatal(err)
	}
	h.f.catchUp()
}

// hpaCond is an HPA condition that has held since since.
func hpaCond(t autoscalingv2.HorizontalPodAutoscalerConditionType, s corev1.ConditionStatus, reason string, since time.Time) autoscalingv2.HorizontalPodAutoscalerCondition {
	return autoscalingv2.HorizontalPodAutoscalerCondition{Type: t, Status: s, Reason: reason, Message: "the HPA says " + reason,
		LastTransitionTime: metav1.NewTime(since)}
}

// TestAutoscalerStatus pins what the App's status says of its HPA: status.autoscaling,
// ScalingActive and ScalingLimited, whether the App is Ready, kstatus's verdict and the
// Warning Events, for each state the HPA reports; and that a failing HPA is pending for
// AutoscalerGrace (the sync asks to run again when it ends), then a verdict, never
// InProgress forever.
func TestAutoscalerStatus(t *testing.T) {
	now := testNow
	active := hpaCond(autoscalingv2.ScalingActive, corev1.ConditionTrue, "ValidMetricFound", now.Add(-time.Hour))
	able := hpaCond(autoscalingv2.AbleToScale, corev1.ConditionTrue, "ReadyForNewScale", now.Add(-time.Hour))
	tests := []struct {
		name string
		// noRequest: the App's container requests no CPU.
		noRequest  bool
		conditions []autoscalingv2.HorizontalPodAutoscalerCondition
		// noStatus: the HPA reports nothing.
		noStatus      bool
		wantActive    string
		wantLimited   string
		wantReady     string
		wantKstatus   kstatus.Status
		wantRecheck   time.Duration
		wantWarning   string
		wantInMessage string
	}{
		{name: "not reported yet", noStatus: true,
			wantActive: "Unknown/AutoscalerPending", wantReady: "True/Available", wantKstatus: kstatus.CurrentStatus},
		{name: "active", conditions: []autoscalingv2.HorizontalPodAutoscalerCondition{able, active,
			hpaCond(autoscalingv2.ScalingLimited, corev1.ConditionTrue, "TooFewReplicas", now.Add(-time.Hour))},
			wantActive: "True/AutoscalerActive", wantReady: "True/Available", wantKstatus: kstatus.CurrentStatus},
		{name: "at maxReplicas with the load above the target", conditions: []autoscalingv2.HorizontalPodAutoscalerCondition{able, active,
			hpaCond(autoscalingv2.ScalingLimited, corev1.ConditionTrue, "TooManyReplicas", now.Add(-time.Minute))},
			wantActive: "True/AutoscalerActive", wantLimited: "True/MaxReplicasReached", wantReady: "True/Available", wantKstatus: kstatus.CurrentStatus},
		{name: "no metrics for 30 s: pending", conditions: []autoscalingv2.HorizontalPodAutoscalerCondition{able,
			hpaCond(autoscalingv2.ScalingActive, corev1.ConditionFalse, "FailedGetResourceMetric", now.Add(-30*time.Second))},
			wantActive: "Unknown/AutoscalerPending", wantReady: "True/Available", wantKstatus: kstatus.CurrentStatus,
			// The sync runs one coalescing window after now: 29 s of the grace are left.
			wantRecheck: 29 * time.Second, wantInMessage: "FailedGetResourceMetric"},
		{name: "no metrics for 2 minutes: inactive, Stalled", conditions: []autoscalingv2.HorizontalPodAutoscalerCondition{able,
			hpaCond(autoscalingv2.ScalingActive, corev1.ConditionFalse, "FailedGetResourceMetric", now.Add(-2*time.Minute))},
			wantActive: "False/AutoscalerInactive", wantReady: "False/AutoscalerInactive", wantKstatus: kstatus.FailedStatus,
			wantWarning: "Warning AutoscalerInactive", wantInMessage: "FailedGetResourceMetric"},
		{name: "cannot update the scale for 2 minutes: unable to scale, Stalled", conditions: []autoscalingv2.HorizontalPodAutoscalerCondition{
			hpaCond(autoscalingv2.AbleToScale, corev1.ConditionFalse, "FailedUpdateScale", now.Add(-2*time.Minute)), active},
			wantActive: "False/AutoscalerUnableToScale", wantReady: "False/AutoscalerUnableToScale", wantKstatus: kstatus.FailedStatus,
			wantWarning: "Warning AutoscalerUnableToScale", wantInMessage: "FailedUpdateScale"},
		{name: "no CPU request: at once, before the HPA says anything", noRequest: true, noStatus: true,
			wantActive: "False/MissingResourceRequest", wantReady: "False/MissingResourceRequest", wantKstatus: kstatus.FailedStatus,
			wantWarning: "Warning MissingResourceRequest", wantInMessage: `container "app-deploy-container" (deploymentTemplate.resources) requests no cpu`},
		{name: "no CPU request in the App, but the HPA computes it (a LimitRange's default)", noRequest: true,
			conditions: []autoscalingv2.HorizontalPodAutoscalerCondition{able, active},
			wantActive: "True/AutoscalerActive", wantReady: "True/Available", wantKstatus: kstatus.CurrentStatus},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			app := newApp("web", now.Add(-time.Hour))
			withAutoscaling(app, 1, 3)
			if tc.noRequest {
				app.Spec.DeploymentTemplate.Resources = nil
			}
			app.Spec.DeploymentTemplate.Replicas = ptr.To[int32](2)
			h := newHandover(t, app)
			h.f.clock.SetTime(now)
			h.sync()
			h.rolledOut()
			if !tc.noStatus {
				h.hpaReports(2, 3, tc.conditions...)
			}
			h.f.events()
			h.f.requeues = nil
			h.f.step(StatusCoalesceWindow)
			h.sync()
			got := h.app
			if app, _, _ := h.f.c.getApp(nameOf(h.app)); app != nil {
				got = app
			}
			if c := condition(got, appv1.ConditionScalingActive); c != tc.wantActive {
				t.Errorf("ScalingActive %s, want %s", c, tc.wantActive)
			}
			if c := condition(got, appv1.ConditionScalingLimited); c != tc.wantLimited {
				t.Errorf("ScalingLimited %q, want %q", c, tc.wantLimited)
			}
			if c := condition(got, appv1.ConditionReady); c != tc.wantReady {
				t.Errorf("Ready %s, want %s", c, tc.wantReady)
			}
			if k := controllertest.KStatus(t, got); k != tc.wantKstatus {
				t.Errorf("kstatus %s, want %s", k, tc.wantKstatus)
			}
			if tc.wantInMessage != "" {
				if c := findCondition(got, appv1.ConditionScalingActive); c == nil || !strings.Contains(c.Message, tc.wantInMessage) {
					t.Errorf("ScalingActive's message %+v does not say %q", c, tc.wantInMessage)
				}
			}
			if tc.wantRecheck != 0 && !slices.Contains(h.f.requeues, tc.wantRecheck) {
				t.Errorf("requeues %v, want one at %s, when the grace ends", h.f.requeues, tc.wantRecheck)
			}
			events := h.f.events()
			warnings := slices.DeleteFunc(slices.Clone(events), func(e string) bool { return !strings.HasPrefix(e, "Warning") })
			switch {
			case tc.wantWarning == "" && len(warnings) > 0:
				t.Errorf("warnings %q, want none", warnings)
			case tc.wantWarning != "" && (len(warnings) != 1 || !strings.HasPrefix(warnings[0], tc.wantWarning)):
				t.Errorf("warnings %q, want one %s", warnings, tc.wantWarning)
			}
			want := &appv1.AutoscalingStatus{Name: "web-deploy"}
			if !tc.noStatus {
				want.CurrentReplicas, want.DesiredReplicas = 2, 3
			}
			if !equality.Semantic.DeepEqual(got.Status.Autoscaling, want) {
				t.Errorf("status.autoscaling %+v, want %+v", got.Status.Autoscaling, want)
			}
			// The next sync, nothing changed: no new Warning.
			h.sync()
			if events := h.f.events(); len(events) != 0 {
				t.Errorf("a sync with nothing new emitted %q", events)
			}
		})
	}
}

// TestAutoscalerGraceEnds checks that a pending verdict becomes one when the grace
// ends, at the sync the Result asked for, with nothing else changing.
func TestAutoscalerGraceEnds(t *testing.T) {
	app := newApp("web", testNow.Add(-time.Hour))
	withAutoscaling(app, 1, 3)
	app.Spec.DeploymentTemplate.Replicas = ptr.To[int32](1)
	h := newHandover(t, app)
	h.f.clock.SetTime(testNow)
	h.sync()
	h.rolledOut()
	h.hpaReports(1, 1, hpaCond(autoscalingv2.ScalingActive, corev1.ConditionFalse, "FailedGetResourceMetric", testNow))
	h.f.step(StatusCoalesceWindow)
	h.sync()
	got, _, _ := h.f.c.getApp(nameOf(app))
	if c := condition(got, appv1.ConditionScalingActive); c != "Unknown/AutoscalerPending" {
		t.Fatalf("ScalingActive %s within the grace, want Unknown/AutoscalerPending", c)
	}
	h.f.requeues = nil
	h.f.clock.SetTime(testNow.Add(appv1.AutoscalerGrace))
	h.sync()
	got, _, _ = h.f.c.getApp(nameOf(app))
	if c := condition(got, appv1.ConditionScalingActive); c != "False/AutoscalerInactive" {
		t.Errorf("ScalingActive %s when the grace ended, want False/AutoscalerInactive", c)
	}
	if k := controllertest.KStatus(t, got); k != kstatus.FailedStatus {
		t.Errorf("kstatus %s, want Failed", k)
	}
}

// rolledOut has the deployment controller report the App's Deployment rolled out, at
// its count, and the informers see it.
func (h *handover) rolledOut() {
	h.t.Helper()
	d := h.deployment()
	replicas := ptr.Deref(d.Spec.Replicas, 1)
	d.Generation = 1
	d.Status = liveDeployment(h.t, h.app).Status
	d.Status.Replicas, d.Status.UpdatedReplicas, d.Status.ReadyReplicas, d.Status.AvailableReplicas = replicas, replicas, replicas, replicas
	if err := h.f.kubeClient.Tracker().Update(appsv1.SchemeGroupVersion.WithResource("deployments"), d, h.app.Namespace); err != nil {
		h.t.Fatal(err)
	}
	h.stamp()
	h.f.catchUp()
}

// findCondition returns app's condition of type t, or nil.
func findCondition(app *appv1.App, t string) *metav1.Condition {
	for i := range app.Status.Conditions {
		if app.Status.Conditions[i].Type == t {
			return &app.Status.Conditions[i]
		}
	}
	return nil
}

// deploymentAt sets the Deployment's generation and the status the deployment
// controller reports (observed generation, replicas, updated, available; Available=True
// when every pod it wants is, as with the default 25% maxUnavailable of a few pods), and
// lets the informers see it.
func (h *handover) deploymentAt(generation, observed int64, replicas, updated, available int32) {
	h.t.Helper()
	d := h.deployment()
	d.Generation = generation
	availableCond := corev1.ConditionTrue
	if available < ptr.Deref(d.Spec.Replicas, 1) {
		availableCond = corev1.ConditionFalse
	}
	d.Status = appsv1.DeploymentStatus{
		ObservedGeneration: observed, Replicas: replicas, UpdatedReplicas: updated, ReadyReplicas: available, AvailableReplicas: available,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: availableCond, Reason: "MinimumReplicasAvailable"},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"},
		},
	}
	if err := h.f.kubeClient.Tracker().Update(appsv1.SchemeGroupVersion.WithResource("deployments"), d, h.app.Namespace); err != nil {
		h.t.Fatal(err)
	}
	h.stamp()
	h.f.catchUp()
}

// TestAutoscalerScaleIsNoRollout checks that the autoscaler changing the count of a
// Ready App's Deployment keeps the App Ready (kstatus Current) while the new pods start,
// from the moment the Deployment's new generation is not observed yet, and that a change
// of the App's pod template still reads as a rollout (Progressing, InProgress) until
// every pod of it is available.
func TestAutoscalerScaleIsNoRollout(t *testing.T) {
	app := newApp("web", testNow.Add(-time.Hour))
	withAutoscaling(app, 1, 5)
	app.Spec.DeploymentTemplate.Replicas = ptr.To[int32](2)
	h := newHandover(t, app)
	h.f.clock.SetTime(testNow)
	h.sync()
	h.deploymentAt(1, 1, 2, 2, 2)
	h.f.step(StatusCoalesceWindow)
	h.sync()
	status := func() *appv1.App {
		a, _, _ := h.f.c.getApp(nameOf(h.app))
		return a
	}
	if got := status(); condition(got, appv1.ConditionReady) != "True/Available" {
		t.Fatalf("the App before the scale: Ready %s", condition(got, appv1.ConditionReady))
	}
	steps := []scaleStep{
		{"the autoscaler's write, not observed yet", 2, 1, 2, 2, 2, "True/Available", "False/RolloutComplete", kstatus.CurrentStatus, "2 of 4 replicas available (the autoscaler scales it)"},
		{"the new pods starting", 2, 2, 4, 4, 2, "True/Available", "False/RolloutComplete", kstatus.CurrentStatus, "2 of 4 replicas available (the autoscaler scales it)"},
		{"scaled", 2, 2, 4, 4, 4, "True/Available", "False/RolloutComplete", kstatus.CurrentStatus, "4 of 4 replicas available"},
		{"the pods crash: fewer available than minReplicas", 2, 2, 4, 4, 0, "False/DeploymentUnavailable", "False/RolloutComplete", kstatus.InProgressStatus, "fewer than autoscaling.minReplicas"},
		{"back", 2, 2, 4, 4, 4, "True/Available", "False/RolloutComplete", kstatus.CurrentStatus, "4 of 4 replicas available"},
	}
	h.scale("kube-controller-manager", 4)
	h.scaleSteps(status, steps)
	// Down to 2 while one of the 4 pods is not available yet: the deployment controller
	// observes the new count before the ReplicaSet removes the pods, so for a moment 3 of
	// 4 pods of the newest template are available against 2 wanted (the e2e test's
	// Ready=False for 100 ms, "2 of 3 updated replicas available", in a whole make test).
	h.scale("kube-controller-manager", 2)
	h.scaleSteps(status, []scaleStep{
		{"a scale-down, not observed yet", 3, 2, 4, 4, 3, "True/Available", "False/RolloutComplete", kstatus.CurrentStatus, "2 of 2 replicas available, 2 being removed (the autoscaler scales it)"},
		{"a scale-down observed, the pods not removed yet", 3, 3, 4, 4, 3, "True/Available", "False/RolloutComplete", kstatus.CurrentStatus, "2 of 2 replicas available, 2 being removed (the autoscaler scales it)"},
		{"one removed, the one starting kept", 3, 3, 3, 3, 2, "True/Available", "False/RolloutComplete", kstatus.CurrentStatus, "2 of 2 replicas available, 1 being removed (the autoscaler scales it)"},
		{"the pods removed are the available ones", 3, 3, 3, 3, 0, "False/DeploymentUnavailable", "False/RolloutComplete", kstatus.InProgressStatus, "fewer than autoscaling.minReplicas"},
		{"scaled down", 3, 3, 2, 2, 2, "True/Available", "False/RolloutComplete", kstatus.CurrentStatus, "2 of 2 replicas available"},
	})

	// A new image: a rollout, InProgress until its pods are all available, even though
	// the count does not change and no old pod is left at its end.
	h.change(func(app *appv1.App) { app.Spec.DeploymentTemplate.Image = "nginx:2" })
	// The API server's answer to the controller's write: a new generation, not observed
	// (the fake one does not count generations).
	h.deploymentAt(4, 3, 2, 2, 2)
	h.f.step(StatusCoalesceWindow)
	if writes := h.sync(); !slices.Contains(writes, "patch deployments") {
		t.Fatalf("the new image wrote %q, want the Deployment", writes)
	}
	for _, s := range []struct {
		name                         string
		observed                     int64
		replicas, updated, available int32
	}{
		{"the controller's write, not observed yet", 3, 2, 2, 2},
		{"the new ReplicaSet's last pods starting, the old ones gone", 4, 2, 2, 1},
	} {
		h.deploymentAt(4, s.observed, s.replicas, s.updated, s.available)
		h.f.step(StatusCoalesceWindow)
		h.sync()
		got := status()
		if c := condition(got, appv1.ConditionProgressing); c != "True/RollingOut" {
			t.Errorf("%s: Progressing %s, want True/RollingOut", s.name, c)
		}
		if k := controllertest.KStatus(t, got); k != kstatus.InProgressStatus {
			t.Errorf("%s: kstatus %s, want InProgress", s.name, k)
		}
	}
	h.deploymentAt(4, 4, 2, 2, 2)
	h.f.step(StatusCoalesceWindow)
	h.sync()
	if got := status(); condition(got, appv1.ConditionReady) != "True/Available" {
		t.Errorf("after the rollout: Ready %s, want True/Available", condition(got, appv1.ConditionReady))
	}
}

// scaleStep is a state of an autoscaled App's Deployment and what the App must say of it.
type scaleStep struct {
	name                         string
	generation, observed         int64
	replicas, updated, available int32
	wantReady, wantProgressing   string
	wantKstatus                  kstatus.Status
	wantMessageHas               string
}

// scaleSteps puts the App's Deployment in each state of steps in turn and checks that
// the App's sync writes nothing to it and that its status says what the step wants.
func (h *handover) scaleSteps(status func() *appv1.App, steps []scaleStep) {
	h.t.Helper()
	t := h.t
	for _, s := range steps {
		h.deploymentAt(s.generation, s.observed, s.replicas, s.updated, s.available)
		h.f.step(StatusCoalesceWindow)
		if writes := h.sync(); len(writes) != 0 {
			t.Errorf("%s: wrote %q", s.name, writes)
		}
		h.f.step(StatusCoalesceWindow)
		h.sync()
		got := status()
		if c := condition(got, appv1.ConditionReady); c != s.wantReady {
			t.Errorf("%s: Ready %s, want %s", s.name, c, s.wantReady)
		}
		if c := condition(got, appv1.ConditionProgressing); c != s.wantProgressing {
			t.Errorf("%s: Progressing %s, want %s", s.name, c, s.wantProgressing)
		}
		if k := controllertest.KStatus(t, got); k != s.wantKstatus {
			t.Errorf("%s: kstatus %s, want %s", s.name, k, s.wantKstatus)
		}
		if c := findCondition(got, appv1.ConditionReady); !strings.Contains(c.Message, s.wantMessageHas) {
			t.Errorf("%s: Ready says %q, want %q in it", s.name, c.Message, s.wantMessageHas)
		}
	}
}

package app

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// hpaManager is the field manager of the HorizontalPodAutoscaler's scale writes.
const hpaManager = "kube-controller-manager"

// autoscalerScales sets the Deployment name's replicas as the HorizontalPodAutoscaler
// does (an update of field manager kube-controller-manager, which takes spec.replicas
// from every other owner), its pods then all available; the caches see it.
func (w *world) autoscalerScales(name string, replicas int32) {
	w.t.Helper()
	client := w.f.kubeClient.AppsV1().Deployments(w.key.Namespace)
	d, err := client.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	hash := newReplicaSetHash(d)
	if hash == "" {
		hash = "aaaa"
	}
	if len(d.ManagedFields) == 0 {
		// Seeded into the fake API server without managedFields: as the controller created
		// it, its apply owning the count (the fake tracks an update's fields only then).
		d.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: appv1.FieldManager, Operation: metav1.ManagedFieldsOperationApply,
			APIVersion: "apps/v1", FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:replicas":{}}}`)}}
		if d, err = client.Update(context.Background(), d, metav1.UpdateOptions{FieldManager: appv1.FieldManager}); err != nil {
			w.t.Fatal(err)
		}
	}
	d.Spec.Replicas = ptr.To(replicas)
	w.rv++
	d.ResourceVersion = fmt.Sprint(w.rv)
	d.Status = appsv1.DeploymentStatus{
		ObservedGeneration: d.Generation, Replicas: replicas, UpdatedReplicas: replicas, ReadyReplicas: replicas, AvailableReplicas: replicas,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable",
				Message: fmt.Sprintf("ReplicaSet %q has successfully progressed.", name+"-"+hash)},
		},
	}
	updated, err := client.Update(context.Background(), d, metav1.UpdateOptions{FieldManager: hpaManager})
	if err != nil {
		w.t.Fatal(err)
	}
	if owners := fmt.Sprint(replicasOwners(updated)); owners != "["+hpaManager+"]" {
		w.t.Fatalf("the autoscaler's write left spec.replicas to %s", owners)
	}
	if err := w.f.inf.Deployments.Informer().GetIndexer().Update(updated); err != nil {
		w.t.Fatal(err)
	}
	w.f.catchUp()
}

// autoscaler returns the App's HorizontalPodAutoscaler as the fake API server holds it.
func (w *world) autoscaler() *autoscalingv2.HorizontalPodAutoscaler {
	w.t.Helper()
	hpa, err := w.f.kubeClient.AutoscalingV2().HorizontalPodAutoscalers(w.key.Namespace).Get(context.Background(), "web-deploy", metav1.GetOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	return hpa
}

// expectReplicas checks the stable and canary Deployments' counts (-1: no canary), and
// that the controller does not own the stable's.
func (w *world) expectReplicas(what string, stable, canary int32) {
	w.t.Helper()
	if s, c := w.deploymentReplicas("web-deploy"), w.deploymentReplicas("web-deploy-canary"); s != stable || c != canary {
		w.t.Errorf("%s: stable %d, canary %d replicas; want %d, %d", what, s, c, stable, canary)
	}
	if owners := replicasOwners(w.trackedDeployment("web-deploy")); slices.Contains(owners, appv1.FieldManager) {
		w.t.Errorf("%s: the stable's spec.replicas owned by %q: the controller took it from the autoscaler", what, owners)
	}
}

// canaryFollows has the autoscaler set the stable to n in rollout state wantRollout:
// the next sync writes the canary alone, to canary pods, and once they are up a resync
// writes nothing.
func (w *world) canaryFollows(what string, n, canary int32, wantRollout string) {
	w.t.Helper()
	w.autoscalerScales("web-deploy", n)
	w.step(what, []string{"patch deployments web-deploy-canary"}, wantRollout)
	w.expectReplicas(what, n, canary)
	w.deploymentSettles("web-deploy-canary", "cccc")
	w.step(what+": a resync once the canary is up", nil, wantRollout)
}

// TestAutoscaledRolloutWrites walks a canary rollout of an autoscaled App (2 to 20
// replicas, no HTTPRoute: the split is by pods) and counts each step's writes: the
// controller never writes the stable Deployment's replicas (its autoscaler owns them),
// the canary is sized from the autoscaler's count by the step's weight and follows it
// when it changes during a pause, a resync in the pause writes nothing, and after the
// promotion the stable runs the new template at the autoscaler's count, the
// autoscaler's bounds untouched.
func TestAutoscaledRolloutWrites(t *testing.T) {
	w := canaryWorldOf(t, false, func(app *appv1.App) { withAutoscaling(app, 2, 20) },
		func(w *world) {
			w.autoscalerScales("web-deploy", 6)
			w.step("the autoscaler at 6: nothing", nil, "")
		})
	w.step("the strategy added: Healthy, nothing rolls", []string{"create controllerrevisions web-<rev>", "patch apps/status web"}, "Healthy 0")
	w.step("a resync", nil, "Healthy 0")

	w.edit(true, func(a *appv1.App) { a.Spec.DeploymentTemplate.Image = "nginx:2" })
	w.step("a new image: a rollout starts, the canary created at 2 (25% of 8 pods)",
		[]string{"create controllerrevisions web-<rev>", "patch apps/status web", "patch deployments web-deploy-canary"}, "Progressing 0")
	w.expectReplicas("rollout started", 6, 2)
	if w.image("web-deploy") != "nginx" || w.image("web-deploy-canary") != "nginx:2" {
		t.Errorf("stable %s, canary %s: want nginx, nginx:2", w.image("web-deploy"), w.image("web-deploy-canary"))
	}
	w.step("the canary not available yet: nothing", nil, "Progressing 0")
	w.deploymentSettles("web-deploy-canary", "cccc")
	w.step("the canary available: the step is done, no stable write", []string{"patch apps/status web"}, "Paused 1")
	w.step("a resync in the pause", nil, "Paused 1")
	w.at(2 * time.Hour)
	w.step("a resync two hours later", nil, "Paused 1")

	w.canaryFollows("the autoscaler at 12 in the pause: the canary to 4 (25% of 16)", 12, 4, "Paused 1")
	w.canaryFollows("the autoscaler down to 9: the canary to 3", 9, 3, "Paused 1")

	w.request(appv1.RolloutActionPromote, "promote-1")
	w.step("kubectl app promote: setWeight 100, the canary grows to the stable's 9 (half of the pods)",
		[]string{"patch apps/status web", "patch deployments web-deploy-canary"}, "Progressing 2")
	w.expectReplicas("setWeight 100", 9, 9)
	w.deploymentSettles("web-deploy-canary", "cccc")
	w.step("the canary at 9: the last step done, the promotion: the stable gets the new template, not its replicas",
		[]string{"patch apps/status web", "patch deployments web-deploy"}, "Progressing 3")
	if d := appliedDeployment(t, w.f); applied(d) != "no replicas" {
		t.Errorf("the stable's apply at the promotion carries %s, want no replicas", applied(d))
	}
	w.expectReplicas("promoting", 9, 9)
	if w.image("web-deploy") != "nginx:2" {
		t.Errorf("stable runs %s, want nginx:2", w.image("web-deploy"))
	}
	w.deploymentSettles("web-deploy", "bbbb")
	w.step("the stable rolled out: promoted and Ready in one status write", []string{"patch apps/status web"}, "Healthy 0")
	w.at(2*time.Hour + 31*time.Second)
	w.step("the canary deleted after its delay", []string{"delete deployments web-deploy-canary"}, "Healthy 0")
	w.f.catchUp()
	w.step("at rest", nil, "Healthy 0")
	w.expectReplicas("after the rollout", 9, -1)
	if hpa := w.autoscaler(); ptr.Deref(hpa.Spec.MinReplicas, 0) != 2 || hpa.Spec.MaxReplicas != 20 || hpa.Spec.ScaleTargetRef.Name != "web-deploy" {
		t.Errorf("the autoscaler: %d to %d of %s, want 2 to 20 of web-deploy", ptr.Deref(hpa.Spec.MinReplicas, 0), hpa.Spec.MaxReplicas, hpa.Spec.ScaleTargetRef.Name)
	}
	for _, wr := range w.writes {
		if wr == "patch horizontalpodautoscalers" || wr == "create horizontalpodautoscalers" {
			t.Errorf("the rollout wrote the autoscaler: %q", w.writes)
		}
	}
}

// TestAutoscaledRolloutGateway walks the promotion of an autoscaled App behind an
// HTTPRoute: the canary takes its weight with its share of the autoscaler's count, and
// before it takes all the traffic it grows to what the stable runs then (the autoscaler's
// count, never its minimum); the stable is never written a count.
func TestAutoscaledRolloutGateway(t *testing.T) {
	w := canaryWorldOf(t, true, func(app *appv1.App) { withAutoscaling(app, 2, 20) },
		func(w *world) { w.autoscalerScales("web-deploy", 8) })
	w.step("the strategy added", []string{"create controllerrevisions web-<rev>", "patch apps/status web"}, "Healthy 0")
	w.edit(true, func(a *appv1.App) { a.Spec.DeploymentTemplate.Image = "nginx:2" })
	w.step("a new image: the split Services",
		[]string{"create controllerrevisions web-<rev>", "patch apps/status web",
			"patch services web-service-stable", "patch services web-service-canary"}, "Progressing 0")
	w.step("the split Services there: the canary at 2 (25% of 8), the route at 100/0",
		[]string{"patch deployments web-deploy-canary", "patch httproutes web"}, "Progressing 0")
	w.expectReplicas("rollout started", 8, 2)
	w.deploymentSettles("web-deploy-canary", "cccc")
	w.step("the canary up: 75/25", []string{"patch httproutes web"}, "Progressing 0")
	w.step("the weight in effect: the pause", []string{"patch apps/status web"}, "Paused 1")
	w.step("a resync in the pause", nil, "Paused 1")

	w.canaryFollows("the autoscaler at 12: the canary to 3, the weight stays", 12, 3, "Paused 1")
	if got := w.route(); fmt.Sprint(got) != "[web-service-stable:75 web-service-canary:25]" {
		t.Errorf("route %v after the autoscaler's change, want 75/25", got)
	}

	w.request(appv1.RolloutActionPromote, "promote-1")
	w.step("promote: setWeight 100, the canary grows to the stable's 12 first, the weight stays at 25",
		[]string{"patch apps/status web", "patch deployments web-deploy-canary"}, "Progressing 2")
	w.expectReplicas("setWeight 100", 12, 12)
	if got := w.route(); fmt.Sprint(got) != "[web-service-stable:75 web-service-canary:25]" {
		t.Errorf("route %v before the canary is up, want 75/25", got)
	}
	w.deploymentSettles("web-deploy-canary", "cccc")
	w.step("the canary at 12: all the traffic to it", []string{"patch httproutes web"}, "Progressing 2")
	w.expectReplicas("at 100%", 12, 12)
}

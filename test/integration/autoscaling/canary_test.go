package autoscaling

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller/appfixture"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// TestCanaryFollowsAutoscaler rolls an autoscaled App (2 to 10 replicas, behind an
// HTTPRoute) out in steps 25% / pause / 100% / pause while its count changes as the
// autoscaler changes it (kubectl scale deployment: the update of the scale subresource
// the HPA makes; kwok has no metrics): the canary is sized from the stable's count by the
// step's weight and follows it during the pause; nothing is written at the resyncs of the
// pause; at 100% the canary runs what the stable runs (not the autoscaler's minimum);
// after the promotion the stable runs the new image at the autoscaler's count (not its
// maximum), the autoscaler's bounds and target untouched, and the controller never wrote
// the stable's count (it owns no part of spec.replicas).
func TestCanaryFollowsAutoscaler(t *testing.T) {
	const resync = time.Second
	c, ns := setUp(t, resync)
	ctx := context.Background()
	app := appfixture.WithAutoscaling(appfixture.NewApp(ns, "web", "nginx:1", 2), 2, 10, 50, "100m")
	app.Spec.Route = &appv1.Route{Hosts: []appv1.Hostname{"web.example.com"}, ParentRefs: []appv1.GatewayRef{{Name: "public"}}}
	app.Spec.Rollout = &appv1.Rollout{Canary: &appv1.CanaryStrategy{ScaleDownDelaySeconds: ptr.To[int32](0), Steps: []appv1.CanaryStep{
		{SetWeight: ptr.To[int32](25)}, {Pause: &appv1.CanaryPause{}}, {SetWeight: ptr.To[int32](100)}, {Pause: &appv1.CanaryPause{}},
	}}}
	c.Create(t, app)
	gw := framework.GatewayClient(t)
	// route returns the HTTPRoute's backends as "name:weight".
	route := func() string {
		r, err := gw.GatewayV1().HTTPRoutes(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil || len(r.Spec.Rules) == 0 {
			return ""
		}
		var out []string
		for _, b := range r.Spec.Rules[0].BackendRefs {
			out = append(out, fmt.Sprintf("%s:%d", b.Name, ptr.Deref(b.Weight, 1)))
		}
		return strings.Join(out, " ")
	}
	available := func(name string, n int32) {
		t.Helper()
		c.WaitDeployment(t, ns, name, func(d *appsv1.Deployment) bool {
			return ptr.Deref(d.Spec.Replicas, 1) == n && d.Status.ObservedGeneration == d.Generation &&
				d.Status.UpdatedReplicas == n && d.Status.Replicas == n && d.Status.AvailableReplicas == n
		})
	}
	// scale writes the stable's count as the autoscaler does.
	scale := func(n int32) {
		t.Helper()
		framework.Kubectl(t, "-n", ns, "scale", "deployment/web-deploy", fmt.Sprintf("--replicas=%d", n))
		available("web-deploy", n)
	}
	// expect waits until the canary runs canary pods (-1: none) and the route is want,
	// and checks that the stable's count is stable's and not the controller's.
	expect := func(what string, stable, canary int32, want string) {
		t.Helper()
		var got string
		deadline := time.Now().Add(converge)
		for {
			n, ready := int32(-1), true
			if d, err := c.Kube.AppsV1().Deployments(ns).Get(ctx, "web-deploy-canary", metav1.GetOptions{}); err == nil {
				n = ptr.Deref(d.Spec.Replicas, 1)
				ready = d.Status.ObservedGeneration == d.Generation && d.Status.Replicas == n && d.Status.AvailableReplicas == n
			}
			got = fmt.Sprintf("canary %d (available: %t), route %s", n, ready, route())
			if got == fmt.Sprintf("canary %d (available: true), route %s", canary, want) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %s, want canary %d available, route %s", what, got, canary, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
		d, err := c.Kube.AppsV1().Deployments(ns).Get(ctx, "web-deploy", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		owners := replicasOwners(d)
		t.Logf("%s: stable %d (spec.replicas owned by %v), %s", what, ptr.Deref(d.Spec.Replicas, 1), owners, got)
		if n := ptr.Deref(d.Spec.Replicas, 1); n != stable {
			t.Errorf("%s: the stable at %d, want %d", what, n, stable)
		}
		if fmt.Sprint(owners) != "[kubectl Update scale]" {
			t.Errorf("%s: the stable's spec.replicas owned by %v, want kubectl (standing for the autoscaler) alone", what, owners)
		}
	}

	c.waitAutoscaler(t, ns, "web-deploy", func(*autoscalingv2.HorizontalPodAutoscaler) bool { return true })
	c.WaitRollout(t, ns, "web", appv1.RolloutHealthy, 0)
	available("web-deploy", 2)
	scale(4)
	c.update(t, ns, "web", func(a *appv1.App) { a.Spec.DeploymentTemplate.Image = "nginx:2" })
	c.WaitRollout(t, ns, "web", appv1.RolloutPaused, 1)
	expect("paused at 25% of the autoscaler's 4", 4, 1, "web-svc-stable:75 web-svc-canary:25")
	// The HPA counts the pods its target's scale selects: the stable's selector takes in
	// the canary's pods, so the autoscaler's count is the whole App's.
	sc, err := c.Kube.AppsV1().Deployments(ns).GetScale(ctx, "web-deploy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods, err := c.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sc.Status.Selector})
	if err != nil {
		t.Fatal(err)
	}
	canaryPods := 0
	for _, p := range pods.Items {
		if p.Labels[appv1.TrackLabel] == appv1.TrackCanary {
			canaryPods++
		}
	}
	t.Logf("the stable's scale selects %q: %d pods, %d of them the canary's", sc.Status.Selector, len(pods.Items), canaryPods)
	if len(pods.Items) != 5 || canaryPods != 1 {
		t.Errorf("the stable's scale selector %q selects %d pods, %d of the canary; want 5, 1", sc.Status.Selector, len(pods.Items), canaryPods)
	}

	scale(8)
	expect("the autoscaler at 8 in the pause: the canary follows", 8, 2, "web-svc-stable:75 web-svc-canary:25")
	_, mark := auditedWrites(t, 0, ns)
	before := reconciles(t)
	time.Sleep(5 * resync)
	framework.Eventually(t, converge, func() (bool, error) { return reconciles(t) >= before+5, nil })
	time.Sleep(resync)
	writes, _ := auditedWrites(t, mark, ns, "deployments", "horizontalpodautoscalers", "httproutes", "services")
	t.Logf("the pause: %.0f syncs, %d writes of the controller to the children", reconciles(t)-before, len(writes))
	if len(writes) != 0 {
		t.Errorf("the controller wrote %d times to the App's children in the pause: %q", len(writes), writes)
	}

	framework.RequestRollout(t, c.App, c.Kube, ns, "web", appv1.RolloutActionPromote)
	c.WaitRollout(t, ns, "web", appv1.RolloutPaused, 3)
	expect("paused at 100%: the canary runs what the stable runs", 8, 8, "web-svc-canary:100")
	scale(6)
	expect("the autoscaler at 6 at 100%: the canary follows", 6, 6, "web-svc-canary:100")

	mark = 0
	framework.RequestRollout(t, c.App, c.Kube, ns, "web", appv1.RolloutActionPromote)
	c.WaitRollout(t, ns, "web", appv1.RolloutHealthy, 0)
	expect("promoted", 6, -1, "web-svc:1")
	if n, image := framework.DeploymentReplicas(t, c.Kube, ns, "web-deploy"); n != 6 || image != "nginx:2" {
		t.Errorf("promoted: the stable %d %s, want 6 nginx:2", n, image)
	}
	hpa := c.waitAutoscaler(t, ns, "web-deploy", func(*autoscalingv2.HorizontalPodAutoscaler) bool { return true })
	if got := fmt.Sprintf("%s %d..%d", hpa.Spec.ScaleTargetRef.Name, ptr.Deref(hpa.Spec.MinReplicas, 1), hpa.Spec.MaxReplicas); got != "web-deploy 2..10" {
		t.Errorf("the autoscaler after the rollout: %s, want web-deploy 2..10", got)
	}
	writes, _ = auditedWrites(t, mark, ns, "horizontalpodautoscalers")
	if len(writes) != 1 {
		t.Errorf("the controller's writes of the autoscaler %q, want its creation alone", writes)
	}
}

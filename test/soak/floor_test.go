package soak

import (
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller/appfixture"
)

// TestServingFloor pins the floor: the replicas less the Deployment's maxUnavailable,
// rounded down, 25% when the App names no strategy.
func TestServingFloor(t *testing.T) {
	for _, tc := range []struct {
		replicas    int32
		unavailable *intstr.IntOrString
		want        int
	}{
		{replicas: 1, want: 1},
		{replicas: 2, want: 2},
		{replicas: 4, want: 3},
		{replicas: 10, want: 8},
		{replicas: 4, unavailable: ptr.To(intstr.FromInt32(2)), want: 2},
		{replicas: 4, unavailable: ptr.To(intstr.FromString("50%")), want: 2},
	} {
		a := appfixture.NewApp("ns", "x", "img", tc.replicas)
		if tc.unavailable != nil {
			a.Spec.DeploymentTemplate.Strategy = &appsv1.DeploymentStrategy{RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: tc.unavailable}}
		}
		if got, _, _ := servingFloor(&a.Spec); got != tc.want {
			t.Errorf("%d replicas, maxUnavailable %v: floor %d, want %d", tc.replicas, tc.unavailable, got, tc.want)
		}
	}
}

// TestFloorSampler samples a canary of 2 replicas at a step with 1, then 2 serving pods,
// and checks which samples below the floor count: those whose App is still in the
// rollout (or promoted it) floorConfirm later, not those an abort or a rollback explains.
func TestFloorSampler(t *testing.T) {
	const hash = "canary1"
	for _, tc := range []struct {
		name string
		// then is the App's rollout floorConfirm after the sample.
		then      *appv1.RolloutStatus
		below     int
		discarded int
		// firstStep: the rollout is at its first step at the sample (else at the
		// fixture's step 1); abortedAgo, if set, when before the sample the App said
		// RolloutAborted (a rollout before).
		firstStep  bool
		abortedAgo time.Duration
	}{
		{name: "still at the step", then: &appv1.RolloutStatus{Phase: appv1.RolloutPaused, Canary: &appv1.RolloutVersion{PodTemplateHash: hash}}, below: 1},
		{name: "promoted", then: &appv1.RolloutStatus{Phase: appv1.RolloutHealthy, Stable: &appv1.RolloutVersion{PodTemplateHash: hash}}, below: 1},
		{name: "aborted", then: &appv1.RolloutStatus{Phase: appv1.RolloutAborted, Canary: &appv1.RolloutVersion{PodTemplateHash: hash}}, discarded: 1},
		{name: "rolled back", then: &appv1.RolloutStatus{Phase: appv1.RolloutHealthy, Stable: &appv1.RolloutVersion{PodTemplateHash: "stable0"}}, discarded: 1},
		{name: "first step just after an abort: the abort's stable still coming back", firstStep: true, abortedAgo: 2 * time.Second,
			then: &appv1.RolloutStatus{Phase: appv1.RolloutPaused, Canary: &appv1.RolloutVersion{PodTemplateHash: hash}}, discarded: 1},
		{name: "first step long after an abort", firstStep: true, abortedAgo: time.Minute,
			then: &appv1.RolloutStatus{Phase: appv1.RolloutPaused, Canary: &appv1.RolloutVersion{PodTemplateHash: hash}}, below: 1},
		{name: "a later step just after an abort", abortedAgo: 2 * time.Second,
			then: &appv1.RolloutStatus{Phase: appv1.RolloutPaused, Canary: &appv1.RolloutVersion{PodTemplateHash: hash}}, below: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld()
			a := appfixture.NewApp("ns", "c", "img", 2)
			a.Generation, a.Status.ObservedGeneration = 3, 3
			a.Spec.Rollout = &appv1.Rollout{Canary: &appv1.CanaryStrategy{Steps: gateSteps()}}
			a.Status.Rollout = &appv1.RolloutStatus{Phase: appv1.RolloutPaused, CurrentStepIndex: 1, CanaryWeight: 25, Canary: &appv1.RolloutVersion{PodTemplateHash: hash}}
			if tc.firstStep {
				a.Status.Rollout.CurrentStepIndex = 0
			}
			r := &appRecord{namespace: "ns", name: "c", kind: kindGate, latest: a}
			w.apps[r.key()] = r
			t0 := time.Date(2026, 11, 28, 14, 0, 0, 0, time.UTC)
			if tc.abortedAgo > 0 {
				r.states = []stateRecord{{at: t0.Add(-tc.abortedAgo), generation: 2, ready: "False", reason: appv1.ReasonRolloutAborted},
					{at: t0.Add(-tc.abortedAgo + time.Second), generation: 3, ready: "False", reason: appv1.ReasonRolloutPaused}}
			}
			pods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{podsByApp: func(obj any) ([]string, error) {
				p := obj.(*corev1.Pod)
				return []string{key(p.Namespace, p.Labels[appv1.InstanceLabel])}, nil
			}})
			pod := func(name string, ready corev1.ConditionStatus) *corev1.Pod {
				return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{appv1.InstanceLabel: "c"}},
					Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}}}}
			}
			_ = pods.Add(pod("stable-1", corev1.ConditionTrue))
			_ = pods.Add(pod("canary-1", corev1.ConditionFalse))
			s := &floorSampler{world: w, pods: pods, sampled: map[string]bool{}, reported: map[string]bool{}}
			s.sampleApp("ns/c", t0)                           // 1 serving: below the floor of 2
			s.sampleApp("ns/c", t0.Add(100*time.Millisecond)) // the same episode
			_ = pods.Update(pod("canary-1", corev1.ConditionTrue))
			s.sampleApp("ns/c", t0.Add(200*time.Millisecond)) // 2 serving
			s.confirm(t0.Add(time.Second), false)
			if len(s.checks.Below) != 0 || s.checks.Discarded != 0 {
				t.Fatalf("confirmed before floorConfirm: %+v", s.checks)
			}
			a2 := a.DeepCopy()
			a2.Status.Rollout = tc.then
			r.latest = a2
			s.confirm(t0.Add(3*time.Second), false)
			c := s.result()
			if len(c.Below) != tc.below || c.Discarded != tc.discarded*2 || c.Samples != 3 || c.MinMargin != -1 {
				t.Errorf("below %d %+v, discarded %d, samples %d, min margin %d; want below %d, discarded %d, 3 samples, min margin -1",
					len(c.Below), c.Below, c.Discarded, c.Samples, c.MinMargin, tc.below, tc.discarded*2)
			}
		})
	}
}

// TestFloorBreaches leaves out the episodes during a fault of the node, up to the bound
// after it.
func TestFloorBreaches(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 14, 0, 0, 0, time.UTC)
	c := &FloorChecks{Below: []FloorBreach{{At: t0.Add(10 * time.Second), App: "ns/a"}, {At: t0.Add(100 * time.Second), App: "ns/b"}, {At: t0.Add(300 * time.Second), App: "ns/c"}}}
	faults := []FaultRecord{
		{Kind: FaultKubelet, Start: t0, End: t0.Add(time.Second)},
		{Kind: FaultLeaderA, Start: t0.Add(290 * time.Second), End: t0.Add(291 * time.Second)},
	}
	got := floorBreaches(c, faults, 2*time.Minute)
	if len(got) != 1 || got[0][:4] != "ns/c" {
		t.Errorf("breaches %q, want ns/c's alone (ns/a and ns/b within the kubelet restart's bound)", got)
	}
}

// TestFloorRouteSplit: a canary whose traffic an HTTPRoute splits keeps its stable at the
// App's replicas through a step, so its stable pods alone must hold the floor: two
// pods serving, one of them the canary's, is below it; while promoting every pod counts.
func TestFloorRouteSplit(t *testing.T) {
	for _, tc := range []struct {
		name      string
		step      int32
		stable    int
		wantBelow bool
	}{
		{name: "a step, one stable pod and the canary's", step: 1, stable: 1, wantBelow: true},
		{name: "a step, both stable pods", step: 1, stable: 2},
		{name: "promoting, one stable pod and the canary's", step: 4, stable: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld()
			a := appfixture.NewApp("ns", "c", "img", 2)
			a.Generation, a.Status.ObservedGeneration = 3, 3
			a.Spec.Rollout = &appv1.Rollout{Canary: &appv1.CanaryStrategy{Steps: gateSteps()}}
			a.Spec.Route = &appv1.Route{Hosts: []appv1.Hostname{"c.test"}, ParentRefs: gatewayParent()}
			a.Status.Rollout = &appv1.RolloutStatus{Phase: appv1.RolloutProgressing, CurrentStepIndex: tc.step, CanaryWeight: 25, Canary: &appv1.RolloutVersion{PodTemplateHash: "canary1"}}
			r := &appRecord{namespace: "ns", name: "c", kind: kindGate, latest: a}
			w.apps[r.key()] = r
			pods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{podsByApp: func(obj any) ([]string, error) {
				p := obj.(*corev1.Pod)
				return []string{key(p.Namespace, p.Labels[appv1.InstanceLabel])}, nil
			}})
			pod := func(name string, canary bool) *corev1.Pod {
				p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{appv1.InstanceLabel: "c"}},
					Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
				if canary {
					p.Labels[appv1.TrackLabel] = appv1.TrackCanary
				}
				return p
			}
			for i := range tc.stable {
				_ = pods.Add(pod(fmt.Sprintf("stable-%d", i), false))
			}
			_ = pods.Add(pod("canary-1", true))
			s := &floorSampler{world: w, pods: pods, sampled: map[string]bool{}, reported: map[string]bool{}}
			t0 := time.Date(2026, 11, 28, 16, 0, 0, 0, time.UTC)
			s.sampleApp("ns/c", t0)
			s.confirm(t0.Add(3*time.Second), true)
			if c := s.result(); (len(c.Below) == 1) != tc.wantBelow {
				t.Errorf("below %+v, want below: %v", c.Below, tc.wantBelow)
			}
		})
	}
}

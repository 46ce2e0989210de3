package rollout

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller/appfixture"
)

// TestShares pins the replica shares of a split by replicas: each side rounded up, the
// canary at least one pod when its weight is not 0, the stable never below one.
func TestShares(t *testing.T) {
	for _, tt := range []struct{ n, w, canary, stable int32 }{
		{10, 20, 2, 8}, {4, 25, 1, 3}, {3, 50, 2, 2}, {1, 20, 1, 1}, {4, 100, 4, 1},
		{5, 0, 0, 5}, {0, 50, 0, 0}, {7, 10, 1, 7}, {100, 1, 1, 99},
	} {
		if c, s := canaryShare(tt.n, tt.w), stableShare(tt.n, tt.w); c != tt.canary || s != tt.stable {
			t.Errorf("%d replicas at %d%%: canary %d, stable %d; want %d, %d", tt.n, tt.w, c, s, tt.canary, tt.stable)
		}
	}
}

// TestCanaryPodShare pins the canary's pods beside an autoscaled stable side that keeps
// its n pods (no HTTPRoute): w of all the pods, rounded up, at least one, at most n.
func TestCanaryPodShare(t *testing.T) {
	for _, tt := range []struct{ n, w, canary int32 }{
		{8, 20, 2}, {4, 20, 1}, {4, 25, 2}, {3, 25, 1}, {10, 10, 2}, {1, 20, 1}, {6, 50, 6}, {6, 80, 6}, {6, 100, 6},
		{5, 0, 0}, {0, 50, 0}, {100, 1, 2},
	} {
		if c := canaryPodShare(tt.n, tt.w); c != tt.canary {
			t.Errorf("%d stable pods, canary at %d%%: %d canary pods, want %d", tt.n, tt.w, c, tt.canary)
		}
	}
}

// TestOrderSplit checks the order of the HTTPRoute's and the split Services' writes: the
// route names the stable and canary Services only once both exist, and they stay while
// the live route names them.
func TestOrderSplit(t *testing.T) {
	s := appfixture.CanaryStrategy()
	v1 := &appv1.RolloutVersion{PodTemplateHash: "h1", ReplicaSetHash: "rs1"}
	v2 := &appv1.RolloutVersion{PodTemplateHash: "h2", ReplicaSetHash: "rs2"}
	starting := &appv1.RolloutStatus{Phase: appv1.RolloutProgressing, Stable: v1, Canary: v2}
	tests := []struct {
		name     string
		r        *appv1.RolloutStatus
		l        Live
		split    string
		services bool
		// canary: its replicas ("-": none, "keep": as it is).
		canary string
	}{
		{"a rollout starts: the Services first, the route on the App's Service, no canary yet", starting,
			Live{Gateway: true, N: 4, StableReplicas: 4, CanaryWeight: -1}, "-", true, "-"},
		{"the Services exist: the route splits, the canary starts", starting,
			Live{Gateway: true, N: 4, StableReplicas: 4, CanaryWeight: -1, SplitServicesExist: true}, "100/0", true, "1"},
		{"a canary that runs while the route does not split stays as it is", starting,
			Live{Gateway: true, N: 4, StableReplicas: 4, CanaryExists: true, CanaryReplicas: 1, CanaryWeight: -1}, "-", true, "keep"},
		{"aborted before the route split: the canary to 0, the Services first", &appv1.RolloutStatus{Phase: appv1.RolloutAborted, Stable: v1, Canary: v2},
			Live{Gateway: true, N: 4, StableReplicas: 4, CanaryExists: true, CanaryReplicas: 1, CanaryWeight: -1}, "-", true, "0"},
		{"promoted, the canary gone: the route back on the App's Service, the Services kept while it names them",
			&appv1.RolloutStatus{Phase: appv1.RolloutHealthy, Stable: v2},
			Live{Gateway: true, N: 4, StableReplicas: 4, CanaryWeight: 0, SplitServicesExist: true}, "-", true, "-"},
		{"then the route no longer names them: they go", &appv1.RolloutStatus{Phase: appv1.RolloutHealthy, Stable: v2},
			Live{Gateway: true, N: 4, StableReplicas: 4, CanaryWeight: -1, SplitServicesExist: true}, "-", false, "-"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewPlan(s, tt.r, tt.l, testNow)
			split := "-"
			if p.Split != nil {
				split = fmt.Sprintf("%d/%d", p.Split.Stable, p.Split.Canary)
			}
			canary := "-"
			switch {
			case p.CanaryReplicas != nil:
				canary = fmt.Sprint(*p.CanaryReplicas)
			case p.KeepCanary:
				canary = "keep"
			}
			if split != tt.split || p.SplitServices != tt.services || canary != tt.canary {
				t.Errorf("split %s, Services %t, canary %s; want %s, %t, %s", split, p.SplitServices, canary, tt.split, tt.services, tt.canary)
			}
		})
	}
}

// TestNewPlan checks what the children are in each state: by replicas and by
// HTTPRoute weights, the canary scaled up before the stable down or the weight moves.
func TestNewPlan(t *testing.T) {
	s := appfixture.CanaryStrategy()
	v1 := &appv1.RolloutVersion{PodTemplateHash: "h1", ReplicaSetHash: "rs1"}
	v2 := &appv1.RolloutVersion{PodTemplateHash: "h2"}
	state := func(phase appv1.RolloutPhase, step int32, stable *appv1.RolloutVersion) *appv1.RolloutStatus {
		return &appv1.RolloutStatus{Phase: phase, CurrentStepIndex: step, Stable: stable, Canary: v2}
	}
	later := metav1.NewTime(testNow.Add(time.Minute))
	tests := []struct {
		name string
		r    *appv1.RolloutStatus
		l    Live
		// want: stable replicas, canary replicas ("-": nil), split ("-": none), stepDone.
		want string
	}{
		{"step 0 by replicas, canary not up yet: the stable keeps its 4", state(appv1.RolloutProgressing, 0, v1),
			Live{N: 4, StableReplicas: 4, CanaryWeight: -1}, "4 1 - false"},
		{"step 0 by replicas, canary up: the stable down to its share", state(appv1.RolloutProgressing, 0, v1),
			Live{N: 4, StableReplicas: 4, CanaryExists: true, CanaryReplicas: 1, CanaryAvailable: 1, CanaryWeight: -1}, "3 1 - false"},
		{"step 0 by replicas, done", state(appv1.RolloutProgressing, 0, v1),
			Live{N: 4, StableReplicas: 3, CanaryExists: true, CanaryReplicas: 1, CanaryAvailable: 1, CanaryWeight: -1}, "3 1 - true"},
		{"step 0 by weight, canary not up: no weight yet", state(appv1.RolloutProgressing, 0, v1),
			Live{Gateway: true, N: 4, StableReplicas: 4, CanaryWeight: -1, SplitServicesExist: true}, "- 1 100/0 false"},
		{"step 0 by weight, canary up: 25%", state(appv1.RolloutProgressing, 0, v1),
			Live{Gateway: true, N: 4, StableReplicas: 4, CanaryExists: true, CanaryReplicas: 1, CanaryAvailable: 1, CanaryWeight: 0}, "- 1 75/25 false"},
		{"step 0 by weight, canary available a second ago: its first weight waits for the Gateway to see its pods", state(appv1.RolloutProgressing, 0, v1),
			Live{Gateway: true, N: 4, StableReplicas: 4, CanaryExists: true, CanaryReplicas: 1, CanaryAvailable: 1, CanaryWeight: 0,
				CanaryAvailableSince: testNow.Add(-time.Second)}, "- 1 100/0 false"},
		{"step 0 by weight, canary available GatewaySettle ago: 25%", state(appv1.RolloutProgressing, 0, v1),
			Live{Gateway: true, N: 4, StableReplicas: 4, CanaryExists: true, CanaryReplicas: 1, CanaryAvailable: 1, CanaryWeight: 0,
				CanaryAvailableSince: testNow.Add(-GatewaySettle)}, "- 1 75/25 false"},
		{"a canary that has a weight takes the next at once", state(appv1.RolloutProgressing, 2, v1),
			Live{Gateway: true, N: 4, StableReplicas: 4, CanaryExists: true, CanaryReplicas: 4, CanaryAvailable: 4, CanaryWeight: 25,
				CanaryAvailableSince: testNow}, "- 4 0/100 false"},
		{"step 0 by weight, in effect", state(appv1.RolloutProgressing, 0, v1),
			Live{Gateway: true, N: 4, StableReplicas: 4, CanaryExists: true, CanaryReplicas: 1, CanaryAvailable: 1, CanaryWeight: 25}, "- 1 75/25 true"},
		{"a weight in effect stays while a canary pod restarts", state(appv1.RolloutPaused, 1, v1),
			Live{Gateway: true, N: 4, StableReplicas: 4, CanaryExists: true, CanaryReplicas: 1, CanaryAvailable: 0, CanaryWeight: 25}, "- 1 75/25 false"},
		{"aborted by replicas: canary to 0 at once", func() *appv1.RolloutStatus {
			r := state(appv1.RolloutAborted, 0, v1)
			r.CanaryScaleDownAt = &later
			return r
		}(), Live{N: 4, StableReplicas: 3, CanaryExists: true, CanaryReplicas: 1, CanaryWeight: -1}, "- 0 - false"},
		{"aborted by weight: all traffic to stable, the canary kept for its delay", func() *appv1.RolloutStatus {
			r := state(appv1.RolloutAborted, 0, v1)
			r.CanaryScaleDownAt = &later
			return r
		}(), Live{Gateway: true, N: 4, StableReplicas: 4, CanaryExists: true, CanaryReplicas: 1, CanaryWeight: 25}, "- - 100/0 false"},
		{"promotion by weight: the canary grows to the stable's count first", state(appv1.RolloutProgressing, 3, v1),
			Live{Gateway: true, N: 4, StableReplicas: 4, CanaryExists: true, CanaryReplicas: 1, CanaryAvailable: 1, CanaryWeight: 25}, "- 4 75/25 false"},
		{"promotion by weight: then takes all the traffic", state(appv1.RolloutProgressing, 3, v1),
			Live{Gateway: true, N: 4, StableReplicas: 4, CanaryExists: true, CanaryReplicas: 4, CanaryAvailable: 4, CanaryWeight: 100}, "- 4 0/100 true"},
		{"promotion's last stage: the stable rolls with its own replicas", state(appv1.RolloutProgressing, 3, v2),
			Live{N: 4, StableReplicas: 1, CanaryExists: true, CanaryReplicas: 4, CanaryAvailable: 4, CanaryWeight: -1}, "- 4 - false"},
		{"promoted by weight: the canary kept for its delay, the route back on the App's Service",
			&appv1.RolloutStatus{Phase: appv1.RolloutHealthy, Stable: v2, CanaryScaleDownAt: &later},
			Live{Gateway: true, N: 4, StableReplicas: 4, CanaryExists: true, CanaryReplicas: 4, CanaryWeight: 100}, "- - - true"},
		{"promoted by weight, its delay over, the route on the App's Service: the canary goes",
			&appv1.RolloutStatus{Phase: appv1.RolloutHealthy, Stable: v2, CanaryScaleDownAt: &metav1.Time{Time: testNow.Add(-time.Second)}},
			Live{Gateway: true, N: 4, StableReplicas: 4, CanaryExists: true, CanaryReplicas: 4, CanaryWeight: -1}, "- - - true"},
		{"autoscaled, by replicas: the stable keeps the autoscaler's 6, the canary 2 of 8 pods", state(appv1.RolloutProgressing, 0, v1),
			Live{Autoscaled: true, N: 6, StableReplicas: 6, CanaryWeight: -1}, "- 2 - false"},
		{"autoscaled, by replicas, the canary up: the step is done, the stable not scaled", state(appv1.RolloutProgressing, 0, v1),
			Live{Autoscaled: true, N: 6, StableReplicas: 6, CanaryExists: true, CanaryReplicas: 2, CanaryAvailable: 2, CanaryWeight: -1}, "- 2 - true"},
		{"autoscaled, by replicas, the autoscaler at 12 in the pause: the canary follows to 4", state(appv1.RolloutPaused, 1, v1),
			Live{Autoscaled: true, N: 12, StableReplicas: 12, CanaryExists: true, CanaryReplicas: 2, CanaryAvailable: 2, CanaryWeight: -1}, "- 4 - false"},
		{"autoscaled, by replicas, setWeight 100: half of the pods, the stable kept", state(appv1.RolloutProgressing, 2, v1),
			Live{Autoscaled: true, N: 6, StableReplicas: 6, CanaryExists: true, CanaryReplicas: 2, CanaryAvailable: 2, CanaryWeight: -1}, "- 6 - false"},
		{"autoscaled, by replicas, promotion: nothing scaled", state(appv1.RolloutProgressing, 3, v1),
			Live{Autoscaled: true, N: 6, StableReplicas: 6, CanaryExists: true, CanaryReplicas: 6, CanaryAvailable: 6, CanaryWeight: -1}, "- 6 - true"},
		{"autoscaled, aborted by replicas: the canary to 0, the stable not written", state(appv1.RolloutAborted, 0, v1),
			Live{Autoscaled: true, N: 6, StableReplicas: 6, CanaryExists: true, CanaryReplicas: 2, CanaryWeight: -1}, "- 0 - false"},
		{"autoscaled, by weight, the autoscaler at 8: the canary 2 (25%)", state(appv1.RolloutPaused, 1, v1),
			Live{Gateway: true, Autoscaled: true, N: 8, StableReplicas: 8, CanaryExists: true, CanaryReplicas: 1, CanaryAvailable: 1, CanaryWeight: 25}, "- 2 75/25 false"},
		{"autoscaled, promotion by weight: the canary grows to the autoscaler's 8 first", state(appv1.RolloutProgressing, 3, v1),
			Live{Gateway: true, Autoscaled: true, N: 8, StableReplicas: 8, CanaryExists: true, CanaryReplicas: 2, CanaryAvailable: 2, CanaryWeight: 25}, "- 8 75/25 false"},
		{"a rollout that ended unpromoted, by weight: nothing to the canary while it goes",
			&appv1.RolloutStatus{Phase: appv1.RolloutHealthy, Stable: v1},
			Live{Gateway: true, N: 4, StableReplicas: 4, CanaryExists: true, CanaryReplicas: 1, CanaryWeight: 25}, "- - 100/0 true"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewPlan(s, tt.r, tt.l, testNow)
			str := func(v *int32) string {
				if v == nil {
					return "-"
				}
				return fmt.Sprint(*v)
			}
			split := "-"
			if p.Split != nil {
				split = fmt.Sprintf("%d/%d", p.Split.Stable, p.Split.Canary)
			}
			if got := fmt.Sprintf("%s %s %s %t", str(p.StableReplicas), str(p.CanaryReplicas), split, p.StepDone); got != tt.want {
				t.Errorf("plan %s, want %s", got, tt.want)
			}
		})
	}
}

// TestPlanPromotedCanaryGoes: a canary promoted through an HTTPRoute is drained once its
// scale-down delay is over, as any other canary: the stable Service made for the stable
// pods as they run at rest (Live.StableHash: the state has no hash at rest, and the
// canary waited for one forever, which the soak found), the route at stable 100, the
// canary gone once the Gateway applied it, then the route back on the App's Service and
// the split Services gone once it no longer names them, and once the canary's pods
// are gone too (the garbage collector deletes them after their Deployment, and they
// stop: behind the App's Service they answered 502). With the stable rolling there
// is nothing to drain to: the canary goes at once.
func TestPlanPromotedCanaryGoes(t *testing.T) {
	s := appfixture.CanaryStrategy()
	over := metav1.NewTime(testNow.Add(-time.Second))
	r := &appv1.RolloutStatus{Phase: appv1.RolloutHealthy, Stable: &appv1.RolloutVersion{PodTemplateHash: "h2"}, CanaryScaleDownAt: &over}
	live := Live{Gateway: true, N: 4, StableReplicas: 4, StableHash: "rs2", CanaryExists: true, CanaryReplicas: 4, CanaryWeight: -1}
	for _, tc := range []struct {
		name   string
		change func(*Live)
		// want: StableHash, Split ("-": none), SplitServices, KeepCanary
		want string
	}{
		{"the delay over: the split Services first, the route on the App's Service", func(*Live) {}, "rs2 - true true"},
		{"the Services there: the route at stable 100", func(l *Live) { l.SplitServicesExist = true }, "rs2 100/0 true true"},
		{"the route at canary 0, not yet applied", func(l *Live) { l.SplitServicesExist, l.CanaryWeight = true, 0 }, "rs2 100/0 true true"},
		{"the route applied: the canary goes", func(l *Live) { l.SplitServicesExist, l.CanaryWeight, l.CanaryDrained = true, 0, true }, "rs2 100/0 true false"},
		{"the canary Deployment gone, its pods not yet: the route stays at stable 100", func(l *Live) {
			l.SplitServicesExist, l.CanaryWeight, l.CanaryExists, l.CanaryPodsLeft = true, 0, false, true
		}, "rs2 100/0 true false"},
		{"the canary gone: the route back, the Services kept while it names them", func(l *Live) {
			l.SplitServicesExist, l.CanaryWeight, l.CanaryExists = true, 0, false
		}, "rs2 - true false"},
		{"the route back: the Services go", func(l *Live) { l.SplitServicesExist, l.CanaryExists = true, false }, " - false false"},
		{"the stable rolling: the canary goes at once", func(l *Live) { l.StableHash = "" }, " - true false"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := live
			tc.change(&l)
			p := NewPlan(s, r, l, testNow)
			split := "-"
			if p.Split != nil {
				split = fmt.Sprintf("%d/%d", p.Split.Stable, p.Split.Canary)
			}
			if got := fmt.Sprintf("%s %s %v %v", p.StableHash, split, p.SplitServices, p.KeepCanary); got != tc.want {
				t.Errorf("plan %q, want %q", got, tc.want)
			}
			if p.CanaryReplicas != nil {
				t.Errorf("canary replicas %d, want it kept as it is or pruned", *p.CanaryReplicas)
			}
		})
	}
}

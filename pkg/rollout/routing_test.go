package rollout

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// routingStrategy is a canary with a header route from its first step, a mirror from
// its third, the header route removed at its fifth:
//
//	0 setHeaderRoute X-Canary: always   3 setMirrorRoute 20%
//	1 setWeight 10                      4 pause
//	2 pause                             5 setHeaderRoute {} (none)
//	                                    6 setWeight 50
func routingStrategy() *appv1.CanaryStrategy {
	return &appv1.CanaryStrategy{Steps: []appv1.CanaryStep{
		{SetHeaderRoute: &appv1.HeaderRoute{Match: []appv1.RouteMatch{{Header: "X-Canary", Exact: "always"}}}},
		{SetWeight: ptr.To[int32](10)},
		{Pause: &appv1.CanaryPause{}},
		{SetMirrorRoute: &appv1.MirrorRoute{Percent: ptr.To[int32](20)}},
		{Pause: &appv1.CanaryPause{}},
		{SetHeaderRoute: &appv1.HeaderRoute{}},
		{SetWeight: ptr.To[int32](50)},
	}, ProgressDeadlineSeconds: ptr.To[int32](600)}
}

var xCanary = []gatewayv1.HTTPHeaderMatch{{Type: ptr.To(gatewayv1.HeaderMatchExact), Name: "X-Canary", Value: "always"}}

// TestRoutingAt pins which header route and mirror each step has: each stays from its
// step until a later one changes it, and none is left past the last step.
func TestRoutingAt(t *testing.T) {
	s := routingStrategy()
	for k, want := range []string{"header", "header", "header", "header mirror 20", "header mirror 20", "mirror 20", "mirror 20", "", ""} {
		r := RoutingAt(s, int32(k))
		var got []string
		if len(r.Header) > 0 {
			if !r.Equal(Routing{Header: xCanary, MirrorPercent: r.MirrorPercent}) {
				t.Errorf("step %d: header matches %v, want X-Canary: always", k, r.Header)
			}
			got = append(got, "header")
		}
		if r.MirrorPercent > 0 {
			got = append(got, fmt.Sprintf("mirror %d", r.MirrorPercent))
		}
		if g := strings.Join(got, " "); g != want {
			t.Errorf("step %d: %q, want %q", k, g, want)
		}
	}
	if d := RoutingDescription(s, 3); d != "header route X-Canary: always, mirror 20%" {
		t.Errorf("RoutingDescription(3) = %q", d)
	}
	if d := RoutingDescription(s, 6); d != "mirror 20%" {
		t.Errorf("RoutingDescription(6) = %q", d)
	}
}

// TestHeaderMatches pins the HTTPRoute header matches of a header route: headers as
// they are, a cookie as a regular expression on the Cookie header, its name and an
// exact value quoted.
func TestHeaderMatches(t *testing.T) {
	got := HeaderMatches([]appv1.RouteMatch{
		{Header: "X-Canary", Exact: "always"},
		{Header: "User-Agent", Regex: ".*Firefox.*"},
		{Cookie: "canary", Exact: "a.b"},
	})
	want := []string{
		"Exact X-Canary always",
		"RegularExpression User-Agent .*Firefox.*",
		`RegularExpression Cookie (^|;\s*)canary=a\.b(;|$)`,
	}
	if len(got) != len(want) {
		t.Fatalf("%d matches, want %d", len(got), len(want))
	}
	for i, m := range got {
		if s := fmt.Sprintf("%s %s %s", *m.Type, m.Name, m.Value); s != want[i] {
			t.Errorf("match %d: %s, want %s", i, s, want[i])
		}
	}
	if r := HeaderMatches([]appv1.RouteMatch{{Cookie: "c", Regex: "x|y"}}); r[0].Value != `(^|;\s*)c=(?:x|y)(;|$)` {
		t.Errorf("cookie regex: %s", r[0].Value)
	}
}

// TestPlanRouting checks the HTTPRoute's header route and mirror in each state: planned
// once the canary's pods for them are available (at least one for a header route, the
// mirrored share for a mirror), kept while in effect, the step done only once the live
// route has them; none at an abort, at the promotion, when the rollout ended, and no
// mirror a Gateway cannot do.
func TestPlanRouting(t *testing.T) {
	s := routingStrategy()
	v1 := &appv1.RolloutVersion{PodTemplateHash: "h1", ReplicaSetHash: "rs1"}
	v2 := &appv1.RolloutVersion{PodTemplateHash: "h2"}
	state := func(phase appv1.RolloutPhase, step int32) *appv1.RolloutStatus {
		return &appv1.RolloutStatus{Phase: phase, CurrentStepIndex: step, Stable: v1, Canary: v2}
	}
	header := Routing{Header: xCanary}
	both := Routing{Header: xCanary, MirrorPercent: 20}
	mirror := Routing{MirrorPercent: 20}
	up := func(n int32, w int32, r Routing) Live {
		return Live{Gateway: true, N: 10, StableReplicas: 10, CanaryExists: true, CanaryReplicas: n, CanaryAvailable: n, CanaryWeight: w, Routing: r}
	}
	tests := []struct {
		name string
		r    *appv1.RolloutStatus
		l    Live
		// want: canary replicas, split, routing ("header", "mirror N", "-"), stepDone.
		want string
	}{
		{"setHeaderRoute, no split Services yet: neither the canary nor the split (orderSplit)", state(appv1.RolloutProgressing, 0),
			Live{Gateway: true, N: 10, StableReplicas: 10, CanaryWeight: -1}, "- - - false"},
		{"setHeaderRoute at weight 0, no canary pod yet: one, and no route to it yet", state(appv1.RolloutProgressing, 0),
			Live{Gateway: true, N: 10, StableReplicas: 10, CanaryWeight: -1, SplitServicesExist: true}, "1 100/0 - false"},
		{"setHeaderRoute, the canary pod available: the header route", state(appv1.RolloutProgressing, 0),
			up(1, 0, Routing{}), "1 100/0 header false"},
		{"setHeaderRoute in effect: done", state(appv1.RolloutProgressing, 0), up(1, 0, header), "1 100/0 header true"},
		{"setWeight 10 keeps the header route", state(appv1.RolloutProgressing, 1), up(1, 10, header), "1 90/10 header true"},
		{"a header route in effect stays while the canary pod restarts", state(appv1.RolloutPaused, 2),
			Live{Gateway: true, N: 10, StableReplicas: 10, CanaryExists: true, CanaryReplicas: 1, CanaryWeight: 10, Routing: header}, "1 90/10 header false"},
		{"setMirrorRoute 20%: two canary pods first, the header route kept meanwhile", state(appv1.RolloutProgressing, 3),
			up(1, 10, header), "2 90/10 header false"},
		{"setMirrorRoute 20%, two pods available: the mirror", state(appv1.RolloutProgressing, 3), up(2, 10, header), "2 90/10 header mirror 20 false"},
		{"setMirrorRoute in effect: done", state(appv1.RolloutProgressing, 3), up(2, 10, both), "2 90/10 header mirror 20 true"},
		{"setHeaderRoute {}: the header route goes, the mirror stays", state(appv1.RolloutProgressing, 5), up(2, 10, both), "2 90/10 mirror 20 false"},
		{"setHeaderRoute {} in effect: done", state(appv1.RolloutProgressing, 5), up(2, 10, mirror), "2 90/10 mirror 20 true"},
		{"setWeight 50 with the mirror", state(appv1.RolloutProgressing, 6), up(5, 50, mirror), "5 50/50 mirror 20 true"},
		{"a mirror the Gateway cannot do is not planned", state(appv1.RolloutProgressing, 3),
			func() Live { l := up(1, 10, header); l.MirrorUnsupported = "no"; return l }(), "1 90/10 header true"},
		{"aborted: no header route, no mirror", func() *appv1.RolloutStatus {
			r := state(appv1.RolloutAborted, 3)
			r.CanaryScaleDownAt = &metav1.Time{Time: testNow.Add(60e9)}
			return r
		}(), up(2, 10, both), "- 100/0 - false"},
		{"promotion: no header route, no mirror", state(appv1.RolloutProgressing, 7), up(2, 50, both), "10 50/50 - false"},
		{"ended: no header route, no mirror", &appv1.RolloutStatus{Phase: appv1.RolloutHealthy, Stable: v1}, up(2, 50, both), "- 100/0 - true"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewPlan(s, tt.r, tt.l, testNow)
			canary := "-"
			if p.CanaryReplicas != nil {
				canary = fmt.Sprint(*p.CanaryReplicas)
			}
			split := "-"
			if p.Split != nil {
				split = fmt.Sprintf("%d/%d", p.Split.Stable, p.Split.Canary)
			}
			var routing []string
			if len(p.Routing.Header) > 0 {
				routing = append(routing, "header")
			}
			if p.Routing.MirrorPercent > 0 {
				routing = append(routing, fmt.Sprintf("mirror %d", p.Routing.MirrorPercent))
			}
			if len(routing) == 0 {
				routing = []string{"-"}
			}
			if got := fmt.Sprintf("%s %s %s %t", canary, split, strings.Join(routing, " "), p.StepDone); got != tt.want {
				t.Errorf("plan %s, want %s", got, tt.want)
			}
		})
	}
}

// TestRoutingSteps walks a rollout through its header and mirror steps: each ends once
// its route is in effect, and one that is not within progressDeadlineSeconds aborts.
func TestRoutingSteps(t *testing.T) {
	s := routingStrategy()
	cur := &appv1.RolloutStatus{Phase: appv1.RolloutProgressing, CurrentStepIndex: 0,
		StepStartedAt: &metav1.Time{Time: testNow}, Stable: &appv1.RolloutVersion{PodTemplateHash: "h1"}, Canary: &appv1.RolloutVersion{PodTemplateHash: "h2", Revision: "r2"}}
	o := &Observation{Now: testNow.Add(1e9), Desired: *cur.Canary, StableSettled: true, Weighted: true}
	cur.Message = messageOf(s, cur, o)
	if want := "step 1 of 7 (setHeaderRoute: header route X-Canary: always), canary at 0% and header route X-Canary: always: waiting for the canary's pods and the route"; !strings.HasSuffix(cur.Message, want) {
		t.Errorf("message %q, want it to end with %q", cur.Message, want)
	}
	if next, _ := Next(s, cur, o); next != cur {
		t.Fatalf("the header step ended before its route was in effect: %+v", next)
	}
	o.StepDone = true
	next, notes := Next(s, cur, o)
	if next.CurrentStepIndex != 1 || len(notes) != 1 || !strings.Contains(notes[0].Message, "(setHeaderRoute: header route X-Canary: always)") ||
		!strings.HasSuffix(notes[0].Message, "ended with its route in effect") || notes[0].Step != "setHeaderRoute" {
		t.Errorf("after the header route is in effect: step %d, notes %+v", next.CurrentStepIndex, notes)
	}
	o.StepDone, o.Now = false, testNow.Add(601e9)
	next, notes = Next(s, cur, o)
	if next.Phase != appv1.RolloutAborted || next.AbortReason != appv1.ReasonProgressDeadlineExceeded || len(notes) != 1 {
		t.Errorf("a header step not in effect after the deadline: %s %s", next.Phase, next.AbortReason)
	}
	if d := Due(s, cur, testNow); d != 601e9 {
		t.Errorf("Due of a header step = %v, want its progress deadline", d)
	}
}

// messageOf is the message of state r as Next writes it.
func messageOf(s *appv1.CanaryStrategy, r *appv1.RolloutStatus, o *Observation) string {
	m := &machine{s: s, o: o, next: r.DeepCopy()}
	return m.message()
}

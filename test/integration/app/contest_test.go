package app

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	appctrl "github.com/app-controller/app-controller/pkg/controller/app"
	"github.com/app-controller/app-controller/pkg/controllermanager"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// maxPerSecond returns the largest number of times within any one second.
func maxPerSecond(times []time.Time) int {
	most := 0
	for i := range times {
		n := 0
		for _, u := range times[i:] {
			if u.Sub(times[i]) < time.Second {
				n++
			}
		}
		most = max(most, n)
	}
	return most
}

// scaleAs sets the Deployment's replicas with a merge patch under field manager
// "hpa-like", as an autoscaler of the Deployment would.
func scaleAs(t *testing.T, c clients, ns, name string, replicas int32) {
	t.Helper()
	patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas)
	if _, err := c.Kube.AppsV1().Deployments(ns).Patch(context.Background(), name, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: "hpa-like"}); err != nil {
		t.Fatalf("scaling Deployment %s: %v", name, err)
	}
}

// TestCompetingWriter scales the Deployment of an App that sets replicas=2 every second
// for 15 s under another field manager. The controller restores it with at most one
// write per change and never more than two in a second; after three repairs in a row
// the App is Contested with a Warning naming "hpa-like", and repairs back off (2 s
// doubling to 8 s here), so the fight costs far fewer writes than changes. When the
// other writer stops, the Deployment goes back to 2 replicas and the condition clears
// after the quiet window. An App without replicas in the same namespace, scaled the same
// way, is never written to.
func TestCompetingWriter(t *testing.T) {
	c := newClients(t)
	ns := framework.Namespace(t)
	opts := controllermanager.NewOptions()
	opts.AppContest = appctrl.ContestPolicy{Threshold: 3, Window: 15 * time.Second, InitialBackoff: 2 * time.Second, MaxBackoff: 8 * time.Second}
	m := startManagerWith(t, opts)

	fought := newApp(ns, "fought", "nginx", 2)
	free := newApp(ns, "free", "nginx", 2)
	free.Spec.DeploymentTemplate.Replicas = nil
	c.Create(t, fought)
	c.Create(t, free)
	c.WaitReady(t, ns, "fought")
	c.WaitReady(t, ns, "free")

	foughtPath := "/namespaces/" + ns + "/deployments/fought-deploy"
	freePath := "/namespaces/" + ns + "/deployments/free-deploy"
	before := len(m.WritesTo(foughtPath))
	freeBefore := len(m.WritesTo(freePath))
	start := time.Now()
	const changes = 15
	for i := range changes {
		scaleAs(t, c, ns, "fought-deploy", int32(3+i%2))
		scaleAs(t, c, ns, "free-deploy", int32(3+i%2))
		time.Sleep(time.Second)
	}
	fightEnd := time.Now()
	repairs := m.WritesTo(foughtPath)[before:]
	t.Logf("%d changes in %s: %d repairs at %v after the start, at most %d in one second",
		changes, fightEnd.Sub(start).Round(time.Millisecond), len(repairs), offsets(repairs, start), maxPerSecond(repairs))
	if len(repairs) > changes || maxPerSecond(repairs) > 2 {
		t.Errorf("%d repairs for %d changes, at most %d in a second; want at most one per change, never a loop", len(repairs), changes, maxPerSecond(repairs))
	}
	// 3 at once, then after 2, 4, 8, 8 s: about 6 within 15 s; 9 leaves room for a slow
	// machine, and is far below one per change.
	if len(repairs) < 3 || len(repairs) > 9 {
		t.Errorf("%d repairs in the fight, want 3 at once then backed off (3..9)", len(repairs))
	}

	app := c.WaitCondition(t, ns, "fought", appv1.ConditionContested, "True/"+appv1.ReasonCompetingWriter)
	if cond := meta.FindStatusCondition(app.Status.Conditions, appv1.ConditionContested); !strings.Contains(cond.Message, `"hpa-like"`) {
		t.Errorf("Contested message = %q, want the other field manager named", cond.Message)
	}
	ev := framework.WaitEvent(t, c.Kube, ns, "App", "fought", "Warning "+appv1.EventReasonContested, converge)
	if !strings.Contains(ev, `field manager "hpa-like"`) {
		t.Errorf("Contested Event = %q, want the other field manager named", ev)
	}

	// The other writer stopped: the last change is repaired after its backoff, then the
	// condition clears after the quiet window.
	c.WaitDeployment(t, ns, "fought-deploy", func(d *appsv1.Deployment) bool { return ptr.Deref(d.Spec.Replicas, 0) == 2 })
	framework.Eventually(t, converge, func() (bool, error) {
		return framework.AppCondition(c.GetApp(t, ns, "fought"), appv1.ConditionContested) == "", nil
	})
	t.Logf("restored and uncontested %s after the fight", time.Since(fightEnd).Round(time.Millisecond))

	if n := len(m.WritesTo(freePath)) - freeBefore; n != 0 {
		t.Errorf("the Deployment of the App without replicas was written %d times, want 0", n)
	}
	if got := framework.AppCondition(c.GetApp(t, ns, "free"), appv1.ConditionContested); got != "" {
		t.Errorf("App without replicas: Contested = %s, want none", got)
	}
}

// offsets returns the times as durations after start, rounded to 10 ms.
func offsets(times []time.Time, start time.Time) []time.Duration {
	out := make([]time.Duration, len(times))
	for i, at := range times {
		out[i] = at.Sub(start).Round(10 * time.Millisecond)
	}
	return out
}

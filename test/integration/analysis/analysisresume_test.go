package analysis

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controllermanager"
	"github.com/app-controller/app-controller/test/integration/apptest"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// statusLog records the App statuses a controller writes (its JSON patches of
// /status), in order, across the controllers of a test.
type statusLog struct {
	mu       sync.Mutex
	statuses []appv1.AppStatus
	// by is the controller (1, 2, ...) that wrote each.
	by []int
}

// hook returns a hook for the manager's writes (Manager.SetBeforeWrite) that records
// the status writes of App name of controller n.
func (l *statusLog) hook(t *testing.T, name string, n int) func(*http.Request) {
	return func(req *http.Request) {
		if !strings.HasSuffix(req.URL.Path, "/apps/"+name+"/status") || req.GetBody == nil {
			return
		}
		body, err := req.GetBody()
		if err != nil {
			t.Errorf("reading a status write: %v", err)
			return
		}
		defer body.Close()
		data, _ := io.ReadAll(body)
		var patch []struct {
			Path  string          `json:"path"`
			Value appv1.AppStatus `json:"value"`
		}
		if err := json.Unmarshal(data, &patch); err != nil || len(patch) != 1 || patch[0].Path != "/status" {
			t.Errorf("a status write that is not one JSON patch of /status: %s", data)
			return
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		l.statuses = append(l.statuses, patch[0].Value)
		l.by = append(l.by, n)
	}
}

// aborts returns how many of the writes moved the rollout into Aborted with reason, and
// the controllers that wrote them.
func (l *statusLog) aborts(reason string) (int, []int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, by := 0, []int(nil)
	prev := appv1.RolloutPhase("")
	for i, s := range l.statuses {
		if s.Rollout == nil {
			continue
		}
		if s.Rollout.Phase == appv1.RolloutAborted && prev != appv1.RolloutAborted && s.Rollout.AbortReason == reason {
			n++
			by = append(by, l.by[i])
		}
		prev = s.Rollout.Phase
	}
	return n, by
}

// applyApp server-side applies app's manifest as field manager gitops (a GitOps tool's
// sync), and returns the App the API server answered with.
func applyApp(t *testing.T, c apptest.Clients, app *appv1.App) *appv1.App {
	t.Helper()
	obj := app.DeepCopy()
	obj.APIVersion, obj.Kind = appv1.GroupVersion.String(), "App"
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var manifest map[string]any
	if err := json.Unmarshal(data, &manifest); err != nil {
		t.Fatal(err)
	}
	delete(manifest, "status")
	if data, err = json.Marshal(manifest); err != nil {
		t.Fatal(err)
	}
	applied, err := c.App.AppcontrollerV1().Apps(app.Namespace).Patch(context.Background(), app.Name, types.ApplyPatchType, data,
		metav1.PatchOptions{FieldManager: "gitops", Force: ptr.To(true)})
	if err != nil {
		t.Fatalf("applying App %s: %v", app.Name, err)
	}
	return applied
}

// TestAnalysisResumeWrites pins the writes of an analysis across restarts and a GitOps
// tool's re-apply. An App applied server-side (field manager gitops) rolls out to an
// analysis step of count 6 at a 10 s interval. The controller is stopped after 2
// passes; a new one goes on from them (the third pass is counted 3, not 1). Mid-step the
// same manifest is applied again: the API server changes nothing, and the controller
// writes exactly one status patch until the next pass, the measurement's. The canary
// turns bad while no controller runs; a third controller measures the failure and
// aborts once: one status write into Aborted (AnalysisFailed), one Warning Event; a
// fourth controller started after the abort writes nothing and aborts nothing again.
func TestAnalysisResumeWrites(t *testing.T) {
	c := apptest.NewClients(t)
	pods, target := startFakePods(t)
	opts := controllermanager.NewOptions()
	opts.ResyncPeriod = 10 * time.Minute // the syncs are the events' and the measurements'
	opts.PrometheusURL = framework.StartPrometheus(t, target)
	ns := framework.Namespace(t)
	log := &statusLog{}
	start := func(n int) *apptest.Manager {
		m := apptest.StartManagerWith(t, opts)
		m.SetBeforeWrite(log.hook(t, "resume", n))
		return m
	}
	m1 := start(1)

	manifest := analysisApp(ns, "resume", 6, 600)
	manifest.Spec.Rollout.Canary.Steps[1].Analysis.Checks[0].FailureLimit = 0
	applyApp(t, c, manifest)
	c.WaitReady(t, ns, "resume")
	canaryPod := "resume-deploy-canary-5d8f9c-x7k2p"
	pods.serve(ns, canaryPod, 20, 0)
	manifest.Spec.DeploymentTemplate.Image = "nginx:2"
	applyApp(t, c, manifest)

	passes := func(n int32) appv1.CheckStatus {
		t.Helper()
		var st appv1.CheckStatus
		framework.Eventually(t, apptest.Converge, func() (bool, error) {
			r := c.GetApp(t, ns, "resume").Status.Rollout
			if r != nil && len(r.Analysis) == 1 && r.Analysis[0].Passed >= n {
				st = r.Analysis[0]
				return true, nil
			}
			return false, nil
		})
		if st.Passed != n || st.Failed != 0 {
			t.Fatalf("analysis %+v, want %d passes and no failure", st, n)
		}
		return st
	}

	// Two passes, then a restart: the third pass is counted 3.
	second := passes(2)
	if err := m1.Run.Stop(t); err != nil {
		t.Fatalf("stopping controller 1: %v", err)
	}
	m2 := start(2)
	third := passes(3)
	if gap := third.MeasuredAt.Sub(second.MeasuredAt.Time); gap < 10*time.Second {
		t.Errorf("controller 2 measured %s after controller 1's last measurement, within the interval (10s)", gap)
	}

	// The GitOps tool applies the same manifest mid-step: no change at the API server,
	// and until the fourth pass the controller writes exactly the measurement's status.
	before := c.GetApp(t, ns, "resume")
	writesBefore := len(m2.WritesIn(ns))
	if applied := applyApp(t, c, manifest); applied.ResourceVersion != before.ResourceVersion || applied.Generation != before.Generation {
		t.Errorf("re-applying the same manifest: resourceVersion %s -> %s, generation %d -> %d; want no change",
			before.ResourceVersion, applied.ResourceVersion, before.Generation, applied.Generation)
	}
	fourth := passes(4)
	time.Sleep(2 * time.Second) // any write that would trail the measurement's
	if w := m2.WritesIn(ns)[writesBefore:]; len(w) != 1 || w[0] != "PATCH /apis/appcontroller.k8s.io/v1/namespaces/"+ns+"/apps/resume/status" {
		t.Errorf("from the re-apply to the fourth pass, controller 2 wrote %q; want exactly the measurement's status patch", w)
	}
	if fourth.Passed != 4 {
		t.Errorf("fourth pass counted %d", fourth.Passed)
	}

	// The canary turns bad while no controller runs; controller 3 measures it and
	// aborts once.
	if err := m2.Run.Stop(t); err != nil {
		t.Fatalf("stopping controller 2: %v", err)
	}
	pods.serve(ns, canaryPod, 18, 2)
	time.Sleep(12 * time.Second) // the check's window (10s) holds only the bad requests
	m3 := start(3)
	app := c.WaitAborted(t, ns, "resume", 1, appv1.ReasonAnalysisFailed)
	r := app.Status.Rollout
	if len(r.Analysis) != 1 || r.Analysis[0].Passed != 4 || r.Analysis[0].Failed != 1 {
		t.Errorf("status.rollout.analysis %+v, want 4 passes and 1 failure", r.Analysis)
	}
	// Settled: the canary's Deployment is scaled to zero (scaleDownDelaySeconds 0) and
	// controller 3 writes no more.
	c.WaitDeployment(t, ns, "resume-deploy-canary", func(d *appsv1.Deployment) bool {
		return d.Spec.Replicas != nil && *d.Spec.Replicas == 0 && d.Status.Replicas == 0
	})
	framework.Eventually(t, apptest.Converge, func() (bool, error) {
		n := len(m3.WritesIn(ns))
		time.Sleep(3 * time.Second)
		return len(m3.WritesIn(ns)) == n, nil
	})
	if err := m3.Run.Stop(t); err != nil {
		t.Fatalf("stopping controller 3: %v", err)
	}
	// Controller 4 syncs the aborted App at its start (its informer's list): nothing to
	// write, nothing to abort again.
	m4 := start(4)
	time.Sleep(5 * time.Second)
	if w := m4.WritesIn(ns); len(w) != 0 {
		t.Errorf("controller 4 wrote %q about an App aborted before it started; want nothing", w)
	}

	if n, by := log.aborts(appv1.ReasonAnalysisFailed); n != 1 || by[0] != 3 {
		t.Errorf("%d status writes moved the rollout into Aborted (AnalysisFailed), by controllers %v; want 1, by controller 3", n, by)
	}
	list, err := c.Kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{
		FieldSelector: "involvedObject.kind=App,involvedObject.name=resume,reason=" + appv1.ReasonRolloutAborted})
	if err != nil {
		t.Fatal(err)
	}
	emitted := 0
	for _, e := range list.Items {
		if e.Type != corev1.EventTypeWarning {
			t.Errorf("a %s RolloutAborted Event, want Warning", e.Type)
		}
		emitted += int(max(e.Count, 1))
	}
	if emitted != 1 {
		t.Errorf("%d RolloutAborted Events emitted, want 1", emitted)
	}
	log.mu.Lock()
	t.Logf("status writes by controller: %v", log.by)
	log.mu.Unlock()
}

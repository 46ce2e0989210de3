package analysis

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata"
	"k8s.io/utils/ptr"

	"github.com/app-controller/app-controller/internal/plugin"
	"github.com/app-controller/app-controller/pkg/analysis"
	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controllermanager"
	"github.com/app-controller/app-controller/test/harness"
	"github.com/app-controller/app-controller/test/integration/apptest"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// Canary analysis against a real Prometheus (Debian's 2.42, framework.StartPrometheus)
// on loopback, which scrapes every second an exporter the test serves on loopback: the
// pods' own http_requests_total{namespace,pod,code}, as the App's canary and stable
// pods would export them, at the rates the test sets. The pods are kwok's: nothing
// answers requests, the series are the test's.

// fakePods exports http_requests_total for pods, each at a rate the test sets: every
// 100 ms, per pod, ok answers 200 and errors answers 500.
type fakePods struct {
	mu       sync.Mutex
	requests *prometheus.CounterVec
	rates    map[[2]string][2]int // namespace/pod -> ok, errors a tick
}

func startFakePods(t *testing.T) (*fakePods, string) {
	t.Helper()
	reg := prometheus.NewRegistry()
	f := &fakePods{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "http_requests_total", Help: "requests"}, []string{"namespace", "pod", "code", "method"}),
		rates:    map[[2]string][2]int{},
	}
	reg.MustRegister(f.requests)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go harness.Every(ctx, 100*time.Millisecond, func() {
		f.mu.Lock()
		for p, r := range f.rates {
			f.requests.WithLabelValues(p[0], p[1], "200", "GET").Add(float64(r[0]))
			f.requests.WithLabelValues(p[0], p[1], "500", "GET").Add(float64(r[1]))
		}
		f.mu.Unlock()
	})
	return f, strings.TrimPrefix(srv.URL, "http://")
}

// serve sets the rate of pod (a name the canary's pod pattern matches).
func (f *fakePods) serve(ns, pod string, ok, errors int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rates[[2]string{ns, pod}] = [2]int{ok, errors}
}

// rollOut creates each of apps (by name) and waits until it is Ready, then changes the
// image of each to nginx:2, which starts its rollout; it returns when the changes began.
func rollOut(t *testing.T, c apptest.Clients, ns string, apps map[string]*appv1.App) time.Time {
	t.Helper()
	for name, app := range apps {
		c.Create(t, app)
		c.WaitReady(t, ns, name)
	}
	start := time.Now()
	for name := range apps {
		c.Update(t, ns, name, func(a *appv1.App) { a.Spec.DeploymentTemplate.Image = "nginx:2" })
	}
	return start
}

// analysisApp is an App of 2 replicas whose rollout is setWeight 50, then an analysis
// step: success rate >= 99% over 10 s, count passes, by the pods' metrics.
func analysisApp(ns, name string, count int32, deadline int32) *appv1.App {
	app := apptest.RolloutApp(ns, name, 2, apptest.SetWeight(50), appv1.CanaryStep{Analysis: &appv1.AnalysisStep{Checks: []appv1.AnalysisCheck{{
		Name: "success-rate", SuccessRate: &appv1.SuccessRateCheck{Min: ptr.To("99")},
		Interval: &metav1.Duration{Duration: 10 * time.Second}, Count: ptr.To(count), MinRequests: ptr.To[int32](10),
	}}}})
	app.Spec.Rollout.Canary.ProgressDeadlineSeconds = ptr.To(deadline)
	return app
}

// printAppStatus logs `kubectl app status` of the App, with the plugin's code.
func printAppStatus(t *testing.T, c apptest.Clients, ns, name, when string) {
	t.Helper()
	dyn := framework.DynamicClient(t)
	meta, err := metadata.NewForConfig(c.Cfg)
	if err != nil {
		t.Fatal(err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(c.Cfg)
	if err != nil {
		t.Fatal(err)
	}
	s, err := plugin.GetStatus(context.Background(), plugin.Clients{Discovery: disc, Metadata: meta, Dynamic: dyn, Apps: c.App, Kube: c.Kube}, ns, name)
	if err != nil {
		t.Fatalf("kubectl app status %s: %v", name, err)
	}
	var b bytes.Buffer
	if err := plugin.PrintStatus(&b, s, time.Now()); err != nil {
		t.Fatal(err)
	}
	t.Logf("kubectl app status %s (%s):\n%s", name, when, b.String())
}

// receiver collects what webhooks get on loopback: the rollout notifications, by App,
// and the calls of a webhook gate, which it answers with 500.
type receiver struct {
	mu            sync.Mutex
	notifications map[string][]string // app -> events
	gateCalls     int
}

func startReceiver(t *testing.T) (*receiver, string) {
	t.Helper()
	r := &receiver{notifications: map[string][]string{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		data, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		if req.URL.Path == "/gate" {
			r.gateCalls++
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		var n analysis.Notification
		if err := json.Unmarshal(data, &n); err != nil {
			t.Errorf("notification %q: %v", data, err)
		}
		r.notifications[n.App] = append(r.notifications[n.App], n.Event)
	}))
	t.Cleanup(srv.Close)
	return r, srv.URL
}

func (r *receiver) events(app string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.notifications[app], ",")
}

// TestAnalysis runs five Apps' rollouts at once under one controller and one
// Prometheus: a canary whose success rate passes is promoted; one at 90% is aborted
// with AnalysisFailed and a message naming the check, the value and the threshold; one
// that gets no traffic waits, then aborts at the progress deadline with
// AnalysisInconclusive, saying so; one whose analysis needs three passes goes on from
// its count after the controller restarts; one held by a webhook gate that answers 500
// holds at its first failure, then aborts at the second (failureLimit 1). Rollout
// notifications reach a webhook on loopback, once per event.
func TestAnalysis(t *testing.T) {
	c := apptest.NewClients(t)
	pods, target := startFakePods(t)
	hooks, hookURL := startReceiver(t)
	opts := controllermanager.NewOptions()
	opts.ResyncPeriod = 5 * time.Second
	opts.PrometheusURL = framework.StartPrometheus(t, target)
	opts.NotificationWebhookURLFile = filepath.Join(t.TempDir(), "url")
	if err := os.WriteFile(opts.NotificationWebhookURLFile, []byte(hookURL+"/notify\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m := apptest.StartManagerWith(t, opts)
	ns := framework.Namespace(t)

	gated := apptest.RolloutApp(ns, "gated", 2, apptest.SetWeight(50), appv1.CanaryStep{Analysis: &appv1.AnalysisStep{Checks: []appv1.AnalysisCheck{{
		Name: "acceptance", Webhook: &appv1.WebhookCheck{URL: hookURL + "/gate", TimeoutSeconds: ptr.To[int32](5), Retries: ptr.To[int32](0)},
		Interval: &metav1.Duration{Duration: 10 * time.Second}, FailureLimit: 1,
	}}}})
	apps := map[string]*appv1.App{
		"good":   analysisApp(ns, "good", 1, 600),
		"bad":    analysisApp(ns, "bad", 1, 600),
		"quiet":  analysisApp(ns, "quiet", 1, 30),
		"resume": analysisApp(ns, "resume", 3, 600),
		"gated":  gated,
	}
	// The canary pods' series (a name the pattern DEPLOYMENT-canary-HASH-XXXXX matches).
	pods.serve(ns, "good-deploy-canary-5d8f9c-x7k2p", 20, 0)
	pods.serve(ns, "bad-deploy-canary-5d8f9c-x7k2p", 18, 2)
	pods.serve(ns, "resume-deploy-canary-5d8f9c-x7k2p", 20, 0)
	// The stable pods of bad answer well: only the canary is judged.
	pods.serve(ns, "bad-deploy-6b7c8d-a1b2c", 20, 0)
	start := rollOut(t, c, ns, apps)

	// resume: its first pass, then a restart of the controller.
	var first appv1.CheckStatus
	framework.Eventually(t, apptest.Converge, func() (bool, error) {
		r := c.GetApp(t, ns, "resume").Status.Rollout
		if r != nil && len(r.Analysis) == 1 && r.Analysis[0].Passed == 1 {
			first = r.Analysis[0]
			return true, nil
		}
		return false, nil
	})
	printAppStatus(t, c, ns, "resume", "during the analysis step")
	if err := m.Run.Stop(t); err != nil {
		t.Fatalf("stopping the controller: %v", err)
	}
	apptest.StartManagerWith(t, opts)
	var second appv1.CheckStatus
	framework.Eventually(t, apptest.Converge, func() (bool, error) {
		r := c.GetApp(t, ns, "resume").Status.Rollout
		if r != nil && len(r.Analysis) == 1 && r.Analysis[0].MeasuredAt != nil && r.Analysis[0].MeasuredAt.After(first.MeasuredAt.Time) {
			second = r.Analysis[0]
			return true, nil
		}
		return r != nil && r.CurrentStepIndex > 1, nil
	})
	if second.Name != "" && second.Passed != 2 {
		t.Errorf("after the restart: %d passes, want 2 (the count goes on)", second.Passed)
	}
	if second.Name != "" && second.MeasuredAt.Sub(first.MeasuredAt.Time) < 10*time.Second {
		t.Errorf("the restarted controller measured %s after the last measurement, within the interval (10s)", second.MeasuredAt.Sub(first.MeasuredAt.Time))
	}

	// good and resume: promoted, no person involved.
	for _, name := range []string{"good", "resume"} {
		framework.Eventually(t, apptest.Converge, func() (bool, error) {
			app := c.GetApp(t, ns, name)
			replicas, image := framework.DeploymentReplicas(t, c.Kube, ns, name+"-deploy")
			return app.Status.Rollout.Phase == appv1.RolloutHealthy && image == "nginx:2" && replicas == 2, nil
		})
		t.Logf("%s promoted %.1fs after the change", name, time.Since(start).Seconds())
	}

	// bad: aborted by the success rate.
	app := c.WaitAborted(t, ns, "bad", 1, appv1.ReasonAnalysisFailed, "success rate 90% < 99% over 10s (canary bad-deploy-canary)")
	r := app.Status.Rollout
	if len(r.Analysis) != 1 || r.Analysis[0].Failed != 1 || r.Analysis[0].Value != "90%" || r.Analysis[0].Threshold != ">= 99%" {
		t.Errorf("bad: status.rollout.analysis %+v, want the failed measurement", r.Analysis)
	}
	t.Logf("bad aborted %.1fs after the change: %s", time.Since(start).Seconds(), r.AbortMessage)
	printAppStatus(t, c, ns, "bad", "after the abort")
	if data, err := json.MarshalIndent(r, "", "  "); err == nil {
		t.Logf("bad: status.rollout:\n%s", data)
	}

	// quiet: no traffic, inconclusive, aborted at the progress deadline.
	app = c.WaitAborted(t, ns, "quiet", 1, appv1.ReasonAnalysisInconclusive,
		"stayed inconclusive for progressDeadlineSeconds (30s)", "too little traffic to judge")
	r = app.Status.Rollout
	if len(r.Analysis) != 1 || r.Analysis[0].Inconclusive < 2 || r.Analysis[0].Passed+r.Analysis[0].Failed != 0 {
		t.Errorf("quiet: status.rollout.analysis %+v, want only inconclusive measurements", r.Analysis)
	}

	// gated: held by its first failure (failureLimit 1), aborted at the second.
	app = c.WaitAborted(t, ns, "gated", 1, appv1.ReasonAnalysisFailed, "webhook acceptance answered HTTP 500 (1 calls)")
	if r = app.Status.Rollout; len(r.Analysis) != 1 || r.Analysis[0].Failed != 2 {
		t.Errorf("gated: status.rollout.analysis %+v, want two failed calls", r.Analysis)
	}
	hooks.mu.Lock()
	if hooks.gateCalls != 2 {
		t.Errorf("the gate was called %d times, want 2 (one a measurement, no retries)", hooks.gateCalls)
	}
	hooks.mu.Unlock()

	// The notifications, once per event (the notifier sends from its own goroutine).
	want := map[string]string{
		"good":  "started,step,step,promoted",
		"bad":   "started,step,aborted",
		"quiet": "started,step,aborted",
		"gated": "started,step,aborted",
	}
	// Waited for, then each App's list is compared (a wrong one is named below).
	_ = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		for name, events := range want {
			if hooks.events(name) != events {
				return false, nil
			}
		}
		return true, nil
	})
	time.Sleep(time.Second)
	for name, events := range want {
		if got := hooks.events(name); got != events {
			t.Errorf("%s: notifications %s, want %s", name, got, events)
		}
	}

	// Re-applying the manifests changes nothing: the aborted stay aborted, the promoted
	// promoted.
	for name := range apps {
		before := c.GetApp(t, ns, name)
		c.Update(t, ns, name, func(a *appv1.App) { a.Spec.DeploymentTemplate.Image = "nginx:2" })
		if after := c.GetApp(t, ns, name); after.Generation != before.Generation {
			t.Errorf("%s: re-applying the same spec made generation %d", name, after.Generation)
		}
	}
}

// TestAnalysisWithoutPrometheus: a controller without --prometheus-url refuses a
// rollout that asks for a metric check (PrometheusNotConfigured, Ready False, a Warning
// Event), and rolls an App without checks as before.
func TestAnalysisWithoutPrometheus(t *testing.T) {
	c := apptest.NewClients(t)
	apptest.StartManager(t, 5*time.Second)
	ns := framework.Namespace(t)
	rollOut(t, c, ns, map[string]*appv1.App{
		"checked": analysisApp(ns, "checked", 1, 600),
		"plain":   apptest.RolloutApp(ns, "plain", 2, apptest.SetWeight(50)),
	})
	c.WaitAborted(t, ns, "checked", 0, appv1.ReasonPrometheusNotConfigured, "the controller has no Prometheus (--prometheus-url")
	framework.Eventually(t, apptest.Converge, func() (bool, error) {
		events, err := c.Kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=checked,reason=" + appv1.ReasonRolloutAborted})
		return err == nil && len(events.Items) == 1 && events.Items[0].Type == "Warning" && strings.Contains(events.Items[0].Message, "--prometheus-url"), err
	})
	framework.Eventually(t, apptest.Converge, func() (bool, error) {
		_, image := framework.DeploymentReplicas(t, c.Kube, ns, "plain-deploy")
		return c.GetApp(t, ns, "plain").Status.Rollout.Phase == appv1.RolloutHealthy && image == "nginx:2", nil
	})
}

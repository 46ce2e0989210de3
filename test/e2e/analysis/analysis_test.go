// Package analysis_test proves the canary analysis on a real node: a real Prometheus
// (realnode.InstallPrometheus, Debian's 2.42) scraping Traefik as the Gateway and the pods
// of Apps that run test/images/demoapp, whose error rate and latency come from its
// environment, while demoapp's load generator sends a bounded load through the Gateway
// from a pod of the cluster. The controller runs on this machine (framework.StartManager)
// and reaches Prometheus through a port-forward on 127.0.0.1; its webhook gates and rollout
// notifications go to a server of the test on 127.0.0.1. make e2e (so make test) builds
// Traefik's image and names it in TRAEFIK_IMAGE_LAYOUT; without it (go test alone) the
// package says in one line that it skipped.
//
// TestAnalysis runs its cases at once, a namespace each, with one Traefik, one Prometheus,
// one controller and one receiver: every App rolls out with the steps [setWeight 10,
// analysis, setWeight 50, analysis], each check measured every 10 s (the API's floor).
package analysis_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/app-controller/app-controller/internal/localcluster"
	"github.com/app-controller/app-controller/pkg/analysis"
	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controllermanager"
	"github.com/app-controller/app-controller/test/e2e/realnode"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// TestMain starts a cluster with a real node, the App CRD and the Gateway API CRDs, when
// Traefik's image is there.
func TestMain(m *testing.M) { realnode.MainWithTraefik(m, "analysis") }

// The load of each case: rps requests a second through Traefik, from a pod, for long
// enough to cover the rollout (promoted) or the abort (aborted).
const (
	rps              = 40
	promotedSeconds  = 80
	abortedSeconds   = 50
	interval         = 10 * time.Second
	rolloutTimeout   = 3 * time.Minute
	notifyQuietAfter = 2 * time.Second
)

// canaryWeight is the weight of the first step, in percent.
const canaryWeight = 10

// env is what the cases share.
type env struct {
	tns, pns string
	// promURL is Prometheus's API through a port-forward on 127.0.0.1, which the
	// controller queries too; traefikFwd Traefik's entry point the same way.
	promURL, traefikFwd string
	// traefikWeb is Traefik's entry point as a pod reaches it: http://CLUSTER-IP:8000/.
	traefikWeb string
	demoapp    string
	prom       promv1.API
	hooks      *receiver
	hookURL    string
}

// TestAnalysis installs Traefik and Prometheus, starts the controller with
// --prometheus-url (the port-forward) and --notification-webhook-url-file (a receiver
// on 127.0.0.1), and runs the cases in parallel.
func TestAnalysis(t *testing.T) {
	e := &env{}
	e.tns, e.pns = framework.Namespace(t), framework.Namespace(t)
	realnode.InstallTraefik(t, e.tns)
	e.promURL = realnode.InstallPrometheus(t, e.pns)
	t.Logf("Prometheus: %s from this machine, %s from the cluster", e.promURL, realnode.PrometheusServiceURL(t, e.pns))
	e.traefikFwd = realnode.PortForward(t, e.tns, "pod/traefik", realnode.TraefikWebPort)
	svc, err := framework.Client(t).CoreV1().Services(e.tns).Get(context.Background(), "traefik", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.traefikWeb = fmt.Sprintf("http://%s:%d/", svc.Spec.ClusterIP, realnode.TraefikWebPort)
	e.demoapp = realnode.Registry(t) + "/" + localcluster.DemoappImage
	promClient, err := api.NewClient(api.Config{Address: e.promURL})
	if err != nil {
		t.Fatal(err)
	}
	e.prom = promv1.NewAPI(promClient)
	e.hooks, e.hookURL = startReceiver(t)

	opts := controllermanager.NewOptions()
	opts.PrometheusURL = e.promURL
	opts.NotificationWebhookURLFile = filepath.Join(t.TempDir(), "notification-url")
	if err := os.WriteFile(opts.NotificationWebhookURLFile, []byte(e.hookURL+"/notify\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	framework.StartAppController(t, framework.Config(t), opts)

	t.Run("PrometheusSeesTheCanary", func(t *testing.T) { t.Parallel(); prometheusSeesTheCanary(t, e) })
	t.Run("HealthyIsPromoted", func(t *testing.T) { t.Parallel(); healthyIsPromoted(t, e) })
	t.Run("ErrorsAbortBySuccessRate", func(t *testing.T) { t.Parallel(); errorsAbortBySuccessRate(t, e) })
	t.Run("SlowAbortsByLatency", func(t *testing.T) { t.Parallel(); slowAbortsByLatency(t, e) })
	t.Run("StableIncidentRelativeAndAbsolute", func(t *testing.T) { t.Parallel(); stableIncident(t, e) })
	t.Run("WebhookGateHoldsThenAborts", func(t *testing.T) { t.Parallel(); webhookGate(t, e) })
}

// Notifications the Apps get: a rollout of the four steps that is promoted, and one
// aborted at its first analysis (its setWeight step ended).
var (
	promotedEvents = []string{"started", "step", "step", "step", "step", "promoted"}
	abortedEvents  = []string{"started", "step", "aborted"}
)

// healthyIsPromoted: a canary as good as its stable passes its success rate and latency
// checks at 10% and at 50%, and is promoted with no person involved; no request of the
// load fails.
func healthyIsPromoted(t *testing.T, e *env) {
	c := e.newCase(t, "web", `[{name: VERSION, value: "1"}]`,
		`[{name: success-rate, interval: 10s, successRate: {min: "99"}}, {name: latency, interval: 10s, latency: {percentile: 50, maxMs: 500}}]`)
	c.startLoad(promotedSeconds)
	c.rollTo(`[{name: VERSION, value: "2"}]`)
	c.watch("at its second analysis step, its checks listed", func(app *appv1.App) bool {
		r := app.Status.Rollout
		return r != nil && r.CurrentStepIndex == 3 && r.Phase == appv1.RolloutProgressing && len(r.Analysis) == 2
	})
	c.status("during its second analysis step (50%)")
	c.watch("promoted", func(app *appv1.App) bool {
		r := app.Status.Rollout
		return r != nil && r.Phase == appv1.RolloutHealthy && r.Canary == nil && r.Stable != nil && r.Stable.Revision == app.Status.CurrentRevision &&
			meta.IsStatusConditionTrue(app.Status.Conditions, appv1.ConditionReady)
	})
	if v := c.stableVersion(); v != "2" {
		t.Errorf("the stable Deployment runs VERSION=%s after the promotion, want 2", v)
	}
	c.wantStepEvents(4, "with its checks passed", 2)
	c.wantNotifications(promotedEvents)
	s := c.loadSummary()
	// Healthy on both sides, and the promotion moves no request to a pod that is not
	// ready: every request of the load is answered 200.
	if s.Errors != 0 || s.Codes["200"] != s.Requests || s.Requests != rps*promotedSeconds {
		t.Errorf("the load: %+v; want %d requests, all answered 200", s, rps*promotedSeconds)
	}
}

// errorsAbortBySuccessRate: a canary answering 500 to one request in ten is aborted by
// the success rate check at its first analysis step, at its first measurement with
// requests enough to judge (every tenth request fails: a window of minRequests or more
// holds an error, its first one counted since 2d567d2), and the failed requests are
// bounded by the weight and the time.
//
// The bound: with the canary at weight w, a load of r requests a second, a check of
// interval i and failureLimit f, the canary takes requests from the moment Traefik
// sends it its share to the moment it stops: at most (f+2) intervals (the first
// measurement's window filling, f+1 failing measurements; the setWeight step's few
// seconds and Traefik's reaction fit in the first). At an error rate e it fails at most
// e x w x r x (f+2) x i of them: here 0.1 x 0.1 x 40 x 2 x 10 = 8 (and it answers at most
// w x r x (f+2) x i = 80 requests). A window with too few canary requests to judge (a
// loaded machine's load falling behind) adds its interval to both.
func errorsAbortBySuccessRate(t *testing.T, e *env) {
	const (
		errorRate    = 0.1
		failureLimit = 0
	)
	bound := int(errorRate * canaryWeight / 100 * rps * (failureLimit + 2) * interval.Seconds())
	requestBound := int(float64(canaryWeight) / 100 * rps * (failureLimit + 2) * interval.Seconds())
	c := e.newCase(t, "web", `[{name: VERSION, value: "1"}]`, `[{name: success-rate, interval: 10s, successRate: {min: "99"}}]`)
	c.startLoad(abortedSeconds)
	c.rollTo(`[{name: VERSION, value: "2"}, {name: ERROR_RATE, value: "0.1"}]`)
	app := c.waitAborted()
	c.status("after the abort")
	st := c.wantAbort(app, "success-rate", []string{"threshold >= 99%", "< 99% over 10s (canary web-canary)"})
	if v := percent(t, st.Value); v >= 99 {
		t.Errorf("the failed measurement's value %q, want under 99%%", st.Value)
	}
	// Each window that held too few canary requests to judge adds its interval.
	bound += int(errorRate * canaryWeight / 100 * rps * float64(st.Inconclusive) * interval.Seconds())
	requestBound += int(float64(canaryWeight) / 100 * rps * float64(st.Inconclusive) * interval.Seconds())
	c.wantNotifications(abortedEvents)

	// The failed requests: every 500 is the canary's (the stable answers none).
	s := c.loadSummary()
	canary5xx := e.scalar(t, fmt.Sprintf(`sum(max_over_time(traefik_service_requests_total{service=~"%s-web-canary-.*",code="500"}[10m]))`, c.ns))
	canaryAll := e.scalar(t, fmt.Sprintf(`sum(max_over_time(traefik_service_requests_total{service=~"%s-web-canary-.*"}[10m]))`, c.ns))
	t.Logf("failed requests: the load got %d answers 500 of %d (%+v); Traefik counted %v 500s of %v requests to the canary; bound e x w x r x (f+2) x i = %v x %v x %v x %d x %v = %d failed, %d requests to the canary",
		s.Codes["500"], s.Requests, s.Codes, canary5xx, canaryAll, errorRate, float64(canaryWeight)/100, rps, failureLimit+2, interval.Seconds(), bound, requestBound)
	if s.Codes["500"] == 0 || s.Codes["500"] > bound {
		t.Errorf("the load got %d answers 500; want at least one and at most the bound %d", s.Codes["500"], bound)
	}
	if float64(s.Codes["500"]) != canary5xx {
		t.Errorf("the load got %d answers 500, Traefik counted %v from the canary: want the same (the stable answers none, and nothing else fails)", s.Codes["500"], canary5xx)
	}
	if canaryAll > float64(requestBound) {
		t.Errorf("Traefik sent %v requests to the canary, more than the bound w x r x (f+2) x i = %d", canaryAll, requestBound)
	}
	if s.Errors != 0 || s.Codes["200"]+s.Codes["500"] != s.Requests || s.Requests != rps*abortedSeconds {
		t.Errorf("the load: %+v; want %d requests, each answered 200 or 500", s, rps*abortedSeconds)
	}
}

// slowAbortsByLatency: a canary 800 ms slower than its stable (the issue's "800 ms
// instead of 40") is aborted by the latency check (the median at most 500 ms) at its
// first analysis step. The median, not the p99: every request of the slow canary takes
// 800 ms, while a whole make test on 2 cores stalls the healthy case's path past 500 ms
// for a few requests a window (its p99 read 530 ms, and aborted a healthy canary).
func slowAbortsByLatency(t *testing.T, e *env) {
	c := e.newCase(t, "web", `[{name: VERSION, value: "1"}]`, `[{name: latency, interval: 10s, latency: {percentile: 50, maxMs: 500}}]`)
	c.startLoad(abortedSeconds)
	c.rollTo(`[{name: VERSION, value: "2"}, {name: LATENCY_MS, value: "800"}]`)
	app := c.waitAborted()
	st := c.wantAbort(app, "latency", []string{"threshold <= 500ms", "> 500ms over 10s (canary web-canary)"})
	// Traefik's duration buckets are 0.1, 0.3, 1.2 and 5 s: a median of requests that all
	// take 800 ms is read by interpolation within (0.3, 1.2], about 750 ms.
	if ms, err := strconv.ParseFloat(strings.TrimSuffix(st.Value, "ms"), 64); err != nil || ms <= 500 {
		t.Errorf("the failed measurement's value %q, want more than 500ms", st.Value)
	}
	c.wantNotifications(abortedEvents)
	s := c.loadSummary()
	t.Logf("the load: p50 %vms, p99 %vms, %+v", s.P50Ms, s.P99Ms, s.Codes)
	if s.Errors != 0 || s.Codes["200"] != s.Requests {
		t.Errorf("the load: %+v; want every request answered 200", s)
	}
}

// stableIncident: stable and canary both answer 500 to one request in ten (an incident
// of the whole system, not of the new version). The App relative, whose check compares
// the canary with the stable (stableMargin 5 points: at 40 canary requests a window, one
// request is 2.5 points), passes and is promoted; the App absolute, whose check asks 99%,
// aborts the same canary.
func stableIncident(t *testing.T, e *env) {
	v1 := `[{name: VERSION, value: "1"}, {name: ERROR_RATE, value: "0.1"}]`
	v2 := `[{name: VERSION, value: "2"}, {name: ERROR_RATE, value: "0.1"}]`
	relative := e.newCase(t, "relative", v1, `[{name: success-rate, interval: 10s, successRate: {stableMargin: "5"}}]`)
	absolute := e.newCaseIn(t, relative.ns, "absolute", v1, `[{name: success-rate, interval: 10s, successRate: {min: "99"}}]`)
	relative.startLoad(promotedSeconds)
	absolute.startLoad(abortedSeconds)
	relative.rollTo(v2)
	absolute.rollTo(v2)

	app := absolute.waitAborted()
	absolute.wantAbort(app, "success-rate", []string{"threshold >= 99%", "< 99% over 10s (canary absolute-canary)"})
	absolute.wantNotifications(abortedEvents)

	relative.watch("promoted", func(app *appv1.App) bool {
		r := app.Status.Rollout
		return r != nil && r.Phase == appv1.RolloutHealthy && r.Canary == nil && r.Stable != nil && r.Stable.Revision == app.Status.CurrentRevision
	})
	relative.wantStepEvents(4, "with its checks passed", 2)
	relative.wantNotifications(promotedEvents)
	for _, c := range []*rolloutCase{relative, absolute} {
		s := c.loadSummary()
		t.Logf("%s: the load: %+v (%.1f%% 500s)", c.name, s.Codes, 100*float64(s.Codes["500"])/float64(s.Requests))
		// The case is about the checks' verdicts; a request lost in transit is for the
		// healthy case and the blue-green switch to assert. Whole make test runs saw the
		// load pod's network unreachable for an instant (2 of 3200 and 2 of 2000 at once,
		// on both Apps' loads): at most 1% is let through, and logged.
		if s.Errors > s.Requests/100 || s.Codes["200"]+s.Codes["500"]+s.Errors != s.Requests {
			t.Errorf("%s: the load: %+v; want each request answered 200 or 500 (at most 1%% failing in transit)", c.name, s)
		} else if s.Errors > 0 {
			t.Logf("%s: %d requests failed in transit: %s", c.name, s.Errors, s.LastError)
		}
	}
	// The relative check's passes compared the two: the Events of its analysis steps
	// name the canary's rate and the stable's (wantStepEvents logged them).
	if n := relative.stepEvents("ended with its checks passed: success-rate ", "(>= stable "); n != 2 {
		t.Errorf("relative: %d analysis steps passed against the stable's success rate, want 2", n)
	}
}

// webhookGate: an analysis step whose webhook gate answers 500 (failureLimit 1) holds
// the rollout at its first failure, and aborts it at the second; the gate is called once
// a measurement (no retries).
func webhookGate(t *testing.T, e *env) {
	ns := framework.Namespace(t)
	gate := e.hookURL + "/gate"
	checks := fmt.Sprintf(`[{name: acceptance, interval: 10s, failureLimit: 1, webhook: {url: %q, timeoutSeconds: 5, retries: 0}}]`, gate)
	c := e.newCaseIn(t, ns, "web", `[{name: VERSION, value: "1"}]`, checks)
	c.rollTo(`[{name: VERSION, value: "2"}]`)
	app := c.watch("held by its gate's first failure", func(app *appv1.App) bool {
		r := app.Status.Rollout
		return r != nil && len(r.Analysis) == 1 && r.Analysis[0].Failed == 1
	})
	if r := app.Status.Rollout; r.Phase != appv1.RolloutProgressing || r.CurrentStepIndex != 1 || r.Analysis[0].Phase != appv1.AnalysisFailed {
		t.Errorf("after the gate's first failure: phase %s at step %d, check %s; want Progressing at step 1 (held), the check Failed", r.Phase, r.CurrentStepIndex, r.Analysis[0].Phase)
	}
	c.status("held by its gate (one failure of failureLimit 1)")
	app = c.waitAborted()
	st := c.wantAbort(app, "acceptance", []string{"webhook acceptance answered HTTP 500 (1 calls)", "threshold 2xx"})
	if st.Failed != 2 {
		t.Errorf("the gate failed %d times, want 2 (failureLimit 1)", st.Failed)
	}
	if n := e.hooks.gateCalls(ns, "web"); n != 2 {
		t.Errorf("the gate was called %d times, want 2 (one a measurement, no retries)", n)
	}
	c.wantNotifications(abortedEvents)
}

// rolloutCase is one App of a case: demoapp published through Traefik as HOST, where
// HOST is NAME.NAMESPACE.example.com.
type rolloutCase struct {
	t        *testing.T
	e        *env
	ns, name string
	host     string
	loadPod  string
	// measured lists the measurements record logged.
	mu       sync.Mutex
	measured []string
}

// appManifest is the App %[2]s in namespace %[1]s: demoapp (image %[3]s) with env %[4]s,
// its pods annotated for Prometheus, published as %[5]s through the Gateway %[7]s of
// namespace %[6]s, rolled out in the steps setWeight 10, an analysis of checks %[8]s,
// setWeight 50 and the same analysis again.
const appManifest = `apiVersion: appcontroller.k8s.io/v1
kind: App
metadata: {name: %[2]s, namespace: %[1]s}
spec:
  deploymentTemplate:
    name: %[2]s
    image: %[3]s
    containerPort: 8080
    replicas: 1
    env: %[4]s
    podAnnotations: {prometheus.io/scrape: "true", prometheus.io/port: "8080"}
    readinessProbe:
      httpGet: {path: /healthz, port: 8080}
      periodSeconds: 1
  serviceTemplate: {name: %[2]s, port: 80}
  route:
    hosts: [%[5]s]
    parentRefs: [{name: %[7]s, namespace: %[6]s}]
  rollout:
    canary:
      steps:
      - setWeight: 10
      - analysis: {checks: %[8]s}
      - setWeight: 50
      - analysis: {checks: %[8]s}
`

// newCase makes a namespace and, in it, the App name (env and checks as appManifest
// takes them), and waits until it is Ready with its route accepted.
func (e *env) newCase(t *testing.T, name, env, checks string) *rolloutCase {
	t.Helper()
	return e.newCaseIn(t, framework.Namespace(t), name, env, checks)
}

// newCaseIn is newCase in namespace ns.
func (e *env) newCaseIn(t *testing.T, ns, name, env, checks string) *rolloutCase {
	t.Helper()
	c := &rolloutCase{t: t, e: e, ns: ns, name: name, host: name + "." + ns + ".example.com"}
	realnode.Apply(t, fmt.Appendf(nil, appManifest, ns, name, e.demoapp, env, c.host, e.tns, realnode.TraefikGateway, checks))
	c.watch("Ready, its route accepted", func(app *appv1.App) bool {
		return meta.IsStatusConditionTrue(app.Status.Conditions, appv1.ConditionReady) &&
			meta.IsStatusConditionTrue(app.Status.Conditions, appv1.ConditionRouteAccepted)
	})
	c.record()
	return c
}

// startLoad starts the pod load-NAME: demoapp load, rps requests a second for seconds,
// to Traefik with the App's Host, once Traefik serves the App (the App's Ready and
// RouteAccepted say its pods and route are there; Traefik reads the Service's endpoints
// apart): ten answers in a row through the port-forward to Traefik. It waits until
// Prometheus counts the load.
func (c *rolloutCase) startLoad(seconds int) {
	t := c.t
	t.Helper()
	inARow := 0
	framework.Eventually(t, time.Minute, func() (bool, error) {
		if !servedBy(c.e.traefikFwd, c.host, "version=1") {
			inARow = 0
			return false, nil
		}
		inARow++
		return inARow == 10, nil
	})
	c.loadPod = "load-" + c.name
	realnode.StartLoad(t, c.ns, c.loadPod, c.e.demoapp, c.e.traefikWeb, c.host, rps, seconds)
	// The stable has its share of the load in Prometheus before the rollout starts.
	framework.Eventually(t, 2*time.Minute, func() (bool, error) {
		return c.e.scalar(t, fmt.Sprintf(`sum(increase(traefik_service_requests_total{service=~"%s-%s-.*"}[10s]))`, c.ns, c.name)) >= rps, nil
	})
	t.Logf("%s: the load (%d requests a second for %ds) reaches the App", c.name, rps, seconds)
}

// loadSummary waits until the load pod has ended and returns its summary.
func (c *rolloutCase) loadSummary() realnode.LoadSummary {
	t := c.t
	t.Helper()
	s, line := realnode.LoadResult(t, c.ns, c.loadPod, 3*time.Minute)
	t.Logf("%s: the load: %s", c.name, line)
	c.traffic()
	return s
}

// traffic logs what Traefik counted of the App's requests, by service and code, and
// when the counts of the answers other than 200 grew.
func (c *rolloutCase) traffic() {
	t := c.t
	t.Helper()
	sel := fmt.Sprintf(`service=~"%s-%s-.*"`, c.ns, c.name)
	v, _, err := c.e.prom.QueryRange(context.Background(), `sum by (service, code) (traefik_service_requests_total{`+sel+`})`,
		promv1.Range{Start: time.Now().Add(-3 * time.Minute), End: time.Now(), Step: time.Second})
	if err != nil {
		t.Logf("%s: Traefik's counts: %v", c.name, err)
		return
	}
	m, _ := v.(model.Matrix)
	for _, series := range m {
		var changes []string
		for i, p := range series.Values {
			if i > 0 && p.Value != series.Values[i-1].Value && series.Metric["code"] != "200" {
				changes = append(changes, fmt.Sprintf("%s=%v", p.Timestamp.Time().Format("15:04:05"), p.Value))
			}
		}
		last := series.Values[len(series.Values)-1]
		t.Logf("%s: Traefik: service %s code %s: %v (first seen %s) %s", c.name, series.Metric["service"], series.Metric["code"], last.Value,
			series.Values[0].Timestamp.Time().Format("15:04:05"), strings.Join(changes, " "))
	}
}

// rollTo gives the App the pod environment env: a new version, rolled out.
func (c *rolloutCase) rollTo(env string) {
	t := c.t
	t.Helper()
	var list []corev1.EnvVar
	for _, kv := range strings.Split(strings.Trim(env, "[]"), "}, {") {
		kv = strings.Trim(kv, "{} ")
		name, value, _ := strings.Cut(kv, ", value: ")
		list = append(list, corev1.EnvVar{Name: strings.TrimPrefix(name, "name: "), Value: strings.Trim(value, `"`)})
	}
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"deploymentTemplate": map[string]any{"env": list}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := framework.AppClient(t).AppcontrollerV1().Apps(c.ns).Patch(context.Background(), c.name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("patching the App's env to %s: %v", env, err)
	}
	t.Logf("%s: rolling out %s", c.name, env)
}

// record polls the App until the test ends, logging with the time each change of the
// rollout's phase, step and weight and each new measurement of a check (kept in
// c.measured).
func (c *rolloutCase) record() {
	t := c.t
	apps := framework.AppClient(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		var lastState string
		for ctx.Err() == nil {
			app, err := apps.AppcontrollerV1().Apps(c.ns).Get(ctx, c.name, metav1.GetOptions{})
			if err == nil && app.Status.Rollout != nil {
				r := app.Status.Rollout
				now := time.Now().Format("15:04:05.000")
				if state := fmt.Sprintf("%s step %d weight %d", r.Phase, r.CurrentStepIndex, r.CanaryWeight); state != lastState {
					lastState = state
					t.Logf("%s %s: rollout %s", now, c.name, state)
				}
				for _, st := range r.Analysis {
					if st.MeasuredAt == nil {
						continue
					}
					m := fmt.Sprintf("step %d check %s %s: value %q threshold %q (passed %d, failed %d, inconclusive %d): %s",
						st.Step, st.Name, st.Phase, st.Value, st.Threshold, st.Passed, st.Failed, st.Inconclusive, st.Message)
					c.mu.Lock()
					seen := slices.Contains(c.measured, m)
					if !seen {
						c.measured = append(c.measured, m)
					}
					c.mu.Unlock()
					if !seen {
						t.Logf("%s %s: measured at %s: %s", now, c.name, st.MeasuredAt.Format("15:04:05"), m)
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
}

// watch polls the App until done says so (its status at its generation).
func (c *rolloutCase) watch(what string, done func(app *appv1.App) bool) *appv1.App {
	t := c.t
	t.Helper()
	apps := framework.AppClient(t)
	var last *appv1.App
	framework.Eventually(t, rolloutTimeout, func() (bool, error) {
		app, err := apps.AppcontrollerV1().Apps(c.ns).Get(context.Background(), c.name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = app
		return app.Status.ObservedGeneration == app.Generation && done(app), nil
	})
	t.Logf("%s %s: %s", time.Now().Format("15:04:05.000"), c.name, what)
	return last
}

// waitAborted waits until the rollout is aborted.
func (c *rolloutCase) waitAborted() *appv1.App {
	c.t.Helper()
	return c.watch("aborted", func(app *appv1.App) bool {
		r := app.Status.Rollout
		return r != nil && r.Phase == appv1.RolloutAborted
	})
}

// wantAbort checks an App aborted by check at its first analysis step (step 1), within
// two measurements: the rollout's abort (reason AnalysisFailed, the message naming the
// check and holding each of want), the check's state in status.rollout.analysis, Ready
// False and Stalled True for RolloutAborted, and one Warning Event saying the same. It
// returns the check's state.
func (c *rolloutCase) wantAbort(app *appv1.App, check string, want []string) appv1.CheckStatus {
	t := c.t
	t.Helper()
	r := app.Status.Rollout
	t.Logf("%s: aborted: %s: %s", c.name, r.AbortReason, r.AbortMessage)
	if r.AbortReason != appv1.ReasonAnalysisFailed || r.CurrentStepIndex != 1 || !strings.Contains(r.AbortMessage, fmt.Sprintf("check %q failed", check)) {
		t.Errorf("%s: abort %s at step %d: %q; want AnalysisFailed at step 1 naming check %q", c.name, r.AbortReason, r.CurrentStepIndex, r.AbortMessage, check)
	}
	for _, w := range want {
		if !strings.Contains(r.AbortMessage, w) {
			t.Errorf("%s: the abort message %q does not say %q", c.name, r.AbortMessage, w)
		}
	}
	var st appv1.CheckStatus
	if len(r.Analysis) != 1 || r.Analysis[0].Name != check {
		t.Fatalf("%s: status.rollout.analysis %+v, want the one check %s", c.name, r.Analysis, check)
	}
	st = r.Analysis[0]
	if st.Phase != appv1.AnalysisFailed || st.Step != 1 || st.Passed != 0 || st.Value == "" || st.Threshold == "" || st.MeasuredAt == nil ||
		!strings.Contains(r.AbortMessage, st.Value) || !strings.Contains(r.AbortMessage, st.Threshold) {
		t.Errorf("%s: status.rollout.analysis[0] %+v; want the failed measurement the abort message names", c.name, st)
	}
	// The first measurement that judges fails (a webhook gate's failureLimit adds its
	// own failures); before it, only windows that held too few of the canary's requests
	// (fewer than minRequests: inconclusive, neither a pass nor an abort). On an idle
	// machine the first window judges; on a loaded one the load's pod and Traefik may
	// fall behind, and the product holds the step rather than judge too little.
	if st.Failed == 0 {
		t.Errorf("%s: %d failed and %d inconclusive measurements; want a failed one", c.name, st.Failed, st.Inconclusive)
	}
	if st.Inconclusive > 0 {
		c.mu.Lock()
		for _, m := range c.measured {
			if strings.Contains(m, " Inconclusive: ") && !strings.Contains(m, "too little traffic to judge") {
				t.Errorf("%s: an inconclusive measurement for another reason than too little traffic: %s", c.name, m)
			}
		}
		c.mu.Unlock()
		t.Logf("%s: %d windows with too few canary requests before the failed measurement", c.name, st.Inconclusive)
	}
	if got := framework.AppCondition(app, appv1.ConditionReady); got != "False/"+appv1.ReasonRolloutAborted {
		t.Errorf("%s: Ready %s, want False/RolloutAborted", c.name, got)
	}
	if got := framework.AppCondition(app, appv1.ConditionStalled); got != "True/"+appv1.ReasonRolloutAborted {
		t.Errorf("%s: Stalled %s, want True/RolloutAborted", c.name, got)
	}
	event := framework.WaitEvent(t, framework.Client(t), c.ns, "App", c.name, "Warning "+appv1.ReasonRolloutAborted, 30*time.Second)
	if !strings.Contains(event, fmt.Sprintf("check %q failed", check)) || !strings.Contains(event, st.Value) {
		t.Errorf("%s: the Warning Event %q does not name the check and its value", c.name, event)
	}
	t.Logf("%s: Event: %s", c.name, event)
	return st
}

// wantStepEvents checks the Events of the steps ended: n, of which analyses ended how.
func (c *rolloutCase) wantStepEvents(n int, how string, analyses int) {
	t := c.t
	t.Helper()
	var steps, ended int
	for _, ev := range framework.Events(t, framework.Client(t), c.ns, "App", c.name) {
		if strings.HasPrefix(ev, "Normal "+appv1.EventReasonRolloutStep+" ") {
			steps++
			if strings.Contains(ev, "(analysis ") && strings.Contains(ev, how) {
				ended++
			}
			t.Logf("%s: Event: %s", c.name, ev)
		}
	}
	if steps != n || ended != analyses {
		t.Errorf("%s: %d step Events, %d of analyses ended %s; want %d, %d", c.name, steps, ended, how, n, analyses)
	}
}

// stepEvents counts the App's RolloutStep Events that say each of want.
func (c *rolloutCase) stepEvents(want ...string) int {
	c.t.Helper()
	n := 0
	for _, ev := range framework.Events(c.t, framework.Client(c.t), c.ns, "App", c.name) {
		if strings.HasPrefix(ev, "Normal "+appv1.EventReasonRolloutStep+" ") && !slices.ContainsFunc(want, func(w string) bool { return !strings.Contains(ev, w) }) {
			n++
		}
	}
	return n
}

// wantNotifications checks the notifications the App's rollout sent: exactly events,
// once each, in order, after a quiet moment (the notifier sends from its own goroutine).
func (c *rolloutCase) wantNotifications(events []string) {
	t := c.t
	t.Helper()
	want := strings.Join(events, ",")
	got := ""
	framework.Eventually(t, 30*time.Second, func() (bool, error) {
		got = strings.Join(c.e.hooks.events(c.ns, c.name), ",")
		return got == want, nil
	})
	time.Sleep(notifyQuietAfter)
	if got = strings.Join(c.e.hooks.events(c.ns, c.name), ","); got != want {
		t.Errorf("%s: notifications %s, want %s", c.name, got, want)
	}
	t.Logf("%s: notifications: %s", c.name, got)
}

// stableVersion returns VERSION of the stable Deployment's container.
func (c *rolloutCase) stableVersion() string {
	t := c.t
	t.Helper()
	d, err := framework.Client(t).AppsV1().Deployments(c.ns).Get(context.Background(), c.name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting the Deployment %s: %v", c.name, err)
	}
	for _, v := range d.Spec.Template.Spec.Containers[0].Env {
		if v.Name == "VERSION" {
			return v.Value
		}
	}
	return ""
}

// status logs `kubectl app status` of the App.
func (c *rolloutCase) status(when string) {
	c.t.Helper()
	out, code := realnode.KubectlApp(c.t, "status", c.name, "-n", c.ns)
	c.t.Logf("%s: kubectl app status %s -n %s (%s), exit %d:\n%s", c.name, c.name, c.ns, when, code, out)
}

// servedBy reports whether a GET of base/ with Host host is answered by demoapp, its body
// saying want (an answer 500 of its ERROR_RATE is one of its answers too; Traefik's own
// 404, 500 or 503 say nothing of version).
func servedBy(base, host, want string) bool {
	req, err := http.NewRequest(http.MethodGet, base+"/", nil)
	if err != nil {
		return false
	}
	req.Host = host
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return strings.Contains(string(body), want)
}

// scalar returns the value of a query of one sample (-1: none).
func (e *env) scalar(t *testing.T, q string) float64 {
	t.Helper()
	v, _, err := e.prom.Query(context.Background(), q, time.Now())
	if err != nil {
		t.Fatalf("query %s: %v", q, err)
	}
	vec, ok := v.(model.Vector)
	if !ok || len(vec) != 1 {
		return -1
	}
	return float64(vec[0].Value)
}

// percent parses a value such as "89.6%".
func percent(t *testing.T, s string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
	if err != nil {
		t.Fatalf("value %q: not a percent", s)
	}
	return f
}

// receiver is the test's server on 127.0.0.1 for the controller's webhooks: /notify
// collects the rollout notifications by App; /gate answers 500 to a webhook gate, and
// counts its calls by App.
type receiver struct {
	mu            sync.Mutex
	notifications map[string][]string // namespace/app -> events
	gate          map[string]int      // namespace/app -> calls
}

func startReceiver(t *testing.T) (*receiver, string) {
	t.Helper()
	r := &receiver{notifications: map[string][]string{}, gate: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		data, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		switch req.URL.Path {
		case "/gate":
			var g analysis.WebhookRequest
			if err := json.Unmarshal(data, &g); err != nil {
				t.Errorf("a gate's request %q: %v", data, err)
			}
			r.gate[g.Namespace+"/"+g.App]++
			w.WriteHeader(http.StatusInternalServerError)
		case "/notify":
			var n analysis.Notification
			if err := json.Unmarshal(data, &n); err != nil {
				t.Errorf("notification %q: %v", data, err)
			}
			r.notifications[n.Namespace+"/"+n.App] = append(r.notifications[n.Namespace+"/"+n.App], n.Event)
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(srv.Close)
	return r, srv.URL
}

func (r *receiver) events(ns, app string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.notifications[ns+"/"+app])
}

func (r *receiver) gateCalls(ns, app string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gate[ns+"/"+app]
}

package analysis

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controllermanager"
	"github.com/app-controller/app-controller/test/harness"
	"github.com/app-controller/app-controller/test/integration/apptest"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// scaleAppsEnv sets the number of Apps of TestAnalysisScale (default 10, what make
// integration runs); docs/performance.md has its figures at 100, 300 and 1000.
const scaleAppsEnv = "APP_CONTROLLER_ANALYSIS_APPS"

// scaleIntervalEnv sets the interval of its checks (default 10s, the floor; 1m is the
// checks' default).
const scaleIntervalEnv = "APP_CONTROLLER_ANALYSIS_INTERVAL"

// queryCounter is a reverse proxy on loopback in front of Prometheus that records when
// each query was asked, by the App and check it is of.
type queryCounter struct {
	mu sync.Mutex
	// at: "app/check" -> the times its queries were asked.
	at    map[string][]time.Time
	total int
}

// The check a query is of: the built-in success rate's selects the canary's pods as
// pod=~"APP-deploy-canary-..." (and is tagged with label "m"); the template's as
// pod=~"APP-deploy-canary-[a-z0-9]+...".
var queryApp = regexp.MustCompile(`pod=~"([a-z0-9-]+?)-deploy-canary`)

func (q *queryCounter) record(query string) {
	m := queryApp.FindStringSubmatch(query)
	check := "template"
	if strings.Contains(query, `"m"`) {
		check = "success-rate"
	}
	key := "?/" + check
	if m != nil {
		key = m[1] + "/" + check
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.at[key] = append(q.at[key], time.Now())
	q.total++
}

// count returns the queries asked from from to to.
func (q *queryCounter) count(from, to time.Time) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for _, times := range q.at {
		for _, at := range times {
			if !at.Before(from) && at.Before(to) {
				n++
			}
		}
	}
	return n
}

// startQueryCounter proxies promURL and returns the proxy's URL.
func startQueryCounter(t *testing.T, promURL string) (*queryCounter, string) {
	t.Helper()
	target, err := url.Parse(promURL)
	if err != nil {
		t.Fatal(err)
	}
	q := &queryCounter{at: map[string][]time.Time{}}
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if strings.HasSuffix(req.URL.Path, "/api/v1/query") {
			// client_golang POSTs the query as a form: read it, and hand the body on.
			body, err := io.ReadAll(req.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			req.Body = io.NopCloser(bytes.NewReader(body))
			form, _ := url.ParseQuery(string(body))
			query := form.Get("query")
			if query == "" {
				query = req.URL.Query().Get("query")
			}
			q.record(query)
		}
		proxy.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	return q, srv.URL
}

// processCPU reads process_cpu_seconds_total from a /metrics endpoint.
func processCPU(t *testing.T, metricsURL string) float64 {
	t.Helper()
	resp, err := http.Get(metricsURL) //nolint:gosec,noctx // the test's Prometheus on loopback
	if err != nil {
		t.Fatalf("reading %s: %v", metricsURL, err)
	}
	defer resp.Body.Close()
	s := bufio.NewScanner(resp.Body)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "process_cpu_seconds_total "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("%s has no process_cpu_seconds_total", metricsURL)
	return 0
}

// selfCPU returns the CPU time of this process: the controller runs in it.
func selfCPU(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestAnalysisScale puts N Apps (APP_CONTROLLER_ANALYSIS_APPS, default 10) at an
// analysis step of two checks at the 10 s floor (APP_CONTROLLER_ANALYSIS_INTERVAL, 10s
// or more), a built-in success rate and an
// AnalysisTemplate's query, against the real Prometheus behind a counting proxy, and
// measures over three intervals: the queries (each App's checks ask at most one query
// each per interval, never two within an interval, and none is left out), the
// controller's writes (status writes, one per App per measurement of its checks due
// together; nothing else but Events), the CPU of the test process (the controller and
// the test's exporter) and of Prometheus. The figures go to docs/performance.md.
func TestAnalysisScale(t *testing.T) {
	n := 10
	if v := os.Getenv(scaleAppsEnv); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive number", scaleAppsEnv, v)
		}
	}
	interval := 10 * time.Second
	if v := os.Getenv(scaleIntervalEnv); v != "" {
		var err error
		if interval, err = time.ParseDuration(v); err != nil || interval < 10*time.Second {
			t.Fatalf("%s=%q: want a duration of 10s or more", scaleIntervalEnv, v)
		}
	}
	c := apptest.NewClients(t)
	ctx := context.Background()
	ns := framework.Namespace(t)
	pods, target := startFakePods(t)
	promURL := framework.StartPrometheus(t, target)
	queries, proxied := startQueryCounter(t, promURL)
	opts := controllermanager.NewOptions()
	opts.PrometheusURL = proxied
	m := apptest.StartManagerWith(t, opts)

	if _, err := c.App.AppcontrollerV1().AnalysisTemplates(ns).Create(ctx, &appv1.AnalysisTemplate{ObjectMeta: metav1.ObjectMeta{Name: "error-ratio"},
		Spec: errorRatio(ptr.To("5.."))}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	name := func(i int) string { return fmt.Sprintf("a%04d", i) }
	err := harness.Parallel(ctx, n, 10, func(ctx context.Context, i int) error {
		app := apptest.RolloutApp(ns, name(i), 1, apptest.SetWeight(50), appv1.CanaryStep{Analysis: &appv1.AnalysisStep{Checks: []appv1.AnalysisCheck{
			{Name: "success-rate", SuccessRate: &appv1.SuccessRateCheck{Min: ptr.To("99")}, Source: appv1.AnalysisSourcePods,
				Interval: &metav1.Duration{Duration: interval}, Count: ptr.To[int32](100)},
			{Name: "template", TemplateRef: &appv1.AnalysisTemplateRef{Name: "error-ratio"}, Interval: &metav1.Duration{Duration: interval}, Count: ptr.To[int32](100)},
		}}})
		pods.serve(ns, name(i)+"-deploy-canary-5d8f9c-x7k2p", 20, 0)
		_, err := c.App.AppcontrollerV1().Apps(ns).Create(ctx, app, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	inStep := func(step int32) {
		framework.Eventually(t, 2*time.Minute+time.Duration(n)*400*time.Millisecond, func() (bool, error) {
			list, err := c.App.AppcontrollerV1().Apps(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			done := 0
			for i := range list.Items {
				a := &list.Items[i]
				r := a.Status.Rollout
				switch {
				case step < 0 && a.Status.ObservedGeneration == a.Generation && framework.AppCondition(a, appv1.ConditionReady) == "True/Available":
					done++
				case step >= 0 && r != nil && r.Canary != nil && r.CurrentStepIndex == step && len(r.Analysis) == 2 && r.Analysis[0].Passed > 0:
					done++
				}
			}
			return done == n, nil
		})
	}
	inStep(-1)
	start := time.Now()
	err = harness.Parallel(ctx, n, 10, func(ctx context.Context, i int) error {
		app, err := c.App.AppcontrollerV1().Apps(ns).Get(ctx, name(i), metav1.GetOptions{})
		if err != nil {
			return err
		}
		app.Spec.DeploymentTemplate.Image = "nginx:2"
		_, err = c.App.AppcontrollerV1().Apps(ns).Update(ctx, app, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	inStep(1)
	t.Logf("%d Apps at their analysis step, each measured once, %.1fs after the change", n, time.Since(start).Seconds())

	// Three intervals of the steady analysis.
	const intervals = 3
	from := time.Now()
	writesFrom := len(m.WritesIn(ns))
	cpuFrom, promFrom := selfCPU(t), processCPU(t, promURL+"/metrics")
	time.Sleep(intervals * interval)
	to := time.Now()
	cpu, prom := selfCPU(t)-cpuFrom, processCPU(t, promURL+"/metrics")-promFrom
	writes := m.WritesIn(ns)[writesFrom:]
	asked := queries.count(from, to)
	window := to.Sub(from)

	// The status writes, and the Events (the recorder sends them from its own goroutine,
	// and may still send the rollout's step Events of before the window).
	statusWrites, eventWrites := 0, 0
	var others []string
	for _, w := range writes {
		switch {
		case strings.HasSuffix(w, "/status"):
			statusWrites++
		case strings.Contains(w, "/events"):
			eventWrites++
		default:
			others = append(others, w)
		}
	}
	// Each App's check asks at most one query per interval, and is asked in the window.
	queries.mu.Lock()
	keys := make([]string, 0, len(queries.at))
	for k := range queries.at {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(keys) != 2*n {
		t.Errorf("queries of %d App checks, want %d (2 checks of %d Apps): %v", len(keys), 2*n, n, keys)
	}
	var gaps []time.Duration
	for _, k := range keys {
		times := queries.at[k]
		for i := 1; i < len(times); i++ {
			gap := times[i].Sub(times[i-1])
			gaps = append(gaps, gap)
			// A measurement's time is truncated to the second in the status, and a
			// query reaches the proxy a little after the sync's clock read (more on a
			// loaded machine): the bound is on a second measurement in the same
			// interval, which would be half of it or less apart.
			if gap <= interval/2 {
				t.Errorf("%s: two queries %s apart, within its interval (%s)", k, gap, interval)
				break
			}
		}
		inWindow := 0
		for _, at := range times {
			if !at.Before(from) && at.Before(to) {
				inWindow++
			}
		}
		// At most one per interval; at least one: a check is never left out. (Fewer
		// than one per interval is what a saturated controller does: its syncs queue,
		// docs/performance.md.)
		if inWindow < 1 || inWindow > intervals+1 {
			t.Errorf("%s: %d queries in %s, want from 1 to %d (at most one per interval)", k, inWindow, window.Round(time.Second), intervals+1)
		}
	}
	queries.mu.Unlock()
	if len(others) > 0 {
		t.Errorf("writes other than status writes and Events during the analysis: %v", others)
	}
	slices.Sort(gaps)
	if len(gaps) > 0 {
		t.Logf("the time between two queries of an App's check: min %s, median %s, max %s (interval %s)",
			gaps[0].Round(10*time.Millisecond), gaps[len(gaps)/2].Round(10*time.Millisecond), gaps[len(gaps)-1].Round(10*time.Millisecond), interval)
	}
	perInterval := func(x float64) float64 { return x / window.Seconds() * interval.Seconds() }
	t.Logf("N=%d Apps, 2 checks of %s each, over %s: %d queries (%.1f per interval, %.2f per App per interval, %.1f/s); "+
		"%d status writes (%.1f per interval, %.2f per App per interval), %d Event writes; "+
		"CPU of the test process (controller and exporter) %.2fs (%.3f cores), of Prometheus %.2fs (%.3f cores)",
		n, interval, window.Round(time.Second), asked, perInterval(float64(asked)), perInterval(float64(asked))/float64(n), float64(asked)/window.Seconds(),
		statusWrites, perInterval(float64(statusWrites)), perInterval(float64(statusWrites))/float64(n), eventWrites,
		cpu.Seconds(), cpu.Seconds()/window.Seconds(), prom, prom/window.Seconds())
}

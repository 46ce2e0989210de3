package plugin

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// newTestDashboard serves the dashboard of objects (fake clients) on a test server
// and returns its URL (without the token) and the session token.
func newTestDashboard(t *testing.T, objects ...*unstructured.Unstructured) (*httptest.Server, string) {
	t.Helper()
	f := newFakes(t, objects)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c, err := newDashCache(f.clients(), testNamespace)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.start(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(nil)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	s, err := newDashServer(f.clients(), c, "secret", port, loopbackHosts("127.0.0.1", port), "namespace "+testNamespace,
		func() time.Time { return time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC) })
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = s.handler()
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, "secret"
}

// answer is a response of the test server: its code, headers and body.
type answer struct {
	StatusCode int
	Header     http.Header
	body       string
}

// do sends a request to the test server and returns its answer.
func do(t *testing.T, req *http.Request) answer {
	t.Helper()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{StatusCode: resp.StatusCode, Header: resp.Header, body: string(body)}
}

func TestDashboardGuard(t *testing.T) {
	srv, token := newTestDashboard(t, readyApp("web", "web-deploy", "web-svc"))
	cookie := "kubectl-app-dashboard-" + strings.TrimPrefix(srv.URL[strings.LastIndex(srv.URL, ":"):], ":") + "=" + token
	tests := []struct {
		name                   string
		method, path, host     string
		header                 map[string]string
		body                   string
		wantCode               int
		wantInBody, wantCookie string
	}{
		{name: "no token", method: "GET", path: "/", wantCode: 401, wantInBody: "no session token"},
		{name: "wrong token", method: "GET", path: "/?token=guess", wantCode: 403},
		{name: "token", method: "GET", path: "/?token=" + token, wantCode: 303, wantCookie: "HttpOnly; SameSite=Strict"},
		{name: "wrong cookie", method: "GET", path: "/", header: map[string]string{"Cookie": cookie + "x"}, wantCode: 401},
		{name: "cookie", method: "GET", path: "/", header: map[string]string{"Cookie": cookie}, wantCode: 200, wantInBody: `<script src="/static/app.js">`},
		{name: "DNS rebinding", method: "GET", path: "/", host: "attacker.example:80", header: map[string]string{"Cookie": cookie}, wantCode: 403},
		{name: "foreign origin", method: "GET", path: "/", header: map[string]string{"Cookie": cookie, "Origin": "http://attacker.example"}, wantCode: 403},
		{name: "script", method: "GET", path: "/static/app.js", header: map[string]string{"Cookie": cookie}, wantCode: 200, wantInBody: "EventSource"},
		{name: "App page", method: "GET", path: "/apps/" + testNamespace + "/web", header: map[string]string{"Cookie": cookie}, wantCode: 200, wantInBody: `id="action-restart"`},
		{name: "App not found", method: "GET", path: "/apps/" + testNamespace + "/nope", header: map[string]string{"Cookie": cookie}, wantCode: 404, wantInBody: "not found"},
		{name: "form post from elsewhere", method: "POST", path: "/apps/" + testNamespace + "/web/actions", body: "action=restart",
			header: map[string]string{"Cookie": cookie, "Content-Type": "application/x-www-form-urlencoded"}, wantCode: 403, wantInBody: "X-Requested-By"},
		{name: "action on an App gone", method: "POST", path: "/apps/" + testNamespace + "/web/actions", body: "action=promote",
			header:   map[string]string{"Cookie": cookie, "Content-Type": "application/x-www-form-urlencoded", "X-Requested-By": "kubectl-app-dashboard"},
			wantCode: 404, wantInBody: `error: App \"web\" not found in namespace`},
		{name: "unknown action", method: "POST", path: "/apps/" + testNamespace + "/web/actions", body: "action=delete",
			header:   map[string]string{"Cookie": cookie, "Content-Type": "application/x-www-form-urlencoded", "X-Requested-By": "kubectl-app-dashboard"},
			wantCode: 409, wantInBody: `unknown action \"delete\"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, srv.URL+tt.path, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			if tt.host != "" {
				req.Host = tt.host
			}
			resp := do(t, req)
			body := resp.body
			if resp.StatusCode != tt.wantCode {
				t.Errorf("code %d, want %d; body:\n%s", resp.StatusCode, tt.wantCode, body)
			}
			if !strings.Contains(body, tt.wantInBody) {
				t.Errorf("body does not contain %q:\n%s", tt.wantInBody, body)
			}
			if got := resp.Header.Get("Set-Cookie"); !strings.Contains(got, tt.wantCookie) {
				t.Errorf("Set-Cookie %q, want %q", got, tt.wantCookie)
			}
			if csp := resp.Header.Get("Content-Security-Policy"); csp != contentSecurityPolicy {
				t.Errorf("Content-Security-Policy %q", csp)
			}
			if resp.Header.Get("Access-Control-Allow-Origin") != "" {
				t.Error("a CORS header")
			}
		})
	}
}

// TestDashboardListStream reads the first event of the list's stream: every App's row.
func TestDashboardListStream(t *testing.T) {
	srv, token := newTestDashboard(t, readyApp("web", "web-deploy", "web-svc"), newApp("api", "api-deploy", ""))
	u, _ := url.Parse(srv.URL)
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/events/list", nil)
	req.Header.Set("Cookie", "kubectl-app-dashboard-"+u.Port()+"="+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	var event, data string
	for sc.Scan() && data == "" {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "event: "); ok {
			event = v
		}
		if v, ok := strings.CutPrefix(line, "data: "); ok {
			data = v
		}
	}
	var update rowUpdate
	if err := json.Unmarshal([]byte(data), &update); err != nil || event != "rows" {
		t.Fatalf("event %q, data %q: %v", event, data, err)
	}
	if !update.Snapshot || len(update.Rows) != 2 || update.Rows[0].Key != testNamespace+"/api" || update.Rows[1].Key != testNamespace+"/web" {
		t.Fatalf("first update %+v, want a snapshot of api and web", update)
	}
	for _, want := range []string{`data-state="ready"`, `<span class="badge true">Ready</span>`, `href="/apps/` + testNamespace + `/web"`} {
		if !strings.Contains(update.Rows[1].HTML, want) {
			t.Errorf("web's row does not contain %q:\n%s", want, update.Rows[1].HTML)
		}
	}
}

func TestProgressView(t *testing.T) {
	steps := []appv1.CanaryStep{{SetWeight: ptr.To[int32](25)}, {Pause: &appv1.CanaryPause{}}, {SetWeight: ptr.To[int32](50)}}
	app := func(r *appv1.RolloutStatus) *appv1.App {
		return &appv1.App{Spec: appv1.AppSpec{Rollout: &appv1.Rollout{Canary: &appv1.CanaryStrategy{Steps: steps}}}, Status: appv1.AppStatus{Rollout: r}}
	}
	canary := &appv1.RolloutVersion{PodTemplateHash: "abc"}
	tests := []struct {
		name         string
		app          *appv1.App
		wantSegments string
		wantText     string
	}{
		{name: "no strategy", app: &appv1.App{}},
		{name: "not reported", app: app(nil), wantSegments: "", wantText: "not reported by the controller yet"},
		{name: "healthy", app: app(&appv1.RolloutStatus{Phase: appv1.RolloutHealthy}), wantSegments: "done done done", wantText: "Healthy, no rollout in progress"},
		{name: "paused", app: app(&appv1.RolloutStatus{Phase: appv1.RolloutPaused, CurrentStepIndex: 1, CanaryWeight: 25, Canary: canary}),
			wantSegments: "done current todo", wantText: "Paused, step 2 of 3 (pause until promoted), canary weight 25%"},
		{name: "promoting", app: app(&appv1.RolloutStatus{Phase: appv1.RolloutProgressing, CurrentStepIndex: 3, CanaryWeight: 100, Canary: canary}),
			wantSegments: "done done done", wantText: "Progressing, past the last of 3 steps: promoting"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newProgressView(tt.app)
			if p == nil {
				if tt.wantText != "" {
					t.Fatal("no progress")
				}
				return
			}
			if got := strings.Join(p.Segments, " "); got != tt.wantSegments || p.Text != tt.wantText {
				t.Errorf("segments %q, text %q; want %q, %q", got, p.Text, tt.wantSegments, tt.wantText)
			}
		})
	}
}

// TestBlueGreenProgressView shows a blue-green rollout by its stages and the side the
// App's Service selects, instead of a canary's steps and weight.
func TestBlueGreenProgressView(t *testing.T) {
	app := func(r *appv1.RolloutStatus) *appv1.App {
		return &appv1.App{Spec: appv1.AppSpec{Rollout: &appv1.Rollout{BlueGreen: &appv1.BlueGreenStrategy{}}}, Status: appv1.AppStatus{Rollout: r}}
	}
	canary := &appv1.RolloutVersion{PodTemplateHash: "abc"}
	tests := []struct {
		name                   string
		r                      *appv1.RolloutStatus
		wantSegments, wantText string
		wantLabels             string
		// checks: with prePromotionAnalysis (smoke, load), at the same stages.
		checks bool
	}{
		{name: "healthy", r: &appv1.RolloutStatus{Phase: appv1.RolloutHealthy},
			wantSegments: "done done done done", wantText: "Healthy, no rollout in progress", wantLabels: "Active Preview"},
		{name: "waiting for the switch", r: &appv1.RolloutStatus{Phase: appv1.RolloutPaused, CurrentStepIndex: 1, Canary: canary},
			wantSegments: "done current todo todo", wantText: "Paused, blue-green stage switch (2 of 5), the old version active, the new one waiting for the switch",
			wantLabels: "Active Preview"},
		{name: "waiting for the switch and its checks, one passed", r: &appv1.RolloutStatus{Phase: appv1.RolloutPaused, CurrentStepIndex: 1, Canary: canary,
			Analysis: []appv1.CheckStatus{{Name: "smoke", Step: 1, Passed: 1}, {Name: "load", Step: 1}}}, checks: true, wantSegments: "done current todo todo",
			wantText:   "Paused, blue-green stage switch (2 of 5), the old version active, the new one waiting for the switch and its checks before it (load)",
			wantLabels: "Active Preview"},
		{name: "switched, with checks before it", r: &appv1.RolloutStatus{Phase: appv1.RolloutProgressing, CurrentStepIndex: 3, CanaryWeight: 100, Canary: canary},
			checks: true, wantSegments: "done done done current", wantText: "Progressing, blue-green stage scale-down delay (4 of 5), the new version active",
			wantLabels: "Previous Active"},
		{name: "switched", r: &appv1.RolloutStatus{Phase: appv1.RolloutProgressing, CurrentStepIndex: 3, CanaryWeight: 100, Canary: canary},
			wantSegments: "done done done current", wantText: "Progressing, blue-green stage scale-down delay (4 of 5), the new version active",
			wantLabels: "Previous Active"},
		{name: "aborted at the switch", r: &appv1.RolloutStatus{Phase: appv1.RolloutAborted, CurrentStepIndex: 1, Canary: canary},
			wantSegments: "done current todo todo", wantText: "Aborted, blue-green stage switch (2 of 5), the old version active", wantLabels: "Active Preview"},
		{name: "promoting", r: &appv1.RolloutStatus{Phase: appv1.RolloutProgressing, CurrentStepIndex: 4, CanaryWeight: 100, Canary: canary},
			wantSegments: "done done done done", wantText: "Progressing, blue-green stage promotion (5 of 5), the new version active", wantLabels: "Previous Active"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := app(tt.r)
			if tt.checks {
				a.Spec.Rollout.BlueGreen.PrePromotionAnalysis = &appv1.AnalysisStep{Checks: []appv1.AnalysisCheck{{Name: "smoke"}, {Name: "load"}}}
			}
			v := newRolloutView(&dashCache{}, a)
			if v == nil {
				t.Fatal("no rollout section")
			}
			p := v.Progress
			if got := strings.Join(p.Segments, " "); got != tt.wantSegments || p.Text != tt.wantText {
				t.Errorf("segments %q, text %q; want %q, %q", got, p.Text, tt.wantSegments, tt.wantText)
			}
			if got := v.StableLabel + " " + v.CanaryLabel; got != tt.wantLabels {
				t.Errorf("labels %q, want %q", got, tt.wantLabels)
			}
			if len(v.Steps) != 4 || v.Steps[1].Text != "switch" {
				t.Errorf("steps %+v, want the four stages", v.Steps)
			}
		})
	}
	// The page: the stage and the active side instead of a step and a weight, the two
	// versions under their blue-green names.
	srv, err := newDashServer(Clients{}, &dashCache{}, "token", 1, nil, "", time.Now)
	if err != nil {
		t.Fatal(err)
	}
	v := newRolloutView(&dashCache{}, app(tests[1].r))
	html, err := srv.render("detail", detailView{Rollout: v})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`<span class="step">stage switch</span> <span class="weight">old version active</span>`, "<dt>Active</dt>"} {
		if !strings.Contains(html, want) {
			t.Errorf("the page does not contain %q:\n%s", want, html)
		}
	}
	if strings.Contains(html, "weight 0%") || strings.Contains(html, "<dt>Canary</dt>") {
		t.Errorf("the page shows a canary's weight or name:\n%s", html)
	}
	// The restart button says how the new pods come.
	a := app(nil)
	a.Namespace, a.Name = "shop", "web"
	if got, want := restartQuestion(a), "Restart the pods of App shop/web? They roll out through the blue-green stages: a preview, then the switch."; got != want {
		t.Errorf("restart asks %q, want %q", got, want)
	}
}

// TestAnalysisTables renders the lists of objects of status.rollout as tables, whatever
// their fields: the analysis results of a controller newer than this plugin.
func TestAnalysisTables(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"rollout": map[string]any{
		"phase":        "Progressing",
		"recentStable": []any{"abc"},
		"analysis": []any{
			map[string]any{"name": "success-rate", "value": "99.2%", "passed": true},
			map[string]any{"name": "latency", "value": int64(180), "threshold": map[string]any{"max": "200ms"}},
		},
	}}}}
	tables := analysisTables(u)
	if len(tables) != 1 {
		t.Fatalf("%d tables, want 1: %+v", len(tables), tables)
	}
	got := tables[0]
	if got.Title != "analysis" || strings.Join(got.Columns, ",") != "name,passed,value,threshold" {
		t.Fatalf("table %q columns %q", got.Title, got.Columns)
	}
	if want := "latency,,180,{\"max\":\"200ms\"}"; strings.Join(got.Rows[1], ",") != want {
		t.Errorf("second row %q, want %q", strings.Join(got.Rows[1], ","), want)
	}
}

package bench

import (
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/app-controller/app-controller/internal/localcluster"
)

func TestParseAuditLine(t *testing.T) {
	tests := []struct {
		name   string
		line   string
		want   write
		wantOK bool
	}{
		{
			name:   "status patch",
			line:   `{"kind":"Event","level":"Metadata","stage":"ResponseComplete","verb":"patch","user":{"username":"bench:app-controller","groups":["system:masters"]},"objectRef":{"resource":"apps","namespace":"ns","name":"a","apiGroup":"appcontroller.k8s.io","apiVersion":"v1","subresource":"status"},"responseStatus":{"metadata":{},"code":200},"stageTimestamp":"2020-11-23T01:00:00.123456Z"}`,
			want:   write{user: "bench:app-controller", writer: "app-controller", kind: "patch apps/status", code: 200, at: time.Date(2020, 11, 23, 1, 0, 0, 123456000, time.UTC)},
			wantOK: true,
		},
		{
			name:   "event create",
			line:   `{"verb":"create","user":{"username":"u"},"objectRef":{"resource":"events","namespace":"ns"},"responseStatus":{"code":201},"stageTimestamp":"2020-11-23T01:00:01Z"}`,
			want:   write{user: "u", writer: "u", kind: "create events", code: 201, at: time.Date(2020, 11, 23, 1, 0, 1, 0, time.UTC)},
			wantOK: true,
		},
		{
			name:   "a controller of kube-controller-manager, as the admin user",
			line:   `{"verb":"create","user":{"username":"localcluster-admin"},"userAgent":"kube-controller-manager/v1.36.3 (linux/amd64) kubernetes/0123abc/replicaset-controller","objectRef":{"resource":"pods","namespace":"ns"},"responseStatus":{"code":201},"stageTimestamp":"2020-11-23T01:00:01Z"}`,
			want:   write{user: "localcluster-admin", writer: "kube-controller-manager:replicaset-controller", kind: "create pods", code: 201, at: time.Date(2020, 11, 23, 1, 0, 1, 0, time.UTC)},
			wantOK: true,
		},
		{
			name: "non-resource URL",
			line: `{"verb":"post","user":{"username":"u"},"requestURI":"/api","stageTimestamp":"2020-11-23T01:00:01Z"}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok, err := parseAuditLine([]byte(tc.line))
			if err != nil {
				t.Fatal(err)
			}
			if ok != tc.wantOK || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("parseAuditLine() = %+v, %v; want %+v, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

func TestAuditLogCount(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	line := func(user, verb, resource, at string) string {
		return `{"verb":"` + verb + `","user":{"username":"` + user + `"},"objectRef":{"resource":"` + resource + `"},"responseStatus":{"code":200},"stageTimestamp":"` + at + `"}` + "\n"
	}
	first := line("c", "create", "deployments", "2020-11-23T01:00:00Z") +
		line("f", "create", "deployments", "2020-11-23T01:00:00Z") +
		line("c", "create", "events", "2020-11-23T01:00:01Z")
	// A partial line (the apiserver still writing it) is read on the next read.
	partial := line("c", "patch", "services", "2020-11-23T01:00:02Z")
	if err := os.WriteFile(path, []byte(first+partial[:20]), 0o644); err != nil {
		t.Fatal(err)
	}
	a := newAuditLog(path)
	if err := a.read(); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(partial[20:] + line("c", "patch", "services", "2020-11-23T01:00:09Z")); err != nil {
		t.Fatal(err)
	}
	f.Close()

	from := time.Date(2020, 11, 23, 1, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		user     string
		from, to time.Time
		want     writeCounts
		total    int
		events   int
	}{
		{"controller, all", "c", from, from.Add(10 * time.Second), writeCounts{"create deployments": 1, "create events": 1, "patch services": 2}, 4, 1},
		{"controller, window", "c", from.Add(time.Second), from.Add(5 * time.Second), writeCounts{"create events": 1, "patch services": 1}, 2, 1},
		{"floor", "f", from, from.Add(10 * time.Second), writeCounts{"create deployments": 1}, 1, 0},
		{"nobody", "x", from, from.Add(10 * time.Second), writeCounts{}, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := a.count(tc.user, tc.from, tc.to)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) || got.total() != tc.total || got.events() != tc.events {
				t.Errorf("count() = %v (total %d, events %d); want %v (%d, %d)", got, got.total(), got.events(), tc.want, tc.total, tc.events)
			}
		})
	}
}

func TestParseProc(t *testing.T) {
	status := "Name:\tapp-controller\nVmPeak:\t 1300000 kB\nVmHWM:\t   51200 kB\nVmRSS:\t   40960 kB\nRssAnon:\t   30720 kB\nRssFile:\t   10240 kB\nThreads:\t9\n"
	s, err := parseProcStatus([]byte(status))
	if err != nil || s.rssMB != 40 || s.peakMB != 50 || s.anonMB != 30 {
		t.Errorf("parseProcStatus() = %+v, %v; want VmRSS 40, VmHWM 50, RssAnon 30", s, err)
	}
	if _, err := parseProcStatus([]byte("Name:\tx\n")); err == nil {
		t.Error("parseProcStatus() without VmRSS: no error")
	}
	tests := []struct {
		name string
		stat string
		want float64
	}{
		{"plain", "123 (app-controller) S 1 123 123 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 9 0 1000 0 0", 3},
		{"name with spaces and parentheses", "123 (a (b) c) R 1 123 123 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 1 0 0", 0.03},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseProcStat([]byte(tc.stat))
			if err != nil || got != tc.want {
				t.Errorf("parseProcStat() = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
	// This process's own figures are readable.
	if s, err := readProcStats(os.Getpid()); err != nil || s.rssMB <= 0 || s.peakMB < s.rssMB {
		t.Errorf("readProcStats(self) = %+v, %v", s, err)
	}
}

func TestCPUUse(t *testing.T) {
	busy, total, err := parseMachineStat([]byte("cpu  400 100 300 1000 200 50 50 0 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n"))
	if err != nil || busy != 9 || total != 21 {
		t.Errorf("parseMachineStat() = %v, %v, %v; want 9, 21, nil", busy, total, err)
	}
	if _, _, err := parseMachineStat([]byte("intr 1 2 3\n")); err == nil {
		t.Error("parseMachineStat() without a cpu line: no error")
	}
	from := cpuSample{procs: map[string]float64{"kube-apiserver": 10, "etcd": 5, "gone": 1}, busy: 100, total: 200}
	to := cpuSample{procs: map[string]float64{"kube-apiserver": 30, "etcd": 9, "app-controller": 3}, busy: 148, total: 260}
	u := cpuUse(from, to, 1000)
	want := map[string]float64{"kube-apiserver": 20, "etcd": 4, "total": 24}
	if !maps.Equal(u.MsPerApp, want) || u.MachineBusy != 0.8 {
		t.Errorf("cpuUse() = %+v, want %v and busy 0.8 (a process started or gone within the window is left out)", u, want)
	}
	if got, want := u.String(), "24.0 ms per App, machine 80% busy [kube-apiserver 20.0, etcd 4.0]"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	// The machine's speed, from the processes whose work per App is the same in both windows.
	floor := CPUUse{MsPerApp: map[string]float64{"kube-scheduler": 3.5, "kwok": 2.5, "kube-apiserver": 40}}
	product := CPUUse{MsPerApp: map[string]float64{"kube-scheduler": 4.5, "kwok": 3, "kube-apiserver": 60, "app-controller": 6}}
	if got := sameWorkCPURatio(floor, product); got != 1.25 {
		t.Errorf("sameWorkCPURatio() = %v, want 1.25 (7.5 / 6 ms per App)", got)
	}
	delete(product.MsPerApp, "kwok")
	if got := sameWorkCPURatio(floor, product); got != 0 {
		t.Errorf("sameWorkCPURatio() without kwok in the product = %v, want 0", got)
	}
	// This machine's figures are readable.
	if s, err := sampleCPU(map[string]int{harnessProcess: os.Getpid()}); err != nil || s.total <= 0 || s.busy > s.total {
		t.Errorf("sampleCPU(self) = %+v, %v", s, err)
	}
}

func TestPercentile(t *testing.T) {
	values := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	tests := []struct {
		p    float64
		want float64
	}{{50, 5}, {99, 10}, {100, 10}, {10, 1}, {0, 1}}
	for _, tc := range tests {
		if got := percentile(values, tc.p); got != tc.want {
			t.Errorf("percentile(%v) = %v, want %v", tc.p, got, tc.want)
		}
	}
	if got := percentile(nil, 50); got != 0 {
		t.Errorf("percentile(nil) = %v, want 0", got)
	}
}

func TestSummarize(t *testing.T) {
	round := func(n int, ratio float64, converged bool) RoundResult {
		r := RoundResult{Round: n}
		r.Ratio, r.Converged = ratio, converged
		return r
	}
	tests := []struct {
		name          string
		rounds        []RoundResult
		wantRound     float64 // the ratio of the round chosen
		wantConverged bool
	}{
		{"one", []RoundResult{round(1, 1.5, true)}, 1.5, true},
		{"median of three", []RoundResult{round(1, 3, true), round(2, 1, true), round(3, 2, true)}, 2, true},
		{"lower median of two", []RoundResult{round(1, 3, true), round(2, 1, true)}, 1, true},
		{"one not converged", []RoundResult{round(1, 1, true), round(2, 1, false)}, 1, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := Result{Rounds: tc.rounds}
			r.summarize()
			if r.Ratio != tc.wantRound || r.AllConverged != tc.wantConverged || r.RoundCount != len(tc.rounds) {
				t.Errorf("summarize(): ratio %v, all converged %v, rounds %d; want %v, %v, %d", r.Ratio, r.AllConverged, r.RoundCount, tc.wantRound, tc.wantConverged, len(tc.rounds))
			}
		})
	}
}

func TestPerApp(t *testing.T) {
	got := perApp(writeCounts{"create deployments": 10, "patch apps/status": 15, "create events": 10}, 10)
	want := WriteBreakdown{Total: 3.5, ExcludingEvents: 2.5, Events: 1,
		ByVerbResource: map[string]float64{"create deployments": 1, "patch apps/status": 1.5, "create events": 1}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("perApp() = %+v, want %+v", got, want)
	}
}

func TestWriter(t *testing.T) {
	for _, tc := range []struct{ user, agent, want string }{
		{controllerUser, "app-controller/v1", "app-controller"},
		{floorUser, "appbench/v0.0.0", "floor"},
		{localcluster.AdminUser, "kube-controller-manager/v1.36.3 (linux/amd64) kubernetes/0123abc/deployment-controller", "kube-controller-manager:deployment-controller"},
		{localcluster.AdminUser, "kube-controller-manager/v1.36.3 (linux/amd64) kubernetes/0123abc/leader-election", "kube-controller-manager"},
		{localcluster.AdminUser, "kube-scheduler/v1.36.3 (linux/amd64) kubernetes/0123abc/scheduler", "kube-scheduler"},
		{localcluster.AdminUser, "kwok/v0.8.0 (linux/amd64) kwok", "kwok"},
		{localcluster.AdminUser, "", "unknown"},
		{"someone", "kubectl/v1.36.3", "someone"},
	} {
		if got := writer(tc.user, tc.agent); got != tc.want {
			t.Errorf("writer(%q, %q) = %q, want %q", tc.user, tc.agent, got, tc.want)
		}
	}
}

func TestTimeline(t *testing.T) {
	start := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return start.Add(time.Duration(ms) * time.Millisecond) }
	writes := []write{
		{writer: "appbench", kind: "create apps", at: at(100)},
		{writer: "appbench", kind: "create apps", at: at(900)},
		{writer: "app-controller", kind: "patch deployments", at: at(950)},
		{writer: "app-controller", kind: "patch services", at: at(1000)},
		{writer: "kube-controller-manager:replicaset-controller", kind: "create pods", at: at(1100)},
		{writer: "kube-scheduler", kind: "create pods/binding", at: at(1200)},
		{writer: "kwok", kind: "patch pods/status", at: at(1300)},
		{writer: "app-controller", kind: "patch apps/status", at: at(2100)},
		{writer: "app-controller", kind: "create events", at: at(2200)},
		{writer: "app-controller", kind: "patch apps/status", at: at(3000)}, // at the end: out
		{writer: "app-controller", kind: "patch apps/status", at: at(-1)},   // before the start: out
	}
	got := timeline(writes, []time.Time{at(2100), at(2500)}, start, at(3000))
	want := []TimelineSecond{
		{Second: 0, AppsCreated: 2, ChildWrites: 1},
		{Second: 1, ChildWrites: 1, ControllerManager: 1, Scheduler: 1, Kwok: 1},
		{Second: 2, StatusWrites: 1, Events: 1, AppsReady: 2},
		{Second: 3},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("timeline\n%+v\nwant\n%+v", got, want)
	}
	per := writesByWriter(writes, start, at(3000), 2)
	if per["appbench"]["create apps"] != 1 || per["app-controller"]["patch apps/status"] != 0.5 || per["kwok"]["patch pods/status"] != 0.5 {
		t.Errorf("writesByWriter = %v", per)
	}
}

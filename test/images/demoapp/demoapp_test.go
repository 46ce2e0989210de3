package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestParseConfig(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		want    config
		wantErr string
	}{
		{"defaults", nil, config{port: 8080, drain: 5 * time.Second}, ""},
		{"all set", map[string]string{"ERROR_RATE": "0.1", "LATENCY_MS": "500", "PORT": "9000", "VERSION": "2", "DRAIN_SECONDS": "0"},
			config{errorRate: 0.1, errorPPM: 100000, latency: 500 * time.Millisecond, port: 9000, version: "2"}, ""},
		{"every request fails", map[string]string{"ERROR_RATE": "1"}, config{errorRate: 1, errorPPM: 1e6, port: 8080, drain: 5 * time.Second}, ""},
		{"drain too long", map[string]string{"DRAIN_SECONDS": "301"}, config{}, "DRAIN_SECONDS"},
		{"rate above 1", map[string]string{"ERROR_RATE": "1.5"}, config{}, "ERROR_RATE"},
		{"negative rate", map[string]string{"ERROR_RATE": "-0.1"}, config{}, "ERROR_RATE"},
		{"rate not a number", map[string]string{"ERROR_RATE": "10%"}, config{}, "ERROR_RATE"},
		{"negative latency", map[string]string{"LATENCY_MS": "-1"}, config{}, "LATENCY_MS"},
		{"port out of range", map[string]string{"PORT": "70000"}, config{}, "PORT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseConfig(env(tt.env))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parseConfig: %v, want an error naming %s", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("parseConfig = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

// TestErrorRateIsDeterministic sends n requests to the server at each rate and checks
// exactly which ones were answered 500, and that its metrics count them.
func TestErrorRateIsDeterministic(t *testing.T) {
	tests := []struct {
		rate       string
		n          int
		wantFailed []int // the 1-based requests answered 500
	}{
		{"0", 20, nil},
		{"0.1", 35, []int{10, 20, 30}},
		{"0.25", 12, []int{4, 8, 12}},
		{"0.5", 6, []int{2, 4, 6}},
		{"1", 3, []int{1, 2, 3}},
		{"0.3", 10, []int{4, 7, 10}},
	}
	for _, tt := range tests {
		t.Run("rate "+tt.rate, func(t *testing.T) {
			cfg, err := parseConfig(env(map[string]string{"ERROR_RATE": tt.rate, "VERSION": "v9"}))
			if err != nil {
				t.Fatal(err)
			}
			a := newApp(cfg)
			h := a.handler()
			var failed []int
			for i := 1; i <= tt.n; i++ {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
				switch rec.Code {
				case http.StatusInternalServerError:
					failed = append(failed, i)
				case http.StatusOK:
				default:
					t.Fatalf("request %d: status %d", i, rec.Code)
				}
				if !strings.Contains(rec.Body.String(), "version=v9") {
					t.Errorf("request %d: body %q does not name the version", i, rec.Body)
				}
			}
			if !equalInts(failed, tt.wantFailed) {
				t.Errorf("ERROR_RATE=%s: requests %v answered 500, want %v", tt.rate, failed, tt.wantFailed)
			}
			// Probes and scrapes are not the app's requests: always 200, never counted.
			for _, path := range []string{"/healthz", "/metrics"} {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
				if rec.Code != http.StatusOK {
					t.Errorf("GET %s: %d, want 200", path, rec.Code)
				}
			}
			if got := testutil.ToFloat64(a.requests.WithLabelValues("500", "GET")); got != float64(len(tt.wantFailed)) {
				t.Errorf("%s{code=500} = %v, want %d", requestsMetric, got, len(tt.wantFailed))
			}
			if got := testutil.ToFloat64(a.requests.WithLabelValues("200", "GET")); got != float64(tt.n-len(tt.wantFailed)) {
				t.Errorf("%s{code=200} = %v, want %d", requestsMetric, got, tt.n-len(tt.wantFailed))
			}
			if got := testutil.CollectAndCount(a.duration); got != countNonZero(tt.n-len(tt.wantFailed), len(tt.wantFailed)) {
				t.Errorf("%s has %d series, want one per code answered", durationMetric, got)
			}
		})
	}
}

func TestFailsCountsExactly(t *testing.T) {
	for _, ppm := range []uint64{0, 1, 12345, 100000, 290000, 333333, 999999, 1e6} {
		failed := uint64(0)
		for n := uint64(1); n <= 10000; n++ {
			if fails(n, ppm) {
				failed++
			}
			if want := n * ppm / 1e6; failed != want {
				t.Fatalf("ppm %d: %d of the first %d requests failed, want %d", ppm, failed, n, want)
			}
		}
	}
}

func TestParseLoad(t *testing.T) {
	c, err := parseLoad([]string{"--url", "http://10.0.0.1:8000/", "--rps", "20", "--duration", "1500ms", "--header", "Host: web.example.com", "--header", "X-Test:a:b"})
	if err != nil {
		t.Fatal(err)
	}
	if c.total() != 30 || c.host != "web.example.com" || c.headers.Get("X-Test") != "a:b" || c.headers.Get("Host") != "" {
		t.Errorf("parseLoad = %+v (total %d)", c, c.total())
	}
	for _, args := range [][]string{
		{},
		{"--url", "http://x/", "--rps", "0"},
		{"--url", "http://x/", "--duration", "0s"},
		{"--url", "http://x/", "--header", "novalue"},
	} {
		if _, err := parseLoad(args); err == nil {
			t.Errorf("parseLoad(%q): no error", args)
		}
	}
}

// TestLoadIsBounded runs the load against a server and counts what it received: exactly
// rps*duration requests, with the Host and headers asked for, and a summary that adds up.
func TestLoadIsBounded(t *testing.T) {
	var received atomic.Int64
	var mu sync.Mutex
	hosts := map[string]int{}
	cfg, _ := parseConfig(env(map[string]string{"ERROR_RATE": "0.2"}))
	h := newApp(cfg).handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		received.Add(1)
		mu.Lock()
		hosts[r.Host+" "+r.Header.Get("X-Test")]++
		mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()

	var out bytes.Buffer
	args := []string{"--url", srv.URL + "/", "--rps", "100", "--duration", "300ms", "--header", "Host:web.example.com", "--header", "X-Test:yes"}
	if err := runLoad(context.Background(), args, &out); err != nil {
		t.Fatal(err)
	}
	var s summary
	if err := json.Unmarshal(out.Bytes(), &s); err != nil || strings.Count(out.String(), "\n") != 1 {
		t.Fatalf("summary %q: %v; want one line of JSON", out.String(), err)
	}
	if received.Load() != 30 || s.Requests != 30 || s.Errors != 0 || s.Codes["200"] != 24 || s.Codes["500"] != 6 {
		t.Errorf("server received %d requests; summary %+v; want 30: 24 answered 200, 6 answered 500", received.Load(), s)
	}
	if hosts["web.example.com yes"] != 30 {
		t.Errorf("requests by Host and header: %v, want all 30 with Host web.example.com and X-Test yes", hosts)
	}
	if sp, ok := s.Times["500"]; !ok || len(s.Times) != 1 || sp.First == "" || sp.First > sp.Last {
		t.Errorf("times %+v, want the first and last of the 500s only", s.Times)
	}
	if s.P50Ms <= 0 || s.P50Ms > s.P90Ms || s.P90Ms > s.P99Ms {
		t.Errorf("latency quantiles %v, %v, %v: want 0 < p50 <= p90 <= p99", s.P50Ms, s.P90Ms, s.P99Ms)
	}
}

// TestLoadEndsWhenNoOneAnswers sends the load to a server that never answers: every
// request ends at its timeout, counted as an error, and the load returns.
func TestLoadEndsWhenNoOneAnswers(t *testing.T) {
	release := make(chan struct{})
	var received atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		received.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	c, err := parseLoad([]string{"--url", srv.URL, "--rps", "50", "--duration", "100ms", "--timeout", "50ms"})
	if err != nil {
		t.Fatal(err)
	}
	s := sendLoad(context.Background(), c, &http.Client{Timeout: c.timeout})
	if s.Requests != 5 || s.Errors != 5 || len(s.Codes) != 0 || received.Load() != 5 || s.Times["error"].First == "" {
		t.Errorf("summary %+v, server received %d; want 5 requests, 5 errors", s, received.Load())
	}
}

// TestLoadStopsWithItsContext cancels the load's context at the third request of an hour's
// worth: the load returns, having sent only the requests already under way.
func TestLoadStopsWithItsContext(t *testing.T) {
	var received atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		if received.Add(1) == 3 {
			cancel()
		}
	}))
	defer srv.Close()
	c, err := parseLoad([]string{"--url", srv.URL, "--rps", "100", "--duration", "1h"})
	if err != nil {
		t.Fatal(err)
	}
	s := sendLoad(ctx, c, &http.Client{Timeout: c.timeout})
	if s.Requests < 3 || s.Requests >= c.total() || received.Load() > int64(s.Requests) {
		t.Errorf("summary %+v, server received %d: want the load to stop after the 3rd request", s, received.Load())
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func countNonZero(ns ...int) int {
	c := 0
	for _, n := range ns {
		if n > 0 {
			c++
		}
	}
	return c
}

// TestBurn reads the CPU load from the environment and checks its cycle: burning for
// BURN_SECONDS from the start, idle for IDLE_SECONDS, again.
func TestBurn(t *testing.T) {
	b, err := parseBurn(env(map[string]string{"BURN_MILLICORES": "20", "BURN_SECONDS": "120", "IDLE_SECONDS": "60"}))
	if err != nil {
		t.Fatal(err)
	}
	if want := (burn{millicores: 20, on: 2 * time.Minute, off: time.Minute}); b != want {
		t.Fatalf("parseBurn = %+v, want %+v", b, want)
	}
	if got := b.spin(); got != 2*time.Millisecond {
		t.Errorf("spin = %s, want 2ms of each 100ms (20m)", got)
	}
	for _, c := range []struct {
		at   time.Duration
		want bool
	}{{0, true}, {119 * time.Second, true}, {120 * time.Second, false}, {179 * time.Second, false}, {180 * time.Second, true}, {301 * time.Second, false}} {
		if got := b.burning(c.at); got != c.want {
			t.Errorf("burning at %s = %v, want %v", c.at, got, c.want)
		}
	}
	if none, err := parseBurn(env(nil)); err != nil || none.burning(0) {
		t.Errorf("no BURN_MILLICORES: %+v, %v; want no load", none, err)
	}
	for _, bad := range []map[string]string{
		{"BURN_MILLICORES": "5000", "BURN_SECONDS": "1", "IDLE_SECONDS": "1"},
		{"BURN_MILLICORES": "10"},
		{"BURN_MILLICORES": "10", "BURN_SECONDS": "0", "IDLE_SECONDS": "1"},
	} {
		if _, err := parseBurn(env(bad)); err == nil {
			t.Errorf("parseBurn(%v): no error", bad)
		}
	}
}

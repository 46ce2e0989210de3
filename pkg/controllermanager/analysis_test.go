package controllermanager

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestAnalysisOptions checks the validation of the analysis's flags.
func TestAnalysisOptions(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Options)
		want   string
	}{
		{"defaults", func(*Options) {}, ""},
		{"a Prometheus URL", func(o *Options) { o.PrometheusURL = "https://prometheus.monitoring:9090/prom" }, ""},
		{"not a URL", func(o *Options) { o.PrometheusURL = "prometheus:9090" }, "--prometheus-url"},
		{"a query timeout too short", func(o *Options) { o.PrometheusQueryTimeout = 100 * time.Millisecond }, "--prometheus-query-timeout"},
		{"an unknown format", func(o *Options) { o.NotificationFormat = "teams" }, "--notification-format"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := NewOptions()
			tt.mutate(o)
			err := o.validateAnalysis()
			if (err == nil) != (tt.want == "") || err != nil && !strings.Contains(err.Error(), tt.want) {
				t.Errorf("validateAnalysis = %v, want an error naming %q", err, tt.want)
			}
		})
	}
}

// TestPrometheusClient checks that the analyzer's client queries --prometheus-url with
// the bearer token of --prometheus-bearer-token-file, read again at each query (a
// rotated token is sent), and that no URL means no client.
func TestPrometheusClient(t *testing.T) {
	var mu sync.Mutex
	var tokens []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		tokens = append(tokens, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"success","data":{"resultType":"scalar","result":[1700000000,"1"]}}`))
	}))
	defer srv.Close()
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("first\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := NewOptions()
	o.PrometheusURL, o.PrometheusBearerTokenFile = srv.URL, tokenFile
	a, err := o.analyzer()
	if err != nil || a.Prometheus == nil {
		t.Fatalf("analyzer() = %+v, %v", a, err)
	}
	query := func() {
		t.Helper()
		if _, _, err := a.Prometheus.Query(context.Background(), "1", time.Now()); err != nil {
			t.Fatalf("query: %v", err)
		}
	}
	query()
	if err := os.WriteFile(tokenFile, []byte("second"), 0o600); err != nil {
		t.Fatal(err)
	}
	query()
	mu.Lock()
	if strings.Join(tokens, ",") != "Bearer first,Bearer second" {
		t.Errorf("Authorization headers %q, want the token of the file at each query", tokens)
	}
	mu.Unlock()

	o = NewOptions()
	if a, err := o.analyzer(); err != nil || a.Prometheus != nil {
		t.Errorf("without --prometheus-url: %+v, %v; want no Prometheus", a, err)
	}
	o.PrometheusURL, o.PrometheusBearerTokenFile = srv.URL, filepath.Join(dir, "missing")
	if _, err := o.analyzer(); err == nil || !strings.Contains(err.Error(), "--prometheus-bearer-token-file") {
		t.Errorf("a missing token file: %v", err)
	}
	o.PrometheusBearerTokenFile, o.PrometheusCAFile = "", tokenFile
	if _, err := o.analyzer(); err == nil || !strings.Contains(err.Error(), "holds no PEM certificate") {
		t.Errorf("a CA file without a certificate: %v", err)
	}
}

// TestNotifierOption checks --notification-webhook-url-file: a URL read from the file,
// none without it, an error for a file that holds no URL.
func TestNotifierOption(t *testing.T) {
	dir := t.TempDir()
	o := NewOptions()
	if n, err := o.notifier(); n != nil || err != nil {
		t.Errorf("without the flag: %v, %v", n, err)
	}
	o.NotificationWebhookURLFile = filepath.Join(dir, "url")
	if err := os.WriteFile(o.NotificationWebhookURLFile, []byte("https://hooks.example.com/T000/B000\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if n, err := o.notifier(); n == nil || err != nil {
		t.Errorf("a URL: %v, %v", n, err)
	}
	if err := os.WriteFile(o.NotificationWebhookURLFile, []byte("hooks.example.com"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := o.notifier(); err == nil || !strings.Contains(err.Error(), "does not hold an http or https URL") {
		t.Errorf("not a URL: %v", err)
	}
}

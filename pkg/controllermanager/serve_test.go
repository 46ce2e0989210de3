package controllermanager

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestProfiling: Go's profiles are served on the metrics address only with --profiling.
func TestProfiling(t *testing.T) {
	for _, profiling := range []bool{false, true} {
		h := metricsHandler(profiling)
		for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap?debug=1", "/debug/pprof/goroutine?debug=1"} {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
			want := http.StatusNotFound
			if profiling {
				want = http.StatusOK
			}
			if rec.Code != want {
				t.Errorf("--profiling=%v: GET %s: %d, want %d", profiling, path, rec.Code, want)
			}
			if profiling && path == "/debug/pprof/heap?debug=1" && !strings.Contains(rec.Body.String(), "heap profile:") {
				t.Errorf("--profiling: GET %s: no heap profile in %d bytes", path, rec.Body.Len())
			}
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		if rec.Code != http.StatusOK {
			t.Errorf("--profiling=%v: GET /metrics: %d", profiling, rec.Code)
		}
	}
}

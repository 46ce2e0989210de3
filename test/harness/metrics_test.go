package harness

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestValue reads the samples a /metrics exposition serves.
func TestValue(t *testing.T) {
	exposition := `# HELP workqueue_depth Current depth of workqueue
# TYPE workqueue_depth gauge
workqueue_depth{name="app"} 3
workqueue_depth{name="ingress"} 0
workqueue_depth_other{name="app"} 7
workqueue_adds_total{controller="x",name="app"} 1000
workqueue_unfinished_work_seconds{name="app"} 1.5e-3
process_cpu_seconds_total 12.5
`
	tests := []struct {
		name      string
		metric    string
		labels    map[string]string
		want      float64
		wantFound bool
	}{
		{"labelled", "workqueue_depth", map[string]string{"name": "app"}, 3, true},
		{"other label value", "workqueue_depth", map[string]string{"name": "ingress"}, 0, true},
		{"one of several labels", "workqueue_adds_total", map[string]string{"name": "app"}, 1000, true},
		{"exponent", "workqueue_unfinished_work_seconds", map[string]string{"name": "app"}, 0.0015, true},
		{"no labels", "process_cpu_seconds_total", nil, 12.5, true},
		{"missing", "workqueue_depth", map[string]string{"name": "nodelabel"}, 0, false},
		{"prefix of another metric only", "workqueue_dep", nil, 0, false},
	}
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(exposition))
	}))
	defer server.Close()
	families, err := Scrape(context.Background(), server.URL+"/metrics")
	if err != nil {
		t.Fatalf("Scrape: %v", err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, n := Value(families, tc.metric, tc.labels)
			if found := n > 0; got != tc.want || found != tc.wantFound {
				t.Errorf("Value() = %v, %d series; want %v, found %v", got, n, tc.want, tc.wantFound)
			}
		})
	}
}

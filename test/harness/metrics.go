package harness

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/component-base/metrics/testutil"
)

// Scrape gets url (a /metrics endpoint) and parses its Prometheus text exposition into
// metric families by name. It gives up after 5 s.
func Scrape(ctx context.Context, url string) (map[string]*dto.MetricFamily, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", url, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("reading %s: %s: %s", url, resp.Status, body)
	}
	families, err := testutil.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", url, err)
	}
	return families, nil
}

// Value returns the sum of the values of the series of family name whose labels include
// every pair of labels (a histogram counts its samples), and how many series matched.
func Value(families map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, int) {
	f, ok := families[name]
	if !ok {
		return 0, 0
	}
	sum, n := 0.0, 0
	for _, m := range f.GetMetric() {
		if !testutil.LabelsMatch(m, labels) {
			continue
		}
		n++
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		case m.Untyped != nil:
			sum += m.GetUntyped().GetValue()
		}
	}
	return sum, n
}

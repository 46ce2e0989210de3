package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/client-go/kubernetes"
	"k8s.io/component-base/metrics/testutil"

	"github.com/app-controller/app-controller/test/harness"
)

// With Config.Breakdown the harness also reads the controller's own metrics while it
// converges: the App work queue's depth every second (in the timeline), and at
// convergence how long keys waited in the queue and syncs took, and how long each kind
// of API request took and waited for the client's rate limiter. The controller then runs
// with --profiling, and its heap profile at convergence is saved next to its log.

// ControllerMetrics is what the controller's /metrics said at convergence.
type ControllerMetrics struct {
	// QueueAdds and QueueRetries are the App queue's adds and delayed re-adds (client-go
	// counts AddAfter, a held-back status write's requeue among them, and AddRateLimited).
	QueueAdds    float64 `json:"queue_adds"`
	QueueRetries float64 `json:"queue_retries"`
	// QueueWaitSeconds and WorkSeconds are the means of workqueue_queue_duration_seconds
	// (from add to a worker taking the key) and workqueue_work_duration_seconds (a sync).
	QueueWaitSeconds float64 `json:"queue_wait_mean_seconds"`
	WorkSeconds      float64 `json:"work_mean_seconds"`
	// MaxQueueDepth is the deepest the App queue was seen in the samples of the timeline.
	MaxQueueDepth float64 `json:"max_queue_depth"`
	// Requests are the controller's API requests by verb: count, mean latency, and mean
	// wait for the client-side rate limiter.
	Requests map[string]RequestStats `json:"requests_by_verb"`
	// HeapProfile is where the heap profile taken at convergence was saved, CPUProfile
	// the CPU profile of the first apiserverProfileSeconds of the convergence.
	HeapProfile string `json:"heap_profile,omitempty"`
	CPUProfile  string `json:"cpu_profile,omitempty"`
	// APIServer is the API server's own latency of every kind of write made at least
	// N/2 times while the product converged (every writer's, not only the controller's).
	APIServer map[string]APIServerLatency `json:"apiserver_write_latency"`
}

// RequestStats are the controller's requests of one verb.
type RequestStats struct {
	Count              float64 `json:"count"`
	MeanSeconds        float64 `json:"mean_seconds"`
	MeanRateLimitWaitS float64 `json:"mean_rate_limiter_wait_seconds"`
}

// histogramMean returns the count and the mean of the samples of histogram family name
// whose labels include labels, summed over every matching series.
func histogramMean(families map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, float64) {
	f, ok := families[name]
	if !ok {
		return 0, 0
	}
	var count, sum float64
	for _, m := range f.GetMetric() {
		if h := m.GetHistogram(); h != nil && testutil.LabelsMatch(m, labels) {
			count += float64(h.GetSampleCount())
			sum += h.GetSampleSum()
		}
	}
	if count == 0 {
		return 0, 0
	}
	return count, sum / count
}

// labelValues lists the values of label in family name, sorted.
func labelValues(families map[string]*dto.MetricFamily, name, label string) []string {
	seen := map[string]bool{}
	for _, m := range families[name].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == label {
				seen[l.GetValue()] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// queueLabel is the label that names a work queue in the workqueue_* metrics.
const queueLabel = "name"

// controllerMetrics reads the queue and request figures from a scrape.
func controllerMetrics(families map[string]*dto.MetricFamily, queue string) *ControllerMetrics {
	q := map[string]string{queueLabel: queue}
	m := &ControllerMetrics{Requests: map[string]RequestStats{}}
	m.QueueAdds, _ = harness.Value(families, "workqueue_adds_total", q)
	m.QueueRetries, _ = harness.Value(families, "workqueue_retries_total", q)
	_, m.QueueWaitSeconds = histogramMean(families, "workqueue_queue_duration_seconds", q)
	_, m.WorkSeconds = histogramMean(families, "workqueue_work_duration_seconds", q)
	for _, verb := range labelValues(families, "rest_client_request_duration_seconds", "verb") {
		v := map[string]string{"verb": verb}
		count, mean := histogramMean(families, "rest_client_request_duration_seconds", v)
		_, wait := histogramMean(families, "rest_client_rate_limiter_duration_seconds", v)
		m.Requests[verb] = RequestStats{Count: count, MeanSeconds: round4(mean), MeanRateLimitWaitS: round4(wait)}
	}
	m.QueueWaitSeconds, m.WorkSeconds = round4(m.QueueWaitSeconds), round4(m.WorkSeconds)
	return m
}

func round4(v float64) float64 { return math.Round(v*1e4) / 1e4 }

// depthSampler scrapes the controller's App queue depth once a second until stopped.
type depthSampler struct {
	start  time.Time
	stop   context.CancelFunc
	done   sync.WaitGroup
	mu     sync.Mutex
	depths map[int]float64 // second since start -> deepest sample in it
}

func sampleDepth(ctx context.Context, p *controllerProc, queue string, start time.Time) *depthSampler {
	ctx, cancel := context.WithCancel(ctx)
	s := &depthSampler{start: start, stop: cancel, depths: map[int]float64{}}
	s.done.Go(func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			if families, err := p.scrape(ctx); err == nil {
				depth, _ := harness.Value(families, "workqueue_depth", map[string]string{queueLabel: queue})
				sec := int(time.Since(start) / time.Second)
				s.mu.Lock()
				s.depths[sec] = max(s.depths[sec], depth)
				s.mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
	return s
}

// finish stops the sampler and returns the depths by second.
func (s *depthSampler) finish() map[int]float64 {
	s.stop()
	s.done.Wait()
	return s.depths
}

// saveProfile writes the controller's profile (--profiling) named by query ("heap?gc=1",
// "profile?seconds=30") to path.
func (p *controllerProc) saveProfile(ctx context.Context, query, path string) error {
	url := strings.TrimSuffix(p.metricsURL, "/metrics") + "/debug/pprof/" + query
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("reading the controller's profile %s: %w", query, err)
	}
	defer func() { _ = res.Body.Close() }()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("reading the controller's profile %s: %s", query, res.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, res.Body); err != nil {
		_ = f.Close()
		return fmt.Errorf("saving the controller's profile %s: %w", query, err)
	}
	return f.Close()
}

// table renders the controller's metrics for humans.
func (m *ControllerMetrics) table() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "  App queue: %.0f adds, %.0f retries, deepest %.0f; mean wait %.3fs, mean sync %.3fs\n",
		m.QueueAdds, m.QueueRetries, m.MaxQueueDepth, m.QueueWaitSeconds, m.WorkSeconds)
	for _, v := range slices.Sorted(maps.Keys(m.Requests)) {
		r := m.Requests[v]
		fmt.Fprintf(&sb, "  requests %-7s %6.0f, mean %.4fs, rate limiter wait %.4fs\n", v, r.Count, r.MeanSeconds, r.MeanRateLimitWaitS)
	}
	for _, k := range slices.Sorted(maps.Keys(m.APIServer)) {
		fmt.Fprintf(&sb, "  apiserver %-32s %6.0f, mean %.4fs\n", k, m.APIServer[k].Count, m.APIServer[k].MeanSeconds)
	}
	if m.HeapProfile != "" {
		fmt.Fprintf(&sb, "  heap profile at convergence: %s (go tool pprof -sample_index=inuse_space -top bin/app-controller FILE)\n", m.HeapProfile)
	}
	if m.CPUProfile != "" {
		fmt.Fprintf(&sb, "  CPU profile, first %ds: %s (go tool pprof -top bin/app-controller FILE)\n", apiserverProfileSeconds, m.CPUProfile)
	}
	return sb.String()
}

// APIServerLatency is the API server's own mean time for one kind of request during the
// product's convergence (apiserver_request_duration_seconds: from the request's arrival
// to its response, the client's queueing and the network aside).
type APIServerLatency struct {
	Count       float64 `json:"count"`
	MeanSeconds float64 `json:"mean_seconds"`
}

// apiserverDurations returns apiserver_request_duration_seconds' sum and count by
// "VERB resource[/subresource]", writes only.
func apiserverDurations(ctx context.Context, kube kubernetes.Interface) (map[string][2]float64, error) {
	raw, err := kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the apiserver's metrics: %w", err)
	}
	families, err := testutil.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("parsing the apiserver's metrics: %w", err)
	}
	out := map[string][2]float64{}
	for _, m := range families["apiserver_request_duration_seconds"].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		switch labels["verb"] {
		case "GET", "LIST", "WATCH", "CONNECT", "":
			continue
		}
		key := labels["verb"] + " " + labels["resource"]
		if labels["subresource"] != "" {
			key += "/" + labels["subresource"]
		}
		h := m.GetHistogram()
		v := out[key]
		out[key] = [2]float64{v[0] + h.GetSampleSum(), v[1] + float64(h.GetSampleCount())}
	}
	return out, nil
}

// apiserverLatency returns, for every kind of write made at least minCount times between
// the two scrapes, its count and mean duration.
func apiserverLatency(before, after map[string][2]float64, minCount float64) map[string]APIServerLatency {
	out := map[string]APIServerLatency{}
	for key, a := range after {
		b := before[key]
		count := a[1] - b[1]
		if count < minCount || count <= 0 {
			continue
		}
		out[key] = APIServerLatency{Count: count, MeanSeconds: round4((a[0] - b[0]) / count)}
	}
	return out
}

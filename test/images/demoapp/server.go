package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// The names of the server's metrics: the contract of the analysis's checks on the pods'
// own metrics.
const (
	requestsMetric = "http_requests_total"
	durationMetric = "http_request_duration_seconds"
)

// metricLabels are the labels of both metrics: the status code and the method.
var metricLabels = []string{"code", "method"}

// durationBuckets cover 5 ms to 5 s, so a latency quantile is read within a bucket's width
// anywhere in that range.
var durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}

// config is the server's behaviour, read from its environment.
type config struct {
	// errorRate is the fraction of the requests answered 500, 0 to 1; errorPPM the same
	// in parts per million, which fails counts in.
	errorRate float64
	errorPPM  uint64
	// latency is added to every answer of the app (not to /healthz nor /metrics).
	latency time.Duration
	port    int
	version string
	// drain is how long the server goes on answering after SIGTERM before it stops
	// listening: the time for the pod's removal from its Services' EndpointSlices to
	// reach the proxies (a Gateway reloads its configuration a second or two later), so
	// that a pod that goes loses no request.
	drain time.Duration
	// burn is the CPU load it makes by itself (burn.go).
	burn burn
}

// defaultDrain is the drain of a server without DRAIN_SECONDS.
const defaultDrain = 5 * time.Second

// parseConfig reads ERROR_RATE (default 0), LATENCY_MS (default 0), PORT (default 8080),
// DRAIN_SECONDS (default 5), VERSION and the CPU load (parseBurn) with getenv; an error names the variable and
// what it wants.
func parseConfig(getenv func(string) string) (config, error) {
	c := config{port: 8080, version: getenv("VERSION"), drain: defaultDrain}
	if v := getenv("ERROR_RATE"); v != "" {
		rate, err := strconv.ParseFloat(v, 64)
		if err != nil || rate < 0 || rate > 1 {
			return c, fmt.Errorf("ERROR_RATE=%q: want a fraction from 0 to 1", v)
		}
		c.errorRate = rate
		c.errorPPM = uint64(math.Round(rate * 1e6))
	}
	if v := getenv("LATENCY_MS"); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms < 0 {
			return c, fmt.Errorf("LATENCY_MS=%q: want a whole number of milliseconds, 0 or more", v)
		}
		c.latency = time.Duration(ms) * time.Millisecond
	}
	if v := getenv("DRAIN_SECONDS"); v != "" {
		sec, err := strconv.Atoi(v)
		if err != nil || sec < 0 || sec > 300 {
			return c, fmt.Errorf("DRAIN_SECONDS=%q: want a whole number of seconds from 0 to 300", v)
		}
		c.drain = time.Duration(sec) * time.Second
	}
	if v := getenv("PORT"); v != "" {
		port, err := strconv.Atoi(v)
		if err != nil || port < 1 || port > 65535 {
			return c, fmt.Errorf("PORT=%q: want a port number", v)
		}
		c.port = port
	}
	b, err := parseBurn(getenv)
	if err != nil {
		return c, err
	}
	c.burn = b
	return c, nil
}

// app is the server: its configuration, the count of the app's requests and its metrics.
type app struct {
	cfg      config
	host     string
	mu       sync.Mutex
	served   uint64
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	registry *prometheus.Registry
}

func newApp(cfg config) *app {
	host, _ := os.Hostname()
	a := &app{
		cfg:  cfg,
		host: host,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: requestsMetric,
			Help: "Requests the app answered, by status code and method (not /healthz nor /metrics).",
		}, metricLabels),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    durationMetric,
			Help:    "Time the app took to answer a request, LATENCY_MS included, by status code and method.",
			Buckets: durationBuckets,
		}, metricLabels),
		registry: prometheus.NewRegistry(),
	}
	a.registry.MustRegister(a.requests, a.duration)
	return a
}

// fails reports whether the n-th request of the app (from 1) is answered 500 at an error
// rate of ppm parts per million: when floor(n*ppm/1e6) exceeds floor((n-1)*ppm/1e6), so
// that exactly floor(n*ppm/1e6) of the first n requests fail, spread evenly (0.1: the
// 10th, 20th, ...). Integers, so that no rounding of a float moves a failure.
func fails(n, ppm uint64) bool {
	return n*ppm/1e6 > (n-1)*ppm/1e6
}

// handler routes /healthz, /metrics and everything else to the app.
func (a *app) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.Handle("/metrics", promhttp.HandlerFor(a.registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("/", a.serveApp)
	return mux
}

// serveApp answers one request of the app: after the configured latency, 500 when this
// request is one of the failing fraction, else 200 with the version and host.
func (a *app) serveApp(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	a.mu.Lock()
	a.served++
	n := a.served
	a.mu.Unlock()
	if a.cfg.latency > 0 {
		select {
		case <-time.After(a.cfg.latency):
		case <-r.Context().Done():
		}
	}
	code := http.StatusOK
	body := fmt.Sprintf("version=%s host=%s request=%d\n", a.cfg.version, a.host, n)
	if fails(n, a.cfg.errorPPM) {
		code = http.StatusInternalServerError
		body = fmt.Sprintf("version=%s host=%s request=%d: error injected (ERROR_RATE=%g)\n", a.cfg.version, a.host, n, a.cfg.errorRate)
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(body))
	a.requests.WithLabelValues(strconv.Itoa(code), r.Method).Inc()
	a.duration.WithLabelValues(strconv.Itoa(code), r.Method).Observe(time.Since(start).Seconds())
}

// serve runs the server on every address of PORT until ctx is done, and for its drain
// after that.
func serve(ctx context.Context, getenv func(string) string) error {
	cfg, err := parseConfig(getenv)
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", fmt.Sprintf(":%d", cfg.port))
	if err != nil {
		return fmt.Errorf("listening on port %d: %w", cfg.port, err)
	}
	srv := &http.Server{Handler: newApp(cfg).handler(), ReadHeaderTimeout: 10 * time.Second}
	fmt.Printf("demoapp %s serving on %s: ERROR_RATE=%g LATENCY_MS=%d BURN_MILLICORES=%d\n", cfg.version, l.Addr(), cfg.errorRate, cfg.latency.Milliseconds(), cfg.burn.millicores)
	go cfg.burn.run(ctx)
	return serveUntilDone(ctx, srv, l, cfg.drain, fmt.Sprintf("demoapp %s: stopping: answering for %s more (DRAIN_SECONDS)", cfg.version, cfg.drain))
}

// serveUntilDone serves srv on l until ctx is done; then, when drain is above 0, prints
// stopping and goes on answering for drain, and shuts srv down within 5 s.
func serveUntilDone(ctx context.Context, srv *http.Server, l net.Listener, drain time.Duration, stopping string) error {
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	select {
	case err := <-served:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
		if drain > 0 {
			fmt.Println(stopping)
			select {
			case err := <-served:
				return fmt.Errorf("serving: %w", err)
			case <-time.After(drain):
			}
		}
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("shutting down: %w", err)
		}
		return nil
	}
}

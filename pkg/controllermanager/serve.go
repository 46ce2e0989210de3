package controllermanager

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"

	// Workqueue (depth, adds, latency, retries per queue name) and client-go request
	// metrics on /metrics.
	_ "k8s.io/component-base/metrics/prometheus/restclient"
	_ "k8s.io/component-base/metrics/prometheus/workqueue"
)

// probes answers /healthz (the process serves) and /readyz (ready() is nil).
func probes(ready func() error) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := ready(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	return mux
}

// metricsHandler serves the Prometheus metrics of the process and, with profiling, Go's
// profiles under /debug/pprof/.
func metricsHandler(profiling bool) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", legacyregistry.Handler())
	if profiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// metricsServer returns the metrics handler and, with --metrics-secure, its TLS
// configuration and the bearer token authentication and authorization in front of it.
func metricsServer(cfg *rest.Config, opts *Options) (http.Handler, *tls.Config, error) {
	if !opts.MetricsSecure {
		return metricsHandler(opts.Profiling), nil, nil
	}
	tlsConfig, err := metricsTLSConfig(opts.MetricsCertFile, opts.MetricsKeyFile)
	if err != nil {
		return nil, nil, err
	}
	client, err := kubernetes.NewForConfig(rest.AddUserAgent(rest.CopyConfig(cfg), "metrics-auth"))
	if err != nil {
		return nil, nil, fmt.Errorf("making the client of the metrics authorization: %w", err)
	}
	return authorizeMetrics(client, metricsHandler(opts.Profiling)), tlsConfig, nil
}

// serve listens on addr (nothing if addr is "" or "0") and serves handler until ctx
// ends, over TLS if tlsConfig is set. It fails at once if the address cannot be bound.
func serve(ctx context.Context, name, addr string, handler http.Handler, tlsConfig *tls.Config) error {
	if addr == "" || addr == "0" {
		return nil
	}
	listener, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening on %s for %s: %w", addr, name, err)
	}
	if tlsConfig != nil {
		listener = tls.NewListener(listener, tlsConfig)
	}
	logger := klog.FromContext(ctx)
	// Requests carry the logger; they outlive ctx by the shutdown grace.
	baseCtx := context.WithoutCancel(ctx)
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return baseCtx },
		ErrorLog:    log.New(serverErrors{logger: logger, what: name}, "", 0)}
	go func() {
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
	}()
	go func() {
		logger.Info("Serving", "what", name, "address", listener.Addr().String())
		if err := srv.Serve(listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error(err, "Server stopped", "what", name)
		}
	}()
	return nil
}

// serverErrors logs what an http.Server reports (failed TLS handshakes, a client speaking
// HTTP to the HTTPS port) at verbosity 2: scanners and probes make them common.
type serverErrors struct {
	logger klog.Logger
	what   string
}

// Write implements io.Writer for log.Logger.
func (e serverErrors) Write(p []byte) (int, error) {
	e.logger.V(2).Info("HTTP server error", "what", e.what, "err", strings.TrimSpace(string(p)))
	return len(p), nil
}

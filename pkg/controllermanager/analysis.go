package controllermanager

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"

	"github.com/app-controller/app-controller/pkg/analysis"
)

// The clients of the canary analysis (docs/progressive-delivery.md): Prometheus, which
// answers the metric checks (--prometheus-url), and the notification webhook
// (--notification-webhook-url-file). Without --prometheus-url a rollout that asks for a
// metric check is refused (PrometheusNotConfigured), and everything else works.

// analyzer returns the analyzer of the options: with a Prometheus client when
// --prometheus-url is set.
func (o *Options) analyzer() (*analysis.Analyzer, error) {
	a := &analysis.Analyzer{QueryTimeout: o.PrometheusQueryTimeout, HTTP: &http.Client{}}
	if o.PrometheusURL == "" {
		return a, nil
	}
	rt, err := o.prometheusTransport()
	if err != nil {
		return nil, err
	}
	client, err := promapi.NewClient(promapi.Config{Address: o.PrometheusURL, RoundTripper: rt})
	if err != nil {
		return nil, fmt.Errorf("building the Prometheus client of %s: %w", o.PrometheusURL, err)
	}
	a.Prometheus = promv1.NewAPI(client)
	return a, nil
}

// prometheusTransport returns the transport of the Prometheus client: TLS with
// --prometheus-ca-file or --prometheus-insecure-skip-verify, and the bearer token of
// --prometheus-bearer-token-file, read at each query (a rotated token is picked up).
func (o *Options) prometheusTransport() (http.RoundTripper, error) {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: o.PrometheusInsecureSkipVerify} //nolint:gosec // the user's choice, --prometheus-insecure-skip-verify
	if o.PrometheusCAFile != "" {
		pem, err := os.ReadFile(o.PrometheusCAFile)
		if err != nil {
			return nil, fmt.Errorf("reading --prometheus-ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--prometheus-ca-file %s holds no PEM certificate", o.PrometheusCAFile)
		}
		t.TLSClientConfig.RootCAs = pool
	}
	if o.PrometheusBearerTokenFile == "" {
		return t, nil
	}
	if _, err := readToken(o.PrometheusBearerTokenFile); err != nil {
		return nil, err
	}
	return &bearerFile{path: o.PrometheusBearerTokenFile, next: t}, nil
}

// bearerFile adds the bearer token of a file to each request.
type bearerFile struct {
	path string
	next http.RoundTripper
}

func (b *bearerFile) RoundTrip(req *http.Request) (*http.Response, error) {
	token, err := readToken(b.path)
	if err != nil {
		return nil, err
	}
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+token)
	return b.next.RoundTrip(req)
}

func readToken(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading --prometheus-bearer-token-file: %w", err)
	}
	token := strings.TrimSpace(string(data))
	if token == "" {
		return "", fmt.Errorf("--prometheus-bearer-token-file %s is empty", path)
	}
	return token, nil
}

// notifier returns the notifier of --notification-webhook-url-file; nil when it is not
// set.
func (o *Options) notifier() (*analysis.Notifier, error) {
	if o.NotificationWebhookURLFile == "" {
		return nil, nil
	}
	data, err := os.ReadFile(o.NotificationWebhookURLFile)
	if err != nil {
		return nil, fmt.Errorf("reading --notification-webhook-url-file: %w", err)
	}
	u := strings.TrimSpace(string(data))
	if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		return nil, fmt.Errorf("--notification-webhook-url-file %s does not hold an http or https URL", o.NotificationWebhookURLFile)
	}
	return analysis.NewNotifier(u, analysis.NotificationFormat(o.NotificationFormat), &http.Client{Timeout: analysis.NotifyTimeout})
}

// validateAnalysis checks the options of the analysis.
func (o *Options) validateAnalysis() error {
	if o.PrometheusURL != "" {
		u, err := url.Parse(o.PrometheusURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("--prometheus-url %q is not an http or https URL", o.PrometheusURL)
		}
	}
	if o.PrometheusQueryTimeout < time.Second || o.PrometheusQueryTimeout > time.Minute {
		return fmt.Errorf("--prometheus-query-timeout must be from 1s to 1m, got %s", o.PrometheusQueryTimeout)
	}
	switch analysis.NotificationFormat(o.NotificationFormat) {
	case analysis.FormatJSON, analysis.FormatSlack:
	default:
		return fmt.Errorf("--notification-format %q: want json or slack", o.NotificationFormat)
	}
	return nil
}

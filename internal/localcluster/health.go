package localcluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// probeInterval is the pause between two readiness probes.
const probeInterval = 200 * time.Millisecond

// newProbeClient returns an HTTP client for readiness probes. It trusts caPEM (if any) and
// presents the admin client certificate (if any).
func newProbeClient(caPEM, certPEM, keyPEM []byte) (*http.Client, error) {
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(caPEM) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			return nil, errors.New("no CA certificate in the CA PEM data")
		}
		tlsConfig.RootCAs = pool
	}
	if len(certPEM) > 0 {
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("loading the admin client certificate: %w", err)
		}
		tlsConfig.Certificates = []tls.Certificate{pair}
	}
	return &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: tlsConfig, DisableKeepAlives: true},
	}, nil
}

// probeHTTP returns nil if a GET of url answers 200 OK.
func probeHTTP(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// waitReady polls check until it succeeds, the process exits, or timeout (or ctx) ends.
func waitReady(parent context.Context, p *process, timeout time.Duration, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	for {
		if p.exited() {
			return p.exitError()
		}
		err := check(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-p.done:
			return p.exitError()
		case <-ctx.Done():
			if parent.Err() != nil {
				return fmt.Errorf("waiting for %s: %w", p.name, parent.Err())
			}
			return fmt.Errorf("%s not ready after %s (last probe: %w)", p.name, timeout, err)
		case <-time.After(probeInterval):
		}
	}
}

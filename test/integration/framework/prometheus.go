package framework

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/app-controller/app-controller/internal/localcluster"
	"github.com/app-controller/app-controller/test/harness"
)

// PrometheusJob is the job label of the targets StartPrometheus scrapes.
const PrometheusJob = "targets"

// PrometheusInterval is how often the Prometheus of StartPrometheus scrapes its targets
// and evaluates: a counter's change reaches a query within about two of them.
const PrometheusInterval = time.Second

// prometheusConfig is the configuration of StartPrometheus: every target (host:port,
// /metrics over HTTP) in one job, scraped and evaluated every PrometheusInterval.
const prometheusConfig = `global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
- job_name: %s
  static_configs:
  - targets: [%s]
`

// StartPrometheus runs Prometheus (bin/prometheus: `make prometheus`, Debian's 2.42) on a
// free loopback port, with its own data directory, scraping each of targets (host:port
// on loopback, /metrics) every second, job PrometheusJob; it waits until Prometheus is
// ready and returns its URL, http://127.0.0.1:PORT, for client_golang's
// api/prometheus/v1. It is stopped (by its pid) when the test ends. Without the binary
// the test is skipped with one line, or fails when CI=true.
func StartPrometheus(t testing.TB, targets ...string) string {
	t.Helper()
	bin := prometheusBinary(t)
	quoted := make([]string, 0, len(targets))
	for _, target := range targets {
		host, _, err := net.SplitHostPort(target)
		if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
			t.Fatalf("StartPrometheus: target %q is not a loopback host:port (tests scrape only what they serve on loopback)", target)
		}
		quoted = append(quoted, fmt.Sprintf("%q", target))
	}
	dir := t.TempDir()
	config := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(config, fmt.Appendf(nil, prometheusConfig, PrometheusJob, strings.Join(quoted, ", ")), 0o644); err != nil {
		t.Fatal(err)
	}
	addr, err := harness.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	p, err := harness.Start(bin, []string{
		"--config.file=" + config,
		"--storage.tsdb.path=" + filepath.Join(dir, "data"),
		"--web.listen-address=" + addr,
		"--log.level=warn",
	}, filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(syscall.SIGTERM, 10*time.Second); err != nil {
			t.Errorf("stopping Prometheus: %v", err)
		}
	})
	url := "http://" + addr
	err = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := p.Exited(); err != nil {
			return false, err
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/-/ready", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		t.Fatalf("Prometheus on %s not ready: %v\n%s", addr, err, p.Tail(20))
	}
	return url
}

// prometheusBinary returns the path of bin/prometheus, or skips the test (fails it when
// CI=true) when it is not there.
func prometheusBinary(t testing.TB) string {
	t.Helper()
	dir := os.Getenv(localcluster.BinDirEnv)
	if dir == "" {
		dir = filepath.Join(RepoRoot(t), "bin")
	}
	bin := filepath.Join(dir, "prometheus")
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no Prometheus at %s (make prometheus): %v", bin, err)
		}
		t.Skipf("skipped: no Prometheus at %s (make prometheus puts Debian's there)", bin)
	}
	return bin
}

package dashboard

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/app-controller/app-controller/test/integration/framework"
)

// screenshotsEnv names the directory the screenshots are written to.
const screenshotsEnv = "APP_DASHBOARD_SCREENSHOTS"

// pageTimeout bounds a wait for something to show on a page.
const pageTimeout = 60 * time.Second

// chromium returns the path of Chromium, or skips the test (fails it with CI=true).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("Chromium is not installed (make chromium installs Debian's package)")
	}
	t.Skip("Chromium is not installed (make chromium installs Debian's package)")
	return ""
}

// newBrowser starts a headless Chromium for the test and returns the context of its
// first tab. Chromium sends nothing past loopback: every other address goes to a proxy
// that is not there, and names do not resolve.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	path := chromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // the tests run as root
		chromedp.WindowSize(1280, 800),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("proxy-server", "http://127.0.0.1:9"),
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-domain-reliability", true),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	if err := chromedp.Do(ctx); err != nil {
		cancel()
		cancelAlloc()
		t.Fatalf("starting Chromium %s: %v", path, err)
	}
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	return ctx
}

// run runs actions in the tab ctx, failing the test with what on an error.
func run(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// eval returns the value of the JavaScript expression in the tab ctx.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// waitJS waits until the JavaScript expression is true in the tab ctx.
func waitJS(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(pageTimeout), chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		page, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
		t.Fatalf("waiting for %s (%s): %v\npage:\n%s", what, expr, err, page)
	}
}

// textOf returns a JavaScript expression true when the element of selector contains
// text.
func textOf(selector, text string) string {
	return fmt.Sprintf(`(function(){const e=document.querySelector(%s);return !!e && e.textContent.includes(%s);})()`,
		strconv.Quote(selector), strconv.Quote(text))
}

// confirm presses the button of selector, then Confirm in the dialog, and waits until
// the result line says what the server answered; it returns that line. The button is
// pressed from a script, in one step with finding it: the page replaces its content
// each time the App changes, and a node found first could be gone when clicked.
func confirm(t *testing.T, ctx context.Context, selector string) string {
	t.Helper()
	eval[string](t, ctx, `document.getElementById('result').className = document.getElementById('result').textContent = ''`)
	waitJS(t, ctx, "pressing "+selector, fmt.Sprintf(`(function(){const b=document.querySelector(%s);if(!b||b.disabled)return false;b.click();return true;})()`,
		strconv.Quote(selector)))
	run(t, ctx, "confirming "+selector, chromedp.WaitVisible(chromedp.CSS("#confirm-ok")), chromedp.Click(chromedp.CSS("#confirm-ok")))
	waitJS(t, ctx, "the answer to "+selector, `(function(){const r=document.getElementById('result');return r.className!=='' && r.textContent!=='Sending…';})()`)
	result := eval[string](t, ctx, `document.getElementById('result').textContent`)
	t.Logf("%s pressed, the page says: %s", selector, result)
	return result
}

// screenshot writes the tab's viewport to name in $APP_DASHBOARD_SCREENSHOTS, or in a
// temporary directory.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv(screenshotsEnv)
	if dir == "" {
		dir = t.TempDir()
	} else if !filepath.IsAbs(dir) {
		dir = filepath.Join(framework.RepoRoot(t), dir)
	}
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("taking the screenshot %s: %v", name, err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s: %d bytes", path, len(png))
}

// dashboard is a running `kubectl app dashboard`.
type dashboard struct {
	url string
	// base is the server's URL without the token.
	base string
	pid  int
	// stderr is what it wrote to its standard error so far.
	stderr func() string
}

// urlLine finds the URL the dashboard prints.
var urlLine = regexp.MustCompile(`http://127\.0\.0\.1:\d+/\?token=[0-9a-f]+`)

// startDashboard runs the plugin's dashboard with args (and the test cluster's
// kubeconfig) until the test ends and returns its URL.
func startDashboard(t *testing.T, flags ...string) dashboard {
	t.Helper()
	return startDashboardWithEnv(t, nil, flags...)
}

// startDashboardWithEnv is startDashboard with env added to the plugin's environment.
func startDashboardWithEnv(t *testing.T, env []string, flags ...string) dashboard {
	t.Helper()
	bin := framework.BuildBinary(t, "kubectl-app")
	args := append([]string{"dashboard", "--port", "0", "--open=false", "--kubeconfig", framework.Cluster().Kubeconfig,
		"--cache-dir", filepath.Join(t.TempDir(), "cache")}, flags...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(append(os.Environ(), "HOME="+t.TempDir()), env...)
	var stderr framework.LockedBuffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("kubectl app dashboard exited with %v after SIGTERM; stderr:\n%s", err, stderr.String())
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("kubectl app dashboard still running 30s after SIGTERM")
		}
	})
	found := make(chan string, 1)
	go func() {
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			if u := urlLine.FindString(scanner.Text()); u != "" {
				found <- u
			}
		}
		done <- cmd.Wait()
	}()
	select {
	case u := <-found:
		t.Logf("kubectl app dashboard %s: %s", strings.Join(flags, " "), u)
		base, _, _ := strings.Cut(u, "/?token=")
		return dashboard{url: u, base: base, pid: cmd.Process.Pid, stderr: stderr.String}
	case err := <-done:
		t.Fatalf("kubectl app dashboard exited with %v before printing its URL; stderr:\n%s", err, stderr.String())
	case <-time.After(pageTimeout):
		t.Fatalf("kubectl app dashboard printed no URL within %s; stderr:\n%s", pageTimeout, stderr.String())
	}
	return dashboard{}
}

// rss returns the resident memory of the process pid and its peak, in MiB, from
// /proc/PID/status.
func rss(t *testing.T, pid int) (current, peak float64) {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		kib, _ := strconv.ParseFloat(fields[1], 64)
		switch fields[0] {
		case "VmRSS:":
			current = kib / 1024
		case "VmHWM:":
			peak = kib / 1024
		}
	}
	return current, peak
}

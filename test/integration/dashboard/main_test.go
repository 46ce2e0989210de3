// Package dashboard tests `kubectl app dashboard` in a real browser: Chromium from
// Debian's packages, driven by chromedp, against the plugin binary run against a real
// control plane whose pods kwok runs, with the App controller in the test process. It
// follows a canary rollout on the page without a reload, presses promote, abort and a
// rollback, sees the API server refuse a user whose RBAC forbids patching Apps, checks the
// server's guards (token, Host, Origin, Content-Security-Policy), and measures the list
// of 1000 Apps and the plugin's memory. Without Chromium (make chromium installs it) the
// tests skip, except with CI=true, where they fail.
//
// APP_DASHBOARD_SCREENSHOTS=DIR writes the screenshots of the list and of an App mid
// rollout to DIR (make dashboard-screenshots: docs/images).
package dashboard

import (
	"testing"

	"github.com/app-controller/app-controller/test/integration/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

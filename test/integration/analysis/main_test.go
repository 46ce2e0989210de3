// Package analysis tests the canary analysis of the App controller (metric checks against
// a real Prometheus, AnalysisTemplates, webhook gates, restarts, the cost at scale)
// against a real control plane, as test/integration/app does the rest of the controller,
// apart from it so that the two run side by side, each on its own control plane. The
// helpers both share are test/integration/apptest's.
package analysis

import (
	"os"
	"strconv"
	"testing"

	"github.com/app-controller/app-controller/internal/localcluster"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// The Gateway API CRDs are installed: App routes with parentRefs become HTTPRoutes.
func TestMain(m *testing.M) {
	framework.MainWithOptions(m, func(o *localcluster.Options) {
		o.GatewayAPI = true
		// TestAnalysisScale's N Apps run two pods each (stable and canary).
		if n, err := strconv.Atoi(os.Getenv(scaleAppsEnv)); err == nil && n > 0 {
			o.PodCapacity = 2*n + 200
		}
	})
}

package controllermanager

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"

	"github.com/app-controller/app-controller/pkg/version"
)

const buildInfoHeader = `# HELP app_controller_build_info [ALPHA] A metric with a constant '1' value labeled by the version, git commit and Go version app-controller was built from.
# TYPE app_controller_build_info gauge
`

func TestBuildInfo(t *testing.T) {
	tests := []struct {
		name string
		info version.Info
		want string
	}{
		{
			name: "release build",
			info: version.Info{Version: "v0.1.0", Commit: "0123456789abcdef0123456789abcdef01234567", GoVersion: "go1.26.8", Platform: "linux/amd64"},
			want: `app_controller_build_info{commit="0123456789abcdef0123456789abcdef01234567",go_version="go1.26.8",version="v0.1.0"} 1`,
		},
		{
			name: "unknown build",
			info: version.Info{Version: version.Unknown, Commit: version.Unknown, GoVersion: "go1.26.8"},
			want: `app_controller_build_info{commit="unknown",go_version="go1.26.8",version="unknown"} 1`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			registry := metrics.NewKubeRegistry()
			registerBuildInfo(registry.MustRegister, tt.info)
			if err := testutil.GatherAndCompare(registry, strings.NewReader(buildInfoHeader+tt.want+"\n"), "app_controller_build_info"); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestBuildInfoOnDefaultRegistry checks the series /metrics serves: the package
// registered it with the global registry for this very binary.
func TestBuildInfoOnDefaultRegistry(t *testing.T) {
	info := version.Get()
	want := fmt.Sprintf("%sapp_controller_build_info{commit=%q,go_version=%q,version=%q} 1\n", buildInfoHeader, info.Commit, info.GoVersion, info.Version)
	if err := testutil.GatherAndCompare(legacyregistry.DefaultGatherer, strings.NewReader(want), "app_controller_build_info"); err != nil {
		t.Error(err)
	}
}

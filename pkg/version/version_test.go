package version

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestGet(t *testing.T) {
	stamped := func() (*debug.BuildInfo, bool) {
		return &debug.BuildInfo{
			Main: debug.Module{Path: "github.com/app-controller/app-controller", Version: "v0.1.1-0.20261122101010-0123456789ab+dirty"},
			Settings: []debug.BuildSetting{
				{Key: "vcs", Value: "git"},
				{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
				{Key: "vcs.modified", Value: "true"},
			},
		}, true
	}
	devel := func() (*debug.BuildInfo, bool) {
		return &debug.BuildInfo{Main: debug.Module{Path: "github.com/app-controller/app-controller", Version: "(devel)"}}, true
	}
	none := func() (*debug.BuildInfo, bool) { return nil, false }

	tests := []struct {
		name              string
		ldVersion         string
		ldCommit          string
		read              func() (*debug.BuildInfo, bool)
		wantVer, wantComm string
	}{
		{"ldflags win over build info", "v0.1.0", "ffffffffffffffffffffffffffffffffffffffff", stamped, "v0.1.0", "ffffffffffffffffffffffffffffffffffffffff"},
		{"build info when ldflags are unset", "", "", stamped, "v0.1.1-0.20261122101010-0123456789ab+dirty", "0123456789abcdef0123456789abcdef01234567"},
		{"each value falls back on its own", "v0.2.0", "", stamped, "v0.2.0", "0123456789abcdef0123456789abcdef01234567"},
		{"(devel) and no VCS stamp are unknown", "", "", devel, Unknown, Unknown},
		{"no build info at all", "", "", none, Unknown, Unknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := get(tt.ldVersion, tt.ldCommit, tt.read)
			want := Info{Version: tt.wantVer, Commit: tt.wantComm, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
			if got != want {
				t.Errorf("get() = %+v, want %+v", got, want)
			}
		})
	}
}

func TestInfoString(t *testing.T) {
	got := Info{Version: "v0.1.0", Commit: "abc", GoVersion: "go1.26.8", Platform: "linux/arm64"}.String()
	if want := "app-controller version v0.1.0, commit abc, go1.26.8 linux/arm64"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

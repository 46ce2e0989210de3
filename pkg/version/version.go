// Package version reports the version and commit app-controller was built from.
//
// Release builds set them with the linker (the Makefile and the Dockerfile do):
//
//	-ldflags "-X github.com/app-controller/app-controller/pkg/version.version=v0.1.0
//	          -X github.com/app-controller/app-controller/pkg/version.commit=<sha>"
//
// Without them (go install, go run, tests), the module version and VCS revision the Go
// toolchain embedded in the binary are used.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set with -ldflags -X; empty when the binary was built without them.
var (
	version string
	commit  string
)

// Unknown stands for a value neither the linker nor the Go build info provided.
const Unknown = "unknown"

// Info describes the build of the running binary.
type Info struct {
	// Version is a release tag or `git describe` output, such as v0.1.0-3-gabc1234-dirty.
	Version string `json:"version"`
	// Commit is the full git revision.
	Commit string `json:"commit"`
	// GoVersion is the Go toolchain that built the binary.
	GoVersion string `json:"goVersion"`
	// Platform is GOOS/GOARCH of the binary.
	Platform string `json:"platform"`
}

// String formats the Info on one line, as --version prints it.
func (i Info) String() string {
	return fmt.Sprintf("app-controller version %s, commit %s, %s %s", i.Version, i.Commit, i.GoVersion, i.Platform)
}

// Get returns the build information of the running binary.
func Get() Info {
	return get(version, commit, debug.ReadBuildInfo)
}

// get prefers the linker-set values and falls back, value by value, to the build info
// that read returns.
func get(ldVersion, ldCommit string, read func() (*debug.BuildInfo, bool)) Info {
	info := Info{
		Version:   ldVersion,
		Commit:    ldCommit,
		GoVersion: runtime.Version(),
		Platform:  runtime.GOOS + "/" + runtime.GOARCH,
	}
	if info.Version == "" || info.Commit == "" {
		if bi, ok := read(); ok && bi != nil {
			if info.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
				info.Version = bi.Main.Version
			}
			if info.Commit == "" {
				info.Commit = revision(bi)
			}
		}
	}
	if info.Version == "" {
		info.Version = Unknown
	}
	if info.Commit == "" {
		info.Commit = Unknown
	}
	return info
}

// revision returns the vcs.revision the Go toolchain stamped, "" if there is none. (A
// dirty tree shows in the module version, which ends in +dirty.)
func revision(bi *debug.BuildInfo) string {
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			return s.Value
		}
	}
	return ""
}

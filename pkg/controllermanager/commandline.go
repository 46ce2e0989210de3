package controllermanager

import (
	"flag"
	"fmt"

	"k8s.io/klog/v2"

	"github.com/app-controller/app-controller/internal/logformat"
)

// CommandLine is the flag set of the app-controller binary: klog's flags,
// --logging-format, the Options' flags and --version. The reference page
// docs/reference/flags.md is generated from it (hack/refdocs).
type CommandLine struct {
	FlagSet *flag.FlagSet
	Options *Options
	// LogFormat is where --logging-format lands, Version --version.
	LogFormat *string
	Version   *bool
}

// NewCommandLine returns the command line of the binary called name; handling says what
// a parse error does.
func NewCommandLine(name string, handling flag.ErrorHandling) *CommandLine {
	fs := flag.NewFlagSet(name, handling)
	klog.InitFlags(fs)
	c := &CommandLine{FlagSet: fs, Options: NewOptions(), LogFormat: logformat.AddFlag(fs)}
	c.Options.AddFlags(fs)
	c.Version = fs.Bool("version", false, "Print the version, git commit, Go version and platform, then exit.")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: %s [flags]\n\nRuns the app-controller controllers against a Kubernetes API server.\n\nFlags:\n", name)
		fs.PrintDefaults()
	}
	return c
}

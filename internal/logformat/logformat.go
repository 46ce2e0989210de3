// Package logformat selects the controller's log format: klog's text (the default) or
// JSON, one object a line, for log pipelines that parse structured logs.
package logformat

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"

	"k8s.io/klog/v2"
)

// The formats --logging-format accepts.
const (
	Text = "text"
	JSON = "json"
)

// AddFlag registers --logging-format on fs and returns where its value lands.
func AddFlag(fs *flag.FlagSet) *string {
	return fs.String("logging-format", Text, "Log format: text (klog) or json (one JSON object a line, with the klog verbosity -v).")
}

// Apply sets klog's logger for format, writing to out. verbosity is klog's -v: with json,
// a message of V(n) is written when n <= verbosity, as with text.
func Apply(format string, verbosity int, out io.Writer) error {
	switch format {
	case Text:
		return nil
	case JSON:
		handler := slog.NewJSONHandler(out, &slog.HandlerOptions{Level: slog.Level(-verbosity)})
		klog.SetSlogLogger(slog.New(handler))
		return nil
	default:
		return fmt.Errorf("--logging-format=%q: want %q or %q", format, Text, JSON)
	}
}

// Verbosity returns the value of klog's -v flag registered on fs by klog.InitFlags.
func Verbosity(fs *flag.FlagSet) (int, error) {
	f := fs.Lookup("v")
	if f == nil {
		return 0, fmt.Errorf("klog's -v flag is not registered")
	}
	v, err := strconv.Atoi(f.Value.String())
	if err != nil {
		return 0, fmt.Errorf("reading -v: %w", err)
	}
	return v, nil
}

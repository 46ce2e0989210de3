package logformat

import (
	"bytes"
	"encoding/json"
	"flag"
	"strings"
	"testing"

	"k8s.io/klog/v2"
)

func TestApply(t *testing.T) {
	defer klog.ClearLogger()
	tests := []struct {
		name      string
		format    string
		verbosity int
		wantErr   string
		// wantMsgs are the messages of the JSON lines written, in order.
		wantMsgs []string
	}{
		{name: "json at 2 writes V(2), not V(3)", format: JSON, verbosity: 2, wantMsgs: []string{"info", "v2"}},
		{name: "json at 4 writes V(3)", format: JSON, verbosity: 4, wantMsgs: []string{"info", "v2", "v3"}},
		{name: "text leaves klog alone", format: Text, verbosity: 2},
		{name: "unknown format", format: "xml", wantErr: `--logging-format="xml"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			klog.ClearLogger()
			var out bytes.Buffer
			err := Apply(tt.format, tt.verbosity, &out)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Apply() error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.format != JSON {
				return
			}
			logger := klog.Background()
			logger.Info("info", "key", "value")
			logger.V(2).Info("v2")
			logger.V(3).Info("v3")
			var msgs []string
			for line := range strings.Lines(out.String()) {
				var entry map[string]any
				if err := json.Unmarshal([]byte(line), &entry); err != nil {
					t.Fatalf("not a JSON line: %q: %v", line, err)
				}
				msgs = append(msgs, entry["msg"].(string))
			}
			if strings.Join(msgs, ",") != strings.Join(tt.wantMsgs, ",") {
				t.Errorf("messages = %v, want %v", msgs, tt.wantMsgs)
			}
		})
	}
}

func TestVerbosity(t *testing.T) {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	klog.InitFlags(fs)
	if err := fs.Parse([]string{"-v=3"}); err != nil {
		t.Fatal(err)
	}
	v, err := Verbosity(fs)
	if err != nil || v != 3 {
		t.Errorf("Verbosity() = %d, %v; want 3", v, err)
	}
}

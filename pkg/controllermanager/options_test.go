package controllermanager

import (
	"flag"
	"testing"
)

// TestLeaderElectFlagSpellings checks that kube-controller-manager's spellings of the
// lease's namespace and name flags set the same options as ours.
func TestLeaderElectFlagSpellings(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantNS   string
		wantName string
	}{
		{"ours", []string{"--leader-elect-namespace=ns1", "--leader-elect-name=lease1"}, "ns1", "lease1"},
		{"kube-controller-manager's", []string{"--leader-elect-resource-namespace=ns2", "--leader-elect-resource-name=lease2"}, "ns2", "lease2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := NewOptions()
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			opts.AddFlags(fs)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			if opts.LeaderElectNamespace != tt.wantNS || opts.LeaderElectName != tt.wantName {
				t.Errorf("lease = %s/%s, want %s/%s", opts.LeaderElectNamespace, opts.LeaderElectName, tt.wantNS, tt.wantName)
			}
		})
	}
}

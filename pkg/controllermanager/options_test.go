package controllermanager

import (
	"flag"
	"strings"
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

// TestDefaultGateway checks the parsing of --default-gateway: NAMESPACE/NAME or
// NAMESPACE/NAME/LISTENER, each part a valid name, else Validate says which.
func TestDefaultGateway(t *testing.T) {
	for _, tc := range []struct {
		value, want, err string
	}{
		{value: "", want: ""},
		{value: "infra/public", want: "infra/public"},
		{value: "infra/public/https", want: "infra/public/https"},
		{value: "public", err: `--default-gateway "public": want NAMESPACE/NAME or NAMESPACE/NAME/LISTENER`},
		{value: "infra/Public", err: `--default-gateway "infra/Public": "Public": a lowercase RFC 1123 subdomain`},
		{value: "in.fra/public", err: `--default-gateway "in.fra/public": "in.fra": must not contain dots`},
	} {
		o := NewOptions()
		o.DefaultGateway = tc.value
		err := o.Validate()
		ref, _ := o.defaultGateway()
		got := ""
		if ref != nil {
			got = ref.String("")
		}
		if tc.err == "" && (err != nil || got != tc.want) || tc.err != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.err)) {
			t.Errorf("--default-gateway %q: %q, %v; want %q, %q", tc.value, got, err, tc.want, tc.err)
		}
	}
}

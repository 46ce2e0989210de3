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

// TestWatchNamespaces checks --watch-namespace: repeatable and comma-separated, each a
// namespace name, none twice.
func TestWatchNamespaces(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
		err  string
	}{
		{args: nil, want: ""},
		{args: []string{"--watch-namespace=team-a"}, want: "team-a"},
		{args: []string{"--watch-namespace=team-a", "--watch-namespace=team-b,team-c"}, want: "team-a,team-b,team-c"},
		{args: []string{"--watch-namespace=Team_A"}, err: `--watch-namespace "Team_A": a lowercase RFC 1123 label`},
		{args: []string{"--watch-namespace=team-a,team-a"}, err: `--watch-namespace "team-a" is given twice`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			opts := NewOptions()
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			opts.AddFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err := opts.Validate()
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("Validate() = %v, want an error containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(opts.WatchNamespaces, ","); got != tc.want {
				t.Errorf("namespaces = %q, want %q", got, tc.want)
			}
		})
	}
}

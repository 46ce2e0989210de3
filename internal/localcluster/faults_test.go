package localcluster

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCompactEtcd checks the two calls to etcd's JSON gateway: a range to read the
// current revision, then a physical compaction at that revision; and that an etcd error
// is reported.
func TestCompactEtcd(t *testing.T) {
	tests := []struct {
		name       string
		revision   string
		compactErr int // status of the compaction call, 0 = OK
		wantErr    string
	}{
		{name: "compacts at the current revision", revision: "1567"},
		{name: "compaction refused", revision: "12", compactErr: http.StatusBadRequest, wantErr: "compacting etcd at revision 12"},
		{name: "unreadable revision", revision: "x", wantErr: "reading etcd's revision"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var compacted map[string]any
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch r.URL.Path {
				case "/v3/kv/range":
					_ = json.NewEncoder(w).Encode(map[string]any{"header": map[string]string{"revision": tt.revision}})
				case "/v3/kv/compaction":
					if tt.compactErr != 0 {
						http.Error(w, `{"error":"mvcc: required revision has been compacted"}`, tt.compactErr)
						return
					}
					_ = json.NewDecoder(r.Body).Decode(&compacted)
					_, _ = w.Write([]byte(`{"header":{}}`))
				default:
					http.NotFound(w, r)
				}
			}))
			defer srv.Close()
			c := &Cluster{etcdURL: srv.URL}
			rev, err := c.CompactEtcd(context.Background())
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if rev != 1567 || compacted["revision"] != "1567" || compacted["physical"] != true {
				t.Errorf("revision %d, compaction request %v; want 1567, physical", rev, compacted)
			}
		})
	}
}

// TestAuditArgs: no flags without Options.AuditLog; with it, the policy file is written
// and the flags point kube-apiserver at it and at the log.
func TestAuditArgs(t *testing.T) {
	dir := t.TempDir()
	if args, err := (&Cluster{StateDir: dir}).auditArgs(); err != nil || len(args) != 0 {
		t.Errorf("without an audit log: %v, %v; want no flags", args, err)
	}
	c := &Cluster{StateDir: dir, AuditLogPath: filepath.Join(dir, "logs", auditLogFile)}
	args, err := c.auditArgs()
	if err != nil {
		t.Fatal(err)
	}
	policy := filepath.Join(dir, "audit-policy.yaml")
	want := []string{"--audit-policy-file=" + policy, "--audit-log-path=" + c.AuditLogPath}
	for _, w := range want {
		if !strings.Contains(strings.Join(args, " "), w) {
			t.Errorf("flags %v lack %s", args, w)
		}
	}
	data, err := os.ReadFile(policy)
	if err != nil || !strings.Contains(string(data), "kind: Policy") {
		t.Errorf("policy file: %v, %q", err, data)
	}
}

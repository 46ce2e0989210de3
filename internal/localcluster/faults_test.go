package localcluster

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
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

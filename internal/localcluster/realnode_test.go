package localcluster

import "testing"

// TestCRIPluginStatus reads the CRI plugin's status from ctr plugins ls, as containerd
// 1.6 (Debian 12) prints it.
func TestCRIPluginStatus(t *testing.T) {
	const header = "TYPE                            ID                       PLATFORMS      STATUS    \n" +
		"io.containerd.content.v1        content                  -              ok        \n" +
		"io.containerd.snapshotter.v1    aufs                     linux/amd64    skip      \n"
	for _, tt := range []struct{ name, out, want string }{
		{"loaded", header + "io.containerd.grpc.v1           cri                      linux/amd64    ok        \n", "ok"},
		{"failed", header + "io.containerd.grpc.v1           cri                      linux/amd64    error     \n", "error"},
		{"not listed", header + "io.containerd.grpc.v1           introspection            -              ok        \n", ""},
		{"empty", "", ""},
	} {
		if got := criPluginStatus(tt.out); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}

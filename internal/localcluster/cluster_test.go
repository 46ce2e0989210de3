package localcluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// TestStartComponent runs startComponent with a shell script in place of a component:
// the script prints "ready" to its log when it is up.
func TestStartComponent(t *testing.T) {
	tests := []struct {
		name         string
		script       string // %s is replaced by the path of a marker file
		timeout      time.Duration
		wantErr      []string
		wantAttempts int
	}{
		{
			name:         "ready at once",
			script:       "echo ready; exec sleep 60",
			timeout:      10 * time.Second,
			wantAttempts: 1,
		},
		{
			name: "port taken on the first attempt, retried with a new port",
			script: `if [ ! -e %[1]s ]; then touch %[1]s; echo "listen tcp 127.0.0.1:$1: bind: address already in use"; exit 1; fi
echo ready; exec sleep 60`,
			timeout:      10 * time.Second,
			wantAttempts: 2,
		},
		{
			name:         "port taken twice",
			script:       `echo "listen tcp 127.0.0.1:$1: bind: address already in use"; exit 1`,
			timeout:      10 * time.Second,
			wantErr:      []string{"starting kwok", "exit status 1", "address already in use", "kwok.log"},
			wantAttempts: 2,
		},
		{
			name:         "exits with an error",
			script:       `echo "error: unknown flag --bogus" >&2; exit 3`,
			timeout:      10 * time.Second,
			wantErr:      []string{"starting kwok", "exit status 3", "unknown flag --bogus"},
			wantAttempts: 1,
		},
		{
			name:         "never ready",
			script:       `echo starting; exec sleep 60`,
			timeout:      500 * time.Millisecond,
			wantErr:      []string{"starting kwok", "not ready after 500ms", "starting"},
			wantAttempts: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			binDir := t.TempDir()
			marker := filepath.Join(binDir, "attempted")
			script := "#!/bin/sh\n" + strings.ReplaceAll(tt.script, "%[1]s", marker) + "\n"
			if err := os.WriteFile(filepath.Join(binDir, kwokName), []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			stateDir := filepath.Join(t.TempDir(), "state")
			var out bytes.Buffer
			c := &Cluster{
				StateDir: stateDir,
				LogDir:   filepath.Join(stateDir, "logs"),
				opts:     Options{BinDir: binDir, StateDir: stateDir},
				out:      &out,
				procs:    map[string]*process{},
				started:  map[string]startedComponent{},
			}
			if err := os.MkdirAll(c.LogDir, 0o755); err != nil {
				t.Fatal(err)
			}
			logPath := filepath.Join(c.LogDir, kwokName+".log")
			var seenPorts []int
			ports, err := c.startComponent(context.Background(), component{
				name:   kwokName,
				nPorts: 1,
				args: func(ports []int) []string {
					seenPorts = append(seenPorts, ports[0])
					return []string{fmt.Sprint(ports[0])}
				},
				ready: func(context.Context, []int) error {
					if data, _ := os.ReadFile(logPath); !bytes.Contains(data, []byte("\nready\n")) {
						return fmt.Errorf("no ready line yet")
					}
					return nil
				},
				timeout: tt.timeout,
				address: func(ports []int) string { return hostPort(ports[0]) },
			})
			if len(seenPorts) != tt.wantAttempts {
				t.Errorf("%d attempts (ports %v), want %d", len(seenPorts), seenPorts, tt.wantAttempts)
			}
			if len(seenPorts) == 2 && seenPorts[0] == seenPorts[1] {
				t.Errorf("retry used the same port %d", seenPorts[0])
			}
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatal("startComponent succeeded, want an error")
				}
				for _, want := range tt.wantErr {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not contain %q", err, want)
					}
				}
			} else {
				if err != nil {
					t.Fatalf("startComponent: %v", err)
				}
				if len(ports) != 1 || ports[0] != seenPorts[len(seenPorts)-1] {
					t.Errorf("ports = %v, want the last attempt's %v", ports, seenPorts)
				}
				if !strings.Contains(out.String(), "kwok ready on 127.0.0.1:") {
					t.Errorf("progress output %q lacks the ready line", out.String())
				}
			}

			pids := c.PIDs()
			if err := c.Stop(); err != nil {
				t.Fatalf("Stop: %v", err)
			}
			for name, pid := range pids {
				if err := syscall.Kill(pid, 0); err == nil {
					t.Errorf("%s (pid %d) still running after Stop", name, pid)
				}
			}
			if _, err := os.Stat(stateDir); !os.IsNotExist(err) {
				t.Errorf("state directory still there after Stop: %v", err)
			}
			if err := c.Stop(); err != nil {
				t.Errorf("second Stop: %v", err)
			}
		})
	}
}

func TestStartValidatesOptions(t *testing.T) {
	binDir := t.TempDir()
	makeBinDir(t, binDir, false)
	nonEmpty := t.TempDir()
	if err := os.WriteFile(filepath.Join(nonEmpty, "something"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		opts    Options
		wantErr string
	}{
		{"no bin dir", Options{StateDir: t.TempDir()}, "BinDir and Options.StateDir are required"},
		{"no state dir", Options{BinDir: binDir}, "BinDir and Options.StateDir are required"},
		{"binaries missing", Options{BinDir: t.TempDir(), StateDir: t.TempDir()}, "run `make tools`"},
		{"state dir not empty", Options{BinDir: binDir, StateDir: nonEmpty}, "is not empty"},
		{"kube bin dir without the control plane", Options{BinDir: binDir, KubeBinDir: t.TempDir(), StateDir: t.TempDir()},
			"kube-apiserver, kube-controller-manager, kube-scheduler: build them with `make test-compat VERSIONS=MINOR`"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Start(context.Background(), tt.opts)
			if err == nil {
				_ = c.Stop()
				t.Fatal("Start succeeded")
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Start() error = %q, want it to contain %q", err, tt.wantErr)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(nonEmpty, "something")); err != nil {
		t.Errorf("Start touched a non-empty state directory: %v", err)
	}
}

// TestBinary checks where each component's binary comes from: KubeBinDir, when set,
// for the three components of a Kubernetes release it replaces; BinDir for the others.
func TestBinary(t *testing.T) {
	for _, tt := range []struct {
		kubeBinDir string
		name       string
		want       string
	}{
		{"", apiserverName, "/bin/kube-apiserver"},
		{"", etcdName, "/bin/etcd"},
		{"/compat/1.34", apiserverName, "/compat/1.34/kube-apiserver"},
		{"/compat/1.34", controllerManagerName, "/compat/1.34/kube-controller-manager"},
		{"/compat/1.34", schedulerName, "/compat/1.34/kube-scheduler"},
		{"/compat/1.34", etcdName, "/bin/etcd"},
		{"/compat/1.34", kwokName, "/bin/kwok"},
		{"/compat/1.34", kubeletName, "/bin/kubelet"},
	} {
		c := &Cluster{opts: Options{BinDir: "/bin", KubeBinDir: tt.kubeBinDir}}
		if got := c.binary(tt.name); got != tt.want {
			t.Errorf("KubeBinDir %q: binary(%s) = %s, want %s", tt.kubeBinDir, tt.name, got, tt.want)
		}
	}
}

func TestNodeNames(t *testing.T) {
	tests := []struct {
		podCapacity int
		want        []string
	}{
		{0, []string{"kwok-node-0"}},
		{1, []string{"kwok-node-0"}},
		{KwokNodePods, []string{"kwok-node-0"}},
		{KwokNodePods + 1, []string{"kwok-node-0", "kwok-node-1"}},
		{3 * KwokNodePods, []string{"kwok-node-0", "kwok-node-1", "kwok-node-2"}},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.podCapacity), func(t *testing.T) {
			if got := NodeNames(tc.podCapacity); !slices.Equal(got, tc.want) {
				t.Errorf("NodeNames(%d) = %v, want %v", tc.podCapacity, got, tc.want)
			}
		})
	}
	if got := NodeNames(0)[0]; got != DefaultNodeName {
		t.Errorf("first node %q, want DefaultNodeName %q", got, DefaultNodeName)
	}
}

// TestAuditPolicy: writes are logged once complete; without users also the lists and
// watches of the app-controller group (the reliability tests see relists); with users,
// only those users' writes (the benchmark counts each client's writes apart).
func TestAuditPolicy(t *testing.T) {
	type rule struct {
		Level     string   `json:"level"`
		Verbs     []string `json:"verbs"`
		Users     []string `json:"users"`
		Resources []struct {
			Group     string   `json:"group"`
			Resources []string `json:"resources"`
		} `json:"resources"`
	}
	writes := []string{"create", "update", "patch", "delete", "deletecollection"}
	for _, tc := range []struct {
		name   string
		users  []string
		bodies []AuditBody
		check  func(rules []rule) bool
	}{
		{"every user", nil, nil, func(r []rule) bool {
			return len(r) == 3 && r[0].Level == "Metadata" && slices.Equal(r[0].Verbs, writes) && len(r[0].Users) == 0 &&
				r[1].Level == "Metadata" && slices.Equal(r[1].Verbs, []string{"list", "watch"}) &&
				len(r[1].Resources) == 1 && r[1].Resources[0].Group == "appcontroller.k8s.io" &&
				r[2].Level == "None"
		}},
		{"some users", []string{"bench:app-controller", "bench:floor"}, nil, func(r []rule) bool {
			return len(r) == 2 && r[0].Level == "Metadata" && slices.Equal(r[0].Verbs, writes) &&
				slices.Equal(r[0].Users, []string{"bench:app-controller", "bench:floor"}) &&
				r[1].Level == "None" && len(r[1].Users) == 0
		}},
		// The soak's: the Apps' status as written, the Deployments' requests, before the
		// rule of every write (rules match in order).
		{"bodies", []string{"soak:a"}, []AuditBody{
			{Group: "appcontroller.k8s.io", Resources: []string{"apps/status"}, Level: AuditLevelRequestResponse},
			{Group: "apps", Resources: []string{"deployments"}, Level: AuditLevelRequest},
		}, func(r []rule) bool {
			return len(r) == 4 && r[0].Level == "RequestResponse" && slices.Equal(r[0].Verbs, writes) && slices.Equal(r[0].Users, []string{"soak:a"}) &&
				len(r[0].Resources) == 1 && r[0].Resources[0].Group == "appcontroller.k8s.io" && slices.Equal(r[0].Resources[0].Resources, []string{"apps/status"}) &&
				r[1].Level == "Request" && len(r[1].Resources) == 1 && r[1].Resources[0].Group == "apps" && slices.Equal(r[1].Resources[0].Resources, []string{"deployments"}) &&
				r[2].Level == "Metadata" && len(r[2].Resources) == 0 && slices.Equal(r[2].Users, []string{"soak:a"}) && r[3].Level == "None"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			c := &Cluster{StateDir: dir, AuditLogPath: filepath.Join(dir, "logs", auditLogFile), opts: Options{AuditUsers: tc.users, AuditBodies: tc.bodies}}
			args, err := c.auditArgs()
			if err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(filepath.Join(dir, auditPolicyFile))
			if err != nil {
				t.Fatal(err)
			}
			var policy struct {
				Kind  string `json:"kind"`
				Rules []rule `json:"rules"`
			}
			if err := yaml.Unmarshal(data, &policy); err != nil {
				t.Fatalf("the policy is not YAML: %v\n%s", err, data)
			}
			if policy.Kind != "Policy" || !tc.check(policy.Rules) {
				t.Errorf("unexpected policy:\n%s", data)
			}
			for _, want := range []string{"--audit-log-path=" + c.AuditLogPath, "--audit-policy-file=" + filepath.Join(dir, auditPolicyFile)} {
				if !slices.Contains(args, want) {
					t.Errorf("args %v lack %s", args, want)
				}
			}
		})
	}
	if args, err := (&Cluster{StateDir: t.TempDir()}).auditArgs(); err != nil || len(args) != 0 {
		t.Errorf("without an audit log: %v, %v; want no flags", args, err)
	}
}

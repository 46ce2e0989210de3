package localcluster

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// flagValues turns "--name=value" arguments into a map from name to its values.
func flagValues(t *testing.T, args []string) map[string][]string {
	t.Helper()
	flags := map[string][]string{}
	for _, a := range args {
		name, value, ok := strings.Cut(a, "=")
		if !ok || !strings.HasPrefix(name, "--") {
			t.Fatalf("argument %q is not of the form --name=value", a)
		}
		flags[name] = append(flags[name], value)
	}
	return flags
}

func TestComponentArgs(t *testing.T) {
	certs := &certFiles{
		CACert: "/s/certs/ca.crt", CAKey: "/s/certs/ca.key",
		ServingCert: "/s/certs/apiserver.crt", ServingKey: "/s/certs/apiserver.key",
		ServiceAccountPrivateKey: "/s/certs/sa.key", ServiceAccountPublicKey: "/s/certs/sa.pub",
		FrontProxyCACert: "/s/certs/front-proxy-ca.crt", FrontProxyClientCert: "/s/certs/front-proxy-client.crt",
		FrontProxyClientKey: "/s/certs/front-proxy-client.key",
	}
	const kubeconfig = "/s/kubeconfig"
	tests := []struct {
		name string
		args []string
		want map[string]string // flags that must have exactly this value
		// repeated flags that must have exactly these values, in order
		wantRepeated map[string][]string
	}{
		{
			name: "etcd",
			args: etcdArgs("/s/etcd", 40001, 40002),
			want: map[string]string{
				"--data-dir":                    "/s/etcd",
				"--listen-client-urls":          "http://127.0.0.1:40001",
				"--advertise-client-urls":       "http://127.0.0.1:40001",
				"--listen-peer-urls":            "http://127.0.0.1:40002",
				"--initial-advertise-peer-urls": "http://127.0.0.1:40002",
				"--initial-cluster":             "localcluster=http://127.0.0.1:40002",
				"--unsafe-no-fsync":             "true",
				"--log-level":                   "warn",
			},
		},
		{
			name: "kube-apiserver",
			args: apiserverArgs(certs, "/s/apiserver-certs", "http://127.0.0.1:40001", 40003),
			want: map[string]string{
				"--advertise-address":                "127.0.0.1",
				"--bind-address":                     "127.0.0.1",
				"--secure-port":                      "40003",
				"--etcd-servers":                     "http://127.0.0.1:40001",
				"--tls-cert-file":                    "/s/certs/apiserver.crt",
				"--tls-private-key-file":             "/s/certs/apiserver.key",
				"--client-ca-file":                   "/s/certs/ca.crt",
				"--authorization-mode":               "RBAC",
				"--service-cluster-ip-range":         "10.96.0.0/16",
				"--service-account-issuer":           "https://kubernetes.default.svc.cluster.local",
				"--service-account-key-file":         "/s/certs/sa.pub",
				"--service-account-signing-key-file": "/s/certs/sa.key",
				"--cert-dir":                         "/s/apiserver-certs",
				"--disable-admission-plugins":        "TaintNodesByCondition",
				"--enable-admission-plugins":         "OwnerReferencesPermissionEnforcement",
				// The aggregation layer, to an endpoint this machine can reach.
				"--requestheader-client-ca-file": "/s/certs/front-proxy-ca.crt",
				"--requestheader-allowed-names":  "front-proxy-client",
				"--proxy-client-cert-file":       "/s/certs/front-proxy-client.crt",
				"--proxy-client-key-file":        "/s/certs/front-proxy-client.key",
				"--enable-aggregator-routing":    "true",
			},
		},
		{
			name: "kube-controller-manager",
			args: controllerManagerArgs(certs, kubeconfig, 40004, controllerList(false, false)),
			want: map[string]string{
				"--kubeconfig":                            kubeconfig,
				"--bind-address":                          "127.0.0.1",
				"--secure-port":                           "40004",
				"--controllers":                           "*,-serviceaccount-token,-node-lifecycle-controller",
				"--leader-elect":                          "false",
				"--use-service-account-credentials":       "false",
				"--service-account-private-key-file":      "/s/certs/sa.key",
				"--root-ca-file":                          "/s/certs/ca.crt",
				"--kube-api-qps":                          "1000",
				"--kube-api-burst":                        "2000",
				"--concurrent-deployment-syncs":           concurrentSyncs,
				"--concurrent-replicaset-syncs":           concurrentSyncs,
				"--horizontal-pod-autoscaler-sync-period": "1s",
				"--tls-cert-file":                         "/s/certs/apiserver.crt",
			},
		},
		{
			name: "kube-controller-manager of a real node under pressure",
			args: controllerManagerArgs(certs, kubeconfig, 40004, controllerList(true, false)),
			want: map[string]string{"--controllers": "*,-serviceaccount-token"},
		},
		{
			name: "kube-scheduler",
			args: schedulerArgs(certs, kubeconfig, 40005),
			want: map[string]string{
				"--kubeconfig":     kubeconfig,
				"--bind-address":   "127.0.0.1",
				"--secure-port":    "40005",
				"--leader-elect":   "false",
				"--kube-api-qps":   "1000",
				"--kube-api-burst": "2000",
			},
		},
		{
			name: "metrics-server",
			args: metricsServerArgs("/s/metrics-server", "/s/metrics-server/kubeconfig", "/s/certs/ca.crt", "10.201.1.1", 40007),
			want: map[string]string{
				"--kubeconfig":                      "/s/metrics-server/kubeconfig",
				"--authentication-kubeconfig":       "/s/metrics-server/kubeconfig",
				"--authorization-kubeconfig":        "/s/metrics-server/kubeconfig",
				"--bind-address":                    "10.201.1.1",
				"--secure-port":                     "40007",
				"--tls-cert-file":                   "/s/metrics-server/serving.crt",
				"--kubelet-preferred-address-types": "InternalIP",
				"--kubelet-certificate-authority":   "/s/certs/ca.crt",
				"--metric-resolution":               "10s",
				"--kubelet-request-timeout":         "5s",
			},
		},
		{
			name: "kwok",
			args: kwokArgs(kubeconfig, []string{"/b/kwok-stages/a.yaml", "/b/kwok-stages/b.yaml"}, 40006),
			want: map[string]string{
				"--kubeconfig":                            kubeconfig,
				"--manage-all-nodes":                      "false",
				"--manage-nodes-with-annotation-selector": "kwok.x-k8s.io/node=fake",
				"--server-address":                        "127.0.0.1:40006",
			},
			wantRepeated: map[string][]string{
				"--config": {"/b/kwok-stages/a.yaml", "/b/kwok-stages/b.yaml"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			flags := flagValues(t, tt.args)
			for name, want := range tt.want {
				if got := flags[name]; len(got) != 1 || got[0] != want {
					t.Errorf("%s = %q, want [%q]", name, got, want)
				}
			}
			for name, want := range tt.wantRepeated {
				if got := flags[name]; !reflect.DeepEqual(got, want) {
					t.Errorf("%s = %q, want %q", name, got, want)
				}
			}
			for name, values := range flags {
				if _, repeated := tt.wantRepeated[name]; len(values) > 1 && !repeated {
					t.Errorf("%s given %d times: %q", name, len(values), values)
				}
				for _, v := range values {
					// Nothing listens on every interface (only loopback, and metrics-server on
					// the host end of the node's veth), nor on a well-known port.
					if strings.Contains(v, "0.0.0.0") {
						t.Errorf("%s=%s listens on all interfaces", name, v)
					}
					for _, port := range []string{":2379", ":2380", ":6443", ":10257", ":10259"} {
						if strings.HasSuffix(v, port) {
							t.Errorf("%s=%s uses a fixed well-known port", name, v)
						}
					}
				}
			}
		})
	}
}

func TestKwokStageFiles(t *testing.T) {
	stage := "apiVersion: kwok.x-k8s.io/v1alpha1\nkind: Stage\nmetadata:\n  name: x\n"
	tests := []struct {
		name    string
		files   map[string]string
		want    []string
		wantErr string
	}{
		{
			name: "stages only, kustomization skipped",
			files: map[string]string{
				"pod-ready.yaml":       stage,
				"node-initialize.yaml": stage,
				"kustomization.yaml":   "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- pod-ready.yaml\n",
				"README.md":            "kind: Stage\n",
			},
			want: []string{"node-initialize.yaml", "pod-ready.yaml"},
		},
		{
			name:  "CRLF line endings",
			files: map[string]string{"a.yml": strings.ReplaceAll(stage, "\n", "\r\n")},
			want:  []string{"a.yml"},
		},
		{
			name:    "no stage files",
			files:   map[string]string{"kustomization.yaml": "kind: Kustomization\n"},
			wantErr: "run `make tools`",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range tt.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := kwokStageFiles(dir)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("kwokStageFiles() error = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, w := range tt.want {
				want = append(want, filepath.Join(dir, w))
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("kwokStageFiles() = %q, want %q", got, want)
			}
		})
	}
	if _, err := kwokStageFiles(filepath.Join(t.TempDir(), "missing")); err == nil || !strings.Contains(err.Error(), "make tools") {
		t.Errorf("missing stage directory: error = %v, want one saying to run make tools", err)
	}
}

// TestWithoutAutoscalerController checks that NoAutoscalerController turns off
// kube-controller-manager's HorizontalPodAutoscaler controller and nothing else, with or
// without the node lifecycle controller.
func TestWithoutAutoscalerController(t *testing.T) {
	for _, lifecycle := range []bool{false, true} {
		got := controllerList(lifecycle, true)
		want := controllerList(lifecycle, false) + ",-horizontal-pod-autoscaler-controller"
		if got != want {
			t.Errorf("node lifecycle %t: got %q, want %q", lifecycle, got, want)
		}
	}
	if got := controllerList(false, false); got != controllers {
		t.Errorf("got %q, want %q", got, controllers)
	}
}

// TestAPIServerOptionArgs checks the flags Options add to kube-apiserver's: none by
// default, each option's when set.
func TestAPIServerOptionArgs(t *testing.T) {
	if got := (&Options{}).apiserverOptionArgs(); len(got) != 0 {
		t.Errorf("default options add %q, want nothing", got)
	}
	o := &Options{Profiling: true, FeatureGates: "CBORServingAndStorage=true", EventTTL: 10 * time.Minute}
	want := []string{"--profiling=true", "--feature-gates=CBORServingAndStorage=true", "--event-ttl=10m0s"}
	if got := o.apiserverOptionArgs(); !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

package framework

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// The controller binary run as a pod of an install would run it (the chart's tests and
// test/compat): with the install's arguments, as its ServiceAccount.

// controllerStopGrace is how long the controller has to exit after SIGTERM when the test
// ends (the chart's --shutdown-timeout is 30s).
const controllerStopGrace = 40 * time.Second

// ServiceAccountKubeconfig writes a kubeconfig for the ServiceAccount ns/name of the test
// cluster, with a token of the TokenRequest API valid for an hour, and returns its path.
func ServiceAccountKubeconfig(t testing.TB, ns, name string) string {
	t.Helper()
	cfg := Config(t)
	token, err := Client(t).CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: new(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("requesting a token of ServiceAccount %s/%s: %v", ns, name, err)
	}
	ca := cfg.CAData
	if len(ca) == 0 && cfg.CAFile != "" {
		if ca, err = os.ReadFile(cfg.CAFile); err != nil {
			t.Fatal(err)
		}
	}
	kubeconfig := clientcmdapi.NewConfig()
	kubeconfig.Clusters["local"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: ca}
	kubeconfig.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token.Status.Token}
	kubeconfig.Contexts[name] = &clientcmdapi.Context{Cluster: "local", AuthInfo: name, Namespace: ns}
	kubeconfig.CurrentContext = name
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kubeconfig, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// LocalArgs returns the arguments of the controller's container in an install (args),
// fit to run the binary on this machine: the node label rules the pod mounts read from
// rulesFile, the probe and metrics servers on loopback ports the kernel picks.
func LocalArgs(args []string, rulesFile string) []string {
	local := make([]string, len(args))
	for i, arg := range args {
		name, _, _ := strings.Cut(arg, "=")
		switch name {
		case "--node-label-config":
			local[i] = name + "=" + rulesFile
		case "--health-probe-bind-address", "--metrics-bind-address":
			local[i] = name + "=127.0.0.1:0"
		default:
			local[i] = arg
		}
	}
	return local
}

// RunController builds ./cmd/app-controller (BuildBinary) and runs it with args, as a
// pod in namespace ns would (POD_NAMESPACE). It is stopped by SIGTERM when the test
// ends, which fails if it then exits with an error or not within 40s; its output is
// logged if the test failed. The returned function returns its output so far.
func RunController(t testing.TB, ns string, args []string) (logs func() string) {
	t.Helper()
	bin := BuildBinary(t, "app-controller")
	var out LockedBuffer
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "POD_NAMESPACE="+ns)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Logf("running app-controller %s", strings.Join(args, " "))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("app-controller exited with %v after SIGTERM", err)
			}
		case <-time.After(controllerStopGrace):
			_ = cmd.Process.Kill()
			t.Errorf("app-controller still running %v after SIGTERM", controllerStopGrace)
		}
		if t.Failed() {
			t.Logf("app-controller output:\n%s", out.String())
		}
	})
	return out.String
}

// GrepLines returns the lines of s that contain substr.
func GrepLines(s, substr string) string {
	var out []string
	for line := range strings.Lines(s) {
		if strings.Contains(line, substr) {
			out = append(out, strings.TrimRight(line, "\n"))
		}
	}
	return strings.Join(out, "\n")
}

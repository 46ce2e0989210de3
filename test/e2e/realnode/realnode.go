// Package realnode is the end-to-end tests' harness: a local cluster whose node runs pods
// for real (localcluster.NodeReal), and the ways a user drives it (make, helm and kubectl
// as commands, HTTP requests sent from inside a pod).
//
//	func TestMain(m *testing.M) { realnode.Main(m) }
//
// Every request to a pod or Service address is sent from inside a pod: the test opens a
// `kubectl port-forward` to an agnhost netexec pod (the tunnel runs through the apiserver
// and the kubelet) and asks it, with netexec's /dial, to make the request. Nothing is
// sent from this machine's own network namespace to a pod or Service address.
package realnode

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/app-controller/app-controller/internal/localcluster"
	"github.com/app-controller/app-controller/internal/plugin"
	"github.com/app-controller/app-controller/test/harness"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// Main starts a local cluster with a real node for the package's tests (see
// framework.Main), runs them and stops it. The App CRD is not installed: the tests
// install the product as users do, CRD included.
func Main(m *testing.M) {
	framework.MainWithOptions(m, func(o *localcluster.Options) {
		o.Node = localcluster.NodeReal
		o.CRDDir = ""
	})
}

// Registry returns the HOST:PORT of the cluster's registry, as `make cluster-up NODE=real`
// writes it to .local/registry.
func Registry(t testing.TB) string {
	t.Helper()
	c := framework.Cluster()
	if c == nil || c.Registry == "" {
		t.Fatal("realnode: no real node; call realnode.Main(m) from TestMain")
	}
	return c.Registry
}

// Agnhost returns the name under which pods pull agnhost 2.66.1.
func Agnhost(t testing.TB) string {
	return Registry(t) + "/" + localcluster.AgnhostImage
}

// Root returns the repository's root directory (framework.RepoRoot).
func Root(t testing.TB) string {
	t.Helper()
	return framework.RepoRoot(t)
}

// BinDir returns the directory of the binaries built by make, bin/ (framework.BinDir).
func BinDir(t testing.TB) string {
	t.Helper()
	return framework.BinDir(t)
}

// Run runs a command in the repository's root against the test cluster (KUBECONFIG set
// to its admin kubeconfig) and returns its combined output; a failure fails the test.
func Run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := TryRun(name, args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return out
}

// RunStdin is Run with stdin as the command's standard input.
func RunStdin(t testing.TB, stdin []byte, name string, args ...string) string {
	t.Helper()
	out, err := run(stdin, name, args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return out
}

// TryRun is Run that returns the error instead of failing the test.
func TryRun(name string, args ...string) (string, error) {
	return run(nil, name, args...)
}

func run(stdin []byte, name string, args ...string) (string, error) {
	root, err := localcluster.RepoRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.Command(name, args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "KUBECONFIG="+framework.Cluster().Kubeconfig)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return string(out), nil
}

// Make runs make with args in the repository's root, as the README tells users to.
func Make(t testing.TB, args ...string) string {
	t.Helper()
	return Run(t, "make", append([]string{"--no-print-directory"}, args...)...)
}

// Helm runs bin/helm (make helm) against the test cluster.
func Helm(t testing.TB, args ...string) string {
	t.Helper()
	return Run(t, filepath.Join(BinDir(t), "helm"), args...)
}

// Kubectl runs bin/kubectl against the test cluster.
func Kubectl(t testing.TB, args ...string) string {
	t.Helper()
	return Run(t, filepath.Join(BinDir(t), "kubectl"), args...)
}

// KubectlApp runs `kubectl app ARGS` against the test cluster with the plugin's code, in
// the test process, and returns its output (stdout and stderr) and exit code.
func KubectlApp(t testing.TB, args ...string) (string, int) {
	t.Helper()
	var out bytes.Buffer
	args = append(args, "--kubeconfig", framework.Cluster().Kubeconfig)
	code := plugin.Run(context.Background(), args, genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out})
	return out.String(), code
}

// Prober sends HTTP requests from inside a pod: an agnhost netexec pod in a namespace of
// the test, reached through `kubectl port-forward`.
type Prober struct {
	t         testing.TB
	namespace string
	base      string // http://127.0.0.1:PORT, the port-forward's local end
}

// NewProber starts the netexec pod "prober" in namespace and a port-forward to it, both
// ended when the test ends.
func NewProber(t testing.TB, namespace string) *Prober {
	t.Helper()
	client := framework.Client(t)
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "prober", Namespace: namespace, Labels: map[string]string{"app": "prober"}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:  "netexec",
				Image: Agnhost(t),
				Args:  []string{"netexec", "--http-port=8080"},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
					HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)},
				}, PeriodSeconds: 1},
			}},
			TerminationGracePeriodSeconds: new(int64),
		},
	}
	if _, err := client.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating the prober pod: %v", err)
	}
	framework.Eventually(t, 2*time.Minute, func() (bool, error) {
		p, err := client.CoreV1().Pods(namespace).Get(ctx, "prober", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	return &Prober{t: t, namespace: namespace, base: PortForward(t, namespace, "pod/prober", 8080)}
}

// PortForward runs `kubectl port-forward TARGET :PORT` in namespace until the test ends
// (harness.StartPortForward) and returns the local end, http://127.0.0.1:LOCALPORT.
func PortForward(t testing.TB, namespace, target string, port int) string {
	t.Helper()
	f, err := harness.StartPortForward(filepath.Join(BinDir(t), "kubectl"), framework.Cluster().Kubeconfig, namespace, target, port)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Stop)
	return f.URL
}

// GetHost sends GET base+path with Host host and the given headers, base being the local
// end of a port-forward (PortForward: to Traefik's web entry point, or to a Service), and
// returns the body of a 200 answer, white space trimmed; any other answer is an error
// that names its status and body.
func GetHost(base, host, path string, headers map[string]string) (string, error) {
	req, err := http.NewRequest(http.MethodGet, base+path, nil)
	if err != nil {
		return "", err
	}
	req.Host = host
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s%s (Host %s): %s: %s", base, path, host, resp.Status, body)
	}
	return strings.TrimSpace(string(body)), nil
}

// Get asks the prober pod to GET http://host:port/path and returns the body it received.
// An error says why the request failed (as seen from the pod).
func (p *Prober) Get(host string, port int, path string) (string, error) {
	responses, errs, err := p.GetN(host, port, path, 1)
	if err != nil {
		return "", err
	}
	if len(responses) == 0 {
		return "", fmt.Errorf("GET %s:%d%s from the prober pod: %s", host, port, path, strings.Join(errs, "; "))
	}
	return responses[0], nil
}

// GetN asks the prober pod to GET http://host:port/path n times, each on a new
// connection (netexec's /dial with tries=n), and returns the bodies received and the
// errors of the requests that failed, as seen from the pod. The error says why the
// prober could not be asked.
func (p *Prober) GetN(host string, port int, path string, n int) (responses, errs []string, err error) {
	q := url.Values{
		"request":  {strings.TrimPrefix(path, "/")},
		"host":     {host},
		"port":     {fmt.Sprint(port)},
		"protocol": {"http"},
		"tries":    {fmt.Sprint(n)},
	}
	client := &http.Client{Timeout: 20*time.Second + time.Duration(n)*5*time.Second}
	resp, err := client.Get(p.base + "/dial?" + q.Encode())
	if err != nil {
		return nil, nil, fmt.Errorf("asking the prober pod to GET %s:%d%s: %w", host, port, path, err)
	}
	defer resp.Body.Close()
	var result struct {
		Responses []string `json:"responses"`
		Errors    []string `json:"errors"`
	}
	body, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(body, &result); err != nil {
		return nil, nil, fmt.Errorf("the prober pod's answer to GET %s:%d%s: %s: %w", host, port, path, body, err)
	}
	// netexec lists the responses only when the last request got one: count the rest.
	if len(result.Responses) == 0 && len(result.Errors) < n {
		return nil, nil, fmt.Errorf("GET %s:%d%s from the prober pod, %d times: %d errors and no responses listed (the last response was empty)", host, port, path, n, len(result.Errors))
	}
	return result.Responses, result.Errors, nil
}

// PodReady reports whether p's Ready condition is True.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

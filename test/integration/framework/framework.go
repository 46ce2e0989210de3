// Package framework runs integration tests against a real local control plane: one per
// test binary, started by Main from the test package's TestMain.
//
//	func TestMain(m *testing.M) { framework.Main(m) }
//
//	func TestSomething(t *testing.T) {
//		cfg := framework.Config(t)
//		ns := framework.Namespace(t)
//		...
//	}
//
// The binaries come from $APP_CONTROLLER_BIN_DIR or <repo>/bin (built by `make tools`);
// with $APP_CONTROLLER_KUBE_BIN_DIR set, kube-apiserver, kube-controller-manager and
// kube-scheduler come from there instead (another Kubernetes version's: bin/compat/1.34
// runs the tests on Kubernetes 1.34). Set APP_CONTROLLER_KEEP_CLUSTER=1 to keep the cluster's state directory (certificates,
// component logs, kubeconfig) after the tests, for debugging.
package framework

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	gatewayclientset "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/app-controller/app-controller/internal/localcluster"
	appclientset "github.com/app-controller/app-controller/pkg/generated/clientset/versioned"
	"github.com/app-controller/app-controller/test/harness"
)

// KeepClusterEnv names the environment variable that, set to 1, keeps the cluster's state
// directory after the tests.
const KeepClusterEnv = "APP_CONTROLLER_KEEP_CLUSTER"

// startTimeout bounds the start of the control plane and the installation of the CRDs.
const startTimeout = 3 * time.Minute

// cluster is the control plane of this test binary, set by Main.
var cluster *localcluster.Cluster

// Main starts a control plane, installs the CRDs of <repo>/config/crd/bases, runs the
// tests, stops the control plane and exits with the tests' exit code. If the binaries are
// missing or the control plane does not start, it fails (exit code 1) with the reason.
func Main(m *testing.M) {
	os.Exit(run(m, nil))
}

// MainWithOptions is Main with the cluster's options adjusted by configure before the
// start (for example Options.AuditLog for tests that count writes on the server side).
func MainWithOptions(m *testing.M, configure func(*localcluster.Options)) {
	os.Exit(run(m, configure))
}

func run(m *testing.M, configure func(*localcluster.Options)) int {
	flag.Parse()
	stop, err := Start(configure)
	if err != nil {
		fmt.Fprintf(os.Stderr, "framework: %v\n", err)
		return 1
	}
	code := m.Run()
	stop()
	return code
}

// Start starts the control plane of Main, with its options adjusted by configure (nil
// for none), and makes it the cluster of Config, Client, Namespace and the other
// helpers; stop stops it. Main calls it; a test package that reports a control plane
// that does not start as one of its results (test/compat) calls it itself. If the
// binaries are missing or the control plane does not start, it returns why (the error
// says where the logs are). Until stop, SIGINT or SIGTERM stops the control plane and
// exits.
func Start(configure func(*localcluster.Options)) (stop func(), err error) {
	binDir, err := localcluster.BinDirFromEnv()
	if err != nil {
		return nil, err
	}
	root, err := localcluster.RepoRoot()
	if err != nil {
		return nil, fmt.Errorf("locating the CRDs: %w", err)
	}
	stateDir, err := os.MkdirTemp("", "app-controller-cluster-")
	if err != nil {
		return nil, err
	}
	keep := os.Getenv(KeepClusterEnv) == "1"

	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	opts := localcluster.Options{
		BinDir:     binDir,
		KubeBinDir: os.Getenv(localcluster.KubeBinDirEnv),
		StateDir:   stateDir,
		Out:        prefixWriter{},
		KeepState:  keep,
		CRDDir:     filepath.Join(root, "config", "crd", "bases"),
		// A real node's pods (Traefik, the loads, the Apps) compete with some twenty
		// processes of a whole make test on 2 cores. Where the kernel does not group
		// those by session, each weighed as much as the whole node: with 14 busy loops
		// beside test/e2e/analysis and kernel.sched_autogroup_enabled=0, four of its six
		// cases failed (a load through Traefik at p50 81 ms and p99 1.2 s, canaries that
		// got no request for a minute); weighing as 8 processes, all six passed (p50 3 ms).
		NodeCPUWeight: 8,
	}
	if configure != nil {
		configure(&opts)
	}
	c, err := localcluster.Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	cluster = c
	stopCluster := sync.OnceFunc(func() {
		if err := c.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "framework: %v\n", err)
		}
		if keep {
			fmt.Fprintf(os.Stderr, "framework: %s=1: cluster state kept in %s (logs in %s)\n", KeepClusterEnv, c.StateDir, c.LogDir)
		}
	})

	// Ctrl-C reaches only this process (the components have their own process group):
	// stop them in order rather than leave it to the kernel's SIGKILL.
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig, ok := <-signals
		if !ok {
			return
		}
		fmt.Fprintf(os.Stderr, "framework: %v: stopping the control plane\n", sig)
		stopCluster()
		os.Exit(1)
	}()
	return func() {
		signal.Stop(signals)
		close(signals)
		stopCluster()
	}, nil
}

// prefixWriter writes the control plane's progress lines to stderr, prefixed.
type prefixWriter struct{}

func (prefixWriter) Write(p []byte) (int, error) {
	for line := range strings.SplitSeq(strings.TrimRight(string(p), "\n"), "\n") {
		fmt.Fprintf(os.Stderr, "framework: %s\n", line)
	}
	return len(p), nil
}

// Cluster returns the control plane started by Main, or nil if Main did not run.
func Cluster() *localcluster.Cluster {
	return cluster
}

// Config returns a copy of the admin config with client-side rate limits raised to
// QPS 1000 and Burst 2000. It fails the test if Main did not start a cluster.
func Config(t testing.TB) *rest.Config {
	t.Helper()
	if cluster == nil {
		t.Fatal("framework: no cluster; call framework.Main(m) from TestMain")
	}
	cfg := rest.CopyConfig(cluster.Config)
	cfg.QPS, cfg.Burst = 1000, 2000
	return cfg
}

// Client returns a Kubernetes clientset for Config(t).
func Client(t testing.TB) kubernetes.Interface { return forConfig(t, kubernetes.NewForConfig) }

// AppClient returns an App clientset for Config(t).
func AppClient(t testing.TB) appclientset.Interface { return forConfig(t, appclientset.NewForConfig) }

// DynamicClient returns a dynamic client for Config(t): objects sent as unstructured
// JSON reach the API server with every value as written, zeros included.
func DynamicClient(t testing.TB) dynamic.Interface { return forConfig(t, dynamic.NewForConfig) }

// GatewayClient returns a Gateway API clientset for Config(t) (a cluster started with
// localcluster.Options.GatewayAPI serves the CRDs).
func GatewayClient(t testing.TB) gatewayclientset.Interface {
	return forConfig(t, gatewayclientset.NewForConfig)
}

// forConfig returns the client newForConfig makes for Config(t), or fails t.
func forConfig[C any](t testing.TB, newForConfig func(*rest.Config) (C, error)) C {
	t.Helper()
	return must(t, func() (C, error) { return newForConfig(Config(t)) })
}

// Namespace creates a fresh namespace named after the test and returns its name. The
// namespace is deleted when the test ends. Namespace returns once the namespace's default
// ServiceAccount exists, so Pods can be created in it right away.
func Namespace(t testing.TB) string {
	t.Helper()
	client := Client(t)
	ctx := context.Background()
	ns, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: namespacePrefix(t.Name())},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("framework: creating a namespace: %v", err)
	}
	t.Cleanup(func() {
		err := client.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
		if err != nil {
			t.Errorf("framework: deleting namespace %s: %v", ns.Name, err)
		}
	})
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("framework: waiting for the default ServiceAccount of namespace %s: %v", ns.Name, err)
	}
	return ns.Name
}

var notDNSLabel = regexp.MustCompile(`[^a-z0-9]+`)

// namespacePrefix turns a test name into a generateName prefix: lower case, runs of
// characters outside [a-z0-9] turned into "-", at most 40 characters, ending in "-".
func namespacePrefix(testName string) string {
	s := notDNSLabel.ReplaceAllString(strings.ToLower(testName), "-")
	s = strings.Trim(s, "-")
	if len(s) > 40 {
		s = strings.TrimRight(s[:40], "-")
	}
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		s = "test-" + s
		s = strings.TrimRight(s, "-")
	}
	return s + "-"
}

// Eventually polls condition every 100ms until it returns true, and fails the test if
// that does not happen within timeout. An error from condition fails the test at once:
// return (false, nil) for states worth waiting out.
func Eventually(t testing.TB, timeout time.Duration, condition func() (bool, error)) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true,
		func(context.Context) (bool, error) { return condition() })
	if err != nil {
		t.Fatalf("condition not met within %s: %v", timeout, err)
	}
}

// WaitFor polls get until the object it returns passes check, and returns that object;
// it fails the test if that does not happen within timeout. An error from get (the
// object not there yet, a refused connection) is waited out.
func WaitFor[T any](t testing.TB, timeout time.Duration, get func(context.Context, string, metav1.GetOptions) (T, error), name string, check func(T) bool) T {
	t.Helper()
	var obj T
	Eventually(t, timeout, func() (bool, error) {
		got, err := get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		obj = got
		return check(obj), nil
	})
	return obj
}

// Events returns "Type Reason Message" of the Events about the object kind/name, in
// namespace ("" for every namespace: Events about nodes land in default).
func Events(t testing.TB, client kubernetes.Interface, namespace, kind, name string) []string {
	t.Helper()
	list, err := client.CoreV1().Events(namespace).List(context.Background(), metav1.ListOptions{
		FieldSelector: "involvedObject.kind=" + kind + ",involvedObject.name=" + name,
	})
	if err != nil {
		t.Fatalf("framework: listing the Events about %s %s: %v", kind, name, err)
	}
	out := make([]string, 0, len(list.Items))
	for _, e := range list.Items {
		out = append(out, e.Type+" "+e.Reason+" "+e.Message)
	}
	return out
}

// WaitEvent waits up to timeout for an Event about the object kind/name in namespace
// ("" for every namespace) whose "Type Reason Message" starts with prefix, and returns
// it.
func WaitEvent(t testing.TB, client kubernetes.Interface, namespace, kind, name, prefix string, timeout time.Duration) string {
	t.Helper()
	var found string
	Eventually(t, timeout, func() (bool, error) {
		for _, e := range Events(t, client, namespace, kind, name) {
			if strings.HasPrefix(e, prefix) {
				found = e
				return true, nil
			}
		}
		return false, nil
	})
	return found
}

// The static band of the default node port range 30000-32767: the API server hands out
// ports of this band to Services without an explicit nodePort only when the rest of the
// range is full (KEP-3668), so a test that asks for a port of the band never races with
// another test's automatic allocation.
const (
	staticNodePortFirst = 30000
	staticNodePortLast  = 30000 + 2768/32 - 1 // the band is 1/32 of the range, 16..128 ports
)

var (
	nodePortsMu    sync.Mutex
	nodePortsGiven = map[int32]bool{}
)

// FreeNodePort returns a node port for a Service with an explicit nodePort: one of the
// static band that no Service of the cluster holds and that no other test of this binary
// was given (the cluster is shared by the package's tests, and a rerun with -count finds
// the previous run's Services still there).
func FreeNodePort(t testing.TB, client kubernetes.Interface) int32 {
	t.Helper()
	services, err := client.CoreV1().Services(metav1.NamespaceAll).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("framework: listing Services for a free node port: %v", err)
	}
	nodePortsMu.Lock()
	defer nodePortsMu.Unlock()
	taken := map[int32]bool{}
	for _, svc := range services.Items {
		for _, p := range svc.Spec.Ports {
			taken[p.NodePort] = true
		}
	}
	for port := int32(staticNodePortFirst); port <= staticNodePortLast; port++ {
		if !taken[port] && !nodePortsGiven[port] {
			nodePortsGiven[port] = true
			return port
		}
	}
	t.Fatalf("framework: no free node port in %d-%d", staticNodePortFirst, staticNodePortLast)
	return 0
}

// RoundTripperFunc is an http.RoundTripper made of a function, for wrapping a client's
// transport (counting or failing requests).
type RoundTripperFunc func(*http.Request) (*http.Response, error)

// RoundTrip calls f.
func (f RoundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// Kubectl runs the kubectl of the binaries directory against the test cluster, as a user
// would, and returns its combined output; a failure fails the test.
func Kubectl(t testing.TB, args ...string) string {
	t.Helper()
	out, err := TryKubectl(t, args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return out
}

// TryKubectl is Kubectl for a command that may fail: it returns the combined output and
// the error, as a user sees them, instead of failing the test.
func TryKubectl(t testing.TB, args ...string) (string, error) {
	t.Helper()
	binDir, err := localcluster.BinDirFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if cluster == nil {
		t.Fatal("framework: no cluster; call framework.Main(m) from TestMain")
	}
	cmd := exec.Command(filepath.Join(binDir, "kubectl"), append([]string{"--kubeconfig", cluster.Kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w", strings.Join(args, " "), err)
	}
	return string(out), nil
}

// builds holds, by name, the builds of the commands BuildBinary was asked for: each is
// built once per test binary.
var builds struct {
	mu    sync.Mutex
	build map[string]func() (string, error)
}

// BuildBinary builds the command ./cmd/NAME of the repository and returns its path. It
// is built once per test binary, into the binaries directory's test-builds/ (see
// buildShared), so that the test binaries of a run, which `go test -p N` starts at the
// same time, link it once between them; where that directory cannot be made, into the
// cluster's state directory (removed with the cluster), or without a cluster into a
// temporary directory of the test.
func BuildBinary(t testing.TB, name string) string {
	t.Helper()
	builds.mu.Lock()
	if builds.build == nil {
		builds.build = map[string]func() (string, error){}
	}
	if builds.build[name] == nil {
		var dir string
		if cluster != nil {
			dir = filepath.Join(cluster.StateDir, "bin")
		}
		builds.build[name] = sync.OnceValues(func() (string, error) { return buildShared(name, dir) })
	}
	build := builds.build[name]
	builds.mu.Unlock()
	bin, err := build()
	if err != nil {
		t.Fatal(err)
	}
	if bin == "" { // no shared directory and no cluster: the test's own build
		if bin, err = buildCommand(name, t.TempDir()); err != nil {
			t.Fatal(err)
		}
	}
	return bin
}

// buildShared builds ./cmd/NAME into <binaries directory>/test-builds, holding the
// lock file test-builds/NAME.lock meanwhile: the first test binary to get there links
// it, and the others' go build finds the binary up to date (the same build ID) and
// leaves it as it is, so a process another test binary started from it keeps running.
// If that directory cannot be made, it builds into fallback instead ("" for none:
// BuildBinary builds into the test's temporary directory).
func buildShared(name, fallback string) (string, error) {
	var dir string
	if binDir, err := localcluster.BinDirFromEnv(); err == nil {
		dir = filepath.Join(binDir, "test-builds")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			dir = ""
		}
	}
	if dir == "" {
		if fallback == "" {
			return "", nil
		}
		return buildCommand(name, fallback)
	}
	lock, err := os.OpenFile(filepath.Join(dir, name+".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", fmt.Errorf("opening the lock of the build of %s: %w", name, err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("locking the build of %s: %w", name, err)
	}
	defer func() { _ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) }()
	return buildCommand(name, dir)
}

// buildCommand runs go build of ./cmd/NAME into dir and returns the binary's path.
func buildCommand(name, dir string) (string, error) {
	root, err := localcluster.RepoRoot()
	if err != nil {
		return "", err
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("finding the go command to build %s: %w", name, err)
	}
	bin := filepath.Join(dir, name)
	cmd := exec.Command(goTool, "build", "-o", bin, "./cmd/"+name)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/%s: %w\n%s", name, err, out)
	}
	return bin, nil
}

// FreeAddr returns a loopback address nothing listens on (harness.FreeAddr).
func FreeAddr(t *testing.T) string {
	t.Helper()
	addr, err := harness.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

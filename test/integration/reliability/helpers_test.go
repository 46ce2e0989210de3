package reliability

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller/appfixture"
	appclientset "github.com/app-controller/app-controller/pkg/generated/clientset/versioned"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// converge bounds how long the controller and the cluster may take to converge after a
// fault.
const converge = 90 * time.Second

// env holds the admin clients and the namespace of one test.
type env struct {
	kube kubernetes.Interface
	app  appclientset.Interface
	ns   string
	// foreign are the resourceVersions of objects in ns that no App owns, by "kind/name".
	foreign map[string]string
}

// newEnv makes a namespace with a few foreign objects the controller must never touch: a
// Deployment and a Service whose names no App claims, and a ConfigMap.
func newEnv(t *testing.T) *env {
	t.Helper()
	e := newEnvIn(t, framework.Namespace(t))
	ctx := context.Background()
	labels := map[string]string{"app": "foreign"}
	d, err := e.kube.AppsV1().Deployments(e.ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "foreign", Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating the foreign Deployment: %v", err)
	}
	s, err := e.kube.CoreV1().Services(e.ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "foreign"},
		Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating the foreign Service: %v", err)
	}
	cm, err := e.kube.CoreV1().ConfigMaps(e.ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "foreign"}, Data: map[string]string{"k": "v"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating the foreign ConfigMap: %v", err)
	}
	// The deployment controller writes the foreign Deployment's status once: wait for it,
	// so that its resourceVersion is stable from now on.
	framework.Eventually(t, converge, func() (bool, error) {
		d, err = e.kube.AppsV1().Deployments(e.ns).Get(ctx, "foreign", metav1.GetOptions{})
		return err == nil && d.Status.ObservedGeneration == d.Generation, nil
	})
	time.Sleep(500 * time.Millisecond)
	d, err = e.kube.AppsV1().Deployments(e.ns).Get(ctx, "foreign", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.foreign["Deployment/foreign"] = d.ResourceVersion
	e.foreign["Service/foreign"] = s.ResourceVersion
	e.foreign["ConfigMap/foreign"] = cm.ResourceVersion
	return e
}

// newEnvIn returns the env of namespace ns, without foreign objects.
func newEnvIn(t *testing.T, ns string) *env {
	t.Helper()
	app, err := appclientset.NewForConfig(framework.Config(t))
	if err != nil {
		t.Fatal(err)
	}
	return &env{kube: framework.Client(t), app: app, ns: ns, foreign: map[string]string{}}
}

// appName is the name of the i-th App of a test.
func appName(i int) string { return fmt.Sprintf("app-%03d", i) }

// newApp returns the App appName(i): Deployment NAME-deploy, Service NAME-svc, 1 replica.
func (e *env) newApp(i int) *appv1.App {
	return appfixture.NewApp(e.ns, appName(i), "nginx", 1)
}

// createApps creates the Apps first..first+n-1 with a few concurrent clients, retrying
// each until it is created (the API server may be failing when a fault is on).
func (e *env) createApps(t *testing.T, first, n int) {
	t.Helper()
	var wg sync.WaitGroup
	next := make(chan int)
	errs := make(chan error, n)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				errs <- e.retry(func(ctx context.Context) error {
					_, err := e.app.AppcontrollerV1().Apps(e.ns).Create(ctx, e.newApp(i), metav1.CreateOptions{})
					if isAlreadyExists(err) {
						return nil // an earlier attempt got through
					}
					return err
				})
			}
		})
	}
	for i := first; i < first+n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("creating an App: %v", err)
		}
	}
}

// setImage changes the image of App i, retrying conflicts and failures.
func (e *env) setImage(i int, image string) error {
	return e.retry(func(ctx context.Context) error {
		a, err := e.app.AppcontrollerV1().Apps(e.ns).Get(ctx, appName(i), metav1.GetOptions{})
		if err != nil {
			return err
		}
		a.Spec.DeploymentTemplate.Image = image
		_, err = e.app.AppcontrollerV1().Apps(e.ns).Update(ctx, a, metav1.UpdateOptions{})
		return err
	})
}

// retry runs f, each attempt bounded to 5s, until it succeeds or converge passes.
func (e *env) retry(f func(ctx context.Context) error) error {
	deadline := time.Now().Add(converge)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := f(ctx)
		cancel()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func isAlreadyExists(err error) bool {
	return err != nil && strings.Contains(err.Error(), "already exists")
}

// readyCount returns how many of the namespace's Apps are Ready at their generation, and
// how many Apps there are.
func (e *env) readyCount(ctx context.Context) (ready, total int, err error) {
	list, err := e.app.AppcontrollerV1().Apps(e.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, 0, err
	}
	for i := range list.Items {
		if isReady(&list.Items[i]) {
			ready++
		}
	}
	return ready, len(list.Items), nil
}

// isReady: Ready=True/Available at the App's current generation.
func isReady(a *appv1.App) bool {
	c := meta.FindStatusCondition(a.Status.Conditions, appv1.ConditionReady)
	return a.Status.ObservedGeneration == a.Generation && c != nil &&
		c.Status == metav1.ConditionTrue && c.Reason == appv1.ReasonAvailable && c.ObservedGeneration == a.Generation
}

// waitAllReady waits until the namespace holds want Apps, all Ready at their generation,
// and returns how long that took. Errors of the API server (a fault may be on) are
// waited out.
func (e *env) waitAllReady(t *testing.T, want int, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	var ready, total int
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		var err error
		ready, total, err = e.readyCount(ctx)
		return err == nil && total == want && ready == want, nil
	})
	if err != nil {
		t.Fatalf("%d of %d Apps Ready (want %d) after %s", ready, total, want, timeout)
	}
	return time.Since(start)
}

// converged checks the end state every fault test must reach: want Apps, each Ready at
// its generation, with exactly one Deployment NAME-deploy and one Service NAME-svc
// controlled by it (owner UID), no other managed Deployment or Service in the namespace
// (no duplicate, no orphan), the Deployment running the App's image, and the foreign
// objects unchanged.
func (e *env) converged(t *testing.T, want int) {
	t.Helper()
	ctx := context.Background()
	apps, err := e.app.AppcontrollerV1().Apps(e.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(apps.Items) != want {
		t.Errorf("%d Apps, want %d", len(apps.Items), want)
	}
	byUID := map[string]*appv1.App{}
	for i := range apps.Items {
		a := &apps.Items[i]
		byUID[string(a.UID)] = a
		if !isReady(a) {
			t.Errorf("App %s not Ready at generation %d: %+v", a.Name, a.Generation, a.Status.Conditions)
		}
	}
	managed := metav1.ListOptions{LabelSelector: appv1.ManagedByLabel + "=" + appv1.ManagedByValue}
	deps, err := e.kube.AppsV1().Deployments(e.ns).List(ctx, managed)
	if err != nil {
		t.Fatal(err)
	}
	svcs, err := e.kube.CoreV1().Services(e.ns).List(ctx, managed)
	if err != nil {
		t.Fatal(err)
	}
	if len(deps.Items) != want || len(svcs.Items) != want {
		t.Errorf("%d managed Deployments and %d managed Services, want %d of each", len(deps.Items), len(svcs.Items), want)
	}
	owned := map[string]int{}
	check := func(kind string, obj metav1.Object, suffix string, extra func(*appv1.App) string) {
		ref := metav1.GetControllerOf(obj)
		if ref == nil {
			t.Errorf("%s %s has no controller: an orphan", kind, obj.GetName())
			return
		}
		a := byUID[string(ref.UID)]
		if a == nil {
			t.Errorf("%s %s is controlled by %s (uid %s), which is not an App of the namespace: an orphan", kind, obj.GetName(), ref.Name, ref.UID)
			return
		}
		if obj.GetName() != a.Name+suffix {
			t.Errorf("App %s controls %s %s, want %s", a.Name, kind, obj.GetName(), a.Name+suffix)
		}
		if extra != nil {
			if msg := extra(a); msg != "" {
				t.Errorf("%s %s: %s", kind, obj.GetName(), msg)
			}
		}
		owned[kind+"/"+a.Name]++
	}
	for i := range deps.Items {
		d := &deps.Items[i]
		check("Deployment", d, "-deploy", func(a *appv1.App) string {
			if img := d.Spec.Template.Spec.Containers[0].Image; img != a.Spec.DeploymentTemplate.Image {
				return fmt.Sprintf("image %q, the App says %q", img, a.Spec.DeploymentTemplate.Image)
			}
			return ""
		})
	}
	for i := range svcs.Items {
		check("Service", &svcs.Items[i], "-svc", nil)
	}
	for _, a := range apps.Items {
		for _, kind := range []string{"Deployment", "Service"} {
			if n := owned[kind+"/"+a.Name]; n != 1 {
				t.Errorf("App %s controls %d %ss, want 1", a.Name, n, kind)
			}
		}
	}
	e.foreignUnchanged(t)
}

// foreignUnchanged fails the test if an object of e.foreign changed.
func (e *env) foreignUnchanged(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	for key, rv := range e.foreign {
		kind, name, _ := strings.Cut(key, "/")
		var obj metav1.Object
		var err error
		switch kind {
		case "Deployment":
			obj, err = e.kube.AppsV1().Deployments(e.ns).Get(ctx, name, metav1.GetOptions{})
		case "Service":
			obj, err = e.kube.CoreV1().Services(e.ns).Get(ctx, name, metav1.GetOptions{})
		case "ConfigMap":
			obj, err = e.kube.CoreV1().ConfigMaps(e.ns).Get(ctx, name, metav1.GetOptions{})
		}
		if err != nil {
			t.Errorf("foreign %s: %v", key, err)
			continue
		}
		if obj.GetResourceVersion() != rv {
			t.Errorf("foreign %s changed: resourceVersion %s, was %s", key, obj.GetResourceVersion(), rv)
		}
	}
}

// identity is a controller instance's user name: its requests impersonate it (in group
// system:masters), so the audit log tells instances apart.
type identity string

// identityCounter makes each identity unique in the test binary.
var identityCounter struct {
	sync.Mutex
	n int
}

// newIdentity returns a fresh identity named after what.
func newIdentity(what string) identity {
	identityCounter.Lock()
	defer identityCounter.Unlock()
	identityCounter.n++
	return identity(fmt.Sprintf("reliability-%s-%d", what, identityCounter.n))
}

// restConfig returns the admin config impersonating id.
func (id identity) restConfig(t *testing.T) *rest.Config {
	cfg := framework.Config(t)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: string(id), Groups: []string{"system:masters"}}
	return cfg
}

// kubeconfig writes the admin kubeconfig impersonating id and returns its path.
func (id identity) kubeconfig(t *testing.T) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(framework.Cluster().Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, auth := range cfg.AuthInfos {
		auth.Impersonate = string(id)
		auth.ImpersonateGroups = []string{"system:masters"}
	}
	path := filepath.Join(t.TempDir(), string(id)+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// controller is an app-controller process, run with its default flags but its
// kubeconfig (impersonating its identity) and the flags a test adds.
type controller struct {
	id      identity
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	waitErr error

	mu   sync.Mutex
	logs []string
}

// startController starts the controller binary as id with the extra flags, and stops it
// (SIGKILL) at the end of the test if it still runs.
func startController(t *testing.T, id identity, extra ...string) *controller {
	t.Helper()
	c := &controller{id: id, logPath: filepath.Join(t.TempDir(), string(id)+".log"), done: make(chan struct{})}
	args := append([]string{"--kubeconfig", id.kubeconfig(t)}, extra...)
	c.cmd = exec.Command(framework.BuildBinary(t, "app-controller"), args...)
	stderr, err := c.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(c.logPath)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		s := bufio.NewScanner(stderr)
		s.Buffer(make([]byte, 64<<10), 1<<20)
		for s.Scan() {
			line := s.Text()
			fmt.Fprintln(logFile, line)
			c.mu.Lock()
			c.logs = append(c.logs, line)
			c.mu.Unlock()
		}
		_ = logFile.Close()
		c.waitErr = c.cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		_ = c.cmd.Process.Signal(syscall.SIGCONT)
		if !c.exited() {
			_ = c.cmd.Process.Kill()
		}
		<-c.done
		if t.Failed() {
			t.Logf("log of %s: %s", c.id, c.logPath)
			t.Logf("last lines of %s:\n%s", c.id, c.tail(30))
		}
	})
	return c
}

// signal sends sig to the process.
func (c *controller) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := c.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("sending %v to %s: %v", sig, c.id, err)
	}
}

// kill SIGKILLs the process and waits until it is gone.
func (c *controller) kill(t *testing.T) {
	t.Helper()
	c.signal(t, syscall.SIGKILL)
	<-c.done
}

func (c *controller) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// waitExit waits up to timeout for the process to exit and returns its exit code.
func (c *controller) waitExit(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-c.done:
	case <-time.After(timeout):
		t.Fatalf("%s still running after %s", c.id, timeout)
	}
	var exit *exec.ExitError
	if errors.As(c.waitErr, &exit) {
		return exit.ExitCode()
	}
	return 0
}

// lines returns the log lines that contain s.
func (c *controller) lines(s string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, l := range c.logs {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}

// waitLog waits until a log line contains s.
func (c *controller) waitLog(t *testing.T, s string, timeout time.Duration) {
	t.Helper()
	framework.Eventually(t, timeout, func() (bool, error) {
		if len(c.lines(s)) > 0 {
			return true, nil
		}
		if c.exited() {
			return false, fmt.Errorf("%s exited (%v) before logging %q", c.id, c.waitErr, s)
		}
		return false, nil
	})
}

// tail returns the last n log lines.
func (c *controller) tail(n int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	from := max(0, len(c.logs)-n)
	return strings.Join(c.logs[from:], "\n")
}

// freePort returns a free TCP port on loopback.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// metric returns the value of the sample of a Prometheus text exposition whose line
// starts with series (name and labels as printed), or -1 if there is none.
func metric(t *testing.T, url, series string) float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("getting %s: %v", url, err)
	}
	defer resp.Body.Close()
	s := bufio.NewScanner(resp.Body)
	s.Buffer(make([]byte, 64<<10), 1<<20)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				t.Fatalf("metric %s: %v", series, err)
			}
			return v
		}
	}
	return -1
}

// auditEvent is the part of a kube-apiserver audit event the tests read.
type auditEvent struct {
	Stage      string `json:"stage"`
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	UserAgent  string `json:"userAgent"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	ImpersonatedUser *struct {
		Username string `json:"username"`
	} `json:"impersonatedUser"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"responseStatus"`
	RequestReceived metav1.MicroTime `json:"requestReceivedTimestamp"`
}

// who is the impersonated user of the request, "" if none.
func (ev auditEvent) who() identity {
	if ev.ImpersonatedUser == nil {
		return ""
	}
	return identity(ev.ImpersonatedUser.Username)
}

// isWrite: the request could change an object.
func (ev auditEvent) isWrite() bool {
	switch ev.Verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// code is the response code, 0 if unknown.
func (ev auditEvent) code() int {
	if ev.ResponseStatus == nil {
		return 0
	}
	return ev.ResponseStatus.Code
}

// resource is "resource[/subresource]".
func (ev auditEvent) resource() string {
	if ev.ObjectRef == nil {
		return ""
	}
	if ev.ObjectRef.Subresource != "" {
		return ev.ObjectRef.Resource + "/" + ev.ObjectRef.Subresource
	}
	return ev.ObjectRef.Resource
}

func (ev auditEvent) String() string {
	ref := ev.ObjectRef
	if ref == nil {
		return fmt.Sprintf("%s %s %s (%d)", ev.who(), ev.Verb, ev.RequestURI, ev.code())
	}
	return fmt.Sprintf("%s %s %s %s/%s (%d)", ev.who(), ev.Verb, ev.resource(), ref.Namespace, ref.Name, ev.code())
}

// audit returns the audit events of requests made by ids (any identity if none given)
// received at or after since.
func audit(t *testing.T, since time.Time, ids ...identity) []auditEvent {
	t.Helper()
	f, err := os.Open(framework.Cluster().AuditLogPath)
	if err != nil {
		t.Fatalf("reading the audit log: %v", err)
	}
	defer f.Close()
	var out []auditEvent
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 16<<20)
	for s.Scan() {
		var ev auditEvent
		if err := json.Unmarshal(s.Bytes(), &ev); err != nil {
			continue // a line being written
		}
		if ev.RequestReceived.Time.Before(since) || ev.isWrite() && ev.Stage != "ResponseComplete" {
			continue
		}
		if len(ids) > 0 {
			found := false
			for _, id := range ids {
				found = found || ev.who() == id
			}
			if !found {
				continue
			}
		}
		out = append(out, ev)
	}
	return out
}

// writes summarises the write requests of events: the total, and counts by
// "verb resource" (failed ones apart).
func writes(events []auditEvent) (int, map[string]int) {
	n := 0
	by := map[string]int{}
	for _, ev := range events {
		if !ev.isWrite() {
			continue
		}
		n++
		key := ev.Verb + " " + ev.resource()
		if ev.code() >= 300 {
			key += fmt.Sprintf(" (%d)", ev.code())
		}
		by[key]++
	}
	return n, by
}

// onlyOwnWrites fails the test if a write of events is not one the App controller may
// make in namespace ns: its Apps' status, their children (NAME-deploy, NAME-svc),
// Events, and the Leases of leader election in leaseNS ("" if none). The namespaces of
// earlier tests, being deleted, may still hold Apps the controller syncs: writes of the
// same kinds there are allowed too.
func onlyOwnWrites(t *testing.T, events []auditEvent, ns, leaseNS string) {
	t.Helper()
	client := framework.Client(t)
	ours := func(other string) bool {
		if other == ns {
			return true
		}
		n, err := client.CoreV1().Namespaces().Get(context.Background(), other, metav1.GetOptions{})
		return err != nil && strings.Contains(err.Error(), "not found") || err == nil && n.Status.Phase == corev1.NamespaceTerminating
	}
	for _, ev := range events {
		if !ev.isWrite() || ev.ObjectRef == nil {
			continue
		}
		ref := ev.ObjectRef
		ok := false
		switch ev.resource() {
		case "apps/status":
			ok = ours(ref.Namespace)
		case "deployments":
			ok = ours(ref.Namespace) && strings.HasPrefix(ref.Name, "app-") && strings.HasSuffix(ref.Name, "-deploy")
		case "services":
			ok = ours(ref.Namespace) && strings.HasPrefix(ref.Name, "app-") && strings.HasSuffix(ref.Name, "-svc")
		case "events":
			ok = ours(ref.Namespace)
		case "leases":
			ok = leaseNS != "" && ref.Namespace == leaseNS
		}
		if !ok {
			t.Errorf("a write the controller must not make: %s", ev)
		}
	}
}

// logWrites logs the writes of events in namespace ns, and returns their number.
func logWrites(t *testing.T, what, ns string, events []auditEvent) int {
	t.Helper()
	var in []auditEvent
	for _, ev := range events {
		if ev.ObjectRef != nil && ev.ObjectRef.Namespace == ns {
			in = append(in, ev)
		}
	}
	n, by := writes(in)
	t.Logf("%s: %d writes %v", what, n, by)
	failed := 0
	for _, ev := range in {
		if ev.isWrite() && ev.code() >= 400 && failed < 5 {
			failed++
			t.Logf("failed write: %s: %s", ev, ev.ResponseStatus.Message)
		}
	}
	return n
}

// Signals for controller.signal.
const (
	sigstop = syscall.SIGSTOP
	sigcont = syscall.SIGCONT
)

// containsInitialEvents: a watch request that starts with the current state (a watch
// list, client-go's replacement of the initial list).
func containsInitialEvents(uri string) bool {
	return strings.Contains(uri, "sendInitialEvents=true")
}

package reliability

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

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
	d, err := e.kube.AppsV1().Deployments(e.ns).Create(ctx, framework.ForeignDeployment(e.ns, "foreign", 0, labels), metav1.CreateOptions{})
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
	app := framework.AppClient(t)
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

// startConverged starts a controller as the new identity of what, creates the Apps
// 0..n-1 and waits until they are all Ready; it returns the identity, the controller and
// when the controller was started.
func (e *env) startConverged(t *testing.T, what string, n int) (identity, *controller, time.Time) {
	t.Helper()
	id := newIdentity(what)
	start := time.Now()
	c := startController(t, id)
	e.createApps(t, 0, n)
	e.waitAllReady(t, n, converge)
	return id, c, start
}

// waitAllReady waits until the namespace holds want Apps, all Ready at their generation,
// and returns how long that took. Errors of the API server (a fault may be on) are
// waited out. It fails at once if one of the controllers named in leading exits: nothing
// would converge the Apps (an instance that loses its lease exits).
func (e *env) waitAllReady(t *testing.T, want int, timeout time.Duration, leading ...*controller) time.Duration {
	t.Helper()
	start := time.Now()
	var ready, total int
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		for _, c := range leading {
			if err := c.Exited(); err != nil {
				t.Fatalf("%s exited %.1fs into the wait for %d Ready Apps (%d of %d were): %v; its last lines:\n%s",
					c.id, time.Since(start).Seconds(), want, ready, total, err, c.Tail(15))
			}
		}
		r, n, err := e.readyCount(ctx)
		if err != nil {
			last = err
			return false, nil
		}
		ready, total = r, n
		return total == want && ready == want, nil
	})
	if err != nil {
		t.Fatalf("%d of %d Apps Ready (want %d) after %s (last error listing them: %v)", ready, total, want, timeout, last)
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

// Package rollout_test runs canary rollouts (spec.rollout) on a node that runs pods for
// real: an agnhost App of 4 replicas rolls to a new version with the steps 25% / pause /
// 100%, requests through its Service from a pod reach both versions in about that share at
// the pause, and `kubectl app promote` completes it; then rollouts to an image that does
// not exist and to a container that exits abort on their own within a minute, while
// every request to the Service is answered by a stable pod; and with versionedConfig, a
// ConfigMap change to a value the app exits on aborts while the stable pods, never
// restarted, still read the old value from their copy (config_test.go). The controller
// runs in the test process (framework.StartManager) against the cluster's API server.
package rollout_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/app-controller/app-controller/internal/localcluster"
	"github.com/app-controller/app-controller/internal/plugin"
	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	appclient "github.com/app-controller/app-controller/pkg/generated/clientset/versioned"
	"github.com/app-controller/app-controller/test/e2e/realnode"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// TestMain starts a cluster with a real node and the App CRD installed.
func TestMain(m *testing.M) {
	framework.MainWithOptions(m, func(o *localcluster.Options) { o.Node = localcluster.NodeReal })
}

const (
	// port is the App's Service port and netexec's.
	port = 8080
	// abortWithin is how soon a rollout to a broken version must abort on its own.
	abortWithin = 60 * time.Second
)

// env is what the test shares: the clients, the namespace, the prober pod, agnhost.
type env struct {
	client  kubernetes.Interface
	apps    appclient.Interface
	ns      string
	agnhost string
	prober  *realnode.Prober
}

func TestCanaryOnRealNode(t *testing.T) {
	start := time.Now()
	framework.StartAppController(t, framework.Config(t), nil)
	ns := framework.Namespace(t)
	e := &env{client: framework.Client(t), apps: framework.AppClient(t), ns: ns, agnhost: realnode.Agnhost(t), prober: realnode.NewProber(t, ns)}
	t.Logf("prober ready %.1fs after the start", time.Since(start).Seconds())

	t.Run("steps, pause, promote", e.steps)
	t.Run("aborts on its own", e.aborts)
	t.Run("versioned config: a bad value aborts, the stable never reads it", e.versionedConfig)
	t.Logf("the whole test took %.1fs (the cluster's start not counted)", time.Since(start).Seconds())
}

// app returns an App of agnhost netexec named name, with replicas, a readiness probe,
// env VERSION=1, its Service, and the canary steps.
func (e *env) app(name string, replicas int32, steps ...appv1.CanaryStep) *appv1.App {
	return &appv1.App{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: appv1.AppSpec{
			DeploymentTemplate: &appv1.DeploymentTemplate{
				Name: name, Image: e.agnhost, Replicas: ptr.To(replicas),
				Args:          []string{"netexec", fmt.Sprintf("--http-port=%d", port)},
				ContainerPort: ptr.To[int32](port),
				Env:           []corev1.EnvVar{{Name: "VERSION", Value: "1"}},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(port)}},
					PeriodSeconds: 1,
				},
			},
			ServiceTemplate: &appv1.ServiceTemplate{Name: name},
			Rollout: &appv1.Rollout{Canary: &appv1.CanaryStrategy{
				Steps:                      steps,
				ScaleDownDelaySeconds:      ptr.To[int32](0),
				AbortScaleDownDelaySeconds: ptr.To[int32](0),
			}},
		},
	}
}

// steps: 4 replicas roll to VERSION=2 with 25% / pause / 100%; at the pause a quarter of
// the requests through the Service reach the canary; kubectl app promote completes it.
func (e *env) steps(t *testing.T) {
	ctx := context.Background()
	app := e.app("web", 4, appv1.CanaryStep{SetWeight: ptr.To[int32](25)}, appv1.CanaryStep{Pause: &appv1.CanaryPause{}}, appv1.CanaryStep{SetWeight: ptr.To[int32](100)})
	if _, err := e.apps.AppcontrollerV1().Apps(e.ns).Create(ctx, app, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	created := time.Now()
	e.waitRollout(t, "web", 3*time.Minute, "Ready and Healthy", func(a *appv1.App) bool {
		return ready(a) && a.Status.Rollout != nil && a.Status.Rollout.Phase == appv1.RolloutHealthy
	})
	t.Logf("web: Ready %.1fs after its creation", time.Since(created).Seconds())
	stableBefore := e.podNames(t, "web", false)

	changed := time.Now()
	realnode.PatchApp(t, e.ns, "web", `{"spec":{"deploymentTemplate":{"env":[{"name":"VERSION","value":"2"}]}}}`)
	e.waitRollout(t, "web", 3*time.Minute, "Paused at step 2", func(a *appv1.App) bool {
		r := a.Status.Rollout
		return r != nil && r.Phase == appv1.RolloutPaused && r.CurrentStepIndex == 1
	})
	t.Logf("web: paused at 25%% %.1fs after the change", time.Since(changed).Seconds())
	if stable, canary := e.specReplicas(t, "web"), e.specReplicas(t, "web"+appv1.CanarySuffix); stable != 3 || canary != 1 {
		t.Errorf("at 25%% of 4 replicas: %d stable and %d canary replicas, want 3 and 1", stable, canary)
	}
	// The stable pod scaled down gone from the Service's endpoints (1 canary, 3 stable)
	// and from kube-proxy's rules: netexec exits at once on SIGTERM, so until then a
	// connection to it is refused, as for any scale-down of pods without a preStop delay.
	framework.Eventually(t, time.Minute, func() (bool, error) { return e.readyEndpoints(t, "web") == 4, nil })
	e.waitServing(t, e.clusterIP(t, "web"))
	// No stable pod was replaced: the 3 left are of the 4 before.
	if now := e.podNames(t, "web", false); !subset(now, stableBefore) {
		t.Errorf("stable pods %v, want 3 of %v", now, stableBefore)
	}

	// 200 requests through the Service, each on a new connection, from the prober pod.
	ip := e.clusterIP(t, "web")
	var canary, total int
	for range 200 {
		host, err := e.prober.Get(ip, port, "/hostname")
		if err != nil {
			t.Errorf("a request through the Service failed: %v", err)
			continue
		}
		total++
		if strings.HasPrefix(host, "web"+appv1.CanarySuffix+"-") {
			canary++
		}
	}
	share := float64(canary) * 100 / float64(total)
	t.Logf("web at 25%%: %d of %d requests reached the canary (%.1f%%)", canary, total, share)
	// 200 draws at p=0.25: standard deviation 3.1 points; 12-40% is beyond 4 of them.
	if total != 200 || share < 12 || share > 40 {
		t.Errorf("%d of %d requests reached the canary (%.1f%%), want about 25%%", canary, total, share)
	}

	// kubectl app promote, as the user types it (the plugin's code, in process).
	out := e.kubectlApp(t, "promote", "web")
	t.Logf("kubectl app promote web: %s", out)
	promoted := time.Now()
	e.waitRollout(t, "web", 3*time.Minute, "promoted: Ready and Healthy", func(a *appv1.App) bool {
		return ready(a) && a.Status.Rollout != nil && a.Status.Rollout.Phase == appv1.RolloutHealthy
	})
	t.Logf("web: promoted and Ready %.1fs after kubectl app promote", time.Since(promoted).Seconds())
	// The stable Deployment runs VERSION=2 on 4 pods, and the canary is gone.
	framework.Eventually(t, time.Minute, func() (bool, error) {
		pods := e.pods(t, "web")
		if len(pods) != 4 {
			return false, nil
		}
		for _, p := range pods {
			if p.Labels[appv1.TrackLabel] != "" || envOf(&p, "VERSION") != "2" || !realnode.PodReady(&p) {
				return false, nil
			}
		}
		return true, nil
	})
	if _, err := e.client.AppsV1().Deployments(e.ns).Get(ctx, "web"+appv1.CanarySuffix, metav1.GetOptions{}); err == nil {
		t.Errorf("the canary Deployment is still there after the promotion (scaleDownDelaySeconds 0)")
	}
	t.Logf("kubectl app status web:\n%s", e.kubectlApp(t, "status", "web"))
}

// aborts: rollouts to an image that does not exist and to a container that exits abort
// on their own within abortWithin, while requests to the Service all reach stable pods.
func (e *env) aborts(t *testing.T) {
	app := e.app("risky", 2, appv1.CanaryStep{SetWeight: ptr.To[int32](50)}, appv1.CanaryStep{Pause: &appv1.CanaryPause{}})
	if _, err := e.apps.AppcontrollerV1().Apps(e.ns).Create(context.Background(), app, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitRollout(t, "risky", 3*time.Minute, "Ready and Healthy", func(a *appv1.App) bool {
		return ready(a) && a.Status.Rollout != nil && a.Status.Rollout.Phase == appv1.RolloutHealthy
	})
	stable := e.podNames(t, "risky", false)
	ip := e.clusterIP(t, "risky")
	e.waitServing(t, ip) // kube-proxy has the new Service
	load := e.startLoad(t, ip, "risky")

	for _, c := range []struct {
		name, patch, reason string
	}{
		{"an image that does not exist", fmt.Sprintf(`{"spec":{"deploymentTemplate":{"image":%q}}}`, strings.TrimSuffix(e.agnhost, ":2.63.0")+":does-not-exist"), appv1.ReasonImagePullFailed},
		{"a container that exits", `{"spec":{"deploymentTemplate":{"image":"` + e.agnhost + `","args":["netexec","--no-such-flag"]}}}`, appv1.ReasonCrashLoopBackOff},
	} {
		changed := time.Now()
		realnode.PatchApp(t, e.ns, "risky", c.patch)
		var last *appv1.App
		e.waitRollout(t, "risky", abortWithin, "aborted for "+c.reason, func(a *appv1.App) bool {
			last = a
			r := a.Status.Rollout
			return r != nil && r.Phase == appv1.RolloutAborted && r.AbortReason == c.reason
		})
		t.Logf("risky, %s: aborted %.1fs after the change: %s", c.name, time.Since(changed).Seconds(), last.Status.Rollout.AbortMessage)
		ready := meta.FindStatusCondition(last.Status.Conditions, appv1.ConditionReady)
		if ready == nil || ready.Reason != appv1.ReasonRolloutAborted || !strings.Contains(ready.Message, "Pod ") {
			t.Errorf("Ready = %+v, want False, RolloutAborted, naming the pod", ready)
		}
		if !meta.IsStatusConditionTrue(last.Status.Conditions, appv1.ConditionStalled) {
			t.Errorf("an aborted rollout is not Stalled: %+v", last.Status.Conditions)
		}
		t.Logf("kubectl app status risky:\n%s", e.kubectlApp(t, "status", "risky"))
	}
	requests, failed, canary, errs := load.stop()
	t.Logf("risky: %d requests during both aborts, %d failed, %d reached a canary pod", requests, failed, canary)
	if requests == 0 || failed != 0 || canary != 0 {
		t.Errorf("%d requests, %d failed, %d reached a canary pod: want every one answered by a stable pod; first errors:\n%s",
			requests, failed, canary, strings.Join(errs, "\n"))
	}
	if now := e.podNames(t, "risky", false); !equal(now, stable) {
		t.Errorf("stable pods %v, were %v: a stable pod was lost", now, stable)
	}
}

// load sends requests to a Service from the prober pod until stopped.
type load struct {
	stopc, done              chan struct{}
	mu                       sync.Mutex
	requests, failed, canary int
	// errors are the first errors seen.
	errors []string
}

// startLoad starts sending requests to ip:port/hostname one after the other, each on a
// new connection, counting those that fail and those a canary pod of app answers.
func (e *env) startLoad(t *testing.T, ip, app string) *load {
	l := &load{stopc: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for {
			select {
			case <-l.stopc:
				return
			default:
			}
			host, err := e.prober.Get(ip, port, "/hostname")
			l.mu.Lock()
			l.requests++
			switch {
			case err != nil:
				l.failed++
				if len(l.errors) < 5 {
					l.errors = append(l.errors, time.Now().Format("15:04:05.000")+" "+err.Error())
				}
			case strings.HasPrefix(host, app+appv1.CanarySuffix+"-"):
				l.canary++
			}
			l.mu.Unlock()
		}
	}()
	t.Cleanup(func() { l.stop() })
	return l
}

// stop stops the load and returns its counts and first errors.
func (l *load) stop() (requests, failed, canary int, errors []string) {
	select {
	case <-l.stopc:
	default:
		close(l.stopc)
	}
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.requests, l.failed, l.canary, l.errors
}

// waitServing waits until 20 requests in a row to ip:port/hostname are answered.
func (e *env) waitServing(t *testing.T, ip string) {
	t.Helper()
	start := time.Now()
	ok := 0
	framework.Eventually(t, time.Minute, func() (bool, error) {
		if _, err := e.prober.Get(ip, port, "/hostname"); err != nil {
			ok = 0
		} else {
			ok++
		}
		return ok >= 20, nil
	})
	t.Logf("%s:%d answers 20 requests in a row (%.1fs)", ip, port, time.Since(start).Seconds())
}

// waitRollout polls the App name until done says so, within timeout.
func (e *env) waitRollout(t *testing.T, name string, timeout time.Duration, what string, done func(*appv1.App) bool) {
	t.Helper()
	var last *appv1.App
	deadline := time.Now().Add(timeout)
	for {
		a, err := e.apps.AppcontrollerV1().Apps(e.ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		last = a
		if a.Status.ObservedGeneration == a.Generation && done(a) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("App %s not %s within %s: rollout %+v, conditions %+v", name, what, timeout, last.Status.Rollout, last.Status.Conditions)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// kubectlApp runs `kubectl app ARGS -n NS` in process and returns its output; status
// exits 1 for an App that is not Ready, which is not a failure here.
func (e *env) kubectlApp(t *testing.T, args ...string) string {
	t.Helper()
	out, code := realnode.KubectlApp(t, append(args, "-n", e.ns)...)
	if code == plugin.ExitError {
		t.Fatalf("kubectl app %s: exit code %d\n%s", strings.Join(args, " "), code, out)
	}
	return out
}

// pods returns the pods of the App name that are not being deleted.
func (e *env) pods(t *testing.T, name string) []corev1.Pod {
	t.Helper()
	list, err := e.client.CoreV1().Pods(e.ns).List(context.Background(), metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{appv1.InstanceLabel: name}).String(),
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// podNames returns the names of the App's running stable (canary false) or canary pods.
func (e *env) podNames(t *testing.T, name string, canary bool) []string {
	t.Helper()
	var out []string
	for _, p := range e.pods(t, name) {
		if (p.Labels[appv1.TrackLabel] == appv1.TrackCanary) == canary {
			out = append(out, p.Name)
		}
	}
	return out
}

// specReplicas returns the replicas of the Deployment name's spec.
func (e *env) specReplicas(t *testing.T, name string) int32 {
	t.Helper()
	d, err := e.client.AppsV1().Deployments(e.ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ptr.Deref(d.Spec.Replicas, 1)
}

// readyEndpoints returns the number of ready endpoints of the Service name.
func (e *env) readyEndpoints(t *testing.T, name string) int {
	t.Helper()
	slices, err := e.client.DiscoveryV1().EndpointSlices(e.ns).List(context.Background(), metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=" + name,
	})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range slices.Items {
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready != nil && *ep.Conditions.Ready {
				n++
			}
		}
	}
	return n
}

// clusterIP returns the cluster IP of the Service name.
func (e *env) clusterIP(t *testing.T, name string) string {
	t.Helper()
	svc, err := e.client.CoreV1().Services(e.ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return svc.Spec.ClusterIP
}

func ready(a *appv1.App) bool {
	return meta.IsStatusConditionTrue(a.Status.Conditions, appv1.ConditionReady)
}

// envOf returns the value of the App container's environment variable name in pod.
func envOf(pod *corev1.Pod, name string) string {
	for _, c := range pod.Spec.Containers {
		if c.Name != appv1.ContainerName {
			continue
		}
		for _, e := range c.Env {
			if e.Name == name {
				return e.Value
			}
		}
	}
	return ""
}

// subset reports whether every name of a is in b.
func subset(a, b []string) bool {
	for _, x := range a {
		found := false
		for _, y := range b {
			found = found || x == y
		}
		if !found {
			return false
		}
	}
	return true
}

// equal reports whether a and b hold the same names.
func equal(a, b []string) bool {
	return len(a) == len(b) && subset(a, b)
}

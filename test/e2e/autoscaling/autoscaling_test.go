// Package autoscaling_test drives real CPU load on a node that runs pods for real into
// an App with spec.autoscaling: the App controller's HorizontalPodAutoscaler scales the
// App's Deployment up under the load and back down when it stops, the App's status says
// so, and the controller writes nothing to the Deployment meanwhile (the API server's
// audit log of the controller's user, and the Deployment's managedFields). The metrics
// come from metrics-server beside the control plane (metrics.k8s.io); the load is
// resource-consumer's (test/images/resource-consumer of k8s.io/kubernetes), asked for by
// a pod of the cluster (agnhost resource-consumer-controller) through the App's Service:
// nothing is sent from this machine's network namespace to a pod or Service address. It
// prints how many seconds the autoscaler took each way on this machine.
package autoscaling_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/app-controller/app-controller/internal/localcluster"
	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	appclient "github.com/app-controller/app-controller/pkg/generated/clientset/versioned"
	"github.com/app-controller/app-controller/test/e2e/realnode"
	"github.com/app-controller/app-controller/test/gitops"
	"github.com/app-controller/app-controller/test/harness"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// controllerUser is the user the App controller runs as: the audit log records its
// writes.
const controllerUser = "autoscaling-e2e-controller"

// TestMain starts a cluster with a real node, the App CRD installed and the writes of
// controllerUser audited.
func TestMain(m *testing.M) {
	framework.MainWithOptions(m, func(o *localcluster.Options) {
		o.Node = localcluster.NodeReal
		o.AuditUsers = []string{controllerUser}
	})
}

const (
	consumer = "consumer"
	// request is the consumers' CPU request: the autoscaler's 100%.
	request = "200m"
	// loadMillicores is the CPU the driver asks the consumers to burn, in chunks of
	// chunkMillicores: at 3 pods it is still above the 50% target (400m of 600m
	// requested), so the autoscaler settles at its maximum whichever pods the Service
	// sends the chunks to, even if a busy machine lets the consumers burn less.
	loadMillicores  = 400
	chunkMillicores = 200
	// loadPeriod is how long each burst of load lasts; the driver asks again every
	// loadPeriod until the load stops, which then ends within loadPeriod.
	loadPeriod = 10 * time.Second

	healthScript = "../../../config/argocd/health.lua"
	goldenDir    = "../../gitops/testdata"
	// updateGolden makes the test write the App it captures at its maximum to goldenDir.
	updateGolden = "APP_CONTROLLER_UPDATE_GOLDEN"
)

// TestCPULoadScalesAnApp: an App on resource-consumer with a CPU request of 200m and
// spec.autoscaling (50% of the request, 1 to 3 pods, no scale-down stabilization) is
// Ready with one pod and ScalingActive True once the metrics API has its pod's figures
// (kubectl top shows them); under 400m of real load its HorizontalPodAutoscaler scales
// the Deployment to 3, the App's status says so (status.autoscaling, the Deployment's
// counts, ScalingLimited at the maximum, kstatus Current); once the load stops it scales
// back to 1. The App stays Ready all along (a scale is no rollout). Meanwhile
// the controller writes nothing to the Deployment: spec.replicas goes from the
// controller's apply (the starting size) to the autoscaler's update of the scale
// subresource, and kubectl app status shows the autoscaler.
func TestCPULoadScalesAnApp(t *testing.T) {
	ctx := context.Background()
	client := framework.Client(t)
	apps := framework.AppClient(t)
	ns := framework.Namespace(t)
	registry := realnode.Registry(t)
	startAppController(t)
	plugin := framework.BuildBinary(t, "kubectl-app")

	created := time.Now()
	if _, err := apps.AppcontrollerV1().Apps(ns).Create(ctx, consumerApp(ns, registry+"/"+localcluster.ResourceConsumerImage), metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating App %s: %v", consumer, err)
	}
	app := waitApp(t, apps, ns, 2*time.Minute, func(a *appv1.App) bool {
		return framework.AppCondition(a, appv1.ConditionReady) == "True/"+appv1.ReasonAvailable
	})
	t.Logf("App %s Ready %.1fs after its creation; ScalingActive %s", consumer, time.Since(created).Seconds(), framework.AppCondition(app, appv1.ConditionScalingActive))
	readyAt := time.Now()
	driver := startLoadDriver(t, client, ns, registry+"/"+localcluster.AgnhostImage)

	// The metrics API answers for the idle consumer (metrics-server reports a pod once
	// it has scraped it twice), and the autoscaler computes a count from it.
	app = waitApp(t, apps, ns, 2*time.Minute, func(a *appv1.App) bool {
		return framework.AppCondition(a, appv1.ConditionScalingActive) == "True/"+appv1.ReasonAutoscalerActive
	})
	t.Logf("ScalingActive True (%s) %.1fs after the App was Ready", conditionMessage(app, appv1.ConditionScalingActive), time.Since(readyAt).Seconds())
	pod := onlyPod(t, client, ns)
	idle, err := podCPU(ctx, client, ns, pod)
	if err != nil {
		t.Fatalf("the metrics API for pod %s: %v", pod, err)
	}
	top := realnode.Kubectl(t, "top", "pods", "-n", ns)
	if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(pod) + `\s+\d+m\s+\d+Mi`).MatchString(top) {
		t.Fatalf("kubectl top pods -n %s does not show %s's CPU and memory:\n%s", ns, pod, top)
	}
	if r := replicas(t, client, ns, consumer); r != 1 {
		t.Fatalf("the idle Deployment has %d replicas, want 1 (minReplicas)", r)
	}
	if owner := replicasManager(t, client, ns, consumer); owner != appv1.FieldManager+" Apply" {
		t.Errorf("spec.replicas of the new Deployment is owned by %q, want the controller's apply (the starting size)", owner)
	}
	mark := auditLength(t)
	readySince := meta.FindStatusCondition(app.Status.Conditions, appv1.ConditionReady).LastTransitionTime
	readiness := watchReady(t, apps, ns, app.ResourceVersion)

	// Load: the autoscaler scales up to its maximum, and the App's status says so.
	stop := driver.load(t, loadMillicores, chunkMillicores)
	loadStart := time.Now()
	framework.Eventually(t, 3*time.Minute, func() (bool, error) { return replicas(t, client, ns, consumer) == 3, nil })
	up := time.Since(loadStart)
	t.Logf("HorizontalPodAutoscaler: 1 -> 3 replicas %.1fs after the load started (idle CPU %dm)", up.Seconds(), idle.MilliValue())
	app = waitApp(t, apps, ns, 2*time.Minute, func(a *appv1.App) bool {
		st := a.Status.Autoscaling
		return st != nil && st.CurrentReplicas == 3 && st.DesiredReplicas == 3 && a.Status.DeploymentStatus != nil &&
			a.Status.DeploymentStatus.AvailableReplicas == 3 && framework.AppCondition(a, appv1.ConditionReady) == "True/"+appv1.ReasonAvailable
	})
	t.Logf("the App at 3 pods: status.autoscaling %+v, Ready %q", *app.Status.Autoscaling, conditionMessage(app, appv1.ConditionReady))
	// Still under load at the maximum: ScalingLimited True, the App Ready (kstatus
	// Current), when the busy machine lets the consumers burn enough.
	capped := waitAppOrNil(apps, ns, 30*time.Second, func(a *appv1.App) bool {
		return framework.AppCondition(a, appv1.ConditionScalingLimited) == "True/"+appv1.ReasonMaxReplicasReached
	})
	if capped != nil {
		app = capped
		t.Logf("at maxReplicas: ScalingLimited True %q", conditionMessage(app, appv1.ConditionScalingLimited))
	} else {
		t.Logf("ScalingLimited not True within 30s (the consumers burned less than 50%% of 3 requests)")
	}
	health(t, app, ns, registry, "autoscaling-at-max", capped != nil)
	// The plugin shows the autoscaler's count of 1..3 as it is then: 3 while the
	// consumers burn enough, fewer once a busy machine lets the load fall below the
	// target (the scale to 3 is asserted above).
	status := realnode.Run(t, plugin, "status", "-n", ns, consumer)
	if !regexp.MustCompile(`Autoscaling:\s+` + consumer + `: [1-3] of 1\.\.3 replicas, desired [1-3], cpu \d+%/50%`).MatchString(status) {
		t.Errorf("kubectl app status does not show the autoscaler of 1..3 and its CPU:\n%s", status)
	}
	t.Logf("kubectl app status under load:\n%s", status)
	if tree := realnode.Run(t, plugin, "tree", "-n", ns, consumer); !regexp.MustCompile(`HorizontalPodAutoscaler/` + consumer + `\s+Ready\s+` + consumer + `: [1-3] of 1\.\.3`).MatchString(tree) {
		t.Errorf("kubectl app tree does not show the autoscaler Ready of 1..3:\n%s", tree)
	}
	h, err := client.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, consumer, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("HorizontalPodAutoscaler under load: %s", hpaStatus(h))

	// No load: it scales back down to its minimum.
	loadEnd := stop()
	framework.Eventually(t, 3*time.Minute, func() (bool, error) { return replicas(t, client, ns, consumer) == 1, nil })
	down := time.Since(loadEnd)
	t.Logf("HorizontalPodAutoscaler: 3 -> 1 replica %.1fs after the load ended (scale-down stabilization 0)", down.Seconds())
	app = waitApp(t, apps, ns, 2*time.Minute, func(a *appv1.App) bool {
		return a.Status.Autoscaling != nil && a.Status.Autoscaling.DesiredReplicas == 1 && a.Status.DeploymentStatus != nil && a.Status.DeploymentStatus.Replicas == 1
	})

	// The App stayed Ready all along: a scale of the autoscaler is no rollout.
	if c := meta.FindStatusCondition(app.Status.Conditions, appv1.ConditionReady); c.Status != metav1.ConditionTrue || !c.LastTransitionTime.Equal(&readySince) {
		t.Errorf("Ready %s since %s after the scale up and down, want True since %s (before the load); the App's Ready from the load on, with its Deployment's counts:\n%s",
			c.Status, c.LastTransitionTime, readySince, strings.Join(readiness(), "\n"))
	}

	// The controller's writes meanwhile: none to the Deployment; the count's owner is the
	// autoscaler's update of the scale subresource.
	writes := controllerWrites(t, mark, ns)
	var toDeployment []string
	for _, w := range writes {
		if strings.Contains(w, " deployments") {
			toDeployment = append(toDeployment, w)
		}
	}
	t.Logf("the controller's writes from the load's start to the scale-down: %d (%q)", len(writes), writes)
	if len(toDeployment) != 0 {
		t.Errorf("the controller wrote %d times to the Deployment while the autoscaler scaled it: %q", len(toDeployment), toDeployment)
	}
	if owner := replicasManager(t, client, ns, consumer); owner != "kube-controller-manager Update scale" {
		t.Errorf("spec.replicas of the scaled Deployment is owned by %q, want kube-controller-manager Update scale", owner)
	}
	t.Logf("seconds to scale on this machine: up %.1f, down %.1f (metric resolution 10s, HPA sync period 1s)", up.Seconds(), down.Seconds())
}

// consumerApp returns the App "consumer": resource-consumer with a CPU request of 200m
// behind its Service "consumer" on port 8080, autoscaled from 1 to 3 pods at 50% of the
// request, without scale-down stabilization.
func consumerApp(ns, image string) *appv1.App {
	return &appv1.App{
		ObjectMeta: metav1.ObjectMeta{Name: consumer, Namespace: ns},
		Spec: appv1.AppSpec{
			DeploymentTemplate: &appv1.DeploymentTemplate{
				Name: consumer, Image: image, ContainerPort: ptr.To[int32](8080),
				Resources: &appv1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(request)}},
			},
			ServiceTemplate: &appv1.ServiceTemplate{Name: consumer, Port: 8080},
			Autoscaling: &appv1.Autoscaling{
				MinReplicas: ptr.To[int32](1), MaxReplicas: 3,
				CPU: &appv1.ResourceTarget{AverageUtilization: ptr.To[int32](50)},
				Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
					ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](0)},
				},
			},
		},
	}
}

// startAppController runs the App controller (only) in the test process as
// controllerUser, until the test ends.
func startAppController(t *testing.T) {
	t.Helper()
	framework.StartAppController(t, framework.UserConfig(t, controllerUser), nil)
}

// waitApp waits up to timeout until the App consumer passes check, and returns it.
func waitApp(t *testing.T, apps appclient.Interface, ns string, timeout time.Duration, check func(*appv1.App) bool) *appv1.App {
	t.Helper()
	var app *appv1.App
	framework.Eventually(t, timeout, func() (bool, error) {
		a, err := apps.AppcontrollerV1().Apps(ns).Get(context.Background(), consumer, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		app = a
		return a.Status.ObservedGeneration == a.Generation && check(a), nil
	})
	return app
}

// watchReady watches the App from resourceVersion on and returns a function that lists
// each change of its Ready condition seen so far (time, status, reason, message) with
// its Deployment's counts, to say why an App left Ready. The watch ends with the test.
func watchReady(t *testing.T, apps appclient.Interface, ns, resourceVersion string) func() []string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := apps.AppcontrollerV1().Apps(ns).Watch(ctx, metav1.ListOptions{
		FieldSelector: "metadata.name=" + consumer, ResourceVersion: resourceVersion})
	if err != nil {
		t.Fatalf("watching App %s: %v", consumer, err)
	}
	var mu sync.Mutex
	var seen []string
	last := ""
	go func() {
		for ev := range w.ResultChan() {
			a, ok := ev.Object.(*appv1.App)
			if !ok {
				continue
			}
			c := meta.FindStatusCondition(a.Status.Conditions, appv1.ConditionReady)
			if c == nil {
				continue
			}
			line := fmt.Sprintf("%s/%s: %s", c.Status, c.Reason, c.Message)
			if line == last {
				continue
			}
			last = line
			if d := a.Status.DeploymentStatus; d != nil {
				line += fmt.Sprintf(" (Deployment: %d replicas, %d updated, %d available)", d.Replicas, d.UpdatedReplicas, d.AvailableReplicas)
			}
			mu.Lock()
			seen = append(seen, time.Now().Format("15:04:05.000")+" "+line)
			mu.Unlock()
		}
	}()
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen)
	}
}

// waitAppOrNil is waitApp that returns nil when check does not pass within timeout.
func waitAppOrNil(apps appclient.Interface, ns string, timeout time.Duration, check func(*appv1.App) bool) *appv1.App {
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		a, err := apps.AppcontrollerV1().Apps(ns).Get(context.Background(), consumer, metav1.GetOptions{})
		if err == nil && check(a) {
			return a
		}
	}
	return nil
}

// conditionMessage returns the message of the App's condition, "" if absent.
func conditionMessage(app *appv1.App, conditionType string) string {
	if c := meta.FindStatusCondition(app.Status.Conditions, conditionType); c != nil {
		return c.Message
	}
	return ""
}

// health checks that kstatus reads the scaled App Current and that the shipped Argo CD
// health check agrees (Healthy). With APP_CONTROLLER_UPDATE_GOLDEN set and capture, the
// App is written to test/gitops/testdata/STATE.json, the registry and namespace masked.
func health(t *testing.T, app *appv1.App, ns, registry, state string, capture bool) {
	t.Helper()
	r, err := gitops.Read(healthScript, app)
	if err != nil {
		t.Fatal(err)
	}
	if r.Kstatus != "Current" || r.Argo.Status != gitops.Healthy {
		t.Errorf("the scaled App: kstatus %s, Argo CD %s (%s); want Current, Healthy", r.Kstatus, r.Argo.Status, r.Argo.Message)
	}
	if !capture || os.Getenv(updateGolden) == "" {
		return
	}
	if err := gitops.WriteCapture(filepath.Join(goldenDir, state+".json"), r.JSON, registry, "REGISTRY", ns, "NAMESPACE"); err != nil {
		t.Fatal(err)
	}
}

// auditLength returns the number of events in the audit log now.
func auditLength(t *testing.T) int {
	t.Helper()
	n := 0
	if err := harness.NewAuditLog(framework.Cluster().AuditLogPath).Read(func(harness.AuditEvent) error { n++; return nil }); err != nil {
		t.Fatalf("reading the audit log: %v", err)
	}
	return n
}

// controllerWrites returns the writes of controllerUser in namespace ns after the first
// mark events of the audit log, as "verb resource name".
func controllerWrites(t *testing.T, mark int, ns string) []string {
	t.Helper()
	var out []string
	i := -1
	err := harness.NewAuditLog(framework.Cluster().AuditLogPath).Read(func(ev harness.AuditEvent) error {
		i++
		if i < mark || !ev.IsWrite() || ev.Stage != "ResponseComplete" || ev.User.Username != controllerUser ||
			ev.ObjectRef == nil || ev.ObjectRef.Namespace != ns {
			return nil
		}
		out = append(out, ev.Verb+" "+ev.Resource()+" "+ev.ObjectRef.Name)
		return nil
	})
	if err != nil {
		t.Fatalf("reading the audit log: %v", err)
	}
	return slices.Clip(out)
}

// loadDriver is agnhost's resource-consumer-controller in a pod of the cluster: asked
// through a port-forward (the apiserver and the kubelet tunnel it into the pod), it
// spreads /ConsumeCPU requests over the consumers' Service.
type loadDriver struct{ base string }

// startLoadDriver starts the load driver's pod and a port-forward to it. The cluster has
// no DNS: the pod resolves the consumers' Service name from /etc/hosts (hostAliases), and
// its search path gives the driver the cluster's domain.
func startLoadDriver(t *testing.T, client kubernetes.Interface, ns, agnhost string) *loadDriver {
	t.Helper()
	ctx := context.Background()
	svc, err := client.CoreV1().Services(ns).Get(ctx, consumer, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const name = "load-driver"
	_, err = client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			DNSPolicy:                     corev1.DNSNone,
			DNSConfig:                     &corev1.PodDNSConfig{Nameservers: []string{"127.0.0.1"}, Searches: []string{"svc.cluster.local"}},
			HostAliases:                   []corev1.HostAlias{{IP: svc.Spec.ClusterIP, Hostnames: []string{consumer + "." + ns + ".svc.cluster.local"}}},
			Containers: []corev1.Container{{
				Name:  "driver",
				Image: agnhost,
				Args: []string{"resource-consumer-controller", "--port=8080", "--consumer-port=8080",
					"--consumer-service-name=" + consumer, "--consumer-service-namespace=" + ns},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}}, PeriodSeconds: 1},
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating the load driver's pod: %v", err)
	}
	framework.Eventually(t, 2*time.Minute, func() (bool, error) {
		p, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && realnode.PodReady(p), nil
	})
	return &loadDriver{base: realnode.PortForward(t, ns, "pod/"+name, 8080)}
}

// load asks for millicores of CPU, in requests of chunk millicores, for loadPeriod, and
// asks again every loadPeriod until the returned stop is called; stop returns when the
// last burst ends.
func (d *loadDriver) load(t *testing.T, millicores, chunk int) (stop func() time.Time) {
	t.Helper()
	ask := func() error {
		q := url.Values{
			"millicores":            {fmt.Sprint(millicores)},
			"requestSizeMillicores": {fmt.Sprint(chunk)},
			"durationSec":           {fmt.Sprint(int(loadPeriod.Seconds()))},
		}
		resp, err := (&http.Client{Timeout: loadPeriod}).Post(d.base+"/ConsumeCPU?"+q.Encode(), "", nil)
		if err != nil {
			return fmt.Errorf("asking the load driver for %dm of CPU: %w", millicores, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || strings.Contains(string(body), "Failed") {
			return fmt.Errorf("asking the load driver for %dm of CPU: %s: %s", millicores, resp.Status, body)
		}
		return nil
	}
	if err := ask(); err != nil {
		t.Fatal(err)
	}
	last := time.Now()
	done, stopped := make(chan struct{}), make(chan time.Time)
	go func() {
		ticker := time.NewTicker(loadPeriod)
		defer ticker.Stop()
		for {
			select {
			case <-done:
				stopped <- last.Add(loadPeriod)
				return
			case <-ticker.C:
				if err := ask(); err != nil {
					t.Errorf("%v", err)
				}
				last = time.Now()
			}
		}
	}()
	var end time.Time
	once := false
	stop = func() time.Time {
		if !once {
			once = true
			close(done)
			end = <-stopped
			time.Sleep(time.Until(end))
		}
		return end
	}
	t.Cleanup(func() { stop() })
	return stop
}

// podMetrics is the part of a metrics.k8s.io/v1beta1 PodMetrics the tests read.
type podMetrics struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Containers []struct {
		Usage map[corev1.ResourceName]resource.Quantity `json:"usage"`
	} `json:"containers"`
}

// podCPU returns the CPU use of pod that the metrics API reports.
func podCPU(ctx context.Context, client kubernetes.Interface, ns, pod string) (resource.Quantity, error) {
	var m podMetrics
	if err := getMetrics(ctx, client, "/apis/metrics.k8s.io/v1beta1/namespaces/"+ns+"/pods/"+pod, &m); err != nil {
		return resource.Quantity{}, err
	}
	return cpuOf(m), nil
}

func cpuOf(m podMetrics) resource.Quantity {
	var cpu resource.Quantity
	for _, c := range m.Containers {
		cpu.Add(c.Usage[corev1.ResourceCPU])
	}
	return cpu
}

// getMetrics GETs path of the aggregated metrics API through the apiserver into into.
func getMetrics(ctx context.Context, client kubernetes.Interface, path string, into any) error {
	u, err := url.Parse(path)
	if err != nil {
		return err
	}
	req := client.CoreV1().RESTClient().Get().AbsPath(u.Path)
	for k, vs := range u.Query() {
		for _, v := range vs {
			req = req.Param(k, v)
		}
	}
	body, err := req.DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	if err := json.Unmarshal(body, into); err != nil {
		return fmt.Errorf("decoding GET %s: %w", path, err)
	}
	return nil
}

// onlyPod returns the name of the one consumer pod.
func onlyPod(t *testing.T, client kubernetes.Interface, ns string) string {
	t.Helper()
	pods, err := client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: appv1.InstanceLabel + "=" + consumer})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("listing the consumer pods: %d pods, %v", len(pods.Items), err)
	}
	return pods.Items[0].Name
}

// replicas returns the Deployment's spec.replicas.
func replicas(t *testing.T, client kubernetes.Interface, ns, name string) int32 {
	t.Helper()
	d, err := client.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ptr.Deref(d.Spec.Replicas, 1)
}

// replicasManager returns "manager operation subresource" of the managedFields entry
// of the Deployment that owns spec.replicas.
func replicasManager(t *testing.T, client kubernetes.Interface, ns, name string) string {
	t.Helper()
	d, err := client.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var owners []string
	for _, e := range d.ManagedFields {
		var fields struct {
			Spec map[string]any `json:"f:spec"`
		}
		if e.FieldsV1 == nil || json.Unmarshal(e.FieldsV1.GetRawBytes(), &fields) != nil {
			continue
		}
		if _, ok := fields.Spec["f:replicas"]; ok {
			owners = append(owners, strings.TrimSpace(fmt.Sprintf("%s %s %s", e.Manager, e.Operation, e.Subresource)))
		}
	}
	return strings.Join(owners, ", ")
}

// hpaStatus says the autoscaler's replicas, CPU utilization and conditions in a line.
func hpaStatus(h *autoscalingv2.HorizontalPodAutoscaler) string {
	var b strings.Builder
	fmt.Fprintf(&b, "current %d desired %d", h.Status.CurrentReplicas, h.Status.DesiredReplicas)
	for _, m := range h.Status.CurrentMetrics {
		if m.Resource != nil && m.Resource.Current.AverageUtilization != nil {
			fmt.Fprintf(&b, ", cpu %d%%", *m.Resource.Current.AverageUtilization)
		}
	}
	for _, c := range h.Status.Conditions {
		fmt.Fprintf(&b, "; %s=%s %s", c.Type, c.Status, c.Reason)
	}
	return b.String()
}

// Package autoscaling_test drives real CPU load on a node that runs pods for real and
// checks what an autoscaler needs from the cluster: the resource metrics API
// (metrics.k8s.io, metrics-server beside the control plane) reports a pod's CPU, the
// figure rises when the pod burns CPU, and a plain HorizontalPodAutoscaler of a plain
// Deployment scales it up under that load and back down when it stops. The load is
// resource-consumer's (test/images/resource-consumer of k8s.io/kubernetes), asked for
// by a pod of the cluster (agnhost resource-consumer-controller) through the consumers'
// Service: nothing is sent from this machine's network namespace to a pod or Service
// address. It prints how many seconds the autoscaler took each way on this machine.
package autoscaling_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/app-controller/app-controller/internal/localcluster"
	"github.com/app-controller/app-controller/test/e2e/realnode"
	"github.com/app-controller/app-controller/test/integration/framework"
)

func TestMain(m *testing.M) { realnode.Main(m) }

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
)

// TestCPULoadScalesAPlainHPA: the metrics API answers for a running pod, its CPU figure
// rises under real load, and an autoscaling/v2 HorizontalPodAutoscaler (50% of the
// request, 1 to 3 pods, no scale-down stabilization) scales the Deployment to 3 under
// the load and back to 1 once it stops, writing the replicas through the scale
// subresource as its own field manager.
func TestCPULoadScalesAPlainHPA(t *testing.T) {
	ctx := context.Background()
	client := framework.Client(t)
	ns := framework.Namespace(t)
	registry := realnode.Registry(t)

	deployment := startConsumers(t, client, ns, registry+"/"+localcluster.ResourceConsumerImage)
	driver := startLoadDriver(t, client, ns, registry+"/"+localcluster.AgnhostImage)

	// The metrics API answers for the idle consumer: metrics-server reports a pod once
	// it has scraped it twice.
	pod := onlyPod(t, client, ns)
	var idle resource.Quantity
	begin := time.Now()
	framework.Eventually(t, 2*time.Minute, func() (bool, error) {
		cpu, err := podCPU(ctx, client, ns, pod)
		idle = cpu
		return err == nil, nil
	})
	t.Logf("metrics.k8s.io answers for pod %s %.1fs after it was ready: CPU %dm (idle)", pod, time.Since(begin).Seconds(), idle.MilliValue())
	top := realnode.Kubectl(t, "top", "pods", "-n", ns)
	if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(pod) + `\s+\d+m\s+\d+Mi`).MatchString(top) {
		t.Fatalf("kubectl top pods -n %s does not show %s's CPU and memory:\n%s", ns, pod, top)
	}
	t.Logf("kubectl top pods -n %s:\n%s", ns, top)
	t.Logf("kubectl top nodes:\n%s", realnode.Kubectl(t, "top", "nodes"))

	// The autoscaler, before any load: it keeps 1 pod.
	hpa, err := client.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: consumer},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: deployment},
			MinReplicas:    ptr.To[int32](1),
			MaxReplicas:    3,
			Metrics: []autoscalingv2.MetricSpec{{
				Type: autoscalingv2.ResourceMetricSourceType,
				Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{
					Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](50),
				}},
			}},
			Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
				ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](0)},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating the HorizontalPodAutoscaler: %v", err)
	}
	framework.Eventually(t, time.Minute, func() (bool, error) {
		h, err := client.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, hpa.Name, metav1.GetOptions{})
		return err == nil && condition(h, autoscalingv2.ScalingActive) == corev1.ConditionTrue && h.Status.CurrentMetrics != nil, nil
	})
	if r := replicas(t, client, ns, deployment); r != 1 {
		t.Fatalf("the idle Deployment has %d replicas, want 1", r)
	}

	// Load: the consumer's CPU figure rises, and the autoscaler scales up to its maximum.
	stop := driver.load(t, loadMillicores, chunkMillicores)
	loadStart := time.Now()
	var busy resource.Quantity
	framework.Eventually(t, 2*time.Minute, func() (bool, error) {
		var err error
		busy, err = totalCPU(ctx, client, ns)
		return err == nil && busy.MilliValue() >= 150, nil
	})
	t.Logf("the consumers' CPU rose from %dm to %dm %.1fs after the load (%dm) started", idle.MilliValue(), busy.MilliValue(), time.Since(loadStart).Seconds(), loadMillicores)
	framework.Eventually(t, 3*time.Minute, func() (bool, error) { return replicas(t, client, ns, deployment) == 3, nil })
	up := time.Since(loadStart)
	t.Logf("kubectl top pods -n %s under load:\n%s", ns, realnode.Kubectl(t, "top", "pods", "-n", ns))
	h, err := client.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, hpa.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("HorizontalPodAutoscaler: %d -> %d replicas %.1fs after the load started; status: %s", 1, 3, up.Seconds(), hpaStatus(h))

	// The autoscaler's writes: spec.replicas through the scale subresource, as its own
	// field manager (docs/autoscaling.md builds the App's handover on this).
	manager := replicasManager(t, client, ns, deployment)
	if manager != "kube-controller-manager Update scale" {
		t.Errorf("spec.replicas of the scaled Deployment is owned by %q, want kube-controller-manager Update scale", manager)
	}

	// No load: it scales back down to its minimum.
	loadEnd := stop()
	framework.Eventually(t, 3*time.Minute, func() (bool, error) { return replicas(t, client, ns, deployment) == 1, nil })
	down := time.Since(loadEnd)
	t.Logf("HorizontalPodAutoscaler: 3 -> 1 replica %.1fs after the load ended (scale-down stabilization 0)", down.Seconds())
	t.Logf("seconds to scale on this machine: up %.1f, down %.1f (metric resolution 10s, HPA sync period 1s)", up.Seconds(), down.Seconds())
}

// startConsumers starts the Deployment and the Service "consumer" of one
// resource-consumer pod requesting 200m of CPU, waits until the pod is ready and
// returns the Deployment's name.
func startConsumers(t *testing.T, client kubernetes.Interface, ns, image string) string {
	t.Helper()
	ctx := context.Background()
	labels := map[string]string{"app": consumer}
	_, err := client.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: consumer},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To[int64](0),
					Containers: []corev1.Container{{
						Name:      consumer,
						Image:     image,
						Ports:     []corev1.ContainerPort{{ContainerPort: 8080}},
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(request)}},
					}},
				},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating the consumers' Deployment: %v", err)
	}
	if _, err := client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: consumer},
		Spec: corev1.ServiceSpec{
			Selector: labels,
			Ports:    []corev1.ServicePort{{Port: 8080, TargetPort: intstr.FromInt32(8080)}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the consumers' Service: %v", err)
	}
	framework.Eventually(t, 2*time.Minute, func() (bool, error) {
		d, err := client.AppsV1().Deployments(ns).Get(ctx, consumer, metav1.GetOptions{})
		return err == nil && d.Status.ReadyReplicas == 1, nil
	})
	return consumer
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

// totalCPU returns the CPU use of the consumers' pods together, as the metrics API
// reports it.
func totalCPU(ctx context.Context, client kubernetes.Interface, ns string) (resource.Quantity, error) {
	var list struct {
		Items []podMetrics `json:"items"`
	}
	if err := getMetrics(ctx, client, "/apis/metrics.k8s.io/v1beta1/namespaces/"+ns+"/pods?labelSelector=app%3D"+consumer, &list); err != nil {
		return resource.Quantity{}, err
	}
	var total resource.Quantity
	for _, m := range list.Items {
		total.Add(cpuOf(m))
	}
	return total, nil
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
	pods, err := client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=" + consumer})
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

// condition returns the status of the autoscaler's condition of type ct.
func condition(h *autoscalingv2.HorizontalPodAutoscaler, ct autoscalingv2.HorizontalPodAutoscalerConditionType) corev1.ConditionStatus {
	for _, c := range h.Status.Conditions {
		if c.Type == ct {
			return c.Status
		}
	}
	return corev1.ConditionUnknown
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

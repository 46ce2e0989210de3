package notready_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/test/e2e/realnode"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// TestServiceShapeOnRealNode runs, on this package's real node, an App shaped like a real
// service: an init container that must finish before the App's container starts, a
// native sidecar answering on a second port that the Service exposes, and a disruption
// budget that refuses the eviction of the App's only pod.
func TestServiceShapeOnRealNode(t *testing.T) {
	client, apps, agnhost, ns := setUp(t)
	ctx := context.Background()

	app := &appv1.App{
		ObjectMeta: metav1.ObjectMeta{Name: "shaped", Namespace: ns},
		Spec: appv1.AppSpec{
			DeploymentTemplate: &appv1.DeploymentTemplate{
				Name: "shaped", Image: agnhost, Args: []string{"netexec", "--http-port=8080"},
				ContainerPort: ptr.To[int32](8080), Replicas: ptr.To[int32](1),
				// agnhost etc-hosts prints /etc/hosts and exits 0.
				InitContainers: []appv1.Container{{Name: "init", Image: agnhost, Args: []string{"etc-hosts"}}},
				Sidecars: []appv1.Container{{
					Name: "side", Image: agnhost, Args: []string{"netexec", "--http-port=9090", "--udp-port=9091"}, // the App's netexec has UDP 8081
					Ports: []appv1.ContainerPort{{Name: "side", ContainerPort: 9090}},
					ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
						HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("side")},
					}, PeriodSeconds: 1},
				}},
			},
			ServiceTemplate: &appv1.ServiceTemplate{
				Name: "shaped", Port: 80,
				Ports: []appv1.ServicePort{{Name: "side", Port: 9090, TargetPort: ptr.To(intstr.FromString("side"))}},
			},
			DisruptionBudget: &appv1.DisruptionBudget{MinAvailable: ptr.To(intstr.FromInt32(1))},
		},
	}
	if _, err := apps.AppcontrollerV1().Apps(ns).Create(ctx, app, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 3*time.Minute, func() (bool, error) {
		a, err := apps.AppcontrollerV1().Apps(ns).Get(ctx, "shaped", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		c := meta.FindStatusCondition(a.Status.Conditions, appv1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == a.Generation, nil
	})

	// The init container finished before the sidecar and the App's container started.
	pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: appv1.InstanceLabel + "=shaped"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("pods of App shaped: %v, %v", pods, err)
	}
	pod := pods.Items[0]
	var initDone, sideStarted, appStarted time.Time
	for _, s := range pod.Status.InitContainerStatuses {
		switch {
		case s.Name == "init" && s.State.Terminated != nil && s.State.Terminated.ExitCode == 0:
			initDone = s.State.Terminated.FinishedAt.Time
		case s.Name == "side" && s.State.Running != nil:
			sideStarted = s.State.Running.StartedAt.Time
		}
	}
	for _, s := range pod.Status.ContainerStatuses {
		if s.Name == appv1.ContainerName && s.State.Running != nil {
			appStarted = s.State.Running.StartedAt.Time
		}
	}
	t.Logf("init container finished %s, sidecar started %s, app started %s",
		initDone.Format(time.RFC3339), sideStarted.Format(time.RFC3339), appStarted.Format(time.RFC3339))
	if initDone.IsZero() || sideStarted.IsZero() || appStarted.IsZero() || appStarted.Before(initDone) || appStarted.Before(sideStarted) {
		t.Errorf("container order: init finished %v, sidecar started %v, app started %v; want init, then sidecar and app\n%+v",
			initDone, sideStarted, appStarted, pod.Status)
	}

	// The sidecar answers through the Service's second port; the App's container through
	// the first.
	prober := realnode.NewProber(t, ns)
	svc, err := client.CoreV1().Services(ns).Get(ctx, "shaped", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	host := svc.Spec.ClusterIP // the cluster runs no DNS
	for _, port := range []int{9090, 80} {
		var body string
		framework.Eventually(t, time.Minute, func() (bool, error) {
			body, err = prober.Get(host, port, "/hostname")
			return err == nil, nil
		})
		t.Logf("GET %s:%d/hostname -> %q", host, port, body)
		if strings.TrimSpace(body) != pod.Name {
			t.Errorf("GET %s:%d/hostname = %q, want the pod %s", host, port, body, pod.Name)
		}
	}

	// The budget refuses evicting the only pod.
	framework.Eventually(t, time.Minute, func() (bool, error) {
		b, err := client.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "shaped", metav1.GetOptions{})
		return err == nil && b.Status.ObservedGeneration == b.Generation && b.Status.CurrentHealthy == 1, nil
	})
	err = client.PolicyV1().Evictions(ns).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: ns}})
	t.Logf("eviction of %s: %v", pod.Name, err)
	if !apierrors.IsTooManyRequests(err) {
		t.Errorf("eviction of the App's only pod: %v, want 429 Too Many Requests from its PodDisruptionBudget", err)
	}
}

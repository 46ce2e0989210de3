// Package localcluster_test is a smoke test of the local control plane that integration
// tests run against: CRDs installed, Deployments run by the controller-manager, the
// scheduler and kwok, garbage collection, RBAC.
package localcluster_test

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/app-controller/app-controller/internal/localcluster"
	"github.com/app-controller/app-controller/test/integration/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

func TestCRDIsEstablished(t *testing.T) {
	t.Parallel()
	crd := framework.AppCRD(t)
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established {
			if c.Status != apiextensionsv1.ConditionTrue {
				t.Fatalf("CRD Established = %s: %s", c.Status, c.Message)
			}
			return
		}
	}
	t.Fatal("CRD has no Established condition")
}

func TestKwokNodeIsReady(t *testing.T) {
	t.Parallel()
	node, err := framework.Client(t).CoreV1().Nodes().Get(context.Background(), localcluster.DefaultNodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := node.Status.Allocatable.Pods().Value(); got != 1000 {
		t.Errorf("allocatable pods = %d, want 1000", got)
	}
	if node.Labels["type"] != "kwok" || node.Annotations[localcluster.KwokNodeAnnotation] != "fake" {
		t.Errorf("node labels %v, annotations %v", node.Labels, node.Annotations)
	}
	// A taint (such as node.kubernetes.io/not-ready) would keep pods Pending.
	if len(node.Spec.Taints) > 0 {
		t.Errorf("node taints = %v, want none", node.Spec.Taints)
	}
}

func TestDeploymentBecomesAvailable(t *testing.T) {
	t.Parallel()
	client, ns := withDeployment(t, "web", 2)
	ctx := context.Background()
	framework.Eventually(t, 60*time.Second, func() (bool, error) {
		d, err := client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return d.Status.AvailableReplicas == 2 && hasCondition(d, appsv1.DeploymentAvailable), nil
	})

	pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 2 {
		t.Fatalf("%d pods, want 2", len(pods.Items))
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName != localcluster.DefaultNodeName || p.Status.Phase != corev1.PodRunning {
			t.Errorf("pod %s on node %q in phase %s, want Running on %s", p.Name, p.Spec.NodeName, p.Status.Phase, localcluster.DefaultNodeName)
		}
	}
}

func TestDeletingDeploymentGarbageCollectsReplicaSets(t *testing.T) {
	t.Parallel()
	client, ns := withDeployment(t, "gc", 1)
	ctx := context.Background()
	replicaSets := func() int {
		t.Helper()
		list, err := client.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=gc"})
		if err != nil {
			t.Fatal(err)
		}
		return len(list.Items)
	}
	framework.Eventually(t, 30*time.Second, func() (bool, error) { return replicaSets() == 1, nil })

	// Background propagation: the Deployment goes at once, the garbage collector then
	// deletes the ReplicaSet it owns.
	err := client.AppsV1().Deployments(ns).Delete(ctx, "gc", metav1.DeleteOptions{
		PropagationPolicy: ptr.To(metav1.DeletePropagationBackground),
	})
	if err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 60*time.Second, func() (bool, error) { return replicaSets() == 0, nil })
}

func TestRBACIsEnforced(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	ctx := context.Background()

	if _, err := framework.Client(t).CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("admin cannot list pods: %v", err)
	}

	cfg := framework.Config(t)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "unprivileged-user", Groups: []string{"system:authenticated"}}
	unprivileged, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = unprivileged.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("listing pods as an unprivileged user: error = %v, want Forbidden", err)
	}
}

// withDeployment creates a namespace and in it the Deployment name of replicas pause
// pods (labelled app=name), and returns the admin client and the namespace.
func withDeployment(t *testing.T, name string, replicas int32) (kubernetes.Interface, string) {
	t.Helper()
	client := framework.Client(t)
	ns := framework.Namespace(t)
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
				},
			},
		},
	}
	if _, err := client.AppsV1().Deployments(ns).Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return client, ns
}

func hasCondition(d *appsv1.Deployment, condition appsv1.DeploymentConditionType) bool {
	for _, c := range d.Status.Conditions {
		if c.Type == condition && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

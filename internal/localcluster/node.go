package localcluster

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// DefaultNodeName is the first kwok node Start creates.
const DefaultNodeName = "kwok-node-0"

// KwokNodePods is the pods capacity of each kwok node.
const KwokNodePods = 1000

// NodeNames returns the names of the kwok nodes that hold podCapacity pods, KwokNodePods
// each: kwok-node-0, kwok-node-1, ...; at least one.
func NodeNames(podCapacity int) []string {
	n := max(1, (podCapacity+KwokNodePods-1)/KwokNodePods)
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("kwok-node-%d", i)
	}
	return names
}

// KwokNode returns a Node that kwok manages: annotated kwok.x-k8s.io/node=fake, labelled
// type=kwok and kubernetes.io/hostname=<name>, with room for KwokNodePods pods.
func KwokNode(name string) *corev1.Node {
	resources := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   *resource.NewQuantity(KwokNodePods, resource.DecimalSI),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{KwokNodeAnnotation: "fake"},
			Labels: map[string]string{
				"type":               "kwok",
				corev1.LabelHostname: name,
			},
		},
		Spec: corev1.NodeSpec{ProviderID: "kwok://" + name},
		Status: corev1.NodeStatus{
			Capacity:    resources,
			Allocatable: resources.DeepCopy(),
		},
	}
}

// CreateKwokNode creates the Node KwokNode(name) and makes sure its capacity and
// allocatable are set. kwok then marks it Ready (see WaitNodeReady). An error from the
// create (such as AlreadyExists) is wrapped, so apierrors.IsAlreadyExists works on it.
func CreateKwokNode(ctx context.Context, client kubernetes.Interface, name string) error {
	want := KwokNode(name)
	created, err := client.CoreV1().Nodes().Create(ctx, want, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating node %s: %w", name, err)
	}
	if apiequality.Semantic.DeepEqual(created.Status.Allocatable, want.Status.Allocatable) &&
		apiequality.Semantic.DeepEqual(created.Status.Capacity, want.Status.Capacity) {
		return nil
	}
	// The create dropped the status: set it through the status subresource. kwok may be
	// updating the same node, hence the retry on conflicts.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		node.Status.Capacity = want.Status.Capacity
		node.Status.Allocatable = want.Status.Allocatable
		_, err = client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("setting the capacity of node %s: %w", name, err)
	}
	return nil
}

// WaitNodeReady waits until the node's Ready condition is True.
func WaitNodeReady(ctx context.Context, client kubernetes.Interface, name string, timeout time.Duration) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				last = fmt.Sprintf("Ready=%s (%s)", c.Status, c.Reason)
				return c.Status == corev1.ConditionTrue, nil
			}
		}
		last = "no Ready condition yet"
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for node %s to be Ready (last seen: %s): %w", name, last, err)
	}
	return nil
}

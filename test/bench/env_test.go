package bench

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

// benchNamespace is a namespace of the harness and objects in it.
func benchNamespace(name string, pods int) []runtime.Object {
	objs := []runtime.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{benchNamespaceLabel: "true"}}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: "web"}},
		&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: "web-1"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: "web"}},
	}
	for i := range pods {
		objs = append(objs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: "web-" + string(rune('a'+i))}})
	}
	return objs
}

func TestObjectsLeft(t *testing.T) {
	kube := fake.NewClientset(append(benchNamespace("a", 3), benchNamespace("b", 1)...)...)
	namespaces, err := kube.CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := objectsLeft(t.Context(), kube, namespaces.Items), 3+3+1+3; got != want {
		t.Errorf("objectsLeft = %d, want %d (4 pods, 2 ReplicaSets, 2 Deployments, 2 Services)", got, want)
	}
}

// TestEmptyClusterStall: a namespace that stays, with objects that stay, is given up
// after the stall; one whose objects keep going away is waited for past it.
func TestEmptyClusterStall(t *testing.T) {
	// The namespace controller of a real cluster removes the namespace once it is empty;
	// here deleting it does nothing, and each poll's pod list may delete a pod.
	stuck := func(kube *fake.Clientset) {
		kube.PrependReactor("delete", "namespaces", func(clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, nil
		})
		kube.PrependReactor("delete-collection", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, nil
		})
	}

	kube := fake.NewClientset(benchNamespace("a", 2)...)
	stuck(kube)
	_, err := emptyCluster(t.Context(), kube, 2*time.Second)
	if err == nil || !strings.Contains(err.Error(), "1 namespace(s)") || !strings.Contains(err.Error(), "5 pods, ReplicaSets, Deployments and Services left") {
		t.Errorf("a namespace that stays: %v, want it given up with 5 objects left", err)
	}

	// A pod list that fails every other time moves nothing: the stall still ends it.
	kube = fake.NewClientset(benchNamespace("a", 2)...)
	stuck(kube)
	lists := 0
	kube.PrependReactor("list", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		lists++
		return lists%2 == 0, nil, errors.New("the API server is busy")
	})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err = emptyCluster(ctx, kube, 2*time.Second)
	if err == nil || !strings.Contains(err.Error(), "5 pods, ReplicaSets, Deployments and Services left") {
		t.Errorf("a namespace that stays, its pods counted every other time: %v, want it given up with 5 objects left", err)
	}

	kube = fake.NewClientset(benchNamespace("a", 4)...)
	stuck(kube)
	pods := 4
	kube.PrependReactor("list", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		// One pod fewer every 1.5 s, then the namespace goes.
		time.Sleep(1500 * time.Millisecond)
		if pods == 0 {
			return true, &corev1.PodList{}, kube.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("namespaces"), "", "a")
		}
		pods--
		list := &corev1.PodList{}
		for range pods {
			list.Items = append(list.Items, corev1.Pod{})
		}
		return true, list, nil
	})
	ctx, cancel = context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, err := emptyCluster(ctx, kube, 2*time.Second); err != nil {
		t.Errorf("a namespace whose pods go away one by one, each after less than the stall: %v", err)
	}
}

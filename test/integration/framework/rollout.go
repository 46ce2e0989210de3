package framework

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/app-controller/app-controller/internal/plugin"
	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	appclientset "github.com/app-controller/app-controller/pkg/generated/clientset/versioned"
)

// DeploymentReplicas returns the spec replicas and the first container's image of the
// Deployment ns/name; -1 when it does not exist.
func DeploymentReplicas(t testing.TB, kube kubernetes.Interface, ns, name string) (int32, string) {
	t.Helper()
	d, err := kube.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return -1, ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return ptr.Deref(d.Spec.Replicas, 1), d.Spec.Template.Spec.Containers[0].Image
}

// RequestRollout runs kubectl app ACTION on the App ns/name, with the plugin's code.
func RequestRollout(t testing.TB, apps appclientset.Interface, kube kubernetes.Interface, ns, name string, action appv1.RolloutAction) {
	t.Helper()
	res, err := plugin.RequestRollout(context.Background(), plugin.Clients{Apps: apps, Kube: kube}, ns, name, action, time.Now())
	if err != nil {
		t.Fatalf("kubectl app %s %s: %v", action, name, err)
	}
	t.Logf("kubectl app %s %s: %s", action, name, res.Effect)
}

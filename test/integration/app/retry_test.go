package app

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// TestRetryBudget makes every Service write fail (a ResourceQuota allowing no Service):
// after 10 failed attempts in a row the App says so in its Ready and Stalled conditions,
// with the last error, and in a Warning Event; it is retried at the next resync, and
// recovers once the quota is lifted.
func TestRetryBudget(t *testing.T) {
	c := newClients(t)
	const resync = 2 * time.Second
	startManager(t, resync)
	ns := framework.Namespace(t)
	ctx := context.Background()

	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "no-services", Namespace: ns},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceServices: mustQuantity(t, "0")}},
	}
	if _, err := c.Kube.CoreV1().ResourceQuotas(ns).Create(ctx, quota, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The quota admission needs the quota's status before it enforces it.
	framework.Eventually(t, converge, func() (bool, error) {
		q, err := c.Kube.CoreV1().ResourceQuotas(ns).Get(ctx, "no-services", metav1.GetOptions{})
		return err == nil && q.Status.Hard != nil, nil
	})

	c.Create(t, newApp(ns, "web", "nginx", 1))
	app := c.WaitCondition(t, ns, "web", appv1.ConditionReady, "False/ReconcileFailed")
	msg := conditionMessage(app, appv1.ConditionReady)
	if !strings.Contains(msg, "10 failed attempts") || !strings.Contains(msg, "exceeded quota") {
		t.Errorf("Ready message %q does not give the attempts and the last error", msg)
	}
	if got := framework.AppCondition(app, appv1.ConditionStalled); got != "True/ReconcileFailed" {
		t.Errorf("Stalled = %q, want True/ReconcileFailed", got)
	}
	framework.Eventually(t, converge, func() (bool, error) {
		events := c.Events(t, ns, "App", "web")
		return slices.ContainsFunc(events, func(e string) bool { return strings.HasPrefix(e, "Warning ReconcileFailed ") }) &&
			slices.ContainsFunc(events, func(e string) bool { return strings.HasPrefix(e, "Warning SyncFailed ") }), nil
	})

	if err := c.Kube.CoreV1().ResourceQuotas(ns).Delete(ctx, "no-services", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	app = c.WaitReady(t, ns, "web")
	if got := framework.AppCondition(app, appv1.ConditionStalled); got != "" {
		t.Errorf("Stalled = %q after recovery, want it gone", got)
	}
}

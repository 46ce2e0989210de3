package reliability

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// TestConflictingWritersOnApp has other clients change the Apps' labels, annotations and
// image (updates with a resourceVersion, and merge patches) while the controller writes
// their status: no update is lost and every App converges at its last generation.
func TestConflictingWritersOnApp(t *testing.T) {
	e := newEnv(t)
	const n, rounds = 5, 15
	id := newIdentity("conflicts")
	start := time.Now()
	startController(t, id)
	e.createApps(t, 0, n)

	var conflicts atomic.Int32
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			apps := e.app.AppcontrollerV1().Apps(e.ns)
			for k := 1; k <= rounds; k++ {
				image := fmt.Sprintf("nginx:1.%d", k)
				err := e.retry(func(ctx context.Context) error {
					if k%2 == 0 {
						patch := fmt.Sprintf(`{"metadata":{"labels":{"writer":"%d"},"annotations":{"writer":"%d"}},"spec":{"deploymentTemplate":{"image":%q}}}`, k, k, image)
						_, err := apps.Patch(ctx, appName(i), types.MergePatchType, []byte(patch), metav1.PatchOptions{})
						return err
					}
					a, err := apps.Get(ctx, appName(i), metav1.GetOptions{})
					if err != nil {
						return err
					}
					if a.Labels == nil {
						a.Labels = map[string]string{}
					}
					if a.Annotations == nil {
						a.Annotations = map[string]string{}
					}
					a.Labels["writer"], a.Annotations["writer"] = strconv.Itoa(k), strconv.Itoa(k)
					a.Spec.DeploymentTemplate.Image = image
					_, err = apps.Update(ctx, a, metav1.UpdateOptions{})
					if err != nil && strings.Contains(err.Error(), "the object has been modified") {
						conflicts.Add(1)
					}
					return err
				})
				if err != nil {
					t.Errorf("writing App %d: %v", i, err)
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	stopped := time.Now()
	took := e.waitAllReady(t, n, converge)
	e.converged(t, n)
	for i := range n {
		a, err := e.app.AppcontrollerV1().Apps(e.ns).Get(context.Background(), appName(i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := strconv.Itoa(rounds)
		if a.Labels["writer"] != want || a.Annotations["writer"] != want || a.Spec.DeploymentTemplate.Image != fmt.Sprintf("nginx:1.%d", rounds) {
			t.Errorf("App %s lost an update: label %q, annotation %q, image %q; want %s, %s, nginx:1.%d",
				a.Name, a.Labels["writer"], a.Annotations["writer"], a.Spec.DeploymentTemplate.Image, want, want, rounds)
		}
	}
	events := audit(t, start, id)
	onlyOwnWrites(t, events, e.ns, "")
	statusConflicts := 0
	for _, ev := range events {
		if ev.Resource() == "apps/status" && ev.Code() == 409 {
			statusConflicts++
		}
	}
	t.Logf("%d writers x %d changes (%d conflicts of their updates with the controller's status writes, %d of the controller's status writes refused with 409); all Apps Ready at their last generation %.1fs after the last change",
		n, rounds, conflicts.Load(), statusConflicts, took.Seconds())
	logWrites(t, "controller", e.ns, events)
	_ = stopped
}

// TestPodsRefusedByAdmission: pods refused by a ResourceQuota of 0 pods, then by the
// PodSecurity "restricted" level: the App's Ready=False message carries the reason
// (the Deployment's ReplicaFailure condition), and the App becomes Ready once the cause
// is gone and the pods are created.
func TestPodsRefusedByAdmission(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	id := newIdentity("admission")
	start := time.Now()
	startController(t, id)

	t.Run("ResourceQuota of 0 pods", func(t *testing.T) {
		quota := &corev1.ResourceQuota{
			ObjectMeta: metav1.ObjectMeta{Name: "no-pods", Namespace: e.ns},
			Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}},
		}
		if _, err := e.kube.CoreV1().ResourceQuotas(e.ns).Create(ctx, quota, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, converge, func() (bool, error) {
			q, err := e.kube.CoreV1().ResourceQuotas(e.ns).Get(ctx, "no-pods", metav1.GetOptions{})
			return err == nil && q.Status.Hard != nil, nil
		})
		e.createApps(t, 0, 1)
		msg := e.waitReadyMessage(t, appName(0), "exceeded quota")
		t.Logf("Ready=False: %s", msg)
		if err := e.kube.CoreV1().ResourceQuotas(e.ns).Delete(ctx, "no-pods", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		removed := time.Now()
		e.refusedPodsCreated(t)
		e.waitAllReady(t, 1, converge)
		t.Logf("Ready %.1fs after the quota was removed", time.Since(removed).Seconds())
	})

	t.Run("PodSecurity restricted", func(t *testing.T) {
		label := func(level string) {
			patch := fmt.Sprintf(`{"metadata":{"labels":{"pod-security.kubernetes.io/enforce":%q}}}`, level)
			if _, err := e.kube.CoreV1().Namespaces().Patch(ctx, e.ns, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		label("restricted")
		e.createApps(t, 1, 1)
		msg := e.waitReadyMessage(t, appName(1), "violates PodSecurity")
		t.Logf("Ready=False: %s", msg)
		label("privileged")
		removed := time.Now()
		e.refusedPodsCreated(t)
		e.waitAllReady(t, 2, converge)
		t.Logf("Ready %.1fs after the namespace was relabelled privileged", time.Since(removed).Seconds())
	})

	e.converged(t, 2)
	events := audit(t, start, id)
	onlyOwnWrites(t, events, e.ns, "")
	logWrites(t, "controller", e.ns, events)
}

// refusedPodsCreated returns once each ReplicaSet of the namespace has as many pods as it
// wants, after the admission that refused them was lifted: it has kube-controller-manager
// sync them now rather than after the backoff of their refused attempts
// (framework.NudgeReplicaSets).
func (e *env) refusedPodsCreated(t *testing.T) {
	t.Helper()
	framework.NudgeReplicaSets(t, e.kube, e.ns, "", converge, func() bool {
		list, err := e.kube.AppsV1().ReplicaSets(e.ns).List(context.Background(), metav1.ListOptions{})
		if err != nil || len(list.Items) == 0 {
			return false
		}
		for _, rs := range list.Items {
			if rs.Status.Replicas < ptr.Deref(rs.Spec.Replicas, 1) {
				return false
			}
		}
		return true
	})
}

// waitReadyMessage waits until the App is Ready=False with a message containing want,
// and returns the message.
func (e *env) waitReadyMessage(t *testing.T, name, want string) string {
	t.Helper()
	var msg string
	framework.Eventually(t, converge, func() (bool, error) {
		a, err := e.app.AppcontrollerV1().Apps(e.ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(a.Status.Conditions, appv1.ConditionReady)
		if c == nil {
			return false, nil
		}
		msg = string(c.Status) + " " + c.Reason + ": " + c.Message
		return c.Status == metav1.ConditionFalse && strings.Contains(c.Message, want), nil
	})
	return msg
}

// TestNamespaceDeletedWhileConverging deletes a namespace while its Apps converge: the
// controller does not panic, makes no storm of failed writes or errors, and its queue
// drains (workqueue_depth back to 0).
func TestNamespaceDeletedWhileConverging(t *testing.T) {
	const n = 30
	ctx := context.Background()
	kube := framework.Client(t)
	ns, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "ns-deleted-"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvIn(t, ns.Name)
	id := newIdentity("ns-deleted")
	addr := framework.FreeAddr(t)
	metricsURL := "http://" + addr + "/metrics"
	c := startController(t, id, "--metrics-bind-address", addr)
	framework.Eventually(t, converge, func() (bool, error) {
		list, err := kube.CoreV1().ServiceAccounts(e.ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) > 0, nil
	})
	e.createApps(t, 0, n)
	framework.Eventually(t, converge, func() (bool, error) {
		list, err := kube.AppsV1().Deployments(e.ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		return err == nil && len(list.Items) >= n/3, err
	})
	errorsBefore := len(c.Lines("E1"))
	deleted := time.Now()
	if err := kube.CoreV1().Namespaces().Delete(ctx, e.ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 2*converge, func() (bool, error) {
		_, err := kube.CoreV1().Namespaces().Get(ctx, e.ns, metav1.GetOptions{})
		return err != nil && strings.Contains(err.Error(), "not found"), nil
	})
	gone := time.Since(deleted)
	var depth float64
	framework.Eventually(t, converge, func() (bool, error) {
		depth = metric(t, metricsURL, "workqueue_depth", map[string]string{"name": "app"})
		return depth == 0, nil
	})
	drained := time.Since(deleted)
	if c.exited() {
		t.Fatalf("the controller exited: %v", c.Exited())
	}
	if p := c.Lines("panic"); len(p) > 0 {
		t.Errorf("the controller panicked: %v", p)
	}
	errorLines := len(c.Lines("E1")) - errorsBefore
	events := audit(t, deleted, id)
	failed := 0
	for _, ev := range events {
		if ev.IsWrite() && ev.Code() >= 400 {
			failed++
		}
	}
	reconcileErrors := metric(t, metricsURL, "controller_runtime_reconcile_errors_total", map[string]string{"controller": "app"})
	t.Logf("namespace gone %.1fs after its deletion, queue drained %.1fs after; %d error log lines, %d failed writes, %.0f reconcile errors for %d Apps",
		gone.Seconds(), drained.Seconds(), errorLines, failed, reconcileErrors, n)
	logWrites(t, "controller, from the deletion on", e.ns, events)
	// Each App may fail once per event that queues it while its namespace goes and is
	// not deduplicated by the queue: its own, and the updates and deletions of its
	// Deployment, Service, revision and pod; an App whose Deployment is available goes
	// first in the queue (readyToReport), so fewer of its events fold into one sync. At
	// most 5 failed syncs an App. A failed sync makes at most 4 failed writes: the
	// Deployment, the Service and the revision, written in parallel, and its Event. A
	// storm is the retry budget spent on each App (10 syncs an App, 40 writes, as before
	// the Loop dropped them); it was 3 syncs and 3 writes a sync before the revisions
	// and the queue's order (99 failed syncs seen once then).
	if errorLines > n || failed > 4*5*n || reconcileErrors > 5*n {
		t.Errorf("an error storm: %d error log lines, %d failed writes, %.0f reconcile errors for %d Apps", errorLines, failed, reconcileErrors, n)
	}
	onlyOwnWrites(t, audit(t, deleted, id), e.ns, "")
}

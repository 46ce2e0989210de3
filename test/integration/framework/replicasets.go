package framework

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// NudgeAnnotation is the annotation NudgeReplicaSets writes on ReplicaSets.
const NudgeAnnotation = "test.appcontroller.k8s.io/nudge"

// nudgeEvery is how long NudgeReplicaSets waits for done after each write (a variable
// for its unit test).
var nudgeEvery = 5 * time.Second

// NudgeReplicaSets writes NudgeAnnotation on the ReplicaSets in namespace that match
// selector ("" for all), and again every 5 s, until done reports true; it fails the test
// if that takes longer than timeout, saying why each ReplicaSet last failed to create a
// pod. It returns how many rounds of writes it took (with a done already true, it writes
// once and returns 1).
//
// A test that lifts what refused a ReplicaSet's pods (a ResourceQuota, a PodSecurity
// level) calls it rather than wait for the pods. kube-controller-manager's ReplicaSet
// controller retries a refused creation after a backoff of its own for that ReplicaSet,
// counted in attempts (5 ms, doubling with each, up to 1000 s), and every event about the
// ReplicaSet or its pods while the pods were refused was one more attempt: once the
// cause is gone, its next try can be minutes away. It syncs a ReplicaSet at once on any
// update of it, hence the write; the write is repeated because it can reach the
// controller before the API server's admission has seen the cause go.
func NudgeReplicaSets(t testing.TB, client kubernetes.Interface, namespace, selector string, timeout time.Duration, done func() bool) int {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(timeout)
	for n := 1; ; n++ {
		list, err := client.AppsV1().ReplicaSets(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			t.Fatalf("listing the ReplicaSets in %s (%q): %v", namespace, selector, err)
		}
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"%d"}}}`, NudgeAnnotation, n)
		for _, rs := range list.Items {
			if _, err := client.AppsV1().ReplicaSets(namespace).Patch(ctx, rs.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				t.Logf("annotating ReplicaSet %s/%s to have it synced: %v", namespace, rs.Name, err)
			}
		}
		until := time.Now().Add(nudgeEvery)
		if until.After(deadline) {
			until = deadline
		}
		for {
			if done() {
				return n
			}
			if !time.Now().Before(until) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if !time.Now().Before(deadline) {
			if now, err := client.AppsV1().ReplicaSets(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector}); err == nil {
				list = now
			}
			var failures []string
			for i := range list.Items {
				failures = append(failures, list.Items[i].Name+": "+ReplicaFailure(&list.Items[i]))
			}
			t.Fatalf("not done within %s of the first of %d writes to the ReplicaSets in %s (%q): %s", timeout, n, namespace, selector, strings.Join(failures, "; "))
		}
	}
}

// ReplicaFailure says why the ReplicaSet's controller last failed to create or delete a
// pod (its ReplicaFailure condition), or that it has none, with the ReplicaSet's counts.
func ReplicaFailure(rs *appsv1.ReplicaSet) string {
	for _, c := range rs.Status.Conditions {
		if c.Type == appsv1.ReplicaSetReplicaFailure {
			return fmt.Sprintf("ReplicaFailure %s %s: %s", c.Status, c.Reason, c.Message)
		}
	}
	return fmt.Sprintf("no ReplicaFailure condition, %d of %d replicas", rs.Status.Replicas, ptr.Deref(rs.Spec.Replicas, 1))
}

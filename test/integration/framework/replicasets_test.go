package framework

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// TestNudgeReplicaSets: each round annotates the ReplicaSets of the namespace that match
// the selector, and only those, until done.
func TestNudgeReplicaSets(t *testing.T) {
	defer func(d time.Duration) { nudgeEvery = d }(nudgeEvery)
	nudgeEvery = 10 * time.Millisecond
	rs := func(ns, name, app string) runtime.Object {
		return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": app}}}
	}
	client := fake.NewClientset(rs("a", "web-1", "web"), rs("a", "db-1", "db"), rs("b", "web-2", "web"))
	patches := map[string]int{}
	client.PrependReactor("patch", "replicasets", func(action k8stesting.Action) (bool, runtime.Object, error) {
		patches[action.GetNamespace()+"/"+action.(k8stesting.PatchAction).GetName()]++
		return false, nil, nil
	})
	annotation := func(ns, name string) string {
		got, err := client.AppsV1().ReplicaSets(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return got.Annotations[NudgeAnnotation]
	}

	// Done once the second round's write is there.
	rounds := NudgeReplicaSets(t, client, "a", "app=web", time.Minute, func() bool { return annotation("a", "web-1") == "2" })
	if rounds != 2 {
		t.Errorf("rounds = %d, want 2", rounds)
	}
	want := map[string]int{"a/web-1": 2}
	if len(patches) != len(want) || patches["a/web-1"] != 2 {
		t.Errorf("patches %v, want %v", patches, want)
	}
	// Already done: one write.
	if rounds := NudgeReplicaSets(t, client, "b", "", 0, func() bool { return true }); rounds != 1 || patches["b/web-2"] != 1 {
		t.Errorf("rounds = %d, patches %v: want 1 round, b/web-2 written once", rounds, patches)
	}
}

package app

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller/controllertest"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// TestPodProblemNamedAndCleared makes a kwok pod of a Ready App report what a real node
// reports of a container that keeps exiting (its status written through the API, as the
// kubelet does; kwok leaves a Running pod alone): the App's Ready condition names it
// within 5 s, with one status write, and returns to Ready, with one more, when the pod
// is ready again. Repeated status updates of the pod with the same problem write
// nothing.
func TestPodProblemNamedAndCleared(t *testing.T) {
	c := newClients(t)
	m := startManager(t, 10*time.Minute)
	ns := framework.Namespace(t)
	ctx := context.Background()
	c.Create(t, newApp(ns, "web", "nginx", 1))
	c.WaitReady(t, ns, "web")
	time.Sleep(time.Second) // the last status write's own watch event

	pods, err := c.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: appv1.InstanceLabel + "=web"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("pods of App web: %d, %v", len(pods.Items), err)
	}
	healthy := pods.Items[0].DeepCopy()
	statusWrites := func() int {
		n := 0
		for _, w := range m.WritesIn(ns) {
			if strings.HasSuffix(w, "/apps/web/status") {
				n++
			}
		}
		return n
	}
	before := statusWrites()

	crash := func(restarts int32) {
		t.Helper()
		pod, err := c.Kube.CoreV1().Pods(ns).Get(ctx, healthy.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		now := metav1.Now()
		for i := range pod.Status.Conditions {
			if pod.Status.Conditions[i].Type == corev1.PodReady || pod.Status.Conditions[i].Type == corev1.ContainersReady {
				pod.Status.Conditions[i].Status = corev1.ConditionFalse
				pod.Status.Conditions[i].Reason = "ContainersNotReady"
			}
		}
		cs := &pod.Status.ContainerStatuses[0]
		cs.Ready, cs.RestartCount = false, restarts
		cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 10s restarting failed container"}}
		cs.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 2, Reason: "Error", Message: "open /etc/app/config.yaml: no such file or directory", StartedAt: now, FinishedAt: now}}
		if _, err := c.Kube.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	begin := time.Now()
	crash(1)
	got := c.WaitCondition(t, ns, "web", appv1.ConditionReady, "False/"+appv1.ReasonCrashLoopBackOff)
	took := time.Since(begin)
	msg := conditionMessage(got, appv1.ConditionReady)
	t.Logf("Ready named the crash loop %.1fs after the pod's status showed it: %s", took.Seconds(), msg)
	if took > 5*time.Second {
		t.Errorf("Ready named the problem %s after the pod showed it, want within 5s", took)
	}
	want := `Pod "` + healthy.Name + `" container "` + appv1.ContainerName + `" keeps exiting: exit code 2 (Error), restarted once: open /etc/app/config.yaml: no such file or directory`
	if msg != want {
		t.Errorf("Ready message %q, want %q", msg, want)
	}
	if ks := controllertest.KStatus(t, got); ks != kstatus.InProgressStatus {
		t.Errorf("kstatus %s, want InProgress", ks)
	}
	time.Sleep(2 * time.Second) // a held-back write of the Deployment's counts, if any
	named := statusWrites()

	// The kubelet reports the pod again with the same problem: nothing to write.
	for i := 0; i < 3; i++ {
		pod, err := c.Kube.CoreV1().Pods(ns).Get(ctx, healthy.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pod.Status.ContainerStatuses[0].State.Waiting.Message = "back-off 10s restarting failed container, again"
		if _, err := c.Kube.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
	}
	time.Sleep(2 * time.Second)
	if n := statusWrites(); n != named {
		t.Errorf("%d status writes after repeated pod updates with the same problem, want 0", n-named)
	}

	// Ready again.
	pod, err := c.Kube.CoreV1().Pods(ns).Get(ctx, healthy.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	healthy.ResourceVersion = pod.ResourceVersion
	if _, err := c.Kube.CoreV1().Pods(ns).UpdateStatus(ctx, healthy, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	got = c.WaitReady(t, ns, "web")
	if ks := controllertest.KStatus(t, got); ks != kstatus.CurrentStatus {
		t.Errorf("fixed: kstatus %s, want Current", ks)
	}
	time.Sleep(2 * time.Second)
	t.Logf("App status writes: %d to name the problem (Deployment count changes included), %d to clear it", named-before, statusWrites()-named)
}

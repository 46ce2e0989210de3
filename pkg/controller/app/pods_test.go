package app

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/yaml"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/podhealth"
)

// capturedPod returns the pod captured on the real node in
// pkg/podhealth/testdata/NAME.yaml, made a pod of app (its labels), created at created,
// trimmed as the pod informer keeps it. Its status times are moved by the same amount.
func capturedPod(t *testing.T, name string, app *appv1.App, created time.Time) *corev1.Pod {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "podhealth", "testdata", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{}
	if err := yaml.UnmarshalStrict(data, pod); err != nil {
		t.Fatalf("decoding %s: %v", name, err)
	}
	shift := created.Sub(pod.CreationTimestamp.Time)
	move := func(tm *metav1.Time) {
		if tm != nil && !tm.IsZero() {
			tm.Time = tm.Add(shift)
		}
	}
	move(&pod.CreationTimestamp)
	move(pod.Status.StartTime)
	for i := range pod.Status.Conditions {
		move(&pod.Status.Conditions[i].LastTransitionTime)
	}
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for i := range list {
			for _, st := range []*corev1.ContainerState{&list[i].State, &list[i].LastTerminationState} {
				if st.Running != nil {
					move(&st.Running.StartedAt)
				}
				if st.Terminated != nil {
					move(&st.Terminated.StartedAt)
					move(&st.Terminated.FinishedAt)
				}
			}
		}
	}
	// The captures of one Deployment are states of one pod.
	hash := pod.Labels["pod-template-hash"]
	pod.Name = app.Name + "-" + hash + "-x7k2p"
	pod.Namespace = app.Namespace
	pod.Labels = map[string]string{
		appv1.NameLabel: app.Name, appv1.InstanceLabel: app.Name, appv1.ManagedByLabel: appv1.ManagedByValue,
		"pod-template-hash": hash,
	}
	trimmed, err := podhealth.TrimPod(pod)
	if err != nil {
		t.Fatal(err)
	}
	return trimmed.(*corev1.Pod)
}

// podReports puts pod in the pod cache, as the pod informer delivers it.
func (w *world) podReports(pod *corev1.Pod) {
	w.t.Helper()
	w.rv++
	pod = pod.DeepCopy()
	pod.ResourceVersion = fmt.Sprint(w.rv)
	if err := w.f.inf.Pods.Informer().GetIndexer().Update(pod); err != nil {
		w.t.Fatal(err)
	}
}

// podGone removes pod from the pod cache.
func (w *world) podGone(pod *corev1.Pod) {
	w.t.Helper()
	if err := w.f.inf.Pods.Informer().GetIndexer().Delete(pod); err != nil {
		w.t.Fatal(err)
	}
}

// ready returns the App's Ready condition as "Status/Reason".
func (w *world) ready() string { return condition(w.app(), appv1.ConditionReady) }

// TestWritesPodProblem drives a new App whose pod cannot become ready through the pod
// states captured on the real node: Ready names the problem at once (its first status
// write), repeated pod events write nothing, the App becomes Stalled when the problem
// passes its threshold (one write), and a fix makes it Ready again (one write). Each
// state is checked with kstatus.
func TestWritesPodProblem(t *testing.T) {
	tests := []struct {
		name string
		// states are the captured pods the kubelet reports in turn (the same pod).
		states []string
		reason string
		// stalledAfter: how long after the first state the App becomes Stalled; 0:
		// at once, -1: never.
		stalledAfter time.Duration
		// stalledState: the state that makes it Stalled (a restart count), "" for a
		// timed threshold.
		stalledState string
	}{
		{name: "image that does not exist", states: []string{"errimagepull", "imagepullbackoff"}, reason: appv1.ReasonImagePullFailed, stalledAfter: podhealth.PullStalledAfter},
		{name: "invalid image name", states: []string{"invalidimagename"}, reason: appv1.ReasonImagePullFailed, stalledAfter: 0},
		{name: "container exits", states: []string{"crashloopbackoff-1"}, reason: appv1.ReasonCrashLoopBackOff, stalledAfter: -1, stalledState: "crashloopbackoff-3"},
		{name: "OOMKilled", states: []string{"oomkilled-1"}, reason: appv1.ReasonOOMKilled, stalledAfter: -1, stalledState: "oomkilled-3"},
		{name: "missing ConfigMap key", states: []string{"createcontainerconfigerror"}, reason: appv1.ReasonContainerConfigError, stalledAfter: podhealth.PullStalledAfter},
		{name: "readiness probe fails", states: []string{"readiness"}, reason: appv1.ReasonContainerNotReady, stalledAfter: -1},
		{name: "unschedulable", states: []string{"unschedulable"}, reason: appv1.ReasonUnschedulable, stalledAfter: podhealth.UnschedulableStalledAfter},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w, app := podsStartingWorld(t)
			// The pod shows the problem 100ms later; a readiness probe only after its
			// grace.
			first := time.Duration(100) * time.Millisecond
			created := testNow.Add(first).Add(-time.Second)
			if tc.reason == appv1.ReasonContainerNotReady {
				first, created = podhealth.NotReadyGrace+10*time.Second, testNow
			}
			w.at(first)
			pod := capturedPod(t, tc.states[0], app, created)
			w.podReports(pod)
			w.sync()
			// The first status of a new App is held back for the window, then written
			// with the problem.
			w.at(first + StatusCoalesceWindow)
			w.sync()
			if got := w.ready(); got != "False/"+tc.reason {
				t.Fatalf("Ready %s, want False/%s (conditions %+v)", got, tc.reason, w.app().Status.Conditions)
			}
			if w.statusWrites != 1 {
				t.Errorf("%d status writes until Ready named the problem, want 1", w.statusWrites)
			}
			wantKStatus := kstatus.InProgressStatus
			if tc.stalledAfter == 0 {
				wantKStatus = kstatus.FailedStatus
			}
			w.expectKStatus("problem named", wantKStatus)
			t.Logf("Ready: %s", meta.FindStatusCondition(w.app().Status.Conditions, appv1.ConditionReady).Message)

			// The kubelet reports the pod again and again (the back-off's other state,
			// probes, status updates): no write.
			for i := 0; i < 5; i++ {
				w.at(first + StatusCoalesceWindow + time.Duration(i+1)*time.Second)
				w.podReports(capturedPod(t, tc.states[(i+1)%len(tc.states)], app, pod.CreationTimestamp.Time))
				w.sync()
			}
			if w.statusWrites != 1 {
				t.Errorf("%d status writes after repeated pod events, want 1", w.statusWrites)
			}

			// Stalled: at the threshold (the sync the Result queued for then), or with the
			// state that passes it.
			stalledWrites := 1
			switch {
			case tc.stalledState != "":
				// The third restart, past CrashLoopStalledAfter.
				w.at(podhealth.CrashLoopStalledAfter + 30*time.Second)
				w.podReports(capturedPod(t, tc.stalledState, app, pod.CreationTimestamp.Time))
				w.sync()
				stalledWrites = 2
				w.expectKStatus("stalled", kstatus.FailedStatus)
			case tc.stalledAfter > 0:
				w.at(tc.stalledAfter - time.Second)
				w.sync()
				w.expectKStatus("before the threshold", kstatus.InProgressStatus)
				w.at(tc.stalledAfter + time.Second)
				w.sync()
				stalledWrites = 2
				w.expectKStatus("stalled", kstatus.FailedStatus)
			}
			if w.statusWrites != stalledWrites {
				t.Errorf("%d status writes once stalled, want %d", w.statusWrites, stalledWrites)
			}
			if c := meta.FindStatusCondition(w.app().Status.Conditions, appv1.ConditionStalled); stalledWrites == 2 && (c == nil || c.Reason != tc.reason) {
				t.Errorf("Stalled %+v, want True/%s", c, tc.reason)
			}

			// The fix: the pod becomes ready and the Deployment available.
			w.at(10 * time.Minute)
			w.podReports(capturedPod(t, "ready", app, testNow.Add(10*time.Minute-time.Minute)))
			w.deploymentReports(app.Spec.DeploymentTemplate.Name, 1, 1)
			w.sync()
			if got := w.ready(); got != "True/"+appv1.ReasonAvailable {
				t.Errorf("after the fix: Ready %s, want True/Available", got)
			}
			w.expectKStatus("fixed", kstatus.CurrentStatus)
			if w.statusWrites != stalledWrites+1 {
				t.Errorf("%d status writes after the fix, want %d", w.statusWrites, stalledWrites+1)
			}
			w.podGone(pod)
			w.at(11 * time.Minute)
			w.sync()
			if w.statusWrites != stalledWrites+1 {
				t.Errorf("%d status writes when idle, want %d", w.statusWrites, stalledWrites+1)
			}
		})
	}
}

// TestCrashingPodCountedAvailable: a container without a readiness probe that keeps
// exiting is ready, and counted available by the Deployment, for the moment it runs
// after each restart. The App stays not Ready, naming the crash loop, until the
// container has run podhealth.NotReadyGrace; the syncs ask to run again at each
// threshold.
func TestCrashingPodCountedAvailable(t *testing.T) {
	f := newFixture(t)
	// A Ready App, its status written by an earlier controller.
	app := withRV(syncedApp(t, newApp("web", testNow.Add(-time.Hour))), "5")
	f.addApps(app)
	f.addDeployments(liveDeployment(t, app))
	f.addServices(liveService(t, app))
	w := newWorld(t, f, app)
	// Captured: running and ready 41 s after the pod's creation, after 3 restarts.
	created := testNow.Add(-45 * time.Second)
	pod := capturedPod(t, "crash-running", app, created)
	w.podReports(pod)
	w.at(0)
	f.requeues = nil
	w.sync()
	if got := w.ready(); got != "False/"+appv1.ReasonCrashLoopBackOff {
		t.Fatalf("Ready %s, want False/CrashLoopBackOff", got)
	}
	w.expectKStatus("crash loop, Deployment available", kstatus.InProgressStatus)
	// It passed its third restart: Stalled once the pod has run CrashLoopStalledAfter
	// (15 s from now), Ready once the container has run NotReadyGrace (16 s).
	startedAt := pod.Status.ContainerStatuses[0].State.Running.StartedAt.Time
	stallIn := pod.Status.StartTime.Add(podhealth.CrashLoopStalledAfter).Sub(testNow)
	readyIn := startedAt.Add(podhealth.NotReadyGrace).Sub(testNow)
	if len(f.requeues) != 1 || f.requeues[0] != stallIn {
		t.Errorf("requeues %v, want [%s] (the Stalled threshold)", f.requeues, stallIn)
	}
	f.requeues = nil
	w.at(stallIn)
	w.sync()
	w.expectKStatus("past the Stalled threshold", kstatus.FailedStatus)
	if len(f.requeues) != 1 || f.requeues[0] != readyIn-stallIn {
		t.Errorf("requeues %v, want [%s] (when the container has run NotReadyGrace)", f.requeues, readyIn-stallIn)
	}
	w.at(readyIn)
	w.sync()
	if got := w.ready(); got != "True/"+appv1.ReasonAvailable {
		t.Errorf("after NotReadyGrace: Ready %s, want True/Available", got)
	}
	w.expectKStatus("ran NotReadyGrace", kstatus.CurrentStatus)
	if w.statusWrites != 3 {
		t.Errorf("%d status writes, want 3 (not Ready, Stalled, Ready)", w.statusWrites)
	}
}

// TestPodHandler: a pod event queues the App whose selector labels the pod carries, if
// that App exists and the pod had or has a problem (podhealth.Inspect); events of pods
// quiet before and after (a rollout going well), periodic resyncs, pods of no App and
// tombstones of other objects queue nothing.
func TestPodHandler(t *testing.T) {
	app := newApp("web", testNow)
	const quiet, failing = false, true
	pod := func(rv, name, instance string, problem bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "tcs", Name: "p", ResourceVersion: rv,
			Labels: map[string]string{appv1.NameLabel: name, appv1.InstanceLabel: instance}}}
		if problem {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "web",
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: "not found"}}}}
		}
		return p
	}
	tests := []struct {
		name  string
		event func(f *fixture, h cache.ResourceEventHandler)
		want  []string
	}{
		{"add", func(f *fixture, h cache.ResourceEventHandler) { h.OnAdd(pod("1", "web", "web", failing), false) }, []string{"tcs/web"}},
		{"add, quiet", func(f *fixture, h cache.ResourceEventHandler) { h.OnAdd(pod("1", "web", "web", quiet), false) }, nil},
		{"update to a problem", func(f *fixture, h cache.ResourceEventHandler) {
			h.OnUpdate(pod("1", "web", "web", quiet), pod("2", "web", "web", failing))
		}, []string{"tcs/web"}},
		{"update from a problem", func(f *fixture, h cache.ResourceEventHandler) {
			h.OnUpdate(pod("1", "web", "web", failing), pod("2", "web", "web", quiet))
		}, []string{"tcs/web"}},
		{"update, quiet before and after", func(f *fixture, h cache.ResourceEventHandler) {
			h.OnUpdate(pod("1", "web", "web", quiet), pod("2", "web", "web", quiet))
		}, nil},
		{"periodic resync", func(f *fixture, h cache.ResourceEventHandler) {
			h.OnUpdate(pod("1", "web", "web", failing), pod("1", "web", "web", failing))
		}, nil},
		{"delete, tombstone", func(f *fixture, h cache.ResourceEventHandler) {
			h.OnDelete(cache.DeletedFinalStateUnknown{Key: "tcs/p", Obj: pod("1", "web", "web", failing)})
		}, []string{"tcs/web"}},
		{"delete, quiet", func(f *fixture, h cache.ResourceEventHandler) { h.OnDelete(pod("1", "web", "web", quiet)) }, nil},
		// The HTTPRoute of a drained canary waits for the last of its pods (canaryPodsLeft).
		{"delete, quiet, a canary's pod, its Deployment gone", func(f *fixture, h cache.ResourceEventHandler) {
			p := pod("1", "web", "web", quiet)
			p.Labels[appv1.TrackLabel] = appv1.TrackCanary
			h.OnDelete(p)
		}, []string{"tcs/web"}},
		{"delete, quiet, a canary's pod, its Deployment there", func(f *fixture, h cache.ResourceEventHandler) {
			canary := liveDeployment(t, app)
			canary.Name = canaryName(app)
			f.addDeployments(canary)
			p := pod("1", "web", "web", quiet)
			p.Labels[appv1.TrackLabel] = appv1.TrackCanary
			h.OnDelete(p)
		}, nil},
		{"pod of an App that does not exist", func(f *fixture, h cache.ResourceEventHandler) { h.OnAdd(pod("1", "gone", "gone", failing), false) }, nil},
		{"labels that are not an App's selector", func(f *fixture, h cache.ResourceEventHandler) { h.OnAdd(pod("1", "other", "web", failing), false) }, nil},
		{"not a pod", func(f *fixture, h cache.ResourceEventHandler) { h.OnAdd(&appv1.App{}, false) }, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.addApps(app)
			tc.event(f, f.c.podHandler(klog.Background()))
			if got := queued(f.c); !got.Equal(sets.New(tc.want...)) {
				t.Errorf("queued %v, want %v", sets.List(got), tc.want)
			}
		})
	}
}

// TestCurrentPods: the pods of the Deployment's new ReplicaSet, named in its Progressing
// condition, are the current ones, else those of the newest pod's template; pods being
// deleted or of another App are not.
func TestCurrentPods(t *testing.T) {
	app := newApp("web", testNow)
	pod := func(name, hash string, age time.Duration, mutate ...func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "tcs", Name: name,
			CreationTimestamp: metav1.NewTime(testNow.Add(-age)),
			Labels:            map[string]string{appv1.NameLabel: "web", appv1.InstanceLabel: "web", "pod-template-hash": hash}}}
		for _, m := range mutate {
			m(p)
		}
		return p
	}
	deployment := func(message string) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web-deploy"}, Status: appsv1.DeploymentStatus{
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Message: message}}}}
	}
	objs := []interface{}{
		pod("old-1", "aaa", time.Hour),
		pod("new-1", "bbb", time.Minute),
		// A rollback: the old template's ReplicaSet scaled up again, its pod the newest.
		pod("old-2", "aaa", time.Second),
		pod("leaving", "bbb", time.Millisecond, func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: testNow} }),
		pod("other-app", "bbb", time.Millisecond, func(p *corev1.Pod) { p.Labels[appv1.NameLabel] = "other" }),
	}
	selector := labels.SelectorFromSet(selectorLabels(app))
	names := func(pods []*corev1.Pod) []string {
		var out []string
		for _, p := range pods {
			out = append(out, p.Name)
		}
		return out
	}
	for _, tc := range []struct {
		message string
		want    []string
	}{
		{`ReplicaSet "web-deploy-bbb" is progressing.`, []string{"new-1"}},
		{`Created new replica set "web-deploy-aaa"`, []string{"old-1", "old-2"}},
		{`ReplicaSet "web-deploy-bbb" has timed out progressing.`, []string{"new-1"}},
		{"Deployment has minimum availability.", []string{"old-1", "old-2"}}, // no name: the newest pod's template
		{"", []string{"old-1", "old-2"}},
	} {
		hash := newReplicaSetHash(deployment(tc.message))
		if got := names(currentPods(objs, selector, hash)); !slices.Equal(got, tc.want) {
			t.Errorf("%q (hash %q): current pods %v, want %v", tc.message, hash, got, tc.want)
		}
	}
}

// probeEventReports puts in the probe Event cache the kubelet's Unhealthy Event about
// pod's container (the nth time it reports it, at now) with message, trimmed as the
// informer keeps it, and delivers it to the controller's handler.
func (w *world) probeEventReports(pod *corev1.Pod, container, message string, n int) {
	w.t.Helper()
	w.rv++
	e := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name + "." + container, ResourceVersion: fmt.Sprint(w.rv)},
		InvolvedObject: corev1.ObjectReference{
			Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID,
			FieldPath: "spec.containers{" + container + "}",
		},
		Reason: "Unhealthy", Message: message, Type: corev1.EventTypeWarning, Count: int32(n),
		LastTimestamp: metav1.NewTime(w.f.clock.Now()),
	}
	trimmed, err := podhealth.TrimProbeEvent(e)
	if err != nil {
		w.t.Fatal(err)
	}
	if err := w.f.inf.ProbeEvents.Informer().GetIndexer().Update(trimmed); err != nil {
		w.t.Fatal(err)
	}
}

// podsStartingWorld returns the world of a new App web of one replica, at the fake
// clock's start: its first sync wrote its children, the informers delivered them, a
// second sync found them, and the deployment controller reports the pod updated, not
// available.
func podsStartingWorld(t *testing.T) (*world, *appv1.App) {
	w, app := createdWorld(t, "web", 1)
	w.deploymentReports(app.Spec.DeploymentTemplate.Name, 1, 0)
	return w, app
}

// TestWritesProbeOutput: an App whose readiness probe does not pass names, in Ready,
// the probe's output the kubelet reported in an Event (captured on the real node) with
// its first status write; the kubelet repeating the Event writes nothing; another
// output is one write.
func TestWritesProbeOutput(t *testing.T) {
	w, app := podsStartingWorld(t)

	pod := capturedPod(t, "readiness", app, testNow)
	container := pod.Status.ContainerStatuses[0].Name
	const refused = `Get "http://10.244.0.2:9999/healthz": dial tcp 10.244.0.2:9999: connect: connection refused`
	// The probe fails from its first run, seconds after the container started.
	w.at(3 * time.Second)
	w.podReports(pod)
	w.probeEventReports(pod, container, "Readiness probe failed: "+refused, 1)
	w.sync()
	for i := 2; i <= 8; i++ {
		w.at(time.Duration(i) * 2 * time.Second)
		w.probeEventReports(pod, container, "Readiness probe failed: "+refused, i)
		w.sync()
	}
	if w.statusWrites != 1 {
		t.Fatalf("%d status writes before the probe's grace ended, want 1 (the App's first status)", w.statusWrites)
	}
	// The grace ends: the sync the Result queued names the probe and its output.
	w.at(podhealth.NotReadyGrace + 5*time.Second)
	w.sync()
	c := meta.FindStatusCondition(w.app().Status.Conditions, appv1.ConditionReady)
	want := fmt.Sprintf(`Pod %q container %q is running but its readiness probe has not passed since it started: %s`, pod.Name, container, refused)
	if c == nil || c.Reason != appv1.ReasonContainerNotReady || c.Message != want {
		t.Fatalf("Ready %+v, want ContainerNotReady %q", c, want)
	}
	if w.statusWrites != 2 {
		t.Errorf("%d status writes once the probe is named, want 2", w.statusWrites)
	}
	w.expectKStatus("probe not passing", kstatus.InProgressStatus)

	// The kubelet repeats the Event (its count bumped): nothing written.
	for i := 9; i <= 20; i++ {
		w.at(podhealth.NotReadyGrace + 5*time.Second + time.Duration(i)*2*time.Second)
		w.probeEventReports(pod, container, "Readiness probe failed: "+refused, i)
		w.sync()
	}
	if w.statusWrites != 2 {
		t.Errorf("%d status writes after repeated Events, want 2", w.statusWrites)
	}

	// The app now answers, with a 503: one write, naming it.
	w.at(2 * time.Minute)
	w.probeEventReports(pod, container, "Readiness probe failed: HTTP probe failed with statuscode: 503", 1)
	w.sync()
	w.at(2*time.Minute + StatusCoalesceWindow)
	w.sync()
	if c := meta.FindStatusCondition(w.app().Status.Conditions, appv1.ConditionReady); c == nil || !strings.HasSuffix(c.Message, ": HTTP probe failed with statuscode: 503") {
		t.Errorf("Ready %+v, want the 503 named", c)
	}
	if w.statusWrites != 3 {
		t.Errorf("%d status writes after another output, want 3", w.statusWrites)
	}
}

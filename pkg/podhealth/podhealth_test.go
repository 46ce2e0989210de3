package podhealth

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/yaml"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
	"github.com/app-controller/app-controller/pkg/controller/controllertest"
)

// loadPod reads testdata/NAME.yaml: a pod as `kubectl get pod -o yaml` printed it on the
// real node (make cluster-up NODE=real), with the cluster's registry address replaced
// by REGISTRY.
func loadPod(t testing.TB, name string) *corev1.Pod {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{}
	if err := yaml.UnmarshalStrict(data, pod); err != nil {
		t.Fatalf("decoding %s: %v", name, err)
	}
	return pod
}

// capturedCase is a captured pod and what Inspect must say of it.
type capturedCase struct {
	file        string
	after       time.Duration // now = creation + after
	wantReason  string        // "": no problem
	wantMessage string
	// wantStalledAfter: Stalled at creation + it (0: at once; -1: never).
	wantStalledAfter time.Duration
}

// TestInspectCapturedPods reads each captured pod, whole and trimmed as the informer
// keeps it, and checks the problem named, its message and when it makes the App
// Stalled. now is given relative to the pod's creation.
func TestInspectCapturedPods(t *testing.T) {
	for _, tc := range capturedCases {
		t.Run(tc.file, func(t *testing.T) {
			full := loadPod(t, tc.file)
			trimmedObj, err := TrimPod(full.DeepCopy())
			if err != nil {
				t.Fatal(err)
			}
			trimmed := trimmedObj.(*corev1.Pod)
			now := full.CreationTimestamp.Add(tc.after)
			for name, pod := range map[string]*corev1.Pod{"full": full, "trimmed": trimmed} {
				p, _ := Inspect(pod, now)
				if tc.wantReason == "" {
					if p != nil {
						t.Errorf("%s: problem %s %q, want none", name, p.Reason, p.Message)
					}
					continue
				}
				if p == nil {
					t.Fatalf("%s: no problem, want %s", name, tc.wantReason)
				}
				if p.Reason != tc.wantReason || p.Message != tc.wantMessage {
					t.Errorf("%s: problem\n  %s %q\nwant\n  %s %q", name, p.Reason, p.Message, tc.wantReason, tc.wantMessage)
				}
				switch {
				case tc.wantStalledAfter < 0:
					if p.Stalled(now.Add(time.Hour)) {
						t.Errorf("%s: Stalled an hour later, want never", name)
					}
				default:
					at := full.CreationTimestamp.Add(tc.wantStalledAfter)
					if p.Stalled(at.Add(-2*time.Second)) && tc.wantStalledAfter > 2*time.Second {
						t.Errorf("%s: Stalled before %s", name, tc.wantStalledAfter)
					}
					if !p.Stalled(at.Add(2 * time.Second)) {
						t.Errorf("%s: not Stalled %s after creation (StalledAt %s)", name, tc.wantStalledAfter+2*time.Second, p.StalledAt)
					}
				}
			}
		})
	}
}

// TestTrimPod checks that the informer's transform keeps what Inspect reads and drops
// the spec and everything else.
func TestTrimPod(t *testing.T) {
	for _, tc := range capturedCases {
		full := loadPod(t, tc.file)
		obj, err := TrimPod(full.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		trimmed := obj.(*corev1.Pod)
		if !reflect.DeepEqual(trimmed.Spec, corev1.PodSpec{}) || trimmed.Annotations != nil || trimmed.ManagedFields != nil ||
			trimmed.OwnerReferences != nil || trimmed.Status.PodIPs != nil || trimmed.Status.HostIP != "" {
			t.Errorf("%s: trimmed pod keeps more than its status summary: %+v", tc.file, trimmed)
		}
		// Of the conditions, only an unscheduled pod's PodScheduled, whole but for its probe
		// time and observed generation.
		var wantConditions []corev1.PodCondition
		if c := podCondition(full, corev1.PodScheduled); c != nil && c.Status != corev1.ConditionTrue {
			c := *c
			c.LastProbeTime, c.ObservedGeneration = metav1.Time{}, 0
			wantConditions = []corev1.PodCondition{c}
		}
		if !reflect.DeepEqual(trimmed.Status.Conditions, wantConditions) {
			t.Errorf("%s: conditions %+v, want %+v", tc.file, trimmed.Status.Conditions, wantConditions)
		}
		for _, cs := range trimmed.Status.ContainerStatuses {
			if cs.Image != "" || cs.ImageID != "" || cs.ContainerID != "" {
				t.Errorf("%s: container status keeps image or IDs: %+v", tc.file, cs)
			}
		}
		again, _ := TrimPod(trimmed.DeepCopy())
		if !reflect.DeepEqual(again, trimmed) {
			t.Errorf("%s: TrimPod is not idempotent", tc.file)
		}
		fullJSON, _ := json.Marshal(full)
		trimmedJSON, _ := json.Marshal(trimmed)
		t.Logf("%s: %d bytes of JSON, %d trimmed", tc.file, len(fullJSON), len(trimmedJSON))
	}
	if obj, err := TrimPod("not a pod"); err != nil || obj != "not a pod" {
		t.Errorf("TrimPod of a non-pod: %v, %v", obj, err)
	}
}

// TestFirst checks the order of problems across pods (by reason, then pod name) and the
// soonest recheck.
func TestFirst(t *testing.T) {
	ready := loadPod(t, "ready")
	pull := loadPod(t, "imagepullbackoff")
	crash := loadPod(t, "crashloopbackoff-1")
	now := pull.CreationTimestamp.Add(30 * time.Second)
	p, recheck := First([]*corev1.Pod{ready, crash, pull}, now)
	if p == nil || p.Reason != appv1.ReasonImagePullFailed || p.Pod != pull.Name {
		t.Fatalf("First = %+v, want the image pull of %s", p, pull.Name)
	}
	if want := pull.Status.StartTime.Add(PullStalledAfter).Sub(now); recheck != want {
		t.Errorf("recheck %s, want %s (the pull's Stalled threshold)", recheck, want)
	}
	if p, _ := First([]*corev1.Pod{ready}, now); p != nil {
		t.Errorf("First of a ready pod: %+v", p)
	}
	if p, _ := First(nil, now); p != nil {
		t.Errorf("First of no pods: %+v", p)
	}
}

// TestEvictedPodIsNoProblem: a pod the kubelet evicted (phase Failed, reason Evicted,
// its container killed) beside the pod its ReplicaSet made instead, running and ready:
// the App's pods have no problem. Evicted pods stay until the pod garbage collector's
// threshold (the soak's node-pressure fault left an App Ready=False, CrashLoopBackOff,
// for its evicted pod).
func TestEvictedPodIsNoProblem(t *testing.T) {
	ready := loadPod(t, "ready")
	evicted := loadPod(t, "exited")
	evicted.Status.Phase = corev1.PodFailed
	evicted.Status.Reason = "Evicted"
	evicted.Status.Message = "The node was low on resource: ephemeral-storage. Threshold quantity: 128Mi, available: 78204Ki."
	for i := range evicted.Status.ContainerStatuses {
		cs := &evicted.Status.ContainerStatuses[i]
		cs.Ready = false
		cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "Error",
			StartedAt: evicted.CreationTimestamp, FinishedAt: metav1.NewTime(evicted.CreationTimestamp.Add(time.Minute))}}
	}
	now := evicted.CreationTimestamp.Add(5 * time.Minute)
	if p, recheck := Inspect(evicted, now); p != nil || recheck != 0 {
		t.Errorf("Inspect of an evicted pod = %+v, %s; want no problem, no recheck", p, recheck)
	}
	if p, _ := First([]*corev1.Pod{evicted, ready}, now); p != nil {
		t.Errorf("First of an evicted pod and its ready replacement = %s %q, want none", p.Reason, p.Message)
	}
	// The same pod still Running with its container exited is crashing.
	evicted.Status.Phase = corev1.PodRunning
	if p, _ := Inspect(evicted, now); p == nil || p.Reason != appv1.ReasonCrashLoopBackOff {
		t.Errorf("Inspect of a running pod whose container exited = %+v, want CrashLoopBackOff", p)
	}
}

// TestInspectNeverPanics feeds Inspect pods with missing and odd fields.
func TestInspectNeverPanics(t *testing.T) {
	now := time.Now()
	pods := []*corev1.Pod{
		nil,
		{},
		{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "c"}}}},
		{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}},
		{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}}}},
		{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2}}}}}},
		{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable"}}}},
		{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &metav1.Time{Time: now}}},
	}
	for _, pod := range pods {
		Inspect(pod, now)
	}
}

const (
	container = `container "app-deploy-container"`
	notFound  = `rpc error: code = NotFound desc = failed to pull and unpack image "REGISTRY/nope:1": failed to resolve reference "REGISTRY/nope:1": REGISTRY/nope:1: not found`
)

// capturedCases are the pods captured on the real node (agnhost 2.63.0; a registry with
// no image "nope"; a ConfigMap without the key asked for; a node with 2 CPUs) and what
// Inspect says of them.
var capturedCases = []capturedCase{
	{file: "ready", after: 30 * time.Second},
	// Running, not ready: a problem only after NotReadyGrace (started 1 s after creation).
	{file: "readiness", after: 10 * time.Second},
	{file: "readiness", after: time.Minute, wantReason: appv1.ReasonContainerNotReady, wantStalledAfter: -1,
		wantMessage: `Pod "readiness-67f88964f6-p55wb" ` + container + ` is running but its readiness probe has not passed since it started`},
	// ErrImagePull and the ImagePullBackOff that follows say the same.
	{file: "errimagepull", after: 5 * time.Second, wantReason: appv1.ReasonImagePullFailed, wantStalledAfter: PullStalledAfter,
		wantMessage: `Pod "pull-67b888fbcf-ckr2s" ` + container + ` cannot pull its image: ` + notFound},
	{file: "imagepullbackoff", after: 20 * time.Second, wantReason: appv1.ReasonImagePullFailed, wantStalledAfter: PullStalledAfter,
		wantMessage: `Pod "pull-67b888fbcf-ckr2s" ` + container + ` cannot pull its image: ` + notFound},
	{file: "invalidimagename", after: 5 * time.Second, wantReason: appv1.ReasonImagePullFailed, wantStalledAfter: 0,
		wantMessage: `Pod "invalid-776ffddb96-7slt9" ` + container + ` cannot pull its image: InvalidImageName: Failed to apply default image tag "REGISTRY/NotValid:1": couldn't parse image name "REGISTRY/NotValid:1": invalid reference format: repository name (NotValid) must be lowercase`},
	{file: "createcontainerconfigerror", after: 5 * time.Second, wantReason: appv1.ReasonContainerConfigError, wantStalledAfter: PullStalledAfter,
		wantMessage: `Pod "config-689cf4cbff-q72kj" ` + container + ` cannot be created: CreateContainerConfigError: couldn't find key missing in ConfigMap capture/settings`},
	// A container that exits: first exit (terminated), then CrashLoopBackOff; Stalled
	// from the third restart, once a minute has passed since the pod started.
	{file: "crashloopbackoff-1", after: 5 * time.Second, wantReason: appv1.ReasonCrashLoopBackOff, wantStalledAfter: -1,
		wantMessage: `Pod "exits-85c96f756-tgxj8" ` + container + ` keeps exiting: exit code 1 (Error), restarted once`},
	{file: "exited", after: 14 * time.Second, wantReason: appv1.ReasonCrashLoopBackOff, wantStalledAfter: -1,
		wantMessage: `Pod "exits-85c96f756-8rqh2" ` + container + ` keeps exiting: exit code 1 (Error), restarted 2 times`},
	{file: "crashloopbackoff-3", after: 100 * time.Second, wantReason: appv1.ReasonCrashLoopBackOff, wantStalledAfter: CrashLoopStalledAfter,
		wantMessage: `Pod "exits-85c96f756-8rqh2" ` + container + ` keeps exiting: exit code 1 (Error), restarted 4 times`},
	// Running and ready (no readiness probe) a moment after its third restart: still
	// crashing until it has run NotReadyGrace, then nothing.
	{file: "crash-running", after: 45 * time.Second, wantReason: appv1.ReasonCrashLoopBackOff, wantStalledAfter: CrashLoopStalledAfter,
		wantMessage: `Pod "exits-85c96f756-8rqh2" ` + container + ` keeps exiting: exit code 1 (Error), restarted 3 times`},
	{file: "crash-running", after: 70 * time.Second},
	// Over its memory limit: OOMKilled, waiting to restart or just killed.
	{file: "oomkilled-1", after: 5 * time.Second, wantReason: appv1.ReasonOOMKilled, wantStalledAfter: -1,
		wantMessage: `Pod "oom-9bb9c9dcd-8ndgw" ` + container + ` was killed for using more memory than its limit (OOMKilled, exit code 137), restarted once`},
	{file: "oomkilled-3", after: 90 * time.Second, wantReason: appv1.ReasonOOMKilled, wantStalledAfter: CrashLoopStalledAfter,
		wantMessage: `Pod "oom-9bb9c9dcd-8ndgw" ` + container + ` was killed for using more memory than its limit (OOMKilled, exit code 137), restarted 4 times`},
	{file: "oomkilled-terminated", after: 3 * time.Minute, wantReason: appv1.ReasonOOMKilled, wantStalledAfter: CrashLoopStalledAfter + time.Second,
		wantMessage: `Pod "oom-9bb9c9dcd-96qgh" ` + container + ` was killed for using more memory than its limit (OOMKilled, exit code 137), restarted 5 times`},
	{file: "unschedulable", after: 5 * time.Second, wantReason: appv1.ReasonUnschedulable, wantStalledAfter: UnschedulableStalledAfter,
		wantMessage: `Pod "cpu-5fc555fd9d-96h2c" cannot be scheduled: 0/1 nodes are available: 1 Insufficient cpu. no new claims to deallocate, preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.`},
}

// BenchmarkPodCacheFootprint measures the heap that 1000 ready pods (the captured
// ready.yaml, decoded from protobuf as a watch hands them out) take in a store, whole
// (managedFields dropped, as the other informers keep objects) and after TrimPod, the
// pod informer's transform. Reported as heap-bytes/object (the time per op is not the
// figure).
func BenchmarkPodCacheFootprint(b *testing.B) {
	const n = 1000
	raw, err := loadPod(b, "ready").Marshal()
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		transform cache.TransformFunc
	}{
		{"whole", controller.StripManagedFields},
		{"trimmed", TrimPod},
	} {
		b.Run(c.name, func(b *testing.B) {
			controllertest.StoreFootprint[*corev1.Pod](b, n, raw, c.transform)
		})
	}
}

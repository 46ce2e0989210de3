package app

import (
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
	"github.com/app-controller/app-controller/pkg/podhealth"
	"github.com/app-controller/app-controller/pkg/rollout"
)

// The App's pods are read only to tell, in the App's Ready condition, what keeps them
// from being ready (pkg/podhealth). The pod informer watches only pods labelled as
// managed by app-controller (the pods of App Deployments) and keeps of each only its
// status summary (podhealth.TrimPod). Pods are the Deployment's grandchildren, owned by
// its ReplicaSets, which the controller does not watch: they are found the way the
// Deployment and the Service select them, by the App's selector labels, indexed by the
// instance label (the App's name).

// podAppIndex indexes pods by "namespace/instance label", the key of their App.
const podAppIndex = "app.appcontroller.k8s.io/pod-app"

// indexPodByApp is the podAppIndex function.
func indexPodByApp(obj interface{}) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	instance := pod.Labels[appv1.InstanceLabel]
	if instance == "" {
		return nil, nil
	}
	return []string{pod.Namespace + "/" + instance}, nil
}

// podHandler queues the App of a pod that was added, changed or deleted, unless the pod
// was quiet before and after (see quiet): such a pod changes nothing the App's status says
// of its pods, and the Deployment's status, which the App also watches, carries its
// progress (ready and available replicas). Most pod events of a rollout are of this kind.
// Periodic resyncs are skipped: the App's own resync re-examines its pods.
func (c *Controller) podHandler(logger klog.Logger) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			if pod := controller.ObjectFromTombstone(obj); !c.quiet(pod) {
				c.podChanged(logger, "added", pod)
			}
		},
		UpdateFunc: func(old, cur interface{}) {
			oldPod, curPod := controller.ObjectFromTombstone(old), controller.ObjectFromTombstone(cur)
			if oldPod == nil || curPod == nil || oldPod.GetResourceVersion() == curPod.GetResourceVersion() {
				return
			}
			if c.quiet(oldPod) && c.quiet(curPod) {
				return
			}
			c.podChanged(logger, "updated", curPod)
		},
		DeleteFunc: func(obj interface{}) {
			if pod := controller.ObjectFromTombstone(obj); !c.quiet(pod) || c.outlivedCanary(pod) {
				c.podChanged(logger, "deleted", pod)
			}
		},
	}
}

// quiet reports whether pod, as cached, has no problem now and none due later with no
// change of the pod (podhealth.Inspect: nil, 0): whether it is there or not, and in this
// state or another quiet one, the App's pod problem (podProblem) is the same, so its
// events need no sync.
func (c *Controller) quiet(obj metav1.Object) bool {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return false
	}
	problem, recheck := podhealth.Inspect(pod, c.clock.Now())
	return problem == nil && recheck == 0
}

// outlivedCanary reports whether obj is a pod of a canary whose Deployment is gone: the
// HTTPRoute of its App waits for the last of them (canaryPodsLeft), however quiet.
func (c *Controller) outlivedCanary(obj metav1.Object) bool {
	if obj == nil || obj.GetLabels()[appv1.TrackLabel] != appv1.TrackCanary {
		return false
	}
	app, err := c.appLister.Apps(obj.GetNamespace()).Get(obj.GetLabels()[appv1.InstanceLabel])
	return err == nil && c.liveCanary(app) == nil
}

// canaryPodsLeft reports whether pods of app's canary are cached, terminating ones
// included: once its Deployment is gone, the garbage collector deletes them, and they
// stop; the HTTPRoute keeps them out of its traffic until then (rollout.Live).
func (c *Controller) canaryPodsLeft(app *appv1.App) bool {
	objs, selector := c.cachedCanaryPods(app)
	return slices.ContainsFunc(objs, func(obj interface{}) bool {
		pod, ok := obj.(*corev1.Pod)
		return ok && selector.Matches(labels.Set(pod.Labels))
	})
}

// cachedCanaryPods returns the cached pods of app (none without a pod cache) and the
// selector of its canary's among them.
func (c *Controller) cachedCanaryPods(app *appv1.App) ([]interface{}, labels.Selector) {
	set := selectorLabels(app)
	set[appv1.TrackLabel] = appv1.TrackCanary
	selector := labels.SelectorFromSet(set)
	if c.pods == nil {
		return nil, selector
	}
	objs, err := c.pods.ByIndex(podAppIndex, app.Namespace+"/"+app.Name)
	if err != nil {
		return nil, selector
	}
	return objs, selector
}

// podChanged queues the App whose selector labels pod carries, if that App exists.
func (c *Controller) podChanged(logger klog.Logger, what string, obj metav1.Object) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	name := p.Labels[appv1.InstanceLabel]
	if name == "" || p.Labels[appv1.NameLabel] != name {
		return
	}
	if _, err := c.appLister.Apps(p.Namespace).Get(name); err != nil {
		return
	}
	logger.V(5).Info("Pod "+what, "pod", klog.KObj(p))
	c.loop.Enqueue(cache.ObjectName{Namespace: p.Namespace, Name: name})
}

// podProblem returns the first problem of the App's current pods at now (see
// currentPods), and how long until it may change with no pod event; nil and 0 when the
// App has no Deployment or no pod cache.
func (c *Controller) podProblem(app *appv1.App, selector map[string]string, d *appsv1.Deployment, now time.Time) (*podhealth.Problem, time.Duration) {
	// Until the deployment controller has observed the Deployment's spec, the newest
	// pods may be of the template the App just replaced (a fix): their problem is not
	// the App's any more.
	if c.pods == nil || d == nil || d.Status.ObservedGeneration < d.Generation {
		return nil, 0
	}
	objs, err := c.pods.ByIndex(podAppIndex, app.Namespace+"/"+app.Name)
	if err != nil || len(objs) == 0 {
		return nil, 0
	}
	// The canary pods of a rollout are not the Deployment's: the rollout judges them
	// (canaryFailure, below).
	notCanary, err := labels.NewRequirement(appv1.TrackLabel, selection.DoesNotExist, nil)
	if err != nil {
		return nil, 0
	}
	problem, recheck := podhealth.First(currentPods(objs, labels.SelectorFromSet(selector).Add(*notCanary), newReplicaSetHash(d)), now)
	return problem.WithProbeOutput(c.probeOutput(app.Namespace, problem)), recheck
}

// podEventIndex indexes the kubelet's Events by "namespace/pod name" of the pod they
// are about.
const podEventIndex = "app.appcontroller.k8s.io/event-pod"

// indexEventByPod is the podEventIndex function.
func indexEventByPod(obj interface{}) ([]string, error) {
	e, ok := obj.(*corev1.Event)
	if !ok || e.InvolvedObject.Kind != "Pod" {
		return nil, nil
	}
	return []string{e.InvolvedObject.Namespace + "/" + e.InvolvedObject.Name}, nil
}

// probeEventHandler queues the App of the pod an Unhealthy Event is about, if the pod
// is one of an App's (in the pod cache). A repeated Event (its count bumped) queues it
// again; the status changes only if the probe's output did.
func (c *Controller) probeEventHandler(logger klog.Logger) cache.ResourceEventHandler {
	changed := func(obj interface{}) {
		e, ok := controller.ObjectFromTombstone(obj).(*corev1.Event)
		if !ok || e.InvolvedObject.Kind != "Pod" {
			return
		}
		pod, exists, err := c.pods.GetByKey(e.InvolvedObject.Namespace + "/" + e.InvolvedObject.Name)
		if err != nil || !exists {
			return
		}
		if p, ok := pod.(metav1.Object); ok {
			c.podChanged(logger, "probe Event", p)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: changed,
		UpdateFunc: func(old, cur interface{}) {
			if o, ok := old.(metav1.Object); ok {
				if n, ok := cur.(metav1.Object); ok && o.GetResourceVersion() == n.GetResourceVersion() {
					return
				}
			}
			changed(cur)
		},
	}
}

// probeOutput returns the output of the probe that problem says does not pass, from the
// kubelet's Events about its pod in namespace; "" if none or no Event cache.
func (c *Controller) probeOutput(namespace string, problem *podhealth.Problem) string {
	if c.probeEvents == nil || problem == nil || problem.Reason != appv1.ReasonContainerNotReady {
		return ""
	}
	objs, err := c.probeEvents.ByIndex(podEventIndex, namespace+"/"+problem.Pod)
	if err != nil || len(objs) == 0 {
		return ""
	}
	events := make([]*corev1.Event, 0, len(objs))
	for _, obj := range objs {
		if e, ok := obj.(*corev1.Event); ok {
			events = append(events, e)
		}
	}
	return podhealth.ProbeOutput(problem, events)
}

// newReplicaSetHash returns the pod-template-hash of the Deployment's new ReplicaSet,
// which the deployment controller names in the message of the Progressing condition
// (`ReplicaSet "web-5c9f7d" is progressing.`, `Created new replica set "web-5c9f7d"`,
// `... has successfully progressed.`, `... has timed out progressing.`); "" if it
// names none.
func newReplicaSetHash(d *appsv1.Deployment) string {
	c := deploymentCondition(d, appsv1.DeploymentProgressing)
	if c == nil {
		return ""
	}
	prefix := `"` + d.Name + "-"
	i := strings.Index(c.Message, prefix)
	if i < 0 {
		return ""
	}
	rest := c.Message[i+len(prefix):]
	j := strings.IndexByte(rest, '"')
	if j <= 0 || strings.ContainsAny(rest[:j], " -") {
		return ""
	}
	return rest[:j]
}

// currentPods returns the pods among objs that selector matches, are not being deleted
// and belong to the current pod template: the pod-template-hash hash of the new
// ReplicaSet, or, when it is not known (""), the template of the newest pod. The pods
// of an older template that a rollout is replacing would otherwise go on naming a
// problem that the new template fixed.
func currentPods(objs []interface{}, selector labels.Selector, hash string) []*corev1.Pod {
	var (
		newest *corev1.Pod
		pods   []*corev1.Pod
	)
	for _, obj := range objs {
		pod, ok := obj.(*corev1.Pod)
		if !ok || pod.DeletionTimestamp != nil || !selector.Matches(labels.Set(pod.Labels)) {
			continue
		}
		pods = append(pods, pod)
		if newest == nil || newest.CreationTimestamp.Before(&pod.CreationTimestamp) {
			newest = pod
		}
	}
	if newest == nil {
		return nil
	}
	if hash == "" {
		hash = newest.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
	}
	current := pods[:0]
	for _, pod := range pods {
		if pod.Labels[appsv1.DefaultDeploymentUniqueLabelKey] == hash {
			current = append(current, pod)
		}
	}
	return current
}

// canaryFailure returns why the canary Deployment d of app fails, from its current pods (those of
// its newest ReplicaSet): a pod whose image cannot be pulled, whose container
// cannot be created, exits or is OOMKilled, at once; a pod not ready
// readyDeadlineSeconds after its creation. It also returns when a pod not ready yet
// reaches that deadline (0: none).
func (c *Controller) canaryFailure(app *appv1.App, d *appsv1.Deployment, s *appv1.CanaryStrategy, now time.Time) (rollout.Abort, time.Duration) {
	if d == nil || d.Status.ObservedGeneration < d.Generation {
		return rollout.Abort{}, 0
	}
	objs, selector := c.cachedCanaryPods(app)
	pods := currentPods(objs, selector, newReplicaSetHash(d))
	deadline := time.Duration(ptr.Deref(s.ReadyDeadlineSeconds, 120)) * time.Second
	var (
		failing  []*corev1.Pod
		overdue  *corev1.Pod
		recheck  time.Duration
		problems = map[string]bool{appv1.ReasonImagePullFailed: true, appv1.ReasonContainerConfigError: true,
			appv1.ReasonCrashLoopBackOff: true, appv1.ReasonOOMKilled: true}
	)
	for _, pod := range pods {
		if problem, _ := podhealth.Inspect(pod, now); problem != nil && problems[problem.Reason] {
			failing = append(failing, pod)
			continue
		}
		if podReady(pod) {
			continue
		}
		due := pod.CreationTimestamp.Add(deadline)
		if !now.Before(due) {
			if overdue == nil || pod.Name < overdue.Name {
				overdue = pod
			}
		} else if d := due.Sub(now); recheck == 0 || d < recheck {
			recheck = d
		}
	}
	if problem, _ := podhealth.First(failing, now); problem != nil {
		return rollout.Abort{Reason: problem.Reason, Message: problem.Message}, recheck
	}
	if overdue != nil {
		if problem, _ := podhealth.Inspect(overdue, now); problem != nil {
			problem = problem.WithProbeOutput(c.probeOutput(app.Namespace, problem))
			return rollout.Abort{Reason: problem.Reason, Message: fmt.Sprintf("%s, %s after it was created (readyDeadlineSeconds)", problem.Message, deadline)}, recheck
		}
		return rollout.Abort{Reason: appv1.ReasonContainerNotReady, Message: fmt.Sprintf("Pod %q is not ready %s after it was created (readyDeadlineSeconds)", overdue.Name, deadline)}, recheck
	}
	return rollout.Abort{}, recheck
}

// podReady reports whether every container of pod is ready (the pod cache keeps no
// Ready condition).
func podReady(pod *corev1.Pod) bool {
	ready, total := podhealth.ReadyContainers(pod)
	return pod.Status.Phase == corev1.PodRunning && total > 0 && ready == total
}

package plugin

import (
	"context"
	"fmt"
	"io"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/printers"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/podhealth"
)

// podResource is the resource of core/v1 Pods.
var podResource = corev1.SchemeGroupVersion.WithResource("pods")

// appPods lists the pods the App's selector selects, sorted by name.
func appPods(ctx context.Context, c Clients, app *appv1.App) ([]corev1.Pod, error) {
	selector := labels.SelectorFromSet(labels.Set{appv1.NameLabel: app.Name, appv1.InstanceLabel: app.Name}).String()
	list, err := c.Dynamic.Resource(podResource).Namespace(app.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	pods := make([]corev1.Pod, 0, len(list.Items))
	for i := range list.Items {
		var pod corev1.Pod
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(list.Items[i].Object, &pod); err != nil {
			return nil, fmt.Errorf("decoding pod %s: %w", list.Items[i].GetName(), err)
		}
		pods = append(pods, pod)
	}
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	return pods, nil
}

// printPods writes a table of the App's pods: phase, ready containers, restarts, age and
// the problem that keeps each from being ready (podhealth), or why they could not be
// read; with tracks, whether each is a canary or a stable pod of a rollout.
func printPods(w io.Writer, pods []corev1.Pod, note string, tracks bool, now time.Time) error {
	if !startSection(w, "Pods", note, len(pods)) {
		return nil
	}
	tw := printers.GetNewTabWriter(w)
	if tracks {
		fmt.Fprint(tw, "  TRACK\t")
	} else {
		fmt.Fprint(tw, "  ")
	}
	fmt.Fprintln(tw, "NAME\tPHASE\tREADY\tRESTARTS\tAGE\tPROBLEM")
	for i := range pods {
		pod := &pods[i]
		ready, total := podhealth.ReadyContainers(pod)
		phase := string(pod.Status.Phase)
		if pod.DeletionTimestamp != nil {
			phase = "Terminating"
		}
		problem := noValue
		if p, _ := podhealth.Inspect(pod, now); p != nil {
			problem = p.Reason + ": " + p.Message
		}
		if tracks {
			fmt.Fprintf(tw, "  %s\t", podTrack(pod))
		} else {
			fmt.Fprint(tw, "  ")
		}
		fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%d\t%s\t%s\n", pod.Name, phase, ready, total, podhealth.Restarts(pod),
			age(pod.CreationTimestamp, now), oneLine(problem))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("writing the pods: %w", err)
	}
	return nil
}

// podTrack says whether pod is a canary or a stable pod of a rollout.
func podTrack(pod *corev1.Pod) string {
	if pod.Labels[appv1.TrackLabel] == appv1.TrackCanary {
		return appv1.TrackCanary
	}
	return "stable"
}

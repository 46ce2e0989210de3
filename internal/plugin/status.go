package plugin

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/cli-runtime/pkg/printers"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// serviceResource is the resource of core/v1 Services.
var serviceResource = corev1.SchemeGroupVersion.WithResource("services")

// Status is what `kubectl app status` shows of an App.
type Status struct {
	App *appv1.App
	// Ready is true when the App's Ready condition is True and describes the App's
	// current generation.
	Ready bool
	// Readiness says so in one line: the Ready condition's status, reason and message, or
	// why there is none to trust.
	Readiness string
	// Service is the App's Service, when the App controls it.
	Service *corev1.Service
	// ServiceNote says why Service is nil.
	ServiceNote string
	// Pods are the App's pods, by name.
	Pods []corev1.Pod
	// PodsNote says why the pods could not be read; empty when they were.
	PodsNote string
	// Events are the App's most recent Events (at most maxEvents), the latest last.
	Events []corev1.Event
	// EventsNote says why the Events could not be read; empty when they were.
	EventsNote string
	// Rollout is what the App's canary rollout runs, when it has a rollout strategy
	// or reports one; nil otherwise.
	Rollout *RolloutView
}

// GetStatus reads the App namespace/name and the Service it controls. An absent App is
// an *AppNotFoundError; a Service that cannot be read is noted, not an error.
func GetStatus(ctx context.Context, c Clients, namespace, name string) (*Status, error) {
	gvr, err := appResource(c.Discovery)
	if err != nil {
		return nil, err
	}
	u, err := getApp(ctx, c.Dynamic, gvr, namespace, name)
	if err != nil {
		return nil, err
	}
	app := &appv1.App{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, app); err != nil {
		return nil, fmt.Errorf("decoding App %s/%s: %w", namespace, name, err)
	}
	s := &Status{App: app}
	s.Ready, s.Readiness = readiness(app)
	s.Service, s.ServiceNote = appService(ctx, c, app)
	if app.Spec.DeploymentTemplate != nil {
		pods, err := appPods(ctx, c, app)
		if err != nil {
			s.PodsNote = "cannot read them: " + err.Error()
		}
		s.Pods = pods
	}
	events, err := appEvents(ctx, c, namespace, app.UID)
	if err != nil {
		s.EventsNote = "cannot read them: " + err.Error()
	}
	s.Events = events
	if app.Spec.Rollout != nil || app.Status.Rollout != nil {
		s.Rollout = getRolloutView(ctx, c, app)
	}
	return s, nil
}

// readiness tells whether app is Ready, and says why in one line.
func readiness(app *appv1.App) (bool, string) {
	c := meta.FindStatusCondition(app.Status.Conditions, appv1.ConditionReady)
	switch {
	case app.DeletionTimestamp != nil:
		return false, "False: the App is being deleted"
	case c == nil:
		return false, "Unknown: the controller has not reported a Ready condition yet"
	case c.ObservedGeneration < app.Generation:
		return false, fmt.Sprintf("Unknown: the Ready condition describes generation %d of the App, which is at generation %d",
			c.ObservedGeneration, app.Generation)
	}
	line := fmt.Sprintf("%s, %s", c.Status, c.Reason)
	if c.Message != "" {
		line += ": " + c.Message
	}
	return c.Status == metav1.ConditionTrue, line
}

// appService returns the Service app controls, or nil and why not.
func appService(ctx context.Context, c Clients, app *appv1.App) (*corev1.Service, string) {
	t := app.Spec.ServiceTemplate
	if t == nil {
		return nil, "none (the App has no serviceTemplate)"
	}
	svc := &corev1.Service{}
	if note := getControlled(ctx, c, serviceResource, app, t.Name, svc); note != "" {
		return nil, note
	}
	return svc, ""
}

// getControlled reads the object name of resource in app's namespace into obj, and
// returns "" if app controls it, else why it cannot be shown: it does not exist, cannot
// be read, or is held by an object app does not control.
func getControlled(ctx context.Context, c Clients, resource schema.GroupVersionResource, app *appv1.App, name string, obj metav1.Object) string {
	u, err := c.Dynamic.Resource(resource).Namespace(app.Namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return name + ": does not exist"
	}
	if err != nil {
		return fmt.Sprintf("%s: cannot read it: %v", name, err)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
		return fmt.Sprintf("%s: cannot decode it: %v", name, err)
	}
	if ref := metav1.GetControllerOfNoCopy(obj); ref == nil || ref.UID != app.UID {
		owner := "no controller"
		if ref != nil {
			owner = fmt.Sprintf("controlled by %s %s", ref.Kind, ref.Name)
		}
		return fmt.Sprintf("%s: held by an object this App does not control (%s)", name, owner)
	}
	return ""
}

// PrintStatus writes s: the App's readiness, its Deployment's replicas, its Service's
// type, cluster IP and ports, then a table of its conditions, one of its pods (each with
// the problem that keeps it from being ready) and one of its recent Events. now is the time ages are counted to.
func PrintStatus(w io.Writer, s *Status, now time.Time) error {
	tw := printers.GetNewTabWriter(w)
	app := s.App
	fmt.Fprintf(tw, "App:\t%s/%s\n", app.Namespace, app.Name)
	fmt.Fprintf(tw, "Ready:\t%s\n", oneLine(s.Readiness))
	fmt.Fprintf(tw, "Deployment:\t%s\n", deploymentLine(app))
	if s.Service != nil {
		fmt.Fprintf(tw, "Service:\t%s\n", serviceLine(s.Service))
	} else {
		fmt.Fprintf(tw, "Service:\t%s\n", oneLine(s.ServiceNote))
	}
	if s.Rollout != nil {
		printRollout(tw, app, s.Rollout)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("writing the status: %w", err)
	}

	fmt.Fprintln(w)
	if err := printConditions(w, app.Status.Conditions, now); err != nil {
		return err
	}
	if app.Spec.DeploymentTemplate != nil {
		if err := printPods(w, s.Pods, s.PodsNote, s.Rollout != nil, now); err != nil {
			return err
		}
	}
	return printEvents(w, s.Events, s.EventsNote, now)
}

// printConditions writes a table of conditions, Ready first.
func printConditions(w io.Writer, conditions []metav1.Condition, now time.Time) error {
	if len(conditions) == 0 {
		fmt.Fprintln(w, "No conditions reported yet.")
		return nil
	}
	tw := printers.GetNewTabWriter(w)
	fmt.Fprintln(tw, "CONDITION\tSTATUS\tREASON\tAGE\tMESSAGE")
	for _, c := range orderedConditions(conditions) {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", c.Type, c.Status, c.Reason, age(c.LastTransitionTime, now), oneLine(c.Message))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("writing the conditions: %w", err)
	}
	return nil
}

// orderedConditions returns Ready first, then the other conditions in their order.
func orderedConditions(conditions []metav1.Condition) []metav1.Condition {
	out := make([]metav1.Condition, 0, len(conditions))
	for _, c := range conditions {
		if c.Type == appv1.ConditionReady {
			out = append(out, c)
		}
	}
	for _, c := range conditions {
		if c.Type != appv1.ConditionReady {
			out = append(out, c)
		}
	}
	return out
}

// deploymentLine describes the App's Deployment from the App's status: "NAME (image
// IMAGE): 2 desired, 2 updated, 2 ready, 2 available".
func deploymentLine(app *appv1.App) string {
	t := app.Spec.DeploymentTemplate
	if t == nil {
		return "none (the App has no deploymentTemplate)"
	}
	line := fmt.Sprintf("%s (image %s): %d desired", t.Name, t.Image, desiredReplicas(app))
	st := app.Status.DeploymentStatus
	if st == nil {
		return line + ", no status reported"
	}
	line += fmt.Sprintf(", %d updated, %d ready, %d available", st.UpdatedReplicas, st.ReadyReplicas, st.AvailableReplicas)
	if st.UnavailableReplicas > 0 {
		line += fmt.Sprintf(", %d unavailable", st.UnavailableReplicas)
	}
	return oneLine(line)
}

// serviceLine describes a Service: "NAME: TYPE CLUSTER-IP, ports PORTS[, external IPS]".
func serviceLine(svc *corev1.Service) string {
	typ := svc.Spec.Type
	if typ == "" {
		typ = corev1.ServiceTypeClusterIP
	}
	clusterIP := svc.Spec.ClusterIP
	if clusterIP == "" {
		clusterIP = noValue
	}
	line := fmt.Sprintf("%s: %s %s", svc.Name, typ, clusterIP)
	ports := make([]string, 0, len(svc.Spec.Ports))
	for _, p := range svc.Spec.Ports {
		port := fmt.Sprintf("%d", p.Port)
		if p.NodePort != 0 {
			port += fmt.Sprintf(":%d", p.NodePort)
		}
		port += "/" + string(p.Protocol)
		if p.Name != "" {
			port = p.Name + " " + port
		}
		if p.TargetPort.String() != "" && p.TargetPort.String() != "0" {
			port += " -> " + p.TargetPort.String()
		}
		ports = append(ports, port)
	}
	if len(ports) == 0 {
		line += ", no ports"
	} else {
		line += ", ports " + strings.Join(ports, ", ")
	}
	if typ == corev1.ServiceTypeLoadBalancer {
		var external []string
		for _, ing := range svc.Status.LoadBalancer.Ingress {
			if ing.IP != "" {
				external = append(external, ing.IP)
			} else if ing.Hostname != "" {
				external = append(external, ing.Hostname)
			}
		}
		if len(external) == 0 {
			line += ", external <pending>"
		} else {
			line += ", external " + strings.Join(external, ", ")
		}
	}
	return oneLine(line)
}

// watchStatus prints the status of the App namespace/name, then again each time the App
// changes (a watch from the resourceVersion it printed), until settled says the App has
// come to rest; the exit code says whether it is Ready.
func (c *command) watchStatus(ctx context.Context, clients Clients, namespace, name string) error {
	gvr, err := appResource(clients.Discovery)
	if err != nil {
		return err
	}
	last := ""
	for {
		st, err := GetStatus(ctx, clients, namespace, name)
		if err != nil {
			return describe(err, "reading the status of App %s/%s", namespace, name)
		}
		var b strings.Builder
		if err := PrintStatus(&b, st, c.now()); err != nil {
			return err
		}
		if out := b.String(); out != last {
			if last != "" {
				fmt.Fprintln(c.streams.Out, "---")
			}
			fmt.Fprint(c.streams.Out, out)
			last = out
		}
		c.exit = ExitOK
		if !st.Ready {
			c.exit = ExitNotReady
		}
		if settled(st.App) || ctx.Err() != nil {
			return nil
		}
		if err := waitForChange(ctx, clients, gvr, namespace, name, st.App.ResourceVersion); err != nil {
			return err
		}
	}
}

// settled reports whether app, as the controller last reported it, has come to rest: its
// latest change observed, and Ready, its rollout aborted, or Stalled.
func settled(app *appv1.App) bool {
	if app.Status.ObservedGeneration != app.Generation {
		return false
	}
	if r := app.Status.Rollout; r != nil && r.Phase == appv1.RolloutAborted {
		return true
	}
	ready, _ := readiness(app)
	return ready || meta.IsStatusConditionTrue(app.Status.Conditions, appv1.ConditionStalled)
}

// waitForChange waits until the App namespace/name changes after resourceVersion, or
// ctx ends (not an error: the watch was interrupted).
func waitForChange(ctx context.Context, clients Clients, gvr schema.GroupVersionResource, namespace, name, resourceVersion string) error {
	w, err := clients.Dynamic.Resource(gvr).Namespace(namespace).Watch(ctx, metav1.ListOptions{
		FieldSelector:   "metadata.name=" + name,
		ResourceVersion: resourceVersion,
	})
	if err != nil {
		return &APIError{Err: err}
	}
	defer w.Stop()
	select {
	case <-ctx.Done():
		return nil
	case ev, ok := <-w.ResultChan():
		if ok && ev.Type == watch.Deleted {
			return &AppNotFoundError{Namespace: namespace, Name: name}
		}
		// A change, an error (an expired resourceVersion) or a closed watch: read again.
		return nil
	}
}

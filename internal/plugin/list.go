package plugin

import (
	"context"
	"fmt"
	"io"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/printers"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// ListApps returns the Apps of namespace, or of every namespace if namespace is empty,
// sorted by namespace and name.
func ListApps(ctx context.Context, c Clients, namespace string) ([]appv1.App, error) {
	gvr, err := appResource(c.Discovery)
	if err != nil {
		return nil, err
	}
	where := "in namespace " + namespace
	if namespace == "" {
		where = "in all namespaces"
	}
	var apps []appv1.App
	client := c.Dynamic.Resource(gvr).Namespace(namespace)
	err = paged(ctx, func(opts metav1.ListOptions) (string, error) {
		list, err := client.List(ctx, opts)
		if err != nil {
			return "", err
		}
		for _, u := range list.Items {
			var app appv1.App
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &app); err != nil {
				return "", fmt.Errorf("decoding App %s/%s: %w", u.GetNamespace(), u.GetName(), err)
			}
			apps = append(apps, app)
		}
		return list.GetContinue(), nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing Apps %s: %w", where, err)
	}
	sort.Slice(apps, func(i, j int) bool {
		if apps[i].Namespace != apps[j].Namespace {
			return apps[i].Namespace < apps[j].Namespace
		}
		return apps[i].Name < apps[j].Name
	})
	return apps, nil
}

// PrintList writes apps as a table, like `kubectl get apps` with the Ready condition's
// status and reason: [NAMESPACE] NAME READY REASON AVAILABLE AGE, and with wide the
// IMAGE, DEPLOYMENT and SERVICE of each App ("<none>" for an App without one). AVAILABLE
// is available replicas over desired ones. now is the time ages are counted to.
func PrintList(w io.Writer, apps []appv1.App, withNamespace, wide bool, now time.Time) error {
	tw := printers.GetNewTabWriter(w)
	if withNamespace {
		fmt.Fprint(tw, "NAMESPACE\t")
	}
	fmt.Fprint(tw, "NAME\tREADY\tREASON\tAVAILABLE\tAGE")
	if wide {
		fmt.Fprint(tw, "\tIMAGE\tDEPLOYMENT\tSERVICE")
	}
	fmt.Fprintln(tw)
	for i := range apps {
		app := &apps[i]
		if withNamespace {
			fmt.Fprintf(tw, "%s\t", app.Namespace)
		}
		status, reason := readyColumns(app)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s", app.Name, status, reason, availableColumn(app), age(app.CreationTimestamp, now))
		if wide {
			image, deployment, service := noValue, noValue, noValue
			if t := app.Spec.DeploymentTemplate; t != nil {
				image, deployment = t.Image, t.Name
			}
			if t := app.Spec.ServiceTemplate; t != nil {
				service = t.Name
			}
			fmt.Fprintf(tw, "\t%s\t%s\t%s", oneLine(image), deployment, service)
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("writing the list: %w", err)
	}
	return nil
}

// readyColumns returns the status and reason of app's Ready condition; Unknown when it
// is absent or describes an older generation.
func readyColumns(app *appv1.App) (string, string) {
	c := meta.FindStatusCondition(app.Status.Conditions, appv1.ConditionReady)
	switch {
	case c == nil:
		return string(metav1.ConditionUnknown), noValue
	case c.ObservedGeneration < app.Generation:
		return string(metav1.ConditionUnknown), "GenerationNotObserved"
	}
	return string(c.Status), c.Reason
}

// availableColumn returns "available/desired" replicas, "-" for an App without a
// Deployment.
func availableColumn(app *appv1.App) string {
	t := app.Spec.DeploymentTemplate
	if t == nil {
		return "-"
	}
	var available int32
	if st := app.Status.DeploymentStatus; st != nil {
		available = st.AvailableReplicas
	}
	return fmt.Sprintf("%d/%d", available, desiredReplicas(app))
}

// desiredReplicas is the App's replica count; for an App that leaves it to the
// Deployment (replicas unset), the Deployment's as last reported, else 1.
func desiredReplicas(app *appv1.App) int32 {
	if r := app.Spec.DeploymentTemplate.Replicas; r != nil {
		return *r
	}
	if st := app.Status.DeploymentStatus; st != nil {
		return st.Replicas
	}
	return 1
}

// age returns the age of t at now, as kubectl shows it.
func age(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

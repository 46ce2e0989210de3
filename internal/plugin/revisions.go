package plugin

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// Revision is a recorded revision of an App's spec (a ControllerRevision the App
// controls, see the controller's revisions.go).
type Revision struct {
	Number      int64
	Name        string
	Created     time.Time
	ChangeCause string
	// Spec is the App's spec at that revision, without revisionHistoryLimit.
	Spec appv1.AppSpec
	// Current: the App's status names it.
	Current bool
}

// History is an App and its revisions, oldest first.
type History struct {
	App       *appv1.App
	Revisions []Revision
}

// GetHistory reads the App namespace/name and the revisions it controls.
func GetHistory(ctx context.Context, clients Clients, namespace, name string) (*History, error) {
	app, err := getTypedApp(ctx, clients, namespace, name)
	if err != nil {
		return nil, err
	}
	selector := labels.SelectorFromSet(labels.Set{appv1.InstanceLabel: name, appv1.ManagedByLabel: appv1.ManagedByValue})
	list, err := clients.Kube.AppsV1().ControllerRevisions(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return nil, &APIError{Err: err}
	}
	return historyOf(app, list.Items)
}

// historyOf returns the history of app from ControllerRevisions: those app controls,
// oldest first (history reads them from the server, the dashboard from its informer).
func historyOf(app *appv1.App, revisions []appsv1.ControllerRevision) (*History, error) {
	h := &History{App: app}
	for i := range revisions {
		cr := &revisions[i]
		if ref := metav1.GetControllerOfNoCopy(cr); ref == nil || ref.UID != app.UID {
			continue
		}
		var data map[string]appv1.AppSpec
		if err := json.Unmarshal(cr.Data.Raw, &data); err != nil {
			return nil, fmt.Errorf("decoding revision %d (ControllerRevision %s): %w", cr.Revision, cr.Name, err)
		}
		h.Revisions = append(h.Revisions, Revision{
			Number: cr.Revision, Name: cr.Name, Created: cr.CreationTimestamp.Time,
			ChangeCause: cr.Annotations[appv1.ChangeCauseAnnotation],
			Spec:        data[appv1.RevisionDataKey],
			Current:     cr.Name == app.Status.CurrentRevision,
		})
	}
	slices.SortFunc(h.Revisions, func(a, b Revision) int { return cmp.Compare(a.Number, b.Number) })
	return h, nil
}

// getTypedApp reads the App namespace/name with the generated client: an
// AppNotFoundError when it does not exist, an APIError when the read fails.
func getTypedApp(ctx context.Context, clients Clients, namespace, name string) (*appv1.App, error) {
	app, err := clients.Apps.AppcontrollerV1().Apps(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, &AppNotFoundError{Namespace: namespace, Name: name}
	}
	if err != nil {
		return nil, &APIError{Err: err}
	}
	return app, nil
}

// find returns the revision numbered n, or nil.
func (h *History) find(n int64) *Revision {
	for i := range h.Revisions {
		if h.Revisions[i].Number == n {
			return &h.Revisions[i]
		}
	}
	return nil
}

// previous returns the newest revision older than the current one, or nil.
func (h *History) previous() *Revision {
	current := int64(-1)
	for _, r := range h.Revisions {
		if r.Current {
			current = r.Number
		}
	}
	if current < 0 && len(h.Revisions) > 0 {
		current = h.Revisions[len(h.Revisions)-1].Number
	}
	var prev *Revision
	for i := range h.Revisions {
		if h.Revisions[i].Number < current {
			prev = &h.Revisions[i]
		}
	}
	return prev
}

// PrintHistory writes the revisions as a table: number (the current one marked),
// age, image and change cause.
func PrintHistory(w io.Writer, h *History, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "REVISION\tAGE\tIMAGE\tCHANGE-CAUSE")
	for _, r := range h.Revisions {
		number := fmt.Sprint(r.Number)
		if r.Current {
			number += " (current)"
		}
		image := noValue
		if t := r.Spec.DeploymentTemplate; t != nil {
			image = t.Image
		}
		cause := r.ChangeCause
		if cause == "" {
			cause = noValue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", number, duration.HumanDuration(now.Sub(r.Created)), image, cause)
	}
	return tw.Flush()
}

// PrintRevision writes one revision's spec as YAML.
func PrintRevision(w io.Writer, r *Revision) error {
	out, err := yaml.Marshal(map[string]any{"revision": r.Number, "changeCause": r.ChangeCause, "spec": r.Spec})
	if err != nil {
		return fmt.Errorf("encoding revision %d: %w", r.Number, err)
	}
	_, err = w.Write(out)
	return err
}

// RollbackResult is what Rollback did.
type RollbackResult struct {
	To *Revision
	// Changes are the fields of the spec that changed, "path: old -> new"; none when the
	// App already had that spec (nothing was written).
	Changes []string
}

// Rollback writes the spec of revision to (0: the one before the current) back into the
// App namespace/name, an ordinary update (so GitOps tools see the difference from
// their source), keeping its revisionHistoryLimit, and sets its change cause to the
// revision's. The controller then records it as the newest revision.
func Rollback(ctx context.Context, clients Clients, namespace, name string, to int64) (*RollbackResult, error) {
	res := &RollbackResult{}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		h, err := GetHistory(ctx, clients, namespace, name)
		if err != nil {
			return err
		}
		target := h.previous()
		if to != 0 {
			target = h.find(to)
		}
		switch {
		case target == nil && to != 0:
			return fmt.Errorf("App %s/%s has no revision %d (kubectl app history %s lists them)", namespace, name, to, name)
		case target == nil:
			return fmt.Errorf("App %s/%s has no revision before the current one", namespace, name)
		}
		res.To = target
		app := h.App.DeepCopy()
		spec := *target.Spec.DeepCopy()
		spec.RevisionHistoryLimit = app.Spec.RevisionHistoryLimit
		if res.Changes, err = specChanges(&app.Spec, &spec); err != nil {
			return err
		}
		if len(res.Changes) == 0 {
			return nil
		}
		app.Spec = spec
		if target.ChangeCause != "" {
			if app.Annotations == nil {
				app.Annotations = map[string]string{}
			}
			app.Annotations[appv1.ChangeCauseAnnotation] = target.ChangeCause
		} else {
			delete(app.Annotations, appv1.ChangeCauseAnnotation)
		}
		_, err = clients.Apps.AppcontrollerV1().Apps(namespace).Update(ctx, app, metav1.UpdateOptions{FieldManager: FieldManager})
		if err != nil && !apierrors.IsConflict(err) {
			return &APIError{Err: err}
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// specChanges lists the leaves that differ between two specs, "path: old -> new", by
// path.
func specChanges(from, to *appv1.AppSpec) ([]string, error) {
	a, err := leaves(from)
	if err != nil {
		return nil, err
	}
	b, err := leaves(to)
	if err != nil {
		return nil, err
	}
	var out []string
	for path, old := range a {
		if cur, ok := b[path]; !ok || cur != old {
			if !ok {
				cur = "(none)"
			}
			out = append(out, fmt.Sprintf("spec%s: %s -> %s", path, old, cur))
		}
	}
	for path, cur := range b {
		if _, ok := a[path]; !ok {
			out = append(out, fmt.Sprintf("spec%s: (none) -> %s", path, cur))
		}
	}
	slices.Sort(out)
	return out, nil
}

// leaves returns the leaves of v's JSON form by path (".a.b[0].c"), each as JSON.
func leaves(v any) (map[string]string, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var tree any
	if err := json.Unmarshal(data, &tree); err != nil {
		return nil, err
	}
	out := map[string]string{}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch t := v.(type) {
		case map[string]any:
			for k, e := range t {
				walk(path+"."+k, e)
			}
		case []any:
			for i, e := range t {
				walk(fmt.Sprintf("%s[%d]", path, i), e)
			}
		default:
			b, _ := json.Marshal(t)
			out[path] = string(b)
		}
	}
	walk("", tree)
	return out, nil
}

// Restart rolls the pods of the App namespace/name, as `kubectl rollout restart` does:
// it sets the kubectl.kubernetes.io/restartedAt annotation of its Deployment's pod
// template to now, with field manager kubectl-app. The controller leaves that
// annotation alone. It returns the Deployment's name. An App with a rollout strategy is
// restarted through it instead (RestartWithRollout), and canary is true.
func Restart(ctx context.Context, clients Clients, namespace, name string, now time.Time) (deployment string, canary bool, err error) {
	app, err := getTypedApp(ctx, clients, namespace, name)
	if err != nil {
		return "", false, err
	}
	if app.Spec.DeploymentTemplate == nil {
		return "", false, fmt.Errorf("App %s/%s has no Deployment to restart", namespace, name)
	}
	deployment = app.Spec.DeploymentTemplate.Name
	if app.Spec.Rollout != nil {
		return deployment, true, RestartWithRollout(ctx, clients, app, now)
	}
	return deployment, false, restartDeployment(ctx, clients, app, deployment, now)
}

// restartDeployment sets the restartedAt annotation of the pod template of app's
// Deployment, if app controls it.
func restartDeployment(ctx context.Context, clients Clients, app *appv1.App, deployment string, now time.Time) error {
	namespace, name := app.Namespace, app.Name
	d, err := clients.Kube.AppsV1().Deployments(namespace).Get(ctx, deployment, metav1.GetOptions{})
	if err != nil {
		return &APIError{Err: err}
	}
	if ref := metav1.GetControllerOfNoCopy(d); ref == nil || ref.UID != app.UID {
		return fmt.Errorf("Deployment %s/%s is not controlled by App %s: not restarting it", namespace, deployment, name)
	}
	patch, err := json.Marshal(map[string]any{
		"spec": map[string]any{"template": metadataPatch(map[string]string{appv1.RestartedAtAnnotation: now.Format(time.RFC3339)}, "")},
	})
	if err != nil {
		return err
	}
	if _, err := clients.Kube.AppsV1().Deployments(namespace).Patch(ctx, deployment, types.StrategicMergePatchType, patch,
		metav1.PatchOptions{FieldManager: FieldManager}); err != nil {
		return &APIError{Err: err}
	}
	return nil
}

// formatChanges indents the changes of a rollback for printing.
func formatChanges(changes []string) string {
	var b strings.Builder
	for _, c := range changes {
		b.WriteString("  " + c + "\n")
	}
	return b.String()
}

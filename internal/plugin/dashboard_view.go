package plugin

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/podhealth"
)

// What the dashboard's templates (dashboard/*.html) render: views computed from the
// dashboard's cache with the same helpers as list, status, tree and history.

// rowView is an App's row of the list.
type rowView struct {
	Key, Namespace, Name string
	// Ready is True, False or Unknown; Reason says why (the Ready condition's reason).
	Ready, Reason, Message string
	Image, Available       string
	Rollout                *progressView
	Autoscaler             string
	Hosts                  []string
	// Search is what the search box matches, lower case.
	Search string
	// State is ready, notready or rolling (a rollout in progress), for the filter.
	State string
}

// progressView is a rollout's progress: its phase, the steps done and the weight; for a
// blue-green rollout its stages instead of steps, and which side is active instead of
// the weight.
type progressView struct {
	Phase string
	// Stage names the current stage of a blue-green rollout ("" for a canary's steps);
	// Active says which side the App's Service selects.
	Stage, Active string
	// Step is the current step (1-based; Steps+1 past the last: promoting), Steps their
	// number.
	Step, Steps int
	Weight      int32
	// Segments are the steps, each done, current or todo.
	Segments []string
	// Text says the same in words (the progress bar's aria-valuetext).
	Text string
}

// newRowView returns the row of app.
func newRowView(app *appv1.App) rowView {
	ready, reason := readyColumns(app)
	r := rowView{
		Key: app.Namespace + "/" + app.Name, Namespace: app.Namespace, Name: app.Name,
		Ready: ready, Reason: reason, Available: availableColumn(app), Image: "none", Autoscaler: "none",
	}
	if c := meta.FindStatusCondition(app.Status.Conditions, appv1.ConditionReady); c != nil && ready != "Unknown" {
		r.Message = c.Message
	}
	if t := app.Spec.DeploymentTemplate; t != nil {
		r.Image = oneLine(t.Image)
	}
	if a := app.Status.Autoscaling; a != nil {
		r.Autoscaler = fmt.Sprintf("%d/%d", a.CurrentReplicas, a.DesiredReplicas)
	} else if app.Spec.Autoscaling != nil {
		r.Autoscaler = "not reported"
	}
	if rt := app.Spec.Route; rt != nil {
		for _, h := range rt.Hosts {
			r.Hosts = append(r.Hosts, string(h))
		}
	}
	r.Rollout = newProgressView(app)
	switch {
	case r.Rollout != nil && r.Rollout.Phase != string(appv1.RolloutHealthy):
		r.State = "rolling"
	case ready == "True":
		r.State = "ready"
	default:
		r.State = "notready"
	}
	r.Search = strings.ToLower(strings.Join(append([]string{app.Namespace, app.Name, r.Image, r.Reason}, r.Hosts...), " "))
	return r
}

// newProgressView returns the progress of app's rollout, nil for an App without a
// rollout strategy.
func newProgressView(app *appv1.App) *progressView {
	steps := rolloutSteps(app)
	if steps == nil {
		return nil
	}
	blueGreen := app.Spec.Rollout.BlueGreen != nil
	p := &progressView{Steps: len(steps), Phase: "not reported"}
	r := app.Status.Rollout
	if r == nil {
		p.Text = "not reported by the controller yet"
		return p
	}
	p.Phase = string(r.Phase)
	p.Weight = r.CanaryWeight
	current := -1
	if r.Canary != nil && r.Phase != appv1.RolloutHealthy {
		current = int(r.CurrentStepIndex)
		p.Step = current + 1
	}
	for i := range steps {
		switch {
		case current < 0 || i > current:
			p.Segments = append(p.Segments, "todo")
		case i < current:
			p.Segments = append(p.Segments, "done")
		default:
			p.Segments = append(p.Segments, "current")
		}
	}
	if current < 0 && r.Phase == appv1.RolloutHealthy {
		for i := range p.Segments {
			p.Segments[i] = "done"
		}
	}
	switch {
	case current < 0:
		p.Text = fmt.Sprintf("%s, no rollout in progress", p.Phase)
	case blueGreen:
		p.Stage, p.Active = blueGreenStage(r.CurrentStepIndex), "old version"
		if switched(r) {
			p.Active = "new version"
		}
		p.Text = fmt.Sprintf("%s, blue-green stage %s (%d of %d), the %s active", p.Phase, p.Stage, min(p.Step, len(steps)+1), len(steps)+1, p.Active)
		if r.Phase != appv1.RolloutAborted && r.CurrentStepIndex == stageSwitch {
			p.Text += ", the new one waiting for the switch"
			if checks := checksBeforeSwitch(app, r); len(checks) > 0 {
				p.Text += " and its checks before it (" + strings.Join(checks, ", ") + ")"
			}
		}
	case current >= len(steps):
		p.Text = fmt.Sprintf("%s, past the last of %d steps: promoting", p.Phase, len(steps))
	default:
		p.Text = fmt.Sprintf("%s, step %d of %d (%s), canary weight %d%%", p.Phase, p.Step, len(steps), steps[current], p.Weight)
	}
	return p
}

// stageSwitch is the blue-green stage that waits for the switch (pkg/rollout's
// StageSwitch).
const stageSwitch = 1

// rolloutSteps returns the words of app's rollout steps: a canary's steps, or a
// blue-green rollout's stages (the promotion, past them, is not one); nil without a
// rollout strategy.
func rolloutSteps(app *appv1.App) []string {
	switch r := app.Spec.Rollout; {
	case r == nil:
		return nil
	case r.BlueGreen != nil:
		return blueGreenStages
	case r.Canary != nil:
		steps := make([]string, 0, len(r.Canary.Steps))
		for _, s := range r.Canary.Steps {
			steps = append(steps, s.String())
		}
		return steps
	}
	return nil
}

// detailView is an App's page.
type detailView struct {
	Namespace, Name string
	Ready           bool
	Readiness       string
	Row             rowView
	Rollout         *rolloutView
	Actions         []actionView
	Pods            []podView
	PodsNote        string
	Analysis        []tableView
	Events          []eventView
	EventsNote      string
	Revisions       []revisionView
	RevisionsNote   string
}

// rolloutView is the rollout section of an App's page.
type rolloutView struct {
	Progress               *progressView
	Message, Abort         string
	PausedByRequest        bool
	Steps                  []stepView
	Stable, Canary         string
	StableNote, CanaryNote string
	// StableLabel and CanaryLabel name the two lines: Stable and Canary, or a blue-green
	// rollout's Active and Preview (Previous and Active once switched).
	StableLabel, CanaryLabel string
}

// stepView is a step of the rollout: its words and whether it is done, current or to do.
type stepView struct {
	Number int
	Text   string
	State  string
}

// actionView is a button of an App's page: the action it posts, whether it applies now
// and what it will do (the confirmation's question) or why not.
type actionView struct {
	Kind, Label string
	Enabled     bool
	Confirm     string
	Why         string
}

// podView is a pod's row: its track, state and the problem that keeps it from being
// ready (podhealth, as status shows it).
type podView struct {
	Track, Name, Phase, Ready, Age, Problem string
	Restarts                                int32
}

// eventView is an Event's row, as status shows it.
type eventView struct {
	Type, Reason, Age, From, Message string
}

// revisionView is a revision's row, with its rollback button.
type revisionView struct {
	Number                  int64
	Current                 bool
	Age, Image, ChangeCause string
	Confirm                 string
}

// tableView is a generic table: the analysis results of a rollout, as the status has
// them.
type tableView struct {
	Title   string
	Columns []string
	Rows    [][]string
}

// rolloutActions are the buttons of the rollout requests, in order, with the question
// their confirmation asks (%s: the App).
var rolloutActions = []struct {
	action   appv1.RolloutAction
	label    string
	question string
}{
	{appv1.RolloutActionPromote, "Promote step", "End the current step of the rollout of App %s?"},
	{appv1.RolloutActionPromoteFull, "Promote full", "Promote the rollout of App %s, skipping its remaining steps?"},
	{appv1.RolloutActionAbort, "Abort", "Abort the rollout of App %s?"},
	{appv1.RolloutActionPause, "Pause", "Pause the rollout of App %s?"},
	{appv1.RolloutActionResume, "Resume", "Resume the rollout of App %s?"},
}

// newDetailView returns the page of app, from what the cache holds, at now.
func newDetailView(d *dashCache, app *cachedApp, now time.Time) detailView {
	v := detailView{Namespace: app.Namespace, Name: app.Name, Row: newRowView(&app.App)}
	v.Ready, v.Readiness = readiness(&app.App)
	if app.DecodeError != "" {
		v.Readiness = app.DecodeError
	}
	id := app.Namespace + "/" + app.Name
	for _, a := range rolloutActions {
		view := actionView{Kind: string(a.action), Label: a.label}
		if effect, err := requestEffect(&app.App, a.action); err != nil {
			view.Why = err.Error()
		} else {
			view.Enabled = true
			view.Confirm = fmt.Sprintf(a.question, id) + " " + capitalize(effect) + "."
		}
		if app.Spec.Rollout != nil {
			v.Actions = append(v.Actions, view)
		}
	}
	restart := actionView{Kind: ActionRestart, Label: "Restart"}
	if app.Spec.DeploymentTemplate == nil {
		restart.Why = fmt.Sprintf("App %s has no Deployment to restart", id)
	} else {
		restart.Enabled = true
		restart.Confirm = restartQuestion(&app.App)
	}
	v.Actions = append(v.Actions, restart)

	v.Rollout = newRolloutView(d, &app.App)
	v.Analysis = app.Analysis
	if app.Spec.DeploymentTemplate != nil {
		if msg := d.err(podResource.Resource); msg != "" {
			v.PodsNote = "cannot read them: " + msg
		}
		for _, pod := range d.appPodsOf(&app.App) {
			ready, total := podhealth.ReadyContainers(&pod)
			p := podView{
				Track: podTrack(&pod), Name: pod.Name, Phase: string(pod.Status.Phase), Ready: fmt.Sprintf("%d/%d", ready, total),
				Restarts: podhealth.Restarts(&pod), Age: age(pod.CreationTimestamp, now), Problem: noValue,
			}
			if pod.DeletionTimestamp != nil {
				p.Phase = "Terminating"
			}
			if problem, _ := podhealth.Inspect(&pod, now); problem != nil {
				p.Problem = problem.Reason + ": " + problem.Message
			}
			v.Pods = append(v.Pods, p)
		}
	}
	if msg := d.err(eventResource.Resource); msg != "" {
		v.EventsNote = "cannot read them: " + msg
	}
	events := d.appEventsOf(&app.App)
	for i := len(events) - 1; i >= 0; i-- { // the latest first
		e := &events[i]
		v.Events = append(v.Events, eventView{Type: e.Type, Reason: e.Reason, Age: eventAge(e, now), From: eventSource(e), Message: e.Message})
	}
	h, err := d.historyOfApp(&app.App)
	switch {
	case d.err(revisionResource) != "":
		v.RevisionsNote = "cannot read them: " + d.err(revisionResource)
	case err != nil:
		v.RevisionsNote = err.Error()
	default:
		for i := len(h.Revisions) - 1; i >= 0; i-- { // the newest first
			r := &h.Revisions[i]
			image := noValue
			if t := r.Spec.DeploymentTemplate; t != nil {
				image = t.Image
			}
			v.Revisions = append(v.Revisions, revisionView{
				Number: r.Number, Current: r.Current, Age: age(metav1.NewTime(r.Created), now), Image: image, ChangeCause: r.ChangeCause,
				Confirm: fmt.Sprintf("Roll App %s back to revision %d (image %s)? Its spec becomes that revision's.", id, r.Number, image),
			})
		}
	}
	return v
}

// restartQuestion is the confirmation of the restart button of app, which has a
// Deployment: how the new pods come.
func restartQuestion(app *appv1.App) string {
	q := fmt.Sprintf("Restart the pods of App %s/%s?", app.Namespace, app.Name)
	switch r := app.Spec.Rollout; {
	case r != nil && r.BlueGreen != nil:
		q += " They roll out through the blue-green stages: a preview, then the switch."
	case r != nil:
		q += " They roll out through the canary steps."
	}
	return q
}

// newRolloutView returns the rollout section of app, nil without a rollout strategy.
func newRolloutView(d *dashCache, app *appv1.App) *rolloutView {
	p := newProgressView(app)
	if p == nil {
		return nil
	}
	v := &rolloutView{Progress: p, StableLabel: "Stable", CanaryLabel: "Canary"}
	for i, s := range rolloutSteps(app) {
		state := "todo"
		if i < len(p.Segments) {
			state = p.Segments[i]
		}
		v.Steps = append(v.Steps, stepView{Number: i + 1, Text: s, State: state})
	}
	r := app.Status.Rollout
	if app.Spec.Rollout.BlueGreen != nil {
		v.StableLabel, v.CanaryLabel = "Active", "Preview"
		if r != nil && switched(r) {
			v.StableLabel, v.CanaryLabel = "Previous", "Active"
		}
	}
	if r == nil {
		return v
	}
	v.Message, v.PausedByRequest = r.Message, r.PausedByRequest
	if r.Phase == appv1.RolloutAborted {
		v.Abort = r.AbortReason + ": " + r.AbortMessage
	}
	if t := app.Spec.DeploymentTemplate; t != nil {
		v.Stable = versionLine(r.Stable, d.deployment(app, t.Name), "not found")
		if r.Canary != nil {
			v.Canary = versionLine(r.Canary, d.deployment(app, t.Name+appv1.CanarySuffix), "not found")
			if svc := app.Spec.ServiceTemplate; svc != nil && v.CanaryLabel == "Preview" {
				v.Canary += previewWhere(app, r)
			}
		}
	}
	return v
}

// analysisTables returns, as generic tables, the lists of objects in the App's
// status.rollout: the per-check analysis results the controller reports (a field this
// plugin's API types may not know yet), one table per list, a column per scalar field.
func analysisTables(u *unstructured.Unstructured) []tableView {
	if u == nil {
		return nil
	}
	rollout, _, _ := unstructured.NestedMap(u.Object, "status", "rollout")
	keys := make([]string, 0, len(rollout))
	for k := range rollout {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var tables []tableView
	for _, k := range keys {
		list, ok := rollout[k].([]any)
		if !ok || len(list) == 0 {
			continue
		}
		t := tableView{Title: k}
		index := map[string]int{}
		var objs []map[string]any
		for _, item := range list {
			obj, ok := item.(map[string]any)
			if !ok {
				continue
			}
			objs = append(objs, obj)
			fieldNames := make([]string, 0, len(obj))
			for f := range obj {
				fieldNames = append(fieldNames, f)
			}
			sort.Strings(fieldNames)
			for _, f := range fieldNames {
				if _, seen := index[f]; !seen {
					index[f] = len(t.Columns)
					t.Columns = append(t.Columns, f)
				}
			}
		}
		if len(objs) == 0 {
			continue
		}
		for _, obj := range objs {
			row := make([]string, len(t.Columns))
			for f, val := range obj {
				row[index[f]] = cellText(val)
			}
			t.Rows = append(t.Rows, row)
		}
		tables = append(tables, t)
	}
	return tables
}

// cellText returns a value of a generic table as text: scalars as they are, the rest as
// JSON.
func cellText(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case nil:
		return ""
	case map[string]any, []any:
		data, err := json.Marshal(v)
		if err != nil {
			return fmt.Sprint(v)
		}
		return string(data)
	}
	return fmt.Sprint(v)
}

// capitalize returns s with its first letter upper case.
func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// treeView is the tree of an App's page.
type treeView struct {
	Root     *Node
	Warnings []string
	Error    string
}

package soak

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/app-controller/app-controller/internal/plugin"
	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	appclientset "github.com/app-controller/app-controller/pkg/generated/clientset/versioned"
)

// StateCheck compares what the driver made with what the cluster holds at the end:
// every list names the objects at fault, empty when all is well.
type StateCheck struct {
	// Apps is the number of live Apps the driver expects; Deleted how many it deleted.
	Apps    int `json:"apps"`
	Deleted int `json:"deleted"`
	// AppsLost are live Apps that are gone (or another object under their name),
	// AppsUnexpected Apps the driver deleted or never made.
	AppsLost       []string `json:"apps_lost"`
	AppsUnexpected []string `json:"apps_unexpected"`
	// ChildrenMissing: an App without its Deployment, Service or Ingress (controlled
	// by it, under the name of its spec); ChildrenDuplicated: more than one of a kind
	// controlled by it; Orphans: children or revisions whose controlling App is gone.
	ChildrenMissing    []string `json:"children_missing"`
	ChildrenDuplicated []string `json:"children_duplicated"`
	Orphans            []string `json:"orphans"`
	// Revisions (kubectl app history): RevisionsMissing names a spec among an App's last
	// revisionHistoryLimit distinct specs without a revision; RevisionsUnexpected a
	// revision of no such spec; RevisionsDuplicated two revisions of one spec or
	// number; RevisionsOverLimit an App with more than its limit.
	Revisions           int      `json:"revisions"`
	RevisionsMissing    []string `json:"revisions_missing"`
	RevisionsUnexpected []string `json:"revisions_unexpected"`
	RevisionsDuplicated []string `json:"revisions_duplicated"`
	RevisionsOverLimit  []string `json:"revisions_over_limit"`
	// ConfigNotRolled: a Ready App whose pod template's config hash is not the one its
	// Deployment says it saw (its pods not rolled for its ConfigMap's last change).
	ConfigNotRolled []string `json:"config_not_rolled"`
	// DecoysWritten: a foreign object the controller wrote (its field manager in the
	// object's managedFields).
	DecoysWritten []string `json:"decoys_written"`
	// NotConverged: live Apps not reporting what the driver expects at the end.
	NotConverged []string `json:"not_converged"`
	// NotAtRest: a canary App at rest at the end (its rollout promoted, rolled back or
	// aborted, and its canary's scale-down delay over) whose children are not those of
	// an App without a strategy: a canary Deployment or split Service left (an aborted
	// rollout keeps its canary Deployment, at 0 replicas: that alone is allowed), a
	// stable Deployment not at the App's replicas.
	NotAtRest []string `json:"not_at_rest"`
	// Canaries is the number of canary Apps checked at rest; RouteSplitCanaries those
	// of them whose traffic an HTTPRoute splits, whose route is checked too
	// (checkRoutes).
	Canaries           int `json:"canaries"`
	RouteSplitCanaries int `json:"route_split_canaries"`
}

// checkState lists the objects of the soak's namespaces and compares them with w.
func checkState(ctx context.Context, w *world, kube kubernetes.Interface, apps appclientset.Interface, namespaces []string) (*StateCheck, error) {
	s := &StateCheck{}
	w.mu.Lock()
	records := map[string]*appRecord{}
	live := map[types.UID]*appRecord{}
	for k, r := range w.apps {
		records[k] = r
		if r.deleted.IsZero() {
			s.Apps++
			live[r.uid] = r
			if !r.convergedNow() {
				s.NotConverged = append(s.NotConverged, k+" "+describeState(r))
			}
		} else {
			s.Deleted++
		}
	}
	w.mu.Unlock()

	controlled := map[types.UID]map[string][]string{} // App UID -> kind -> names
	replicas := map[string]int32{}                    // namespace/name of each Deployment -> spec.replicas
	for _, ns := range namespaces {
		if err := s.checkApps(ctx, apps, ns, records); err != nil {
			return nil, err
		}
		objects, deployments, err := listChildren(ctx, kube, ns)
		if err != nil {
			return nil, err
		}
		s.checkOwners(ns, objects, live, controlled)
		s.checkConfigRolled(w, deployments, live)
		for _, d := range deployments {
			replicas[key(d.Namespace, d.Name)] = ptr.Deref(d.Spec.Replicas, 1)
		}
	}

	pc := plugin.Clients{Apps: apps, Kube: kube}
	for uid, r := range live {
		w.mu.Lock()
		spec := r.latest.Spec.DeepCopy()
		rollout := r.latest.Status.Rollout.DeepCopy()
		conflict := r.conflict
		expected := r.expectedRevisions(w.historyLimit, rollout)
		w.mu.Unlock()
		if spec.Rollout != nil {
			s.checkAtRest(r, spec, rollout, controlled[uid], replicas)
		}
		s.checkChildren(r, spec, conflict, controlled[uid])
		if err := s.checkRevisions(ctx, pc, r, expected); err != nil {
			return nil, err
		}
	}
	for _, l := range [][]string{s.AppsLost, s.AppsUnexpected, s.ChildrenMissing, s.ChildrenDuplicated, s.Orphans, s.RevisionsMissing,
		s.RevisionsUnexpected, s.RevisionsDuplicated, s.RevisionsOverLimit, s.ConfigNotRolled, s.DecoysWritten, s.NotConverged, s.NotAtRest} {
		sort.Strings(l)
	}
	return s, nil
}

// checkApps compares the Apps of namespace ns with the driver's records: every live one
// there with its UID, no other.
func (s *StateCheck) checkApps(ctx context.Context, apps appclientset.Interface, ns string, records map[string]*appRecord) error {
	list, err := apps.AppcontrollerV1().Apps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing the Apps of %s: %w", ns, err)
	}
	found := map[string]types.UID{}
	for _, a := range list.Items {
		found[key(a.Namespace, a.Name)] = a.UID
		r := records[key(a.Namespace, a.Name)]
		if r == nil || !r.deleted.IsZero() || r.uid != a.UID {
			s.AppsUnexpected = append(s.AppsUnexpected, key(a.Namespace, a.Name))
		}
	}
	for k, r := range records {
		if r.namespace == ns && r.deleted.IsZero() && found[k] != r.uid {
			s.AppsLost = append(s.AppsLost, k)
		}
	}
	return nil
}

// childObject is an object of a kind an App controls, with its kind.
type childObject struct {
	kind string
	metav1.Object
}

// listChildren lists the objects of namespace ns of the kinds an App controls, and its
// Deployments apart.
func listChildren(ctx context.Context, kube kubernetes.Interface, ns string) ([]childObject, []appsv1.Deployment, error) {
	var objects []childObject
	deployments, err := kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("listing the Deployments of %s: %w", ns, err)
	}
	for i := range deployments.Items {
		objects = append(objects, childObject{kindDeployment, &deployments.Items[i]})
	}
	services, err := kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("listing the Services of %s: %w", ns, err)
	}
	for i := range services.Items {
		objects = append(objects, childObject{kindService, &services.Items[i]})
	}
	ingresses, err := kube.NetworkingV1().Ingresses(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("listing the Ingresses of %s: %w", ns, err)
	}
	for i := range ingresses.Items {
		objects = append(objects, childObject{"Ingress", &ingresses.Items[i]})
	}
	hpas, err := kube.AutoscalingV2().HorizontalPodAutoscalers(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("listing the HorizontalPodAutoscalers of %s: %w", ns, err)
	}
	for i := range hpas.Items {
		objects = append(objects, childObject{"HorizontalPodAutoscaler", &hpas.Items[i]})
	}
	revisions, err := kube.AppsV1().ControllerRevisions(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("listing the ControllerRevisions of %s: %w", ns, err)
	}
	for i := range revisions.Items {
		objects = append(objects, childObject{"ControllerRevision", &revisions.Items[i]})
	}
	return objects, deployments.Items, nil
}

// checkOwners records in controlled the objects each live App controls, counts those
// controlled by an App that is gone, and the decoys the controller's field manager
// wrote.
func (s *StateCheck) checkOwners(ns string, objects []childObject, live map[types.UID]*appRecord, controlled map[types.UID]map[string][]string) {
	for _, o := range objects {
		kind := o.kind
		ref := metav1.GetControllerOfNoCopy(o)
		if ref == nil || ref.Kind != "App" {
			if o.GetName() == decoyName || o.GetName() == decoyName+"-svc" {
				for _, mf := range o.GetManagedFields() {
					if mf.Manager == appv1.FieldManager {
						s.DecoysWritten = append(s.DecoysWritten, fmt.Sprintf("%s %s/%s", kind, ns, o.GetName()))
					}
				}
			}
			continue
		}
		if live[ref.UID] == nil {
			s.Orphans = append(s.Orphans, fmt.Sprintf("%s %s/%s of App %s (%s)", kind, ns, o.GetName(), ref.Name, ref.UID))
			continue
		}
		if controlled[ref.UID] == nil {
			controlled[ref.UID] = map[string][]string{}
		}
		controlled[ref.UID][kind] = append(controlled[ref.UID][kind], o.GetName())
	}
}

// checkConfigRolled counts the Deployments of Ready Apps whose pods were not rolled for
// the config hash the Deployment saw.
func (s *StateCheck) checkConfigRolled(w *world, deployments []appsv1.Deployment, live map[types.UID]*appRecord) {
	for i := range deployments {
		d := &deployments[i]
		ref := metav1.GetControllerOfNoCopy(d)
		if ref == nil || live[ref.UID] == nil {
			continue
		}
		r := live[ref.UID]
		w.mu.Lock()
		ready := r.latest != nil && (r.lastGen().expect == "" || r.lastGen().expect == expectReadyOrInactive)
		w.mu.Unlock()
		if ready && d.Annotations[appv1.ConfigHashAnnotation] != d.Spec.Template.Annotations[appv1.ConfigHashAnnotation] {
			s.ConfigNotRolled = append(s.ConfigNotRolled, fmt.Sprintf("%s: Deployment %s saw %q, its pods were rolled for %q", r.key(), d.Name,
				d.Annotations[appv1.ConfigHashAnnotation], d.Spec.Template.Annotations[appv1.ConfigHashAnnotation]))
		}
	}
}

// checkAtRest checks the children of canary App r at the end (controlled: kind ->
// names, which it leaves with those of an App without a strategy; replicas: each
// Deployment's): at rest, a canary's children are an App's without a strategy, but for
// an aborted rollout's canary Deployment at 0 replicas.
func (s *StateCheck) checkAtRest(r *appRecord, spec *appv1.AppSpec, rollout *appv1.RolloutStatus, controlled map[string][]string, replicas map[string]int32) {
	s.Canaries++
	if spec.DeploymentTemplate == nil || rollout == nil {
		s.NotAtRest = append(s.NotAtRest, fmt.Sprintf("%s: no status.rollout", r.key()))
		return
	}
	phase := rollout.Phase
	if phase != appv1.RolloutHealthy && phase != appv1.RolloutAborted {
		s.NotAtRest = append(s.NotAtRest, fmt.Sprintf("%s: rollout %s at the end", r.key(), describeRollout(rollout)))
		return
	}
	stable := spec.DeploymentTemplate.Name
	canary := stable + appv1.CanarySuffix
	for _, kind := range []string{kindDeployment, kindService} {
		var kept []string
		for _, name := range controlled[kind] {
			switch {
			case kind == kindDeployment && name == canary && phase == appv1.RolloutAborted && replicas[key(r.namespace, name)] == 0:
			case kind == kindService && phase == appv1.RolloutAborted && routeSplit(spec) && spec.ServiceTemplate != nil &&
				(name == spec.ServiceTemplate.Name+appv1.CanarySuffix || name == spec.ServiceTemplate.Name+appv1.StableSuffix):
				// An aborted rollout's HTTPRoute keeps its split at 100/0, and with it
				// the split Services, until the rollout ends (docs/progressive-delivery.md).
			case kind == kindDeployment && name == canary, kind == kindService && spec.ServiceTemplate != nil &&
				(name == spec.ServiceTemplate.Name+appv1.CanarySuffix || name == spec.ServiceTemplate.Name+appv1.StableSuffix):
				s.NotAtRest = append(s.NotAtRest, fmt.Sprintf("%s: %s %s left, rollout %s", r.key(), kind, name, describeRollout(rollout)))
			default:
				kept = append(kept, name)
			}
		}
		controlled[kind] = kept
	}
	if want := ptr.Deref(spec.DeploymentTemplate.Replicas, 1); spec.Autoscaling == nil && replicas[key(r.namespace, stable)] != want {
		s.NotAtRest = append(s.NotAtRest, fmt.Sprintf("%s: stable Deployment %s at %d replicas, want %d; rollout %s", r.key(), stable,
			replicas[key(r.namespace, stable)], want, describeRollout(rollout)))
	}
}

// checkChildren compares the children App r controls (kind -> names) with those its
// spec asks for.
func (s *StateCheck) checkChildren(r *appRecord, spec *appv1.AppSpec, conflict bool, controlled map[string][]string) {
	want := map[string]string{}
	if spec.DeploymentTemplate != nil && !conflict {
		want[kindDeployment] = spec.DeploymentTemplate.Name
	}
	if spec.ServiceTemplate != nil {
		want[kindService] = spec.ServiceTemplate.Name
	}
	if spec.Route != nil && len(spec.Route.ParentRefs) == 0 {
		want["Ingress"] = r.name
	}
	if spec.Autoscaling != nil && spec.DeploymentTemplate != nil && !conflict {
		want["HorizontalPodAutoscaler"] = spec.DeploymentTemplate.Name
	}
	for _, kind := range []string{kindDeployment, kindService, "Ingress", "HorizontalPodAutoscaler"} {
		names := controlled[kind]
		switch {
		case want[kind] == "" && len(names) > 0:
			s.ChildrenDuplicated = append(s.ChildrenDuplicated, fmt.Sprintf("%s: %s %v, none wanted", r.key(), kind, names))
		case want[kind] != "" && len(names) == 0:
			s.ChildrenMissing = append(s.ChildrenMissing, fmt.Sprintf("%s: no %s %s", r.key(), kind, want[kind]))
		case len(names) > 1 || len(names) == 1 && names[0] != want[kind]:
			s.ChildrenDuplicated = append(s.ChildrenDuplicated, fmt.Sprintf("%s: %s %v, want one named %s", r.key(), kind, names, want[kind]))
		}
	}
}

// checkRevisions compares App r's revisions (kubectl app history) with its last
// distinct specs, expected.
func (s *StateCheck) checkRevisions(ctx context.Context, pc plugin.Clients, r *appRecord, expected []appv1.AppSpec) error {
	h, err := plugin.GetHistory(ctx, pc, r.namespace, r.name)
	if err != nil {
		return fmt.Errorf("reading the history of App %s: %w", r.key(), err)
	}
	s.Revisions += len(h.Revisions)
	// The limit, and the older versions a rollout keeps beyond it (expected holds them).
	if len(h.Revisions) > max(historyLimit, len(expected)) {
		s.RevisionsOverLimit = append(s.RevisionsOverLimit, fmt.Sprintf("%s: %d revisions, limit %d", r.key(), len(h.Revisions), historyLimit))
	}
	numbers := map[int64]bool{}
	matched := make([]bool, len(expected))
	for i, rev := range h.Revisions {
		if numbers[rev.Number] {
			s.RevisionsDuplicated = append(s.RevisionsDuplicated, fmt.Sprintf("%s: two revisions numbered %d", r.key(), rev.Number))
		}
		numbers[rev.Number] = true
		for _, other := range h.Revisions[:i] {
			if equality.Semantic.DeepEqual(other.Spec, rev.Spec) {
				s.RevisionsDuplicated = append(s.RevisionsDuplicated, fmt.Sprintf("%s: revisions %d and %d hold the same spec", r.key(), other.Number, rev.Number))
			}
		}
		found := false
		for j, spec := range expected {
			if equality.Semantic.DeepEqual(spec, rev.Spec) {
				matched[j], found = true, true
			}
		}
		if !found {
			s.RevisionsUnexpected = append(s.RevisionsUnexpected, fmt.Sprintf("%s: revision %d (%s) holds none of its last %d specs, nor a version its rollout runs", r.key(), rev.Number, rev.Name, historyLimit))
		}
	}
	for j, ok := range matched {
		if !ok {
			s.RevisionsMissing = append(s.RevisionsMissing, fmt.Sprintf("%s: no revision of its spec #%d of the last %d", r.key(), len(expected)-j, len(expected)))
		}
	}
	return nil
}

// describeState says what an App reports and what the driver expects of it.
func describeState(r *appRecord) string {
	if r.latest == nil {
		return "(never seen)"
	}
	g := r.lastGen()
	state := "no state"
	if n := len(r.states); n > 0 {
		st := r.states[n-1]
		state = fmt.Sprintf("Ready=%s/%s at generation %d (status of generation %d)", st.ready, st.reason, st.generation, r.latest.Status.ObservedGeneration)
	}
	want := "Ready=True"
	if g.expect == expectReadyOrInactive {
		want = "Ready=True or Ready=False/" + appv1.ReasonAutoscalerInactive
	} else if g.expect != "" {
		want = "Ready=False/" + g.expect
	}
	return fmt.Sprintf("says %s; want %s at generation %d", state, want, g.generation)
}

// describeStates says what an App reported in a window (its states, from the one
// before the window on): each change's time, Ready condition and generation, the first
// and the last few of them when there are many.
func describeStates(states []stateRecord) string {
	const ends = 3
	var parts []string
	for i, s := range states {
		if len(states) > 2*ends && i == ends {
			parts = append(parts, fmt.Sprintf("(%d more)", len(states)-2*ends))
		}
		if len(states) > 2*ends && i >= ends && i < len(states)-ends {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s Ready=%s/%s gen %d", s.at.Format(time.TimeOnly), s.ready, s.reason, s.generation))
	}
	if len(parts) == 0 {
		return "no state"
	}
	return strings.Join(parts, ", ")
}

// Convergence are the times Apps took to report what the driver expects, after a
// change of their spec (from the change, or from the end of a fault it overlapped).
type Convergence struct {
	Changes   int      `json:"changes"`
	P50S      float64  `json:"p50_s"`
	P99S      float64  `json:"p99_s"`
	MaxS      float64  `json:"max_s"`
	MaxApp    string   `json:"max_app,omitempty"`
	BoundS    float64  `json:"bound_s"`
	OverBound []string `json:"over_bound"`
}

// lastOverlapping returns when the Apps are free of faults after t: the end of the last
// of the chain of faults that each start within bound of t or of the previous one's end
// and end after it; t itself if none does.
func lastOverlapping(faults []FaultRecord, t time.Time, bound time.Duration) time.Time {
	from := t
	for changed := true; changed; {
		changed = false
		for _, f := range faults {
			if f.Start.Before(from.Add(bound)) && f.End.After(from) {
				from, changed = f.End, true
			}
		}
	}
	return from
}

// convergence measures each spec change of the churn (from start on) and, for each
// fault, how long after its end every App that lived then took (filling in the faults'
// records).
func (w *world) convergence(faults []FaultRecord, bound time.Duration, start, end time.Time) Convergence {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := Convergence{BoundS: bound.Seconds()}
	var times []float64
	for _, op := range w.ops {
		r := w.apps[op.app]
		if r == nil || op.at.Before(start) || !r.deleted.IsZero() && r.deleted.Before(op.at.Add(bound)) {
			continue
		}
		if !op.newGeneration {
			continue // no new generation: nothing to converge to
		}
		from := lastOverlapping(faults, op.at, bound)
		at, ok := r.convergedAt(op.generation, op.at, end)
		if !ok {
			c.OverBound = append(c.OverBound, fmt.Sprintf("%s %s at %s: never converged; %s", op.kind, op.app, op.at.Format(time.TimeOnly), describeState(r)))
			continue
		}
		d := max(0, at.Sub(from).Seconds())
		times = append(times, d)
		if d > c.MaxS {
			c.MaxS, c.MaxApp = d, fmt.Sprintf("%s %s at %s", op.kind, op.app, op.at.Format(time.TimeOnly))
		}
		if d > bound.Seconds() {
			c.OverBound = append(c.OverBound, fmt.Sprintf("%s %s at %s: converged after %.1fs", op.kind, op.app, op.at.Format(time.TimeOnly), d))
		}
	}
	sort.Float64s(times)
	c.Changes = len(times)
	if len(times) > 0 {
		c.P50S = round2(times[len(times)/2])
		c.P99S = round2(times[min(len(times)-1, len(times)*99/100)])
	}
	c.MaxS = round2(c.MaxS)
	for i := range faults {
		f := &faults[i]
		// Another fault that starts within the bound (an API server restart that takes
		// longer than the faults' interval) holds the Apps back as long as it lasts: the
		// bound counts from the end of the last such fault.
		from := lastOverlapping(faults, f.End, bound)
		worst := 0.0
		for _, r := range w.apps {
			if len(r.gens) == 0 || r.created.After(f.End) || !r.deleted.IsZero() && r.deleted.Before(f.End.Add(bound)) {
				continue
			}
			gen := r.gens[0].generation
			for _, g := range r.gens {
				if !g.at.After(f.End) {
					gen = g.generation
				}
			}
			at, ok := r.convergedAt(gen, f.End, from.Add(bound))
			if !ok {
				f.NotConverged = append(f.NotConverged, r.key()+" "+describeState(r)+"; in the bound: "+describeStates(r.statesIn(f.End, from.Add(bound))))
				continue
			}
			worst = max(worst, at.Sub(from).Seconds())
		}
		sort.Strings(f.NotConverged)
		f.ConvergedAfterS = round2(worst)
	}
	return c
}

package soak

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/test/harness"
)

// The controller's writes, from the API server's audit log: per second over the run,
// per change of the churn, and each checked against what the controller may write.

// write is one write request of the controller, as the audit log recorded it.
type write struct {
	at              time.Time
	verb, resource  string
	namespace, name string
	code            int
	user            string
	// owner is the App of the run the object belongs to, classification what the
	// write is (classify), ownerDeleted when the owner was deleted (zero if it was not).
	owner, classification string
	ownerDeleted          time.Time
	// recorded is when the recorder stamped an Event's repeat that a patch folds into
	// it (the patch's lastTimestamp; zero: not an Event's patch, or no body logged).
	recorded time.Time
}

// readWrites reads the controller's writes (users) from the audit log at path, when
// each App was deleted (by whoever: the driver), and the writes logged with their
// bodies (AuditBodies; the autoscalers' writes of a scale).
func readWrites(path string, users []string) ([]write, map[string]time.Time, *bodies, error) {
	var out []write
	deleted := map[string]time.Time{}
	b := &bodies{}
	err := harness.NewAuditLog(path).Read(func(ev harness.AuditEvent) error {
		user := ev.User.Username
		if imp := ev.Impersonated(); imp != "" {
			user = imp
		}
		if !ev.IsWrite() || ev.Stage != "ResponseComplete" || ev.ObjectRef == nil {
			return nil
		}
		if ev.Verb == "delete" && ev.Resource() == resourceApps && ev.ObjectRef.APIGroup == appv1.GroupVersion.Group && ev.Code() < 300 {
			deleted[key(ev.ObjectRef.Namespace, ev.ObjectRef.Name)] = ev.StageTimestamp
		}
		if err := b.add(ev, user, slices.Contains(users, user)); err != nil {
			return err
		}
		if !slices.Contains(users, user) {
			return nil
		}
		wr := write{at: ev.StageTimestamp, verb: ev.Verb, resource: ev.Resource(),
			namespace: ev.ObjectRef.Namespace, name: ev.ObjectRef.Name, code: ev.Code(), user: user}
		if wr.resource == resourceEvents && wr.verb == verbPatch && len(ev.RequestObject) > 0 {
			var patch struct {
				LastTimestamp metav1.Time `json:"lastTimestamp"`
			}
			if err := json.Unmarshal(ev.RequestObject, &patch); err == nil {
				wr.recorded = patch.LastTimestamp.Time
			}
		}
		out = append(out, wr)
		return nil
	})
	return out, deleted, b, err
}

// Names of kinds, resources and groups the checks compare.
const (
	kindDeployment      = "Deployment"
	kindService         = "Service"
	groupApps           = "apps"
	resourceApps        = "apps" // the App's, in its own group
	resourceAppStatus   = "apps/status"
	resourceDeployments = "deployments"
	resourceEvents      = "events"
	verbPatch           = "patch"
)

// childResources are the kinds of an App's children (and its revisions).
var childResources = []string{resourceDeployments, "services", "ingresses", "httproutes", "poddisruptionbudgets", "controllerrevisions", "horizontalpodautoscalers"}

// ownerOf returns the App of the run that the object namespace/name belongs to by its
// name (the App itself, NAME-..., or an Event NAME.<id>), "" if none.
func (w *world) ownerOf(namespace, name string) string {
	if r := w.apps[key(namespace, name)]; r != nil {
		return r.key()
	}
	for i := range name {
		if name[i] == '-' || name[i] == '.' {
			if r := w.apps[key(namespace, name[:i])]; r != nil {
				return r.key()
			}
		}
	}
	return ""
}

// The classifications of a write that break an invariant (classify).
const (
	writeForeign     = "foreign"
	writeAfterDelete = "after-delete"
)

// classify says what each write is: "lease", "event", "auth", "status" or "child"
// (allowed); "foreign": a write to an object no App of the run controls; "after-delete":
// a write that went through to an App's object (a child, its status, an Event about it)
// after the App was deleted (deleted: when, from the audit log; the write's time is
// madeAt's), made from a stale cache.
func (w *world) classify(writes []write, soakNamespaces []string, deleted map[string]time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range writes {
		wr := &writes[i]
		wr.owner = w.ownerOf(wr.namespace, wr.name)
		inSoak := slices.Contains(soakNamespaces, wr.namespace)
		switch {
		case wr.resource == "leases" && wr.namespace == leaseNamespace:
			wr.classification = "lease"
		case wr.resource == resourceEvents && (inSoak || wr.namespace == leaseNamespace):
			wr.classification = "event"
		case wr.resource == "tokenreviews" || wr.resource == "subjectaccessreviews":
			wr.classification = "auth"
		case wr.resource == resourceAppStatus && wr.owner != "":
			wr.classification = "status"
		case inSoak && slices.Contains(childResources, wr.resource) && wr.owner != "":
			wr.classification = "child"
		default:
			wr.classification = writeForeign
		}
		if at, ok := deleted[wr.owner]; ok && wr.owner != "" && wr.classification != writeForeign {
			wr.ownerDeleted = at
			if wr.madeAt().After(at) && wr.code < 300 {
				wr.classification = writeAfterDelete
			}
		}
	}
}

// madeAt is when the controller made the write: for an Event's creation, the time the
// recorder stamped into its name (client-go names an Event REGARDING.<UnixNano in hex>
// when it is recorded, and its broadcaster posts it later, seconds later on a loaded
// machine or while the API server restarts); for every other write, the audit log's.
// An Event recorded while its App existed is not a write made from a stale cache. A
// patch of an Event (a repeat folded into it) was made when the repeat was recorded: its
// lastTimestamp, logged with its body (AuditBodies).
func (wr *write) madeAt() time.Time {
	if wr.resource == resourceEvents && wr.verb == verbPatch && !wr.recorded.IsZero() && wr.recorded.Before(wr.at) {
		return wr.recorded
	}
	if wr.resource != resourceEvents || wr.verb != "create" {
		return wr.at
	}
	i := strings.LastIndexByte(wr.name, '.')
	if i < 0 {
		return wr.at
	}
	ns, err := strconv.ParseInt(wr.name[i+1:], 16, 64)
	if err != nil || ns <= 0 {
		return wr.at
	}
	if t := time.Unix(0, ns); t.Before(wr.at) {
		return t
	}
	return wr.at
}

// rateBin is the controller's writes per second in a bin of time.
type rateBin struct {
	T float64 `json:"t"`
	V float64 `json:"writes_per_s"`
}

// writeRate bins the writes of [start, end) into bins of width.
func writeRate(writes []write, start, end time.Time, width time.Duration) []rateBin {
	n := int(end.Sub(start)/width) + 1
	counts := make([]int, n)
	for _, wr := range writes {
		if i := int(wr.at.Sub(start) / width); i >= 0 && i < n {
			counts[i]++
		}
	}
	out := make([]rateBin, n)
	for i, c := range counts {
		out[i] = rateBin{T: (time.Duration(i) * width).Seconds(), V: float64(c) / width.Seconds()}
	}
	return out
}

// ChangeWrites is what one kind of change cost in writes, over the changes made away
// from the faults.
type ChangeWrites struct {
	Kind    string  `json:"kind"`
	Changes int     `json:"changes"`
	Mean    float64 `json:"mean"`
	Median  float64 `json:"median"`
	// FirstThird and LastThird are the means of the changes of the first and the last
	// third of the run.
	FirstThird  float64 `json:"first_third"`
	LastThird   float64 `json:"last_third"`
	FirstThirdN int     `json:"first_third_n"`
	LastThirdN  int     `json:"last_third_n"`
	// Each change's writes are compared with the range the exact-write tests pin for it
	// (expectedWrites; Pinned names the tests): ExpectedMin and ExpectedMax are the
	// medians of the ranges, MedianBeyond the median of each change's writes beyond its
	// own range (0 when within it), Outliers some changes out of their range.
	ExpectedMin  float64  `json:"expected_min"`
	ExpectedMax  float64  `json:"expected_max"`
	Pinned       string   `json:"pinned_by,omitempty"`
	MedianBeyond float64  `json:"median_beyond_expected"`
	Outliers     []string `json:"outliers,omitempty"`
	// ByKind is the mean of each kind of write per change ("patch deployments").
	ByKind map[string]float64 `json:"by_kind"`
	Failed int                `json:"failed_writes"`
	OK     bool               `json:"ok"`
}

// expectedWrites is what the exact-write tests pin for op (pkg/controller/app:
// writes_test.go, revisions_test.go, config_test.go; test/integration/app for the
// shard move): a spec change costs each child it changes (the Deployment for a change of
// deploymentTemplate, the Service for serviceTemplate, the Ingress for the route), the
// Synced Event when a child changed, one revision (made, or renumbered by a rollback),
// the oldest revision's deletion when a new one overflows the history, and the status
// once when the rollout ends within the coalescing window, twice (Progressing, then
// Ready) when it does not. ok is false for the operations they do not pin: those that
// break or fix an App's pods.
func expectedWrites(op opRecord) (lo, hi int, pinnedBy string, ok bool) {
	switch op.kind {
	case opShardMove:
		return 0, 0, "TestAppSelectorShards: the shard taking an App over writes nothing", true
	case opDelete:
		return 0, 0, "the garbage collector deletes the children", true
	case opConfigMap:
		return 4, 4, "TestWritesConfigRollout: the Deployment, the Event, the status twice", true
	}
	if !op.newGeneration || op.spec == nil || slices.Contains(unpinnedOps, op.kind) {
		// A pod that keeps failing changes what the status says as it fails (its
		// restarts, its back-off): the tests pin changes that roll out. A canary's
		// rollout costs what its steps, requests and waits cost (make bench's canary
		// scenario pins its phases at 5 Apps), an autoscaled App what its autoscaler
		// does: reported, and checked not to grow.
		return 0, 0, "", false
	}
	prev := op.prev
	if prev == nil {
		prev = &appv1.AppSpec{}
	}
	children := 0
	if !equality.Semantic.DeepEqual(prev.DeploymentTemplate, op.spec.DeploymentTemplate) {
		children++
	}
	if !equality.Semantic.DeepEqual(prev.ServiceTemplate, op.spec.ServiceTemplate) {
		children++
	}
	if !equality.Semantic.DeepEqual(prev.Route, op.spec.Route) {
		children++
	}
	lo = children + 2 // the revision and the status
	if children > 0 {
		lo++ // the Synced Event
	}
	if op.newRevision && op.historyFull {
		lo++ // the oldest revision deleted
	}
	return lo, lo + 1, "TestWritesCreateToReady, TestWritesSteadyState, TestWritesSlowRollout, TestRevisions, TestRevisionHistoryLimit", true
}

// changeCost is what one change of an App cost: its writes, by kind, and how far they
// are from what the exact-write tests pin for it.
type changeCost struct {
	at        time.Time
	n, beyond int
	byKind    map[string]int
	failed    int
	hasPins   bool
	lo, hi    int
	by        string
	outlier   string
}

// changeWrites attributes each write of an App's objects to the App's last change
// before it, and sums them per kind of change, leaving out the changes whose window
// overlaps a fault (from its start to its end plus bound).
func (w *world) changeWrites(writes []write, faults []FaultRecord, bound time.Duration, start, end time.Time) []ChangeWrites {
	costs := w.changeCosts(writes, faults, bound, start, end)
	out := make([]ChangeWrites, 0, len(costs))
	for kind, cs := range costs {
		out = append(out, summarizeCosts(kind, cs, start, end))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Kind < out[j].Kind })
	return out
}

// changeCosts returns the cost of each change of the churn (from start) by kind of
// change, but for those whose window overlaps a fault.
func (w *world) changeCosts(writes []write, faults []FaultRecord, bound time.Duration, start, end time.Time) map[string][]changeCost {
	w.mu.Lock()
	defer w.mu.Unlock()
	byApp := map[string][]write{}
	for _, wr := range writes {
		if wr.owner != "" && wr.classification != writeForeign {
			byApp[wr.owner] = append(byApp[wr.owner], wr)
		}
	}
	opsByApp := map[string][]opRecord{}
	for _, op := range w.ops {
		opsByApp[op.app] = append(opsByApp[op.app], op)
	}
	duringFault := func(from, to time.Time) bool {
		for _, f := range faults {
			if from.Before(f.End.Add(bound)) && to.After(f.Start) {
				return true
			}
		}
		return false
	}
	costs := map[string][]changeCost{}
	for app, ops := range opsByApp {
		sort.SliceStable(ops, func(i, j int) bool { return ops[i].at.Before(ops[j].at) })
		for i, op := range ops {
			to := end
			if i+1 < len(ops) {
				to = ops[i+1].at
			}
			if op.at.Before(start) || duringFault(op.at, to) {
				continue // the setup's, or a fault's
			}
			costs[op.kind] = append(costs[op.kind], opCost(app, op, byApp[app], to))
		}
	}
	return costs
}

// opCost is the cost of op, a change of App app: its writes ws from op to the App's
// next change (to).
func opCost(app string, op opRecord, ws []write, to time.Time) changeCost {
	c := changeCost{at: op.at, byKind: map[string]int{}}
	for _, wr := range ws {
		if wr.at.Before(op.at) || !wr.at.Before(to) || wr.classification == "lease" {
			continue
		}
		if wr.code >= 300 {
			c.failed++
			continue
		}
		c.n++
		c.byKind[wr.verb+" "+wr.resource]++
	}
	if lo, hi, by, ok := expectedWrites(op); ok {
		c.hasPins, c.lo, c.hi, c.by = true, lo, hi, by
		switch {
		case c.n > hi:
			c.beyond = c.n - hi
		case c.n < lo:
			c.beyond = c.n - lo
		}
		if c.beyond != 0 {
			c.outlier = fmt.Sprintf("%s at %s: %d writes, expected %d-%d: %v", app, op.at.Format(time.TimeOnly), c.n, lo, hi, c.byKind)
		}
	}
	return c
}

// summarizeCosts sums the costs cs of the changes of a kind: their mean and median, how
// far their median is from the pinned range, the first and last thirds of the churn.
func summarizeCosts(kind string, cs []changeCost, start, end time.Time) ChangeWrites {
	third := end.Sub(start) / 3
	cw := ChangeWrites{Kind: kind, Changes: len(cs), ByKind: map[string]float64{}, OK: true}
	ns, beyond := make([]float64, 0, len(cs)), make([]float64, 0, len(cs))
	var first, last float64
	for _, c := range cs {
		ns = append(ns, float64(c.n))
		beyond = append(beyond, float64(c.beyond))
		cw.Failed += c.failed
		for k, v := range c.byKind {
			cw.ByKind[k] += float64(v)
		}
		switch {
		case c.at.Before(start.Add(third)):
			first += float64(c.n)
			cw.FirstThirdN++
		case !c.at.Before(end.Add(-third)):
			last += float64(c.n)
			cw.LastThirdN++
		}
	}
	cw.Mean, cw.Median = mean(ns), median(ns)
	for k, v := range cw.ByKind {
		cw.ByKind[k] = round2(v / float64(len(cs)))
	}
	if cw.FirstThirdN > 0 {
		cw.FirstThird = round2(first / float64(cw.FirstThirdN))
	}
	if cw.LastThirdN > 0 {
		cw.LastThird = round2(last / float64(cw.LastThirdN))
	}
	var los, his []float64
	for _, c := range cs {
		if c.hasPins {
			los, his = append(los, float64(c.lo)), append(his, float64(c.hi))
			cw.Pinned = c.by
			if c.outlier != "" && len(cw.Outliers) < 5 {
				cw.Outliers = append(cw.Outliers, c.outlier)
			}
		}
	}
	if len(los) > 0 {
		cw.ExpectedMin, cw.ExpectedMax = median(los), median(his)
		cw.MedianBeyond = median(beyond)
		cw.OK = cw.MedianBeyond == 0
	}
	// No growth: the last third's changes cost at most a quarter more than the first's.
	if cw.FirstThirdN >= 3 && cw.LastThirdN >= 3 && cw.LastThird > cw.FirstThird*growthAllowance+0.25 {
		cw.OK = false
	}
	cw.Mean, cw.Median = round2(cw.Mean), round2(cw.Median)
	return cw
}

// growthAllowance is how much more the changes of the last third of the run may cost
// than those of the first: a quarter (plus a quarter of a write), well within the
// variation of rollout timings, far below a cache that stops working (every change
// then costs its writes again).
const growthAllowance = 1.25

// stampMilli is the time of a write in the report's lines.
const stampMilli = "2006-01-02T15:04:05.000Z07:00"

// writesClassified lists the writes classified as class, with when the write was made
// when that differs from when it went through, and when its App was deleted.
func writesClassified(writes []write, class string) []string {
	var out []string
	for _, wr := range writes {
		if wr.classification != class {
			continue
		}
		line := fmt.Sprintf("%s %s %s %s/%s (%d) by %s", wr.at.Format(stampMilli), wr.verb, wr.resource, wr.namespace, wr.name, wr.code, wr.user)
		if made := wr.madeAt(); !made.Equal(wr.at) {
			line += ", made " + made.Format(stampMilli)
		}
		if !wr.ownerDeleted.IsZero() {
			line += ", its App deleted " + wr.ownerDeleted.Format(stampMilli)
		}
		out = append(out, line)
	}
	return out
}

// writeKinds counts the writes by "verb resource" and classification.
func writeKinds(writes []write) map[string]int {
	out := map[string]int{}
	for _, wr := range writes {
		out[wr.classification+": "+wr.verb+" "+wr.resource]++
	}
	return out
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func round2(v float64) float64 {
	return float64(int64(v*100+0.5*sign(v))) / 100
}

func sign(v float64) float64 {
	if v < 0 {
		return -1
	}
	return 1
}

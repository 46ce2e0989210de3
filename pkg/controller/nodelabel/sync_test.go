package nodelabel

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	core "k8s.io/client-go/testing"

	"github.com/app-controller/app-controller/pkg/controller"
)

const (
	kwokRules = `
rules:
- name: kwok-nodes
  match: {providerIDPrefix: "kwok://"}
  labels: {node.example.com/joined-via: kwok, node.example.com/simulated: "true"}
`
	joinedVia = "node.example.com/joined-via"
	simulated = "node.example.com/simulated"
)

// kwokNode returns a node named name with a kwok provider ID and the given labels.
func kwokNode(name string, labels map[string]string) *corev1.Node {
	n := newNode(name, "kwok://"+name, labels)
	n.ResourceVersion = ""
	return n
}

// labelOwners returns, for each label key of node, the field managers that own it.
func labelOwners(t *testing.T, node *corev1.Node) map[string][]string {
	t.Helper()
	owners := map[string][]string{}
	for _, entry := range node.ManagedFields {
		if entry.FieldsV1 == nil {
			continue
		}
		// The fields set is JSON like {"f:metadata":{"f:labels":{"f:key":{}}}}.
		var fields map[string]map[string]map[string]any
		if err := json.Unmarshal(entry.FieldsV1.GetRawBytes(), &fields); err != nil {
			t.Fatal(err)
		}
		for key := range fields["f:metadata"]["f:labels"] {
			k := strings.TrimPrefix(key, "f:")
			owners[k] = append(owners[k], entry.Manager)
		}
	}
	return owners
}

// applyActions returns the server-side apply actions among actions, checking that each
// uses the labeler's field manager without forcing.
func applyActions(t *testing.T, actions []core.Action) []core.PatchActionImpl {
	t.Helper()
	var out []core.PatchActionImpl
	for _, a := range actions {
		patch, ok := a.(core.PatchActionImpl)
		if !ok || patch.GetPatchType() != types.ApplyPatchType {
			t.Errorf("unexpected write %s %s", a.GetVerb(), a.GetResource().Resource)
			continue
		}
		opts := patch.GetPatchOptions()
		if opts.FieldManager != FieldManager || (opts.Force != nil && *opts.Force) {
			t.Errorf("apply with field manager %q, force %v; want %q, not forced", opts.FieldManager, opts.Force, FieldManager)
		}
		out = append(out, patch)
	}
	return out
}

// eventReasons returns the reasons of events ("Type Reason message").
func eventReasons(events []string) []string {
	var out []string
	for _, e := range events {
		fields := strings.Fields(e)
		if len(fields) >= 2 {
			out = append(out, fields[1])
		}
	}
	return out
}

func TestSyncNodeAppliesAndRemovesLabels(t *testing.T) {
	f := newFixture(t, kwokRules)
	f.createNode(kwokNode("n1", map[string]string{"type": "kwok"}), "kwok")

	// A matching node gets the rule's labels, through one non-forced apply.
	f.mustSync("n1")
	if got := len(applyActions(t, f.writes())); got != 1 {
		t.Fatalf("got %d applies, want 1", got)
	}
	live := f.live("n1")
	wantLabels := map[string]string{"type": "kwok", joinedVia: "kwok", simulated: "true"}
	if !reflect.DeepEqual(live.Labels, wantLabels) {
		t.Errorf("labels = %v, want %v", live.Labels, wantLabels)
	}
	if live.Annotations[controller.AppliedConfigHashAnnotation] == "" {
		t.Errorf("no %s annotation", controller.AppliedConfigHashAnnotation)
	}
	owners := labelOwners(t, live)
	if !reflect.DeepEqual(owners[joinedVia], []string{FieldManager}) || !reflect.DeepEqual(owners["type"], []string{"kwok"}) {
		t.Errorf("label owners = %v", owners)
	}
	if got := eventReasons(f.events()); !reflect.DeepEqual(got, []string{ReasonLabelsApplied}) {
		t.Errorf("events = %v, want [%s]", got, ReasonLabelsApplied)
	}

	// Up to date: no write, no event.
	f.refresh("n1")
	f.mustSync("n1")
	f.wantQuiet("up-to-date node")

	// A rule that no longer sets a label: that label is removed, the others stay.
	f.c.rules = mustCompile(t, `
rules:
- name: kwok-nodes
  match: {providerIDPrefix: "kwok://"}
  labels: {node.example.com/joined-via: kwok}
`)
	f.mustSync("n1")
	live = f.live("n1")
	wantLabels = map[string]string{"type": "kwok", joinedVia: "kwok"}
	if !reflect.DeepEqual(live.Labels, wantLabels) {
		t.Errorf("after the rule dropped a label: labels = %v, want %v", live.Labels, wantLabels)
	}

	// The node stops matching: every label the labeler applied goes, with the hash;
	// the label kwok set stays.
	node := f.refresh("n1")
	node.Spec.ProviderID = "aws:///eu-west-1a/i-1"
	if _, err := f.client.CoreV1().Nodes().Update(f.ctx, node, metav1.UpdateOptions{FieldManager: "kwok"}); err != nil {
		t.Fatal(err)
	}
	f.refresh("n1")
	f.events()
	f.mustSync("n1")
	live = f.live("n1")
	if want := map[string]string{"type": "kwok"}; !reflect.DeepEqual(live.Labels, want) {
		t.Errorf("after the node stopped matching: labels = %v, want %v", live.Labels, want)
	}
	if _, found := live.Annotations[controller.AppliedConfigHashAnnotation]; found {
		t.Errorf("hash annotation left on a node the labeler no longer labels")
	}
	if got := eventReasons(f.events()); !reflect.DeepEqual(got, []string{ReasonLabelsRemoved}) {
		t.Errorf("events = %v, want [%s]", got, ReasonLabelsRemoved)
	}

	// Nothing applied any more: no write.
	f.refresh("n1")
	f.mustSync("n1")
	if w := f.writes(); len(w) != 0 {
		t.Errorf("unlabelled node written: %v", w)
	}
}

func TestSyncNodeLabelOwnedByAnotherManager(t *testing.T) {
	f := newFixture(t, kwokRules)
	// An administrator set joined-via to another value before the labeler ran.
	f.createNode(kwokNode("n1", map[string]string{joinedVia: "manual"}), "kubectl-label")

	f.mustSync("n1")
	// First apply conflicts; the second applies the other label without it.
	if got := len(applyActions(t, f.writes())); got != 2 {
		t.Errorf("got %d applies, want 2", got)
	}
	live := f.live("n1")
	if want := map[string]string{joinedVia: "manual", simulated: "true"}; !reflect.DeepEqual(live.Labels, want) {
		t.Errorf("labels = %v, want %v", live.Labels, want)
	}
	if owners := labelOwners(t, live); !reflect.DeepEqual(owners[joinedVia], []string{"kubectl-label"}) {
		t.Errorf("owners of %s = %v, want only kubectl-label", joinedVia, owners[joinedVia])
	}
	events := f.events()
	if got := eventReasons(events); !reflect.DeepEqual(got, []string{ReasonLabelConflict, ReasonLabelsApplied}) {
		t.Errorf("events = %v, want [%s %s]", events, ReasonLabelConflict, ReasonLabelsApplied)
	} else if !strings.Contains(events[0], joinedVia) || !strings.Contains(events[0], "kubectl-label") {
		t.Errorf("conflict event %q does not name the label and its owner", events[0])
	}

	// No hot loop: later syncs neither write nor report again.
	for range 3 {
		f.refresh("n1")
		f.mustSync("n1")
		if w := f.writes(); len(w) != 0 {
			t.Fatalf("held label retried: %v", w)
		}
		if e := f.events(); len(e) != 0 {
			t.Fatalf("conflict reported again: %v", e)
		}
	}

	// The administrator removes the label: the labeler sets it.
	node := f.refresh("n1")
	delete(node.Labels, joinedVia)
	if _, err := f.client.CoreV1().Nodes().Update(f.ctx, node, metav1.UpdateOptions{FieldManager: "kubectl-label"}); err != nil {
		t.Fatal(err)
	}
	f.refresh("n1")
	f.mustSync("n1")
	live = f.live("n1")
	if live.Labels[joinedVia] != "kwok" {
		t.Errorf("freed label not applied: labels = %v", live.Labels)
	}
	if owners := labelOwners(t, live); !reflect.DeepEqual(owners[joinedVia], []string{FieldManager}) {
		t.Errorf("owners of %s = %v, want only %s", joinedVia, owners[joinedVia], FieldManager)
	}
}

func TestSyncNodeSharedLabelSurvivesRelease(t *testing.T) {
	f := newFixture(t, kwokRules)
	// Someone else set joined-via to the value the rule sets: both own it, no conflict.
	f.createNode(kwokNode("n1", map[string]string{joinedVia: "kwok"}), "kubectl-label")
	f.mustSync("n1")
	if got := len(applyActions(t, f.writes())); got != 1 {
		t.Errorf("got %d applies, want 1", got)
	}
	if got := eventReasons(f.events()); !reflect.DeepEqual(got, []string{ReasonLabelsApplied}) {
		t.Errorf("events = %v", got)
	}

	// The rules stop matching: the labeler's own label goes, the shared one stays.
	f.c.rules = mustCompile(t, "rules: []\n")
	f.refresh("n1")
	f.mustSync("n1")
	live := f.live("n1")
	if want := map[string]string{joinedVia: "kwok"}; !reflect.DeepEqual(live.Labels, want) {
		t.Errorf("labels = %v, want %v", live.Labels, want)
	}
}

func TestSyncNodeRuleConflict(t *testing.T) {
	f := newFixture(t, `
rules:
- name: kwok-nodes
  match: {providerIDPrefix: "kwok://"}
  labels: {node.example.com/joined-via: kwok}
- name: all-nodes
  match: {labelSelector: {}}
  labels: {node.example.com/joined-via: other, node.example.com/all: "true"}
`)
	f.createNode(kwokNode("n1", nil), "kwok")
	f.mustSync("n1")
	live := f.live("n1")
	if want := map[string]string{joinedVia: "kwok", "node.example.com/all": "true"}; !reflect.DeepEqual(live.Labels, want) {
		t.Errorf("labels = %v, want %v (first rule wins)", live.Labels, want)
	}
	events := f.events()
	if got := eventReasons(events); !reflect.DeepEqual(got, []string{ReasonRuleConflict, ReasonLabelsApplied}) {
		t.Fatalf("events = %v", events)
	}
	for _, want := range []string{`"kwok-nodes"`, `"all-nodes"`, joinedVia, "first rule"} {
		if !strings.Contains(events[0], want) {
			t.Errorf("rule conflict event %q does not contain %q", events[0], want)
		}
	}

	// Reported when writing, not on every sync.
	f.refresh("n1")
	f.mustSync("n1")
	if e := f.events(); len(e) != 0 {
		t.Errorf("events on an up-to-date node: %v", e)
	}
}

func TestSyncNodeNoWrite(t *testing.T) {
	tests := []struct {
		name string
		node *corev1.Node
	}{
		{name: "node gone"},
		{name: "node matching no rule", node: newNode("n1", "aws://n1", map[string]string{"type": "ec2"})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, kwokRules)
			if tt.node != nil {
				f.createNode(tt.node, "kubelet")
			}
			f.mustSync("n1")
			f.wantQuiet(tt.name)
		})
	}
}

func TestSyncNodeForgetsDeletedNode(t *testing.T) {
	f := newFixture(t, kwokRules)
	f.c.hold("n1", joinedVia, heldLabel{value: "manual", present: true})
	f.mustSync("n1")
	if _, found := f.c.held["n1"]; found {
		t.Errorf("held labels of a deleted node kept")
	}
}

func TestSyncNodeAPIError(t *testing.T) {
	f := newFixture(t, kwokRules)
	f.createNode(kwokNode("n1", nil), "kwok")
	f.client.PrependReactor("patch", "nodes", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("etcd unavailable")
	})
	err := f.sync("n1")
	if err == nil || !strings.Contains(err.Error(), "applying the labels of Node n1") || !strings.Contains(err.Error(), "etcd unavailable") {
		t.Errorf("sync error = %v, want the apply error with context", err)
	}
}

func TestNewNodeLabels(t *testing.T) {
	node := kwokNode("n1", map[string]string{"type": "kwok"})
	node.UID = "uid-1"

	a, err := newNodeLabels(node, map[string]string{joinedVia: "kwok"})
	if err != nil {
		t.Fatal(err)
	}
	if a.UID == nil || *a.UID != "uid-1" {
		t.Errorf("apply configuration without the node's UID: a deleted node would be recreated")
	}
	if a.Spec != nil || a.Status != nil {
		t.Errorf("apply configuration holds more than metadata")
	}
	if !reflect.DeepEqual(a.Labels, map[string]string{joinedVia: "kwok"}) {
		t.Errorf("labels = %v", a.Labels)
	}
	b, err := newNodeLabels(node, map[string]string{joinedVia: "other"})
	if err != nil {
		t.Fatal(err)
	}
	if a.Annotations[controller.AppliedConfigHashAnnotation] == b.Annotations[controller.AppliedConfigHashAnnotation] {
		t.Errorf("different labels, same hash")
	}

	empty, err := newNodeLabels(node, nil)
	if err != nil {
		t.Fatal(err)
	}
	if empty.Labels != nil || empty.Annotations != nil {
		t.Errorf("releasing configuration holds labels %v, annotations %v", empty.Labels, empty.Annotations)
	}
}

func TestLabelConflicts(t *testing.T) {
	conflict := &metav1.Status{
		Status: metav1.StatusFailure, Code: 409, Reason: metav1.StatusReasonConflict,
		Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{
			{Type: metav1.CauseTypeFieldManagerConflict, Message: `conflict with "kubectl-label" using v1`, Field: ".metadata.labels.node.example.com/joined-via"},
			{Type: metav1.CauseTypeFieldManagerConflict, Message: `conflict with "other"`, Field: ".metadata.annotations.x"},
		}},
	}
	tests := []struct {
		name string
		err  error
		want map[string]string
	}{
		{"label conflict", statusError(conflict), map[string]string{joinedVia: `"kubectl-label" using v1`}},
		{"not a conflict", errors.New("boom"), nil},
		{"conflict without details", statusError(&metav1.Status{Status: metav1.StatusFailure, Code: 409, Reason: metav1.StatusReasonConflict}), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := labelConflicts(tt.err); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("labelConflicts = %v, want %v", got, tt.want)
			}
		})
	}
}

// statusError returns s as the error a client returns for it.
func statusError(s *metav1.Status) error {
	return &apierrors.StatusError{ErrStatus: *s}
}

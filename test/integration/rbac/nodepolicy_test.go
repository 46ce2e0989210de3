package rbac

import (
	"context"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/app-controller/app-controller/internal/localcluster"
	"github.com/app-controller/app-controller/pkg/controller"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// installNodePolicy creates the ValidatingAdmissionPolicy and its binding of
// config/admission/node_label_policy.yaml, as the admin.
func installNodePolicy(t *testing.T) *admissionregistrationv1.ValidatingAdmissionPolicy {
	t.Helper()
	docs := splitYAML(framework.RepoFile(t, "config", "admission", "node_label_policy.yaml"))
	if len(docs) != 2 {
		t.Fatalf("node_label_policy.yaml holds %d documents, want the policy and its binding", len(docs))
	}
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	for i, obj := range []any{policy, binding} {
		if err := yaml.UnmarshalStrict(docs[i], obj); err != nil {
			t.Fatalf("node_label_policy.yaml document %d: %v", i+1, err)
		}
	}
	admin := framework.Client(t).AdmissionregistrationV1()
	ctx := context.Background()
	if _, err := admin.ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating the policy: %v", err)
	}
	if _, err := admin.ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating the binding: %v", err)
	}
	// The policy must compile: a type error shows in its status.
	framework.Eventually(t, converge, func() (bool, error) {
		p, err := admin.ValidatingAdmissionPolicies().Get(ctx, policy.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if p.Status.TypeChecking != nil && len(p.Status.TypeChecking.ExpressionWarnings) > 0 {
			t.Fatalf("the policy does not type-check: %+v", p.Status.TypeChecking.ExpressionWarnings)
		}
		return p.Status.ObservedGeneration == p.Generation, nil
	})
	return policy
}

// TestNodeLabelPolicy applies the shipped RBAC and node admission policy and checks, as
// the controller's ServiceAccount, that patching a node's labels (and the applied-config
// hash annotation) is allowed, and that a taint, spec.unschedulable, another annotation
// or a label under a reserved prefix is refused with the policy's message; the admin is
// not bound by the policy.
func TestNodeLabelPolicy(t *testing.T) {
	installRBAC(t)
	installNodePolicy(t)
	admin := framework.Client(t)
	sa := impersonatedClient(t)
	ctx := context.Background()

	const node = "rbac-policy-node"
	if err := localcluster.CreateKwokNode(ctx, admin, node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}) })

	patch := func(body string) error {
		_, err := sa.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(body), metav1.PatchOptions{})
		return err
	}

	// Allowed: labels and the hash annotation, as the labeler writes them (server-side
	// apply under its field manager), and a merge patch of a label.
	// Until the policy is loaded, a refused patch proves nothing; wait until it refuses a
	// taint. The API server loads a new policy through its own informers: seen to take
	// more than a minute once, with several control planes busy on the 2 cores.
	var last error
	loaded := time.Now()
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 3*time.Minute, true, func(context.Context) (bool, error) {
		last = patch(`{"spec":{"taints":[{"key":"it.example.com/probe","effect":"NoSchedule"}]}}`)
		if last == nil {
			_ = patch(`{"spec":{"taints":null}}`)
		}
		return last != nil && strings.Contains(last.Error(), "it may not change spec.taints"), nil
	}); err != nil {
		t.Fatalf("the policy did not refuse a taint within 3 minutes; the last answer to the patch: %v", last)
	}
	t.Logf("the policy refused a taint after %.1fs of waiting", time.Since(loaded).Seconds())
	apply := []byte(`{"apiVersion":"v1","kind":"Node","metadata":{"name":"` + node + `","labels":{"it.example.com/pool":"blue"},"annotations":{"` +
		controller.AppliedConfigHashAnnotation + `":"abc"}}}`)
	if _, err := sa.CoreV1().Nodes().Patch(ctx, node, types.ApplyPatchType, apply, metav1.PatchOptions{FieldManager: "app-controller-nodelabel"}); err != nil {
		t.Fatalf("server-side apply of a label and the hash annotation as the controller: %v", err)
	}
	if err := patch(`{"metadata":{"labels":{"it.example.com/other":"1"}}}`); err != nil {
		t.Fatalf("merge patch of a label as the controller: %v", err)
	}
	if err := patch(`{"metadata":{"labels":{"it.example.com/other":null}}}`); err != nil {
		t.Fatalf("removing a label as the controller: %v", err)
	}

	refused := []struct {
		name, patch, want string
	}{
		{"taint", `{"spec":{"taints":[{"key":"it.example.com/x","effect":"NoSchedule"}]}}`, "it may not change spec.taints"},
		{"unschedulable", `{"spec":{"unschedulable":true}}`, "it may not change spec.unschedulable"},
		{"providerID", `{"spec":{"podCIDR":"10.99.0.0/24"}}`, "it may not change the node's spec"},
		{"other annotation", `{"metadata":{"annotations":{"it.example.com/note":"x"}}}`, "annotations other than " + controller.AppliedConfigHashAnnotation},
		{"finalizer", `{"metadata":{"finalizers":["it.example.com/keep"]}}`, "finalizers or owner references"},
		{"node-role label", `{"metadata":{"labels":{"node-role.kubernetes.io/worker":""}}}`, "may not set or remove labels under kubernetes.io/ or k8s.io/"},
		{"node-restriction label", `{"metadata":{"labels":{"node-restriction.kubernetes.io/trusted":"true"}}}`, "may not set or remove labels under kubernetes.io/"},
		{"kubelet label removed", `{"metadata":{"labels":{"kubernetes.io/hostname":null}}}`, "may not set or remove labels under kubernetes.io/"},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			err := patch(tt.patch)
			if err == nil {
				t.Fatalf("patch %s as the controller was allowed, want it refused by the policy", tt.patch)
			}
			if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "app-controller-node-labels-only") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("patch %s: %v, want the policy's refusal containing %q", tt.patch, err, tt.want)
			}
		})
	}

	// The policy binds the controller only: the admin may still taint the node.
	if _, err := admin.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{}); err != nil {
		t.Errorf("the admin cordoning the node: %v", err)
	}
	n, err := admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(n.Spec.Taints) > 0 && n.Spec.Taints[0].Key == "it.example.com/x" {
		t.Errorf("the refused taint is on the node: %v", n.Spec.Taints)
	}
	if n.Labels["it.example.com/pool"] != "blue" {
		t.Errorf("the allowed label is missing: %v", n.Labels)
	}
}

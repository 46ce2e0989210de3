package rbac

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/app-controller/app-controller/internal/localcluster"
	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
	ingressctrl "github.com/app-controller/app-controller/pkg/controller/ingress"
	"github.com/app-controller/app-controller/pkg/controller/nodelabel"
	"github.com/app-controller/app-controller/pkg/controllermanager"
	appclientset "github.com/app-controller/app-controller/pkg/generated/clientset/versioned"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// grant is a permission the shipped RBAC must give, where, and why the code needs it.
type grant struct {
	permission
	why string
	// exercised: TestManagerRunsWithShippedRBAC makes such a request. The others are
	// needed on paths it does not reach (a conflict with an object the cache has not
	// seen yet, a repeated Event), or are checked by admission rather than requested.
	exercised bool
	// namespace: everywhere for a permission in every namespace (the ClusterRole
	// app-controller); else the only namespace it is granted in (the Role app-controller
	// there).
	namespace string
}

// everywhere is the namespace of a grant of the ClusterRole: every namespace.
const everywhere = ""

// attributes returns g as the attributes of an access review, in its namespace.
func (g grant) attributes() authorizationv1.ResourceAttributes {
	attrs := g.permission.attributes()
	attrs.Namespace = g.namespace
	return attrs
}

// scope describes where g is granted.
func (g grant) scope() string {
	if g.namespace == everywhere {
		return "in every namespace"
	}
	return "in namespace " + g.namespace
}

// grants is everything the ClusterRole and the Role app-controller must give, and
// nothing else: each line names the code path that needs it. A marker added to
// pkg/controller or pkg/controllermanager without a line here fails
// TestRolesAreLeastPrivilege.
var grants = []grant{
	// App controller (pkg/controller/app).
	{permission{"list", "appcontroller.k8s.io", "apps"}, "App informer: initial list when the API server serves no watch-list, relists", false, everywhere},
	{permission{"watch", "appcontroller.k8s.io", "apps"}, "App informer", true, everywhere},
	{permission{"get", "appcontroller.k8s.io", "apps"}, "a sync about to create a child or a revision reads the App from the API server first: one deleted since the cache saw it gets nothing made", true, everywhere},
	{permission{"patch", "appcontroller.k8s.io", "apps/status"}, "writeStatus: the whole status written with one JSON patch", true, everywhere},
	{permission{"list", "appcontroller.k8s.io", "analysistemplates"}, "AnalysisTemplate informer (a check's templateRef): initial list, relists", false, everywhere},
	{permission{"watch", "appcontroller.k8s.io", "analysistemplates"}, "AnalysisTemplate informer: a template's change re-syncs the Apps that use it", true, everywhere},
	{permission{"get", "appcontroller.k8s.io", "analysistemplates"}, "kubebuilder's get;list;watch of an informer's kind (no code path reads one by GET)", false, everywhere},
	{permission{"list", "appcontroller.k8s.io", "clusteranalysistemplates"}, "ClusterAnalysisTemplate informer: initial list, relists", false, everywhere},
	{permission{"watch", "appcontroller.k8s.io", "clusteranalysistemplates"}, "ClusterAnalysisTemplate informer: a template's change re-syncs the Apps that use it", true, everywhere},
	{permission{"get", "appcontroller.k8s.io", "clusteranalysistemplates"}, "kubebuilder's get;list;watch of an informer's kind (no code path reads one by GET)", false, everywhere},
	{permission{"update", "appcontroller.k8s.io", "apps/finalizers"}, "OwnerReferencesPermissionEnforcement: children's owner reference has blockOwnerDeletion=true", false, everywhere},
	{permission{"list", "apps", "deployments"}, "managed and unmanaged (metadata-only) Deployment informers", false, everywhere},
	{permission{"watch", "apps", "deployments"}, "managed and unmanaged (metadata-only) Deployment informers", true, everywhere},
	{permission{"get", "apps", "deployments"}, "liveHolder: who holds the name after a create that conflicted", false, everywhere},
	{permission{"create", "apps", "deployments"}, "server-side apply that creates the Deployment: authorized as create too", true, everywhere},
	{permission{"patch", "apps", "deployments"}, "server-side apply of the Deployment", true, everywhere},
	{permission{"delete", "apps", "deployments"}, "prune of a renamed Deployment; name given up to an older App", true, everywhere},
	{permission{"list", "", "services"}, "managed and unmanaged Service informers; Ingress controller's Service informer", false, everywhere},
	{permission{"watch", "", "services"}, "managed and unmanaged Service informers; Ingress controller's Service informer", true, everywhere},
	{permission{"get", "", "services"}, "liveHolder: who holds the name after a create that conflicted", false, everywhere},
	{permission{"create", "", "services"}, "server-side apply that creates the Service: authorized as create too", true, everywhere},
	{permission{"patch", "", "services"}, "server-side apply of the Service; JSON patch of foreign ports and selector", true, everywhere},
	{permission{"delete", "", "services"}, "prune of a removed Service; name given up to an older App", true, everywhere},
	{permission{"list", "", "pods"}, "pod informer (managed pods only, by label selector): what keeps an App's pods from being ready", false, everywhere},
	{permission{"watch", "", "pods"}, "pod informer (managed pods only, by label selector): what keeps an App's pods from being ready", true, everywhere},
	{permission{"list", "", "events"}, "probe Event informer (the kubelet's Unhealthy Events, by field selector): a readiness probe's output in Ready", false, everywhere},
	{permission{"watch", "", "events"}, "probe Event informer (the kubelet's Unhealthy Events, by field selector): a readiness probe's output in Ready", true, everywhere},
	{permission{"list", "", "configmaps"}, "ConfigMap informer, metadata only: roll the pods of the Apps that reference one when it changes", false, everywhere},
	{permission{"watch", "", "configmaps"}, "ConfigMap informer, metadata only: roll the pods of the Apps that reference one when it changes", true, everywhere},
	{permission{"list", "", "secrets"}, "Secret informer, metadata only (the data is never requested): roll the pods of the Apps that reference one when it changes", false, everywhere},
	{permission{"watch", "", "secrets"}, "Secret informer, metadata only (the data is never requested): roll the pods of the Apps that reference one when it changes", true, everywhere},
	{permission{"get", "", "configmaps"}, "spec.rollout.versionedConfig: a referenced ConfigMap read to be copied", false, everywhere},
	{permission{"create", "", "configmaps"}, "spec.rollout.versionedConfig: the immutable copy of a referenced ConfigMap", false, everywhere},
	{permission{"delete", "", "configmaps"}, "spec.rollout.versionedConfig: a copy no version, Deployment or kept revision reads", false, everywhere},
	{permission{"get", "", "secrets"}, "spec.rollout.versionedConfig: a referenced Secret read to be copied", false, everywhere},
	{permission{"create", "", "secrets"}, "spec.rollout.versionedConfig: the immutable copy of a referenced Secret", false, everywhere},
	{permission{"delete", "", "secrets"}, "spec.rollout.versionedConfig: a copy no version, Deployment or kept revision reads", false, everywhere},
	{permission{"list", "apps", "controllerrevisions"}, "revision informer (managed revisions only): the revisions of Apps' specs", false, everywhere},
	{permission{"watch", "apps", "controllerrevisions"}, "revision informer (managed revisions only): the revisions of Apps' specs", true, everywhere},
	{permission{"create", "apps", "controllerrevisions"}, "a new revision of an App's spec", true, everywhere},
	{permission{"get", "apps", "controllerrevisions"}, "a create that found the revision's name taken: read it", false, everywhere},
	{permission{"patch", "apps", "controllerrevisions"}, "an older revision made current again (a rollback): its number", false, everywhere},
	{permission{"delete", "apps", "controllerrevisions"}, "revisions beyond the App's history limit", false, everywhere},
	{permission{"list", "policy", "poddisruptionbudgets"}, "managed and unmanaged (metadata-only) PodDisruptionBudget informers", false, everywhere},
	{permission{"watch", "policy", "poddisruptionbudgets"}, "managed and unmanaged (metadata-only) PodDisruptionBudget informers", true, everywhere},
	{permission{"get", "policy", "poddisruptionbudgets"}, "liveHolder: who holds the name after a create that conflicted", false, everywhere},
	{permission{"create", "policy", "poddisruptionbudgets"}, "server-side apply that creates an App's PodDisruptionBudget: authorized as create too", false, everywhere},
	{permission{"patch", "policy", "poddisruptionbudgets"}, "server-side apply of an App's PodDisruptionBudget", false, everywhere},
	{permission{"delete", "policy", "poddisruptionbudgets"}, "prune of a PodDisruptionBudget removed from the App's spec", false, everywhere},
	// HTTPRoutes of App routes attached to Gateways, where the cluster serves the Gateway
	// API (pkg/controller/app/child_route.go; the Service->Ingress controller lists and
	// watches them too, for host ownership). This test's cluster serves no Gateway API.
	{permission{"list", "gateway.networking.k8s.io", "httproutes"}, "managed and unmanaged (metadata-only) HTTPRoute informers", false, everywhere},
	{permission{"watch", "gateway.networking.k8s.io", "httproutes"}, "managed and unmanaged (metadata-only) HTTPRoute informers", false, everywhere},
	{permission{"get", "gateway.networking.k8s.io", "httproutes"}, "liveHolder: who holds the name after a create that conflicted", false, everywhere},
	{permission{"create", "gateway.networking.k8s.io", "httproutes"}, "server-side apply that creates an App's HTTPRoute: authorized as create too", false, everywhere},
	{permission{"patch", "gateway.networking.k8s.io", "httproutes"}, "server-side apply of an App's HTTPRoute", false, everywhere},
	{permission{"delete", "gateway.networking.k8s.io", "httproutes"}, "prune of an HTTPRoute the route no longer wants (no route, or an Ingress instead)", false, everywhere},
	{permission{"get", "gateway.networking.k8s.io", "gateways"}, "mirrorUnsupported: the class of the Gateway a canary's setMirrorRoute step would mirror through", false, everywhere},
	{permission{"get", "gateway.networking.k8s.io", "gatewayclasses"}, "mirrorUnsupported: whether the GatewayClass lists HTTPRouteRequestMirror in its supportedFeatures", false, everywhere},
	{permission{"list", "autoscaling", "horizontalpodautoscalers"}, "managed and unmanaged (metadata-only) HorizontalPodAutoscaler informers", false, everywhere},
	{permission{"watch", "autoscaling", "horizontalpodautoscalers"}, "managed and unmanaged (metadata-only) HorizontalPodAutoscaler informers", true, everywhere},
	{permission{"get", "autoscaling", "horizontalpodautoscalers"}, "liveHolder: who holds the name after a create that conflicted", false, everywhere},
	{permission{"create", "autoscaling", "horizontalpodautoscalers"}, "server-side apply that creates an App's HorizontalPodAutoscaler (spec.autoscaling): authorized as create too", true, everywhere},
	{permission{"patch", "autoscaling", "horizontalpodautoscalers"}, "server-side apply of an App's HorizontalPodAutoscaler", true, everywhere},
	{permission{"delete", "autoscaling", "horizontalpodautoscalers"}, "prune of the HorizontalPodAutoscaler of a removed spec.autoscaling", true, everywhere},
	// Service->Ingress controller (pkg/controller/ingress).
	{permission{"update", "", "services/finalizers"}, "OwnerReferencesPermissionEnforcement: the Ingress's owner reference has blockOwnerDeletion=true", false, everywhere},
	{permission{"list", "networking.k8s.io", "ingresses"}, "Ingress informer", false, everywhere},
	{permission{"watch", "networking.k8s.io", "ingresses"}, "Ingress informer", true, everywhere},
	{permission{"get", "networking.k8s.io", "ingresses"}, "applyIngress: who holds the name after a create that conflicted", false, everywhere},
	{permission{"create", "networking.k8s.io", "ingresses"}, "server-side apply that creates the Ingress: authorized as create too", true, everywhere},
	{permission{"patch", "networking.k8s.io", "ingresses"}, "server-side apply of the Ingress", true, everywhere},
	{permission{"delete", "networking.k8s.io", "ingresses"}, "removeIngress: the annotation went", true, everywhere},
	// Node labeler (pkg/controller/nodelabel).
	{permission{"list", "", "nodes"}, "Node informer", false, everywhere},
	{permission{"watch", "", "nodes"}, "Node informer", true, everywhere},
	{permission{"patch", "", "nodes"}, "server-side apply of the labels", true, everywhere},
	// Event recorder (pkg/controllermanager), used by every controller.
	{permission{"create", "", "events"}, "new Events", true, everywhere},
	{permission{"patch", "", "events"}, "repeated Events: the recorder bumps the count of the existing one", false, everywhere},
	// --metrics-secure (pkg/controllermanager/metricsauth.go): delegated authentication
	// and authorization of the scrapers, as kube-controller-manager's.
	{permission{"create", "authentication.k8s.io", "tokenreviews"}, "--metrics-secure: TokenReview of a scraper's bearer token", false, everywhere},
	{permission{"create", "authorization.k8s.io", "subjectaccessreviews"}, "--metrics-secure: SubjectAccessReview of get /metrics for that user", false, everywhere},
	// Leader election (pkg/controllermanager/leaderelection.go, client-go's LeaseLock),
	// with --leader-elect: the Lease lives in the controller's own namespace.
	{permission{"get", "coordination.k8s.io", "leases"}, "LeaseLock.Get: read the Lease before acquiring it and before releasing it", true, controllerNamespace},
	{permission{"create", "coordination.k8s.io", "leases"}, "LeaseLock.Create: the first instance creates the missing Lease", true, controllerNamespace},
	{permission{"update", "coordination.k8s.io", "leases"}, "LeaseLock.Update: acquire, renew and, on a graceful stop, release the Lease", true, controllerNamespace},
}

// grantOf returns the line of grants for p, if any.
func grantOf(p permission) (grant, bool) {
	i := slices.IndexFunc(grants, func(g grant) bool { return g.permission == p })
	if i < 0 {
		return grant{}, false
	}
	return grants[i], true
}

// TestRolesAreLeastPrivilege checks the generated ClusterRole and Role statically: no
// wildcard, no resource names or non-resource URLs, and exactly the permissions of
// grants, the ClusterRole those in every namespace, the Role, in app-controller-system,
// those of that namespace. It also checks that the bindings grant these roles to the
// ServiceAccount config/rbac defines, in app-controller-system, and nothing else.
func TestRolesAreLeastPrivilege(t *testing.T) {
	rb := loadRBAC(t)
	if rb.clusterRole.Name != "app-controller" {
		t.Errorf("ClusterRole name = %q, want app-controller", rb.clusterRole.Name)
	}
	if rb.role.Name != "app-controller" || rb.role.Namespace != controllerNamespace {
		t.Errorf("Role = %s/%s, want %s/app-controller", rb.role.Namespace, rb.role.Name, controllerNamespace)
	}
	checkRules(t, "ClusterRole", rb.clusterRole.Rules, everywhere)
	checkRules(t, "Role", rb.role.Rules, controllerNamespace)

	sa := rb.serviceAccount
	if sa.Namespace != controllerNamespace || sa.Name != controllerServiceAccount {
		t.Errorf("ServiceAccount = %s/%s, want %s/%s", sa.Namespace, sa.Name, controllerNamespace, controllerServiceAccount)
	}
	onlyServiceAccount := func(subjects []rbacv1.Subject) bool {
		return len(subjects) == 1 && subjects[0].Kind == "ServiceAccount" &&
			subjects[0].Namespace == sa.Namespace && subjects[0].Name == sa.Name
	}
	ref := rb.clusterBinding.RoleRef
	if ref.APIGroup != "rbac.authorization.k8s.io" || ref.Kind != "ClusterRole" || ref.Name != rb.clusterRole.Name {
		t.Errorf("ClusterRoleBinding roleRef = %+v, want the ClusterRole %s", ref, rb.clusterRole.Name)
	}
	if !onlyServiceAccount(rb.clusterBinding.Subjects) {
		t.Errorf("ClusterRoleBinding subjects = %+v, want only the ServiceAccount %s/%s", rb.clusterBinding.Subjects, sa.Namespace, sa.Name)
	}
	if rb.binding.Namespace != rb.role.Namespace {
		t.Errorf("RoleBinding namespace = %q, want the Role's, %q", rb.binding.Namespace, rb.role.Namespace)
	}
	ref = rb.binding.RoleRef
	if ref.APIGroup != "rbac.authorization.k8s.io" || ref.Kind != "Role" || ref.Name != rb.role.Name {
		t.Errorf("RoleBinding roleRef = %+v, want the Role %s", ref, rb.role.Name)
	}
	if !onlyServiceAccount(rb.binding.Subjects) {
		t.Errorf("RoleBinding subjects = %+v, want only the ServiceAccount %s/%s", rb.binding.Subjects, sa.Namespace, sa.Name)
	}
}

// checkRules checks that rules, of the role of the given kind, hold no wildcard, resource
// names or non-resource URLs, and give exactly the permissions of grants in namespace.
func checkRules(t *testing.T, kind string, rules []rbacv1.PolicyRule, namespace string) {
	t.Helper()
	got := map[permission]bool{}
	for i, rule := range rules {
		if len(rule.ResourceNames) > 0 || len(rule.NonResourceURLs) > 0 {
			t.Errorf("%s rule %d: resourceNames %v, nonResourceURLs %v: not expected", kind, i, rule.ResourceNames, rule.NonResourceURLs)
		}
		for _, group := range rule.APIGroups {
			for _, res := range rule.Resources {
				for _, verb := range rule.Verbs {
					if group == "*" || res == "*" || verb == "*" || strings.HasSuffix(res, "/*") {
						t.Errorf("%s rule %d grants a wildcard: %s %s/%s", kind, i, verb, group, res)
					}
					got[permission{verb, group, res}] = true
				}
			}
		}
	}
	want := map[permission]bool{}
	for _, g := range grants {
		if g.namespace != namespace {
			continue
		}
		want[g.permission] = true
		if !got[g.permission] {
			t.Errorf("%s lacks %s, needed %s for: %s", kind, g.permission, g.scope(), g.why)
		}
	}
	for p := range got {
		if !want[p] {
			if g, ok := grantOf(p); ok {
				t.Errorf("%s grants %s, which grants wants %s only", kind, p, g.scope())
				continue
			}
			t.Errorf("%s grants %s, which no code path needs (or add it to grants, saying which)", kind, p)
		}
	}
}

// TestServiceAccountPermissions asks the API server, as the controller's ServiceAccount,
// whether it may do what grants lists (it must) and a list of things the controller must
// not or need not do (it must not), then tries a few of the latter for real. Writes are
// dry runs: authorization happens first, and a wrongly allowed request changes nothing.
func TestServiceAccountPermissions(t *testing.T) {
	installRBAC(t)
	sa := impersonatedClient(t)
	ctx := context.Background()

	for _, g := range grants {
		allowed, reason, err := canI(ctx, sa, g.attributes())
		if err != nil {
			t.Fatal(err)
		}
		if !allowed {
			t.Errorf("%s %s: denied (%q), but needed for: %s", g.permission, g.scope(), reason, g.why)
		}
		if g.namespace == everywhere {
			continue
		}
		// A permission of the Role: nowhere else.
		for _, elsewhere := range []string{metav1.NamespaceDefault, metav1.NamespaceAll} {
			attrs := g.attributes()
			attrs.Namespace = elsewhere
			allowed, _, err := canI(ctx, sa, attrs)
			if err != nil {
				t.Fatal(err)
			}
			if allowed {
				t.Errorf("%s in namespace %q: allowed, but must be %s only", g.permission, elsewhere, g.scope())
			}
		}
	}

	denied := []authorizationv1.ResourceAttributes{
		// ConfigMaps and Secrets are read one by one and created only to be copied
		// (versionedConfig), never changed: a copy is immutable, a source is not ours.
		{Verb: "update", Resource: "secrets"},
		{Verb: "patch", Resource: "secrets"},
		{Verb: "update", Resource: "configmaps"},
		{Verb: "patch", Resource: "configmaps"},
		// Pods are listed and watched (the pod informer), never read one by one, read
		// from (logs, exec) or written.
		{Verb: "get", Resource: "pods"},
		{Verb: "get", Resource: "pods", Subresource: "log"},
		{Verb: "create", Resource: "pods"},
		{Verb: "update", Resource: "pods"},
		{Verb: "patch", Resource: "pods"},
		{Verb: "delete", Resource: "pods"},
		{Verb: "patch", Resource: "pods", Subresource: "status"},
		{Verb: "create", Resource: "pods", Subresource: "exec"},
		{Verb: "create", Resource: "nodes"},
		{Verb: "update", Resource: "nodes"},
		{Verb: "delete", Resource: "nodes"},
		{Verb: "patch", Resource: "nodes", Subresource: "status"},
		{Verb: "create", Resource: "namespaces"},
		{Verb: "delete", Resource: "namespaces"},
		{Verb: "update", Resource: "services"},
		{Verb: "deletecollection", Resource: "services"},
		{Verb: "patch", Resource: "services", Subresource: "status"},
		{Verb: "update", Group: "apps", Resource: "deployments"},
		{Verb: "deletecollection", Group: "apps", Resource: "deployments"},
		{Verb: "update", Group: "apps", Resource: "deployments", Subresource: "scale"},
		{Verb: "update", Group: "networking.k8s.io", Resource: "ingresses"},
		// An App's spec belongs to its user: only its status is written, and only by patch.
		{Verb: "create", Group: "appcontroller.k8s.io", Resource: "apps"},
		{Verb: "update", Group: "appcontroller.k8s.io", Resource: "apps"},
		{Verb: "patch", Group: "appcontroller.k8s.io", Resource: "apps"},
		{Verb: "delete", Group: "appcontroller.k8s.io", Resource: "apps"},
		{Verb: "update", Group: "appcontroller.k8s.io", Resource: "apps", Subresource: "status"},
		// Events are listed and watched (the kubelet's Unhealthy ones, by field selector),
		// never read one by one, updated or deleted.
		{Verb: "get", Resource: "events"},
		{Verb: "update", Resource: "events"},
		{Verb: "delete", Resource: "events"},
		// Leader election gets, creates and updates its Lease, in its own namespace only:
		// other instances' Leases (kube-controller-manager's, the kubelets' heartbeats in
		// kube-node-lease) are out of reach.
		{Verb: "list", Group: "coordination.k8s.io", Resource: "leases", Namespace: controllerNamespace},
		{Verb: "watch", Group: "coordination.k8s.io", Resource: "leases", Namespace: controllerNamespace},
		{Verb: "patch", Group: "coordination.k8s.io", Resource: "leases", Namespace: controllerNamespace},
		{Verb: "delete", Group: "coordination.k8s.io", Resource: "leases", Namespace: controllerNamespace},
		{Verb: "deletecollection", Group: "coordination.k8s.io", Resource: "leases", Namespace: controllerNamespace},
		{Verb: "get", Group: "coordination.k8s.io", Resource: "leases", Namespace: metav1.NamespaceSystem},
		{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: metav1.NamespaceSystem},
		{Verb: "create", Group: "coordination.k8s.io", Resource: "leases", Namespace: metav1.NamespaceSystem},
		{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: corev1.NamespaceNodeLease},
		{Verb: "list", Group: "coordination.k8s.io", Resource: "leases"},
		{Verb: "create", Group: "coordination.k8s.io", Resource: "leasecandidates", Namespace: controllerNamespace},
		{Verb: "create", Resource: "serviceaccounts", Subresource: "token", Namespace: controllerNamespace},
		{Verb: "impersonate", Resource: "users"},
		{Verb: "impersonate", Resource: "serviceaccounts"},
		{Verb: "create", Group: "rbac.authorization.k8s.io", Resource: "clusterrolebindings"},
		{Verb: "bind", Group: "rbac.authorization.k8s.io", Resource: "clusterroles"},
		{Verb: "escalate", Group: "rbac.authorization.k8s.io", Resource: "clusterroles"},
		{Verb: "create", Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"},
		{Verb: "*", Group: "*", Resource: "*"},
	}
	for _, attrs := range denied {
		allowed, _, err := canI(ctx, sa, attrs)
		if err != nil {
			t.Fatal(err)
		}
		if allowed {
			t.Errorf("allowed, but must not be: %+v", attrs)
		}
	}

	dryRun := []string{metav1.DryRunAll}
	for what, try := range map[string]func() error{
		// A Secret is read (versionedConfig copies it), never changed.
		"update a secret in kube-system": func() error {
			_, err := sa.CoreV1().Secrets("kube-system").Update(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "anything"}},
				metav1.UpdateOptions{DryRun: dryRun})
			return err
		},
		"patch a secret in its own namespace": func() error {
			_, err := sa.CoreV1().Secrets(controllerNamespace).Patch(ctx, "anything", types.MergePatchType, []byte(`{}`),
				metav1.PatchOptions{DryRun: dryRun})
			return err
		},
		"delete node " + localcluster.DefaultNodeName: func() error {
			return sa.CoreV1().Nodes().Delete(ctx, localcluster.DefaultNodeName, metav1.DeleteOptions{DryRun: dryRun})
		},
		"create a namespace": func() error {
			_, err := sa.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "rbac-test-forbidden"}},
				metav1.CreateOptions{DryRun: dryRun})
			return err
		},
		"get the kube-controller-manager Lease": func() error {
			_, err := sa.CoordinationV1().Leases(metav1.NamespaceSystem).Get(ctx, "kube-controller-manager", metav1.GetOptions{})
			return err
		},
		"create a Lease in kube-node-lease": func() error {
			_, err := sa.CoordinationV1().Leases(corev1.NamespaceNodeLease).Create(ctx, &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: "rbac-test-forbidden"},
			}, metav1.CreateOptions{DryRun: dryRun})
			return err
		},
		"create a pod": func() error {
			_, err := sa.CoreV1().Pods(controllerNamespace).Create(ctx, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "rbac-test-forbidden"},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
			}, metav1.CreateOptions{DryRun: dryRun})
			return err
		},
	} {
		if err := try(); !apierrors.IsForbidden(err) {
			t.Errorf("%s: err = %v, want Forbidden", what, err)
		}
	}
}

// labelledKey and labelledValue are the label the node labeler's rules give kwok nodes
// in TestManagerRunsWithShippedRBAC.
const (
	labelledKey   = "rbac-test.example.com/labelled"
	labelledValue = "yes"
)

// TestManagerRunsWithShippedRBAC runs the whole controller-manager as the ServiceAccount,
// with only the shipped RBAC, with leader election as the shipped Deployment runs it
// (faster), through every controller's main paths:
//   - the manager creates its Lease in app-controller-system, acquires and renews it,
//     and releases it when it stops;
//   - an App becomes Ready, with its Deployment, Service and HorizontalPodAutoscaler
//     (App informers, server-side apply of children and of the status);
//   - an annotated Service gets its Ingress, which goes with the annotation;
//   - renaming the App's Deployment and dropping its Service and autoscaling prunes
//     the three;
//   - the node labeler labels kwok-node-0;
//   - the Events of each controller are recorded.
//
// The API server refuses none of the manager's requests (not one 403, from any
// controller, informer, the event recorder or leader election), and every permission the
// manager used is in grants, in the namespace grants gives it. The permissions of grants
// marked exercised were all used.
//
// The test cluster's API server enables the OwnerReferencesPermissionEnforcement
// admission plugin, so the children's owner references with blockOwnerDeletion=true are
// admitted only thanks to the */finalizers grants (not requests of their own, so not in
// the request log): TestFinalizersGrantsAreNeeded shows that without them they are not.
func TestManagerRunsWithShippedRBAC(t *testing.T) {
	installRBAC(t)
	admin := framework.Client(t)
	apps := framework.AppClient(t)
	ns := framework.Namespace(t)
	ctx := context.Background()

	// Registered before the manager starts, so that it runs after the manager stopped:
	// while it runs, the labeler would put the label back.
	t.Cleanup(func() { removeNodeLabel(t) })

	rules := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(rules, []byte(`
rules:
- name: rbac-test
  match:
    providerIDPrefix: "kwok://"
  labels:
    `+labelledKey+`: "`+labelledValue+`"
`), 0o600); err != nil {
		t.Fatal(err)
	}
	requests := &requestLog{}
	// Registered before the manager starts, so that it runs after the manager stopped,
	// also when the test failed on the way: a 403 is then most likely why.
	t.Cleanup(func() { checkRequests(t, requests) })
	cfg := impersonatedConfig(t)
	cfg.Wrap(requests.wrap)
	opts := controllermanager.NewOptions()
	opts.NodeLabelConfig = rules
	opts.ResyncPeriod = 10 * time.Second
	opts.ShutdownTimeout = 5 * time.Second
	opts.LeaderElect = true
	opts.LeaderElectNamespace = controllerNamespace
	opts.LeaderElectLeaseDuration = 3 * time.Second
	opts.LeaderElectRenewDeadline = 2 * time.Second
	opts.LeaderElectRetryPeriod = 300 * time.Millisecond
	// No Lease yet, so that the manager creates it (a Lease left by an earlier run
	// would only be updated).
	leases := admin.CoordinationV1().Leases(opts.LeaderElectNamespace)
	if err := leases.Delete(ctx, opts.LeaderElectName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	stop := startManager(t, cfg, opts)

	// Leader election: the manager holds the Lease.
	var holder string
	framework.Eventually(t, converge, func() (bool, error) {
		lease, err := leases.Get(ctx, opts.LeaderElectName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		holder = ptr.Deref(lease.Spec.HolderIdentity, "")
		return holder != "", nil
	})

	// App controller: an App becomes Ready, with its Deployment and Service.
	app, err := apps.AppcontrollerV1().Apps(ns).Create(ctx, &appv1.App{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appv1.AppSpec{
			DeploymentTemplate: &appv1.DeploymentTemplate{Name: "web", Image: "nginx", Replicas: ptr.To[int32](2)},
			ServiceTemplate:    &appv1.ServiceTemplate{Name: "web"},
			Autoscaling: &appv1.Autoscaling{MaxReplicas: 3,
				CPU: &appv1.ResourceTarget{AverageValue: ptr.To(resource.MustParse("100m"))}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitAppReady(t, apps, ns, "web")
	d, err := admin.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil || !metav1.IsControlledBy(d, app) {
		t.Errorf("Deployment web: %v, controlled by the App: %v", err, err == nil && metav1.IsControlledBy(d, app))
	}
	svc, err := admin.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil || !metav1.IsControlledBy(svc, app) {
		t.Errorf("Service web: %v, controlled by the App: %v", err, err == nil && metav1.IsControlledBy(svc, app))
	}
	hpa, err := admin.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil || !metav1.IsControlledBy(hpa, app) {
		t.Errorf("HorizontalPodAutoscaler web: %v, controlled by the App: %v", err, err == nil && metav1.IsControlledBy(hpa, app))
	}
	waitEvent(t, admin, "App", ns, "web", "Normal "+appv1.EventReasonSynced)

	// Service->Ingress controller: an annotated Service gets its Ingress.
	shop, err := admin.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "shop", Annotations: map[string]string{ingressctrl.AnnotationHTTP: "true"}},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "shop"},
			Ports:    []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ing *networkingv1.Ingress
	framework.Eventually(t, converge, func() (bool, error) {
		ing, err = admin.NetworkingV1().Ingresses(ns).Get(ctx, "shop", metav1.GetOptions{})
		return err == nil, nil
	})
	if !metav1.IsControlledBy(ing, shop) {
		t.Errorf("Ingress shop owners = %+v, want the Service as controller", ing.OwnerReferences)
	}
	waitEvent(t, admin, "Service", ns, "shop", "Normal "+ingressctrl.ReasonIngressCreated)

	// Node labeler: kwok-node-0 gets the label of the rule.
	framework.Eventually(t, converge, func() (bool, error) {
		node, err := admin.CoreV1().Nodes().Get(ctx, localcluster.DefaultNodeName, metav1.GetOptions{})
		return err == nil && node.Labels[labelledKey] == labelledValue, nil
	})
	waitEvent(t, admin, "Node", "", localcluster.DefaultNodeName, "Normal "+nodelabel.ReasonLabelsApplied)

	// Deletes: the renamed Deployment and the dropped Service are pruned; the Ingress
	// goes with the annotation.
	framework.Eventually(t, converge, func() (bool, error) {
		app, err := apps.AppcontrollerV1().Apps(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		app.Spec.DeploymentTemplate.Name = "web-v2"
		app.Spec.ServiceTemplate = nil
		app.Spec.Autoscaling = nil
		_, err = apps.AppcontrollerV1().Apps(ns).Update(ctx, app, metav1.UpdateOptions{})
		return err == nil, nil
	})
	framework.Eventually(t, converge, func() (bool, error) {
		_, err := admin.CoreV1().Services(ns).Patch(ctx, "shop", types.JSONPatchType,
			[]byte(`[{"op":"remove","path":"/metadata/annotations/ingress~1http"}]`), metav1.PatchOptions{})
		return err == nil, nil
	})
	waitAppReady(t, apps, ns, "web")
	waitGone(t, func() error {
		_, err := admin.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		return err
	})
	waitGone(t, func() error { _, err := admin.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{}); return err })
	waitGone(t, func() error {
		_, err := admin.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "web", metav1.GetOptions{})
		return err
	})
	waitGone(t, func() error {
		_, err := admin.NetworkingV1().Ingresses(ns).Get(ctx, "shop", metav1.GetOptions{})
		return err
	})
	waitEvent(t, admin, "App", ns, "web", "Normal "+appv1.EventReasonPruned)
	waitEvent(t, admin, "Service", ns, "shop", "Normal "+ingressctrl.ReasonIngressDeleted)

	stop()

	// Leader election: the manager renewed the Lease all along, and released it when it
	// stopped, so that a standby would take over at once.
	lease, err := leases.Get(ctx, opts.LeaderElectName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := ptr.Deref(lease.Spec.HolderIdentity, ""); got != "" {
		t.Errorf("Lease %s/%s still held by %q after the manager stopped, want released (held by %q while it ran)", lease.Namespace, lease.Name, got, holder)
	}
	if transitions := ptr.Deref(lease.Spec.LeaseTransitions, 0); transitions != 0 {
		t.Errorf("Lease %s/%s changed hands %d times, want 0: the manager lost it while running", lease.Namespace, lease.Name, transitions)
	}
}

// checkRequests fails the test if the API server refused any request of the manager, or
// if the manager used a permission grants does not list, or one of the Role outside its
// namespace. Unless the test failed already, it also fails it if a permission of grants
// marked exercised was not used. It logs the permissions used. Call it after the manager
// stopped.
func checkRequests(t *testing.T, requests *requestLog) {
	t.Helper()
	used, forbidden := requests.snapshot()
	for _, f := range forbidden {
		t.Errorf("the API server refused a request of the manager: %s", f)
	}
	var usedNames []string
	for _, u := range used {
		g, ok := grantOf(u.permission)
		if !ok {
			t.Errorf("the manager used %s, which grants does not list", u.permission)
		} else if g.namespace != everywhere && u.namespace != g.namespace {
			t.Errorf("the manager used %s in namespace %q, but grants has it %s", u.permission, u.namespace, g.scope())
		}
		name := u.String()
		if ok && g.namespace != everywhere {
			name += " (in " + u.namespace + ")"
		}
		if !slices.Contains(usedNames, name) {
			usedNames = append(usedNames, name)
		}
	}
	t.Logf("permissions the manager used: %s", strings.Join(usedNames, ", "))
	if t.Failed() {
		return
	}
	for _, g := range grants {
		if g.exercised && !slices.ContainsFunc(used, func(u use) bool { return u.permission == g.permission }) {
			t.Errorf("the manager never used %s (%s): the test no longer covers it", g.permission, g.why)
		}
	}
}

// waitAppReady waits until the App is Ready at its current generation.
func waitAppReady(t *testing.T, apps appclientset.Interface, ns, name string) {
	t.Helper()
	framework.Eventually(t, converge, func() (bool, error) {
		app, err := apps.AppcontrollerV1().Apps(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ready := meta.FindStatusCondition(app.Status.Conditions, appv1.ConditionReady)
		return app.Status.ObservedGeneration == app.Generation && ready != nil &&
			ready.Status == metav1.ConditionTrue && ready.ObservedGeneration == app.Generation, nil
	})
}

// waitGone waits until get returns NotFound.
func waitGone(t *testing.T, get func() error) {
	t.Helper()
	framework.Eventually(t, converge, func() (bool, error) {
		err := get()
		if err != nil && !apierrors.IsNotFound(err) {
			return false, err
		}
		return apierrors.IsNotFound(err), nil
	})
}

// removeNodeLabel removes, as the admin, what the node labeler applied to kwok-node-0
// in TestManagerRunsWithShippedRBAC: its label and its applied-config hash. It must run
// after the manager stopped.
func removeNodeLabel(t *testing.T) {
	t.Helper()
	admin := framework.Client(t)
	patch := `{"metadata":{"labels":{"` + labelledKey + `":null},"annotations":{"` + controller.AppliedConfigHashAnnotation + `":null}}}`
	node, err := admin.CoreV1().Nodes().Patch(context.Background(), localcluster.DefaultNodeName, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		t.Errorf("removing the test's label from node %s: %v", localcluster.DefaultNodeName, err)
		return
	}
	if _, found := node.Labels[labelledKey]; found {
		t.Errorf("node %s still has label %s", node.Name, labelledKey)
	}
}

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
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/app-controller/app-controller/internal/localcluster"
	"github.com/app-controller/app-controller/internal/localcluster/clustertest"
	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
	appctrl "github.com/app-controller/app-controller/pkg/controller/app"
	ingressctrl "github.com/app-controller/app-controller/pkg/controller/ingress"
	"github.com/app-controller/app-controller/pkg/controller/nodelabel"
	"github.com/app-controller/app-controller/pkg/controllermanager"
	appclientset "github.com/app-controller/app-controller/pkg/generated/clientset/versioned"
)

// grant is a permission the ClusterRole must give, and why the code needs it.
type grant struct {
	permission
	why string
	// exercised: TestManagerRunsWithShippedRBAC makes such a request. The others are
	// needed on paths it does not reach (a conflict with an object the cache has not
	// seen yet, a repeated Event), or are checked by admission rather than requested.
	exercised bool
}

// grants is everything the ClusterRole app-controller must give, and nothing else: each
// line names the code path that needs it. A marker added to pkg/controller without a
// line here fails TestClusterRoleIsLeastPrivilege.
var grants = []grant{
	// App controller (pkg/controller/app).
	{permission{"list", "appcontroller.k8s.io", "apps"}, "App informer: initial list when the API server serves no watch-list, relists", false},
	{permission{"watch", "appcontroller.k8s.io", "apps"}, "App informer", true},
	{permission{"patch", "appcontroller.k8s.io", "apps/status"}, "writeStatus: status written with server-side apply", true},
	{permission{"update", "appcontroller.k8s.io", "apps/finalizers"}, "OwnerReferencesPermissionEnforcement: children's owner reference has blockOwnerDeletion=true", false},
	{permission{"list", "apps", "deployments"}, "managed and unmanaged (metadata-only) Deployment informers", false},
	{permission{"watch", "apps", "deployments"}, "managed and unmanaged (metadata-only) Deployment informers", true},
	{permission{"get", "apps", "deployments"}, "liveHolder: who holds the name after a create that conflicted", false},
	{permission{"create", "apps", "deployments"}, "server-side apply that creates the Deployment: authorized as create too", true},
	{permission{"patch", "apps", "deployments"}, "server-side apply of the Deployment", true},
	{permission{"delete", "apps", "deployments"}, "prune of a renamed Deployment; name given up to an older App", true},
	{permission{"list", "", "services"}, "managed and unmanaged Service informers; Ingress controller's Service informer", false},
	{permission{"watch", "", "services"}, "managed and unmanaged Service informers; Ingress controller's Service informer", true},
	{permission{"get", "", "services"}, "liveHolder: who holds the name after a create that conflicted", false},
	{permission{"create", "", "services"}, "server-side apply that creates the Service: authorized as create too", true},
	{permission{"patch", "", "services"}, "server-side apply of the Service; JSON patch of foreign ports and selector", true},
	{permission{"delete", "", "services"}, "prune of a removed Service; name given up to an older App", true},
	// Service->Ingress controller (pkg/controller/ingress).
	{permission{"update", "", "services/finalizers"}, "OwnerReferencesPermissionEnforcement: the Ingress's owner reference has blockOwnerDeletion=true", false},
	{permission{"list", "networking.k8s.io", "ingresses"}, "Ingress informer", false},
	{permission{"watch", "networking.k8s.io", "ingresses"}, "Ingress informer", true},
	{permission{"get", "networking.k8s.io", "ingresses"}, "applyIngress: who holds the name after a create that conflicted", false},
	{permission{"create", "networking.k8s.io", "ingresses"}, "server-side apply that creates the Ingress: authorized as create too", true},
	{permission{"patch", "networking.k8s.io", "ingresses"}, "server-side apply of the Ingress", true},
	{permission{"delete", "networking.k8s.io", "ingresses"}, "removeIngress: the annotation went", true},
	// Node labeler (pkg/controller/nodelabel).
	{permission{"list", "", "nodes"}, "Node informer", false},
	{permission{"watch", "", "nodes"}, "Node informer", true},
	{permission{"patch", "", "nodes"}, "server-side apply of the labels", true},
	// Event recorder (pkg/controllermanager), used by every controller.
	{permission{"create", "", "events"}, "new Events", true},
	{permission{"patch", "", "events"}, "repeated Events: the recorder bumps the count of the existing one", false},
}

// TestClusterRoleIsLeastPrivilege checks the generated ClusterRole statically: no
// wildcard, no resource names or non-resource URLs, and exactly the permissions of
// grants. It also checks that the binding grants that role to the ServiceAccount
// config/rbac defines, in app-controller-system.
func TestClusterRoleIsLeastPrivilege(t *testing.T) {
	rb := loadRBAC(t)
	if rb.role.Name != "app-controller" {
		t.Errorf("ClusterRole name = %q, want app-controller", rb.role.Name)
	}
	got := map[permission]bool{}
	for i, rule := range rb.role.Rules {
		if len(rule.ResourceNames) > 0 || len(rule.NonResourceURLs) > 0 {
			t.Errorf("rule %d: resourceNames %v, nonResourceURLs %v: not expected", i, rule.ResourceNames, rule.NonResourceURLs)
		}
		for _, group := range rule.APIGroups {
			for _, resource := range rule.Resources {
				for _, verb := range rule.Verbs {
					if group == "*" || resource == "*" || verb == "*" || strings.HasSuffix(resource, "/*") {
						t.Errorf("rule %d grants a wildcard: %s %s/%s", i, verb, group, resource)
					}
					got[permission{verb, group, resource}] = true
				}
			}
		}
	}
	want := map[permission]bool{}
	for _, g := range grants {
		want[g.permission] = true
		if !got[g.permission] {
			t.Errorf("ClusterRole lacks %s, needed for: %s", g.permission, g.why)
		}
	}
	for p := range got {
		if !want[p] {
			t.Errorf("ClusterRole grants %s, which no code path needs (or add it to grants, saying which)", p)
		}
	}

	sa := rb.serviceAccount
	if sa.Namespace != controllerNamespace || sa.Name != controllerServiceAccount {
		t.Errorf("ServiceAccount = %s/%s, want %s/%s", sa.Namespace, sa.Name, controllerNamespace, controllerServiceAccount)
	}
	ref := rb.binding.RoleRef
	if ref.APIGroup != "rbac.authorization.k8s.io" || ref.Kind != "ClusterRole" || ref.Name != rb.role.Name {
		t.Errorf("ClusterRoleBinding roleRef = %+v, want the ClusterRole %s", ref, rb.role.Name)
	}
	if len(rb.binding.Subjects) != 1 || rb.binding.Subjects[0].Kind != "ServiceAccount" ||
		rb.binding.Subjects[0].Namespace != sa.Namespace || rb.binding.Subjects[0].Name != sa.Name {
		t.Errorf("ClusterRoleBinding subjects = %+v, want only the ServiceAccount %s/%s", rb.binding.Subjects, sa.Namespace, sa.Name)
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
			t.Errorf("%s in every namespace: denied (%q), but needed for: %s", g.permission, reason, g.why)
		}
	}

	denied := []authorizationv1.ResourceAttributes{
		{Verb: "get", Resource: "secrets"},
		{Verb: "list", Resource: "secrets"},
		{Verb: "watch", Resource: "secrets"},
		{Verb: "get", Resource: "secrets", Namespace: controllerNamespace},
		{Verb: "get", Resource: "configmaps", Namespace: controllerNamespace},
		{Verb: "list", Resource: "pods"},
		{Verb: "create", Resource: "pods"},
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
		{Verb: "get", Group: "appcontroller.k8s.io", Resource: "apps"},
		{Verb: "create", Group: "appcontroller.k8s.io", Resource: "apps"},
		{Verb: "update", Group: "appcontroller.k8s.io", Resource: "apps"},
		{Verb: "patch", Group: "appcontroller.k8s.io", Resource: "apps"},
		{Verb: "delete", Group: "appcontroller.k8s.io", Resource: "apps"},
		{Verb: "update", Group: "appcontroller.k8s.io", Resource: "apps", Subresource: "status"},
		{Verb: "list", Resource: "events"},
		{Verb: "delete", Resource: "events"},
		{Verb: "create", Group: "coordination.k8s.io", Resource: "leases", Namespace: controllerNamespace},
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
		"list secrets in kube-system": func() error {
			_, err := sa.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{})
			return err
		},
		"get a secret in its own namespace": func() error {
			_, err := sa.CoreV1().Secrets(controllerNamespace).Get(ctx, "anything", metav1.GetOptions{})
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
// with only the shipped RBAC, through every controller's main paths:
//   - an App becomes Ready, with its Deployment and Service (App informers, server-side
//     apply of children and of the status);
//   - an annotated Service gets its Ingress, which goes with the annotation;
//   - renaming the App's Deployment and dropping its Service prunes both;
//   - the node labeler labels kwok-node-0;
//   - the Events of each controller are recorded.
//
// The API server refuses none of the manager's requests (not one 403, from any
// controller, informer or the event recorder), and every permission the manager used is
// in grants. The permissions of grants marked exercised were all used.
//
// The test cluster's API server does not enable the OwnerReferencesPermissionEnforcement
// admission plugin, so the finalizers grants go untested here:
// TestServiceAccountPermissions checks that the ServiceAccount has them.
func TestManagerRunsWithShippedRBAC(t *testing.T) {
	installRBAC(t)
	admin := clustertest.Client(t)
	apps, err := appclientset.NewForConfig(clustertest.Config(t))
	if err != nil {
		t.Fatal(err)
	}
	ns := clustertest.Namespace(t)
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
	stop := startManager(t, cfg, opts)

	// App controller: an App becomes Ready, with its Deployment and Service.
	app, err := apps.AppcontrollerV1().Apps(ns).Create(ctx, &appv1.App{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appv1.AppSpec{
			DeploymentTemplate: &appv1.DeploymentTemplate{Name: "web", Image: "nginx", Replicas: ptr.To[int32](2)},
			ServiceTemplate:    &appv1.ServiceTemplate{Name: "web"},
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
	waitEvent(t, admin, "App", ns, "web", "Normal "+appctrl.SuccessSynced)

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
	clustertest.Eventually(t, converge, func() (bool, error) {
		ing, err = admin.NetworkingV1().Ingresses(ns).Get(ctx, "shop", metav1.GetOptions{})
		return err == nil, nil
	})
	if !metav1.IsControlledBy(ing, shop) {
		t.Errorf("Ingress shop owners = %+v, want the Service as controller", ing.OwnerReferences)
	}
	waitEvent(t, admin, "Service", ns, "shop", "Normal "+ingressctrl.ReasonIngressCreated)

	// Node labeler: kwok-node-0 gets the label of the rule.
	clustertest.Eventually(t, converge, func() (bool, error) {
		node, err := admin.CoreV1().Nodes().Get(ctx, localcluster.DefaultNodeName, metav1.GetOptions{})
		return err == nil && node.Labels[labelledKey] == labelledValue, nil
	})
	waitEvent(t, admin, "Node", "", localcluster.DefaultNodeName, "Normal "+nodelabel.ReasonLabelsApplied)

	// Deletes: the renamed Deployment and the dropped Service are pruned; the Ingress
	// goes with the annotation.
	clustertest.Eventually(t, converge, func() (bool, error) {
		app, err := apps.AppcontrollerV1().Apps(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		app.Spec.DeploymentTemplate.Name = "web-v2"
		app.Spec.ServiceTemplate = nil
		_, err = apps.AppcontrollerV1().Apps(ns).Update(ctx, app, metav1.UpdateOptions{})
		return err == nil, nil
	})
	clustertest.Eventually(t, converge, func() (bool, error) {
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
		_, err := admin.NetworkingV1().Ingresses(ns).Get(ctx, "shop", metav1.GetOptions{})
		return err
	})
	waitEvent(t, admin, "App", ns, "web", "Normal "+appctrl.ReasonPruned)
	waitEvent(t, admin, "Service", ns, "shop", "Normal "+ingressctrl.ReasonIngressDeleted)

	stop()
}

// checkRequests fails the test if the API server refused any request of the manager, or
// if the manager used a permission grants does not list. Unless the test failed already,
// it also fails it if a permission of grants marked exercised was not used. It logs the
// permissions used. Call it after the manager stopped.
func checkRequests(t *testing.T, requests *requestLog) {
	t.Helper()
	used, forbidden := requests.snapshot()
	for _, f := range forbidden {
		t.Errorf("the API server refused a request of the manager: %s", f)
	}
	granted := map[permission]bool{}
	for _, g := range grants {
		granted[g.permission] = true
	}
	var usedNames []string
	for _, p := range used {
		usedNames = append(usedNames, p.String())
		if !granted[p] {
			t.Errorf("the manager used %s, which grants does not list", p)
		}
	}
	t.Logf("permissions the manager used: %s", strings.Join(usedNames, ", "))
	if t.Failed() {
		return
	}
	for _, g := range grants {
		if g.exercised && !slices.Contains(used, g.permission) {
			t.Errorf("the manager never used %s (%s): the test no longer covers it", g.permission, g.why)
		}
	}
}

// waitAppReady waits until the App is Ready at its current generation.
func waitAppReady(t *testing.T, apps appclientset.Interface, ns, name string) {
	t.Helper()
	clustertest.Eventually(t, converge, func() (bool, error) {
		app, err := apps.AppcontrollerV1().Apps(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ready := meta.FindStatusCondition(app.Status.Conditions, appctrl.ConditionReady)
		return app.Status.ObservedGeneration == app.Generation && ready != nil &&
			ready.Status == metav1.ConditionTrue && ready.ObservedGeneration == app.Generation, nil
	})
}

// waitGone waits until get returns NotFound.
func waitGone(t *testing.T, get func() error) {
	t.Helper()
	clustertest.Eventually(t, converge, func() (bool, error) {
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
	admin := clustertest.Client(t)
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

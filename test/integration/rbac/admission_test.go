package rbac

import (
	"context"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// clientAs returns a clientset of the admin config impersonating user.
func clientAs(t *testing.T, user string) kubernetes.Interface {
	t.Helper()
	cfg := framework.Config(t)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// bindClusterRole binds the ClusterRole role to user in namespace ns, as the admin.
func bindClusterRole(t *testing.T, ns, role, user string) {
	t.Helper()
	_, err := framework.Client(t).RbacV1().RoleBindings(ns).Create(context.Background(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role + "-" + strings.ReplaceAll(user, ":", "-")},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("binding %s to %s: %v", role, user, err)
	}
}

// TestFinalizersGrantsAreNeeded shows that the test cluster enforces
// OwnerReferencesPermissionEnforcement and that the */finalizers grants of the shipped
// ClusterRole are what lets the controller set blockOwnerDeletion=true on its children's
// owner references: the same server-side apply (dry run) is admitted for the controller's
// ServiceAccount, and refused for a user with the shipped rules minus */finalizers.
func TestFinalizersGrantsAreNeeded(t *testing.T) {
	rb := installRBAC(t)
	admin := framework.Client(t)
	apps := framework.AppClient(t)
	ns := framework.Namespace(t)
	ctx := context.Background()

	// The shipped ClusterRole without its finalizers rules, for a plain user.
	const user = "rbac-test-without-finalizers"
	var rules []rbacv1.PolicyRule
	for _, rule := range rb.clusterRole.Rules {
		var resources []string
		for _, r := range rule.Resources {
			if !strings.HasSuffix(r, "/finalizers") {
				resources = append(resources, r)
			}
		}
		if len(resources) > 0 {
			rule.Resources = resources
			rules = append(rules, rule)
		}
	}
	withoutFinalizers := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: rules}
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, withoutFinalizers, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	bindClusterRole(t, ns, user, user)

	app, err := apps.AppcontrollerV1().Apps(ns).Create(ctx, &appv1.App{
		ObjectMeta: metav1.ObjectMeta{Name: "owner"},
		Spec:       appv1.AppSpec{ServiceTemplate: &appv1.ServiceTemplate{Name: "unused"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := admin.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "owner"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The App and the Service go before the namespace does: the controller-manager of a
	// later test of this binary would otherwise reconcile the App while the namespace
	// terminates, and be refused.
	t.Cleanup(func() {
		if err := apps.AppcontrollerV1().Apps(ns).Delete(ctx, app.Name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting App %s: %v", app.Name, err)
		}
		if err := admin.CoreV1().Services(ns).Delete(ctx, svc.Name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting Service %s: %v", svc.Name, err)
		}
		waitGone(t, func() error {
			_, err := apps.AppcontrollerV1().Apps(ns).Get(ctx, app.Name, metav1.GetOptions{})
			return err
		})
	})
	ownerRef := func(apiVersion, kind, name string, uid types.UID) string {
		return `"ownerReferences":[{"apiVersion":"` + apiVersion + `","kind":"` + kind + `","name":"` + name +
			`","uid":"` + string(uid) + `","controller":true,"blockOwnerDeletion":true}]`
	}
	tests := []struct {
		name  string
		apply func(client kubernetes.Interface) error
	}{
		{"Deployment owned by an App", func(client kubernetes.Interface) error {
			body := `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"child",` +
				ownerRef("appcontroller.k8s.io/v1", "App", app.Name, app.UID) + `},"spec":{"selector":{"matchLabels":{"a":"b"}},` +
				`"template":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[{"name":"c","image":"nginx"}]}}}}`
			_, err := client.AppsV1().Deployments(ns).Patch(ctx, "child", types.ApplyPatchType, []byte(body),
				metav1.PatchOptions{FieldManager: "rbac-test", DryRun: []string{metav1.DryRunAll}})
			return err
		}},
		{"Ingress owned by a Service", func(client kubernetes.Interface) error {
			body := `{"apiVersion":"networking.k8s.io/v1","kind":"Ingress","metadata":{"name":"child",` +
				ownerRef("v1", "Service", svc.Name, svc.UID) + `},"spec":{"defaultBackend":{"service":{"name":"owner","port":{"number":80}}}}}`
			_, err := client.NetworkingV1().Ingresses(ns).Patch(ctx, "child", types.ApplyPatchType, []byte(body),
				metav1.PatchOptions{FieldManager: "rbac-test", DryRun: []string{metav1.DryRunAll}})
			return err
		}},
	}
	controllerClient := impersonatedClient(t)
	restricted := clientAs(t, user)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The binding of the restricted user may take a moment to reach the authorizer:
			// wait until it is refused for the finalizers and nothing else.
			var refused error
			framework.Eventually(t, converge, func() (bool, error) {
				refused = tt.apply(restricted)
				return refused != nil && strings.Contains(refused.Error(), "blockOwnerDeletion"), nil
			})
			if !apierrors.IsForbidden(refused) {
				t.Errorf("without */finalizers: err = %v, want Forbidden by OwnerReferencesPermissionEnforcement", refused)
			}
			if err := tt.apply(controllerClient); err != nil {
				t.Errorf("as the controller's ServiceAccount: %v, want admitted", err)
			}
		})
	}
}

// TestAggregatedRoles binds the built-in view, edit and admin ClusterRoles to three users
// in a namespace and checks, through access reviews, what the aggregated roles of
// aggregate_roles.yaml give them on Apps and AnalysisTemplates: view reads, edit and
// admin read and write, and nobody writes the status, which is the controller's.
func TestAggregatedRoles(t *testing.T) {
	installRBAC(t)
	ns := framework.Namespace(t)
	admin := framework.Client(t)
	ctx := context.Background()
	users := map[string]string{"view": "rbac-test-viewer", "edit": "rbac-test-editor", "admin": "rbac-test-admin"}
	for role, user := range users {
		bindClusterRole(t, ns, role, user)
	}
	allowed := func(user string, attrs authorizationv1.ResourceAttributes) (bool, error) {
		attrs.Namespace, attrs.Group = ns, appv1.GroupName
		review, err := admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: &attrs},
		}, metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		return review.Status.Allowed, nil
	}
	// The clusterrole-aggregation controller copies the rules into the built-in roles.
	framework.Eventually(t, converge, func() (bool, error) {
		view, err := allowed(users["view"], authorizationv1.ResourceAttributes{Verb: "list", Resource: "apps"})
		if err != nil {
			return false, err
		}
		edit, err := allowed(users["edit"], authorizationv1.ResourceAttributes{Verb: "create", Resource: "apps"})
		return view && edit, err
	})

	read := []string{"get", "list", "watch"}
	write := []string{"create", "update", "patch", "delete", "deletecollection"}
	for role, user := range users {
		t.Run(role, func(t *testing.T) {
			for _, resource := range []string{"apps", "analysistemplates"} {
				for _, verb := range append(read, write...) {
					want := role != "view" || !strings.Contains(strings.Join(write, ","), verb)
					got, err := allowed(user, authorizationv1.ResourceAttributes{Verb: verb, Resource: resource})
					if err != nil {
						t.Fatal(err)
					}
					if got != want {
						t.Errorf("%s (bound to %s): %s %s allowed = %v, want %v", user, role, verb, resource, got, want)
					}
				}
			}
			for _, verb := range []string{"update", "patch"} {
				got, err := allowed(user, authorizationv1.ResourceAttributes{Verb: verb, Resource: "apps", Subresource: "status"})
				if err != nil {
					t.Fatal(err)
				}
				if got {
					t.Errorf("%s (bound to %s): %s apps/status allowed, want denied: the status is the controller's", user, role, verb)
				}
			}
		})
	}
}

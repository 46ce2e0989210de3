package rbac

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller/app"
	"github.com/app-controller/app-controller/pkg/controllermanager"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// noSecretsUser is the identity of TestAppsWithoutSecretRights: a ServiceAccount bound to
// the shipped ClusterRole without its grant on Secrets.
const noSecretsUser = "system:serviceaccount:" + controllerNamespace + ":app-controller-no-secrets"

// withoutSecrets returns the rules with "secrets" taken out of each rule's resources (a
// rule left with no resource dropped), as the chart renders its ClusterRole with
// configRollout.secrets=false, and the verbs the rules granted on Secrets.
func withoutSecrets(rules []rbacv1.PolicyRule) (kept []rbacv1.PolicyRule, dropped []string) {
	for _, r := range rules {
		r = *r.DeepCopy()
		if i := slices.Index(r.Resources, "secrets"); i >= 0 {
			r.Resources = slices.Delete(r.Resources, i, i+1)
			dropped = append(dropped, r.Verbs...)
		}
		if len(r.Resources) > 0 {
			kept = append(kept, r)
		}
	}
	return kept, dropped
}

// TestAppsWithoutSecretRights runs the App controller with --config-rollout-secrets=false
// as a user bound to the shipped ClusterRole without its grant on Secrets (list, watch,
// and get, create and delete for the copies of versionedConfig; nothing else): the API server refuses none of its requests, none of them is
// about Secrets, an App whose pods read a Secret and a ConfigMap becomes Ready, and a
// change of the ConfigMap still rolls its pods.
func TestAppsWithoutSecretRights(t *testing.T) {
	rb := loadRBAC(t)
	admin := framework.Client(t)
	apps := framework.AppClient(t)
	ctx := context.Background()

	rules, dropped := withoutSecrets(rb.clusterRole.Rules)
	slices.Sort(dropped)
	if want := []string{"create", "delete", "get", "list", "watch"}; !slices.Equal(dropped, want) {
		t.Fatalf("the ClusterRole grants %q on Secrets, want %q (what --config-rollout-secrets=false does without)", dropped, want)
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "app-controller-no-secrets"}, Rules: rules}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: noSecretsUser}},
	}
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.RbacV1().ClusterRoles().Delete(ctx, role.Name, metav1.DeleteOptions{}) })
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.RbacV1().ClusterRoleBindings().Delete(ctx, binding.Name, metav1.DeleteOptions{}) })

	cfg := framework.Config(t)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: noSecretsUser}
	sa, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Wait until the authorizer has seen the binding; then Secrets stay out of reach.
	framework.Eventually(t, converge, func() (bool, error) {
		allowed, _, err := canI(ctx, sa, permission{"watch", "", "configmaps"}.attributes())
		return allowed, err
	})
	if allowed, _, err := canI(ctx, sa, permission{"list", "", "secrets"}.attributes()); err != nil || allowed {
		t.Fatalf("%s may list Secrets (%v): the test's role is not the one it means", noSecretsUser, err)
	}

	requests := &requestLog{}
	// Registered before the manager starts, so that it runs after the manager stopped.
	t.Cleanup(func() {
		used, forbidden := requests.snapshot()
		for _, f := range forbidden {
			t.Errorf("the API server refused a request of the manager: %s", f)
		}
		for _, u := range used {
			if u.resource == "secrets" {
				t.Errorf("the manager used %s with --config-rollout-secrets=false", u.permission)
			} else if _, ok := grantOf(u.permission); !ok {
				t.Errorf("the manager used %s, which grants does not list", u.permission)
			}
		}
		t.Logf("%d permissions used, none on Secrets, none refused", len(used))
	})
	cfg.Wrap(requests.wrap)
	opts := controllermanager.NewOptions()
	opts.Controllers = []string{app.ControllerName}
	opts.ConfigRolloutSecrets = false
	opts.ResyncPeriod = 10 * time.Second
	opts.ShutdownTimeout = 5 * time.Second
	startManager(t, cfg, opts)

	ns := framework.Namespace(t)
	if _, err := admin.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "db"}, StringData: map[string]string{"password": "one"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"mode": "one"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := apps.AppcontrollerV1().Apps(ns).Create(ctx, &appv1.App{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appv1.AppSpec{
			DeploymentTemplate: &appv1.DeploymentTemplate{Name: "web", Image: "nginx", Replicas: ptr.To[int32](1), Env: []corev1.EnvVar{
				{Name: "PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "password"}}},
				{Name: "MODE", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}, Key: "mode"}}},
			}},
			ServiceTemplate: &appv1.ServiceTemplate{Name: "web"},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitAppReady(t, apps, ns, "web")
	before, err := admin.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rolledFor := before.Spec.Template.Annotations[appv1.ConfigHashAnnotation]
	if rolledFor == "" {
		t.Fatalf("Deployment web: no %s on its pod template: the ConfigMap is not followed", appv1.ConfigHashAnnotation)
	}
	t.Logf("App web Ready; its pods read Secret db and ConfigMap settings; config hash %s", rolledFor)

	// A change of the ConfigMap rolls the pods: config rollouts work without Secrets.
	if _, err := admin.CoreV1().ConfigMaps(ns).Update(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"mode": "two"},
	}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var after string
	framework.Eventually(t, converge, func() (bool, error) {
		d, err := admin.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		after = d.Spec.Template.Annotations[appv1.ConfigHashAnnotation]
		return after != rolledFor, nil
	})
	waitAppReady(t, apps, ns, "web")
	t.Logf("ConfigMap settings changed: the pods rolled (config hash %s -> %s)", rolledFor, after)
}

package app

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	dto "github.com/prometheus/client_model/go"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controllermanager"
	"github.com/app-controller/app-controller/test/harness"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// TestWatchNamespace runs the App controller with --watch-namespace, given twice, as a
// ServiceAccount whose only rights are a Role in each of those namespaces, made of the
// shipped ClusterRole's rules on namespaced resources, and the read of
// ClusterAnalysisTemplates in a ClusterRole (as the chart's watchNamespaces renders it): the Apps of both namespaces converge, and a Service annotated ingress/http
// in the second gets its Ingress; those of another namespace are left alone (no child, no
// status). Each namespace's controllers have their own work queues, named
// controller/namespace in the workqueue_* metrics.
func TestWatchNamespace(t *testing.T) {
	c := newClients(t)
	mine, second, other := framework.Namespace(t), framework.Namespace(t), framework.Namespace(t)
	ctx := context.Background()
	cfg := namespacedInstall(t, c, mine, []string{mine, second}, true)
	opts := controllermanager.NewOptions()
	opts.WatchNamespaces = []string{mine, second}
	opts.Controllers = []string{"app", "ingress"}
	opts.ShutdownTimeout = 5 * time.Second
	framework.StartManager(t, cfg, opts)

	for _, ns := range []string{mine, second, other} {
		c.Create(t, newApp(ns, "web", "nginx", 1))
	}
	annotated := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: second, Annotations: map[string]string{"ingress/http": "true"}},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
	}
	if _, err := c.Kube.CoreV1().Services(second).Create(ctx, annotated, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.WaitReady(t, mine, "web")
	c.WaitReady(t, second, "web")
	framework.Eventually(t, converge, func() (bool, error) {
		_, err := c.Kube.NetworkingV1().Ingresses(second).Get(ctx, "plain", metav1.GetOptions{})
		return err == nil, nil
	})
	time.Sleep(2 * time.Second) // time to act on the other, if it wrongly would
	if a := c.GetApp(t, other, "web"); a.Status.ObservedGeneration != -1 || len(a.Status.Conditions) != 0 {
		t.Errorf("the App of another namespace was synced: %+v", a.Status)
	}

	families, err := legacyregistry.DefaultGatherer.Gather() // the manager runs in this process
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*dto.MetricFamily{}
	for _, f := range families {
		byName[f.GetName()] = f
	}
	for _, queue := range []string{"app/" + mine, "app/" + second, "ingress/" + mine, "ingress/" + second} {
		if _, series := harness.Value(byName, "workqueue_depth", map[string]string{"name": queue}); series != 1 {
			t.Errorf("workqueue_depth{name=%q}: %d series, want 1", queue, series)
		}
	}
	for _, queue := range []string{"app/" + mine, "app/" + second} {
		if adds, _ := harness.Value(byName, "workqueue_adds_total", map[string]string{"name": queue}); adds < 1 {
			t.Errorf("workqueue_adds_total{name=%q} = %v, want at least 1 (its App)", queue, adds)
		}
	}
}

// namespacedInstall makes what the chart's watchNamespaces renders for a controller
// running as the ServiceAccount app-controller of namespace mine: a Role in each of
// namespaces made of the shipped ClusterRole's rules on namespaced resources, and, when
// clusterTemplates, the read of ClusterAnalysisTemplates in a ClusterRole. It returns
// the configuration that impersonates that ServiceAccount.
func namespacedInstall(t *testing.T, c clients, mine string, namespaces []string, clusterTemplates bool) *rest.Config {
	t.Helper()
	ctx := context.Background()

	var shipped rbacv1.ClusterRole
	if err := yaml.Unmarshal(framework.RepoFile(t, "config", "rbac", "role.yaml"), &shipped); err != nil { // the file's first document
		t.Fatal(err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "app-controller", Namespace: mine}}
	if _, err := c.Kube.CoreV1().ServiceAccounts(mine).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The shipped rules on namespaced resources in a Role; those on the cluster-wide
	// ClusterAnalysisTemplates in a ClusterRole, as the chart renders them.
	var namespaced, clusterWide []rbacv1.PolicyRule
	for _, r := range shipped.Rules {
		switch {
		case slices.ContainsFunc(r.Resources, func(res string) bool {
			return res == "nodes" || res == "tokenreviews" || res == "subjectaccessreviews"
		}):
		case slices.Contains(r.Resources, "clusteranalysistemplates"):
			c := *r.DeepCopy()
			c.Resources = []string{"clusteranalysistemplates"}
			clusterWide = append(clusterWide, c)
			r.Resources = slices.DeleteFunc(slices.Clone(r.Resources), func(res string) bool { return res == "clusteranalysistemplates" })
			namespaced = append(namespaced, r)
		default:
			namespaced = append(namespaced, r)
		}
	}
	for _, ns := range namespaces {
		role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "app-controller", Namespace: ns}, Rules: namespaced}
		binding := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "app-controller", Namespace: ns},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "app-controller"},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "app-controller", Namespace: mine}},
		}
		if _, err := c.Kube.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Kube.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if !clusterTemplates {
		return impersonate(t, mine)
	}
	clusterRole := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: mine + "-app-controller"}, Rules: clusterWide}
	if _, err := c.Kube.RbacV1().ClusterRoles().Create(ctx, clusterRole, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	clusterBinding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: mine + "-app-controller"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole.Name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "app-controller", Namespace: mine}},
	}
	if _, err := c.Kube.RbacV1().ClusterRoleBindings().Create(ctx, clusterBinding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), clusterBinding.Name, metav1.DeleteOptions{})
		_ = c.Kube.RbacV1().ClusterRoles().Delete(context.Background(), clusterRole.Name, metav1.DeleteOptions{})
	})

	return impersonate(t, mine)
}

// impersonate returns the test cluster's configuration as the ServiceAccount
// app-controller of namespace ns.
func impersonate(t *testing.T, ns string) *rest.Config {
	t.Helper()
	cfg := rest.CopyConfig(framework.Config(t))
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":app-controller"}
	return cfg
}

// TestWatchNamespaceWithoutClusterTemplates is a namespaced install whose ServiceAccount
// may not read ClusterAnalysisTemplates (the chart's ClusterRole left out): the
// controller starts and reconciles its namespace (its informer on ClusterAnalysisTemplates
// would never sync), and a check that refers to one waits, its message saying why
// (AnalysisTemplateNotFound: the controller does not watch them, and what to grant).
func TestWatchNamespaceWithoutClusterTemplates(t *testing.T) {
	c := newClients(t)
	mine := framework.Namespace(t)
	ctx := context.Background()
	cfg := namespacedInstall(t, c, mine, []string{mine}, false)
	name := mine + "-error-ratio"
	if _, err := c.App.AppcontrollerV1().ClusterAnalysisTemplates().Create(ctx, &appv1.ClusterAnalysisTemplate{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appv1.AnalysisTemplateSpec{Query: appv1.QueryCheck{PromQL: "vector(0)", SuccessCondition: &appv1.ValueRange{Max: ptr.To("0.05")}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.App.AppcontrollerV1().ClusterAnalysisTemplates().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	opts := controllermanager.NewOptions()
	opts.WatchNamespaces = []string{mine}
	opts.Controllers = []string{"app"}
	opts.ShutdownTimeout = 5 * time.Second
	opts.PrometheusURL = "http://127.0.0.1:1" // never asked: the check's template cannot be read
	framework.StartManager(t, cfg, opts)

	c.Create(t, rolloutApp(mine, "web", 1, setWeight(50), appv1.CanaryStep{Analysis: &appv1.AnalysisStep{Checks: []appv1.AnalysisCheck{
		{Name: "errors", TemplateRef: &appv1.AnalysisTemplateRef{Kind: appv1.AnalysisTemplateKindCluster, Name: name}}}}}))
	c.WaitReady(t, mine, "web")
	c.Update(t, mine, "web", func(a *appv1.App) { a.Spec.DeploymentTemplate.Image = "nginx:2" })
	app := c.WaitCondition(t, mine, "web", appv1.ConditionReady, "False/"+appv1.ReasonAnalysisTemplateNotFound)
	ready := meta.FindStatusCondition(app.Status.Conditions, appv1.ConditionReady)
	if !strings.Contains(ready.Message, "the controller does not watch ClusterAnalysisTemplates") ||
		!strings.Contains(ready.Message, "grant list and watch on clusteranalysistemplates.appcontroller.k8s.io") {
		t.Errorf("Ready message %q, want it to say the controller does not watch ClusterAnalysisTemplates and what to grant", ready.Message)
	}
	t.Logf("Ready: %s", ready.Message)
}

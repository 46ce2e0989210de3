// Package compat is the smoke of the product on one Kubernetes version, run by `make
// test-compat` once per minor of the compatibility matrix (docs/compatibility.md) and
// by `make test` on the oldest supported one: the local control plane started on that
// version's kube-apiserver, kube-controller-manager and kube-scheduler
// ($APP_CONTROLLER_KUBE_BIN_DIR, bin/compat/MINOR), the chart installed with helm as a
// user installs it, the controller binary run as the chart's ServiceAccount with the
// chart's arguments, then one check per feature. Each check's outcome goes to
// $APP_CONTROLLER_COMPAT_RESULTS, which make test-compat prints as a matrix of version x
// check with each failure's message.
//
// $APP_CONTROLLER_COMPAT_VERSION is the minor the binaries must report (e.g. 1.34);
// unset, the smoke runs on whatever the binaries are (bin/'s by default).
package compat

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/app-controller/app-controller/internal/localcluster"
	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller/appfixture"
	ingressctrl "github.com/app-controller/app-controller/pkg/controller/ingress"
	appclientset "github.com/app-controller/app-controller/pkg/generated/clientset/versioned"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// The environment make test-compat sets.
const (
	// VersionEnv is the Kubernetes minor the control plane must report, e.g. 1.34.
	VersionEnv = "APP_CONTROLLER_COMPAT_VERSION"
	// ResultsEnv is the file the checks' outcomes are written to.
	ResultsEnv = "APP_CONTROLLER_COMPAT_RESULTS"
)

const (
	// releaseName is the Helm release, and so the name of the chart's ServiceAccount,
	// Deployment, Lease and node label rules ConfigMap.
	releaseName = "app-controller"
	// releaseNamespace is the namespace helm installs the chart into.
	releaseNamespace = "app-controller-system"
	// labelKey=labelValue is what the node label rule of the install gives kwok nodes.
	labelKey   = "compat.example.com/labelled"
	labelValue = "yes"
	// converge bounds each wait for the controller and the cluster.
	converge = 90 * time.Second
)

// check is one row of the matrix: a name and what it checks. A setup check (the
// control plane, the install, the controller) runs in the test itself: its failure ends
// the test, and the checks after it are not run ("-"). The others run as subtests, each
// whatever the others' outcome.
type check struct {
	name  string
	setup bool
	run   func(s *smoke, t testing.TB)
}

// checks are the rows of the matrix, in the order they run.
var checks = []check{
	{"control plane", true, (*smoke).controlPlane},
	{"helm install", true, (*smoke).helmInstall},
	{"controller", true, (*smoke).controller},
	{"seed Apps Ready", false, (*smoke).seedApps},
	{"CEL validation", false, (*smoke).celValidation},
	{"route (Ingress)", false, (*smoke).route},
	{"PodDisruptionBudget", false, (*smoke).disruptionBudget},
	{"native sidecar", false, (*smoke).sidecar},
	{"config rollout", false, (*smoke).configRollout},
	{"revision+rollback", false, (*smoke).revisionRollback},
	{"canary rollout", false, (*smoke).canaryRollout},
	{"autoscaling (HPA)", false, (*smoke).autoscaling},
	{"Service->Ingress", false, (*smoke).serviceIngress},
	{"node labeler", false, (*smoke).nodeLabeler},
	{"admission policy", false, (*smoke).admissionPolicy},
	{"RBAC (no refusal)", false, (*smoke).noRefusal},
}

// smoke is what the checks share.
type smoke struct {
	minor string // the minor asked for, "" for any
	res   *results
	kube  kubernetes.Interface
	apps  appclientset.Interface
	// controllerKubeconfig is the chart's ServiceAccount's; logs the controller's output.
	controllerKubeconfig string
	logs                 func() string
}

func TestSmoke(t *testing.T) {
	s := &smoke{minor: os.Getenv(VersionEnv)}
	var names []string
	for _, c := range checks {
		names = append(names, c.name)
	}
	s.res = newResults(t, os.Getenv(ResultsEnv), s.minor, names)
	for _, c := range checks {
		if c.setup {
			s.res.run(t, c.name, func(t testing.TB) { c.run(s, t) })
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			s.res.run(t, c.name, func(t testing.TB) { c.run(s, t) })
		})
	}
}

// controlPlane starts the control plane on the binaries of $APP_CONTROLLER_KUBE_BIN_DIR
// (framework.Start), without the App CRD (the chart installs it), and checks that the
// API server is of the minor asked for.
func (s *smoke) controlPlane(t testing.TB) {
	stop, err := framework.Start(func(o *localcluster.Options) { o.CRDDir = "" })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	s.kube = framework.Client(t)
	apps, err := appclientset.NewForConfig(framework.Config(t))
	if err != nil {
		t.Fatal(err)
	}
	s.apps = apps
	v, err := s.kube.Discovery().ServerVersion()
	if err != nil {
		t.Fatalf("reading the API server's version: %v", err)
	}
	s.res.setServer(t, v.GitVersion)
	t.Logf("kube-apiserver %s", v.GitVersion)
	if got := v.Major + "." + v.Minor; s.minor != "" && got != s.minor {
		t.Fatalf("the API server is %s (%s), want %s: $%s holds another version's binaries", got, v.GitVersion, s.minor, localcluster.KubeBinDirEnv)
	}
}

// helmInstall installs the chart with bin/helm, as a user does (the CRD, RBAC, the
// Deployment, its PodDisruptionBudget, the FlowSchema, the ValidatingAdmissionPolicy of
// the node labeler, ...), with a node label rule, and waits until the Deployment is
// available (kwok runs its pods), the CRD is established, the FlowSchema names a
// priority level the API server has and the policy type-checks without warnings.
func (s *smoke) helmInstall(t testing.TB) {
	binDir, root := framework.BinDir(t), framework.RepoRoot(t)
	rules, err := json.Marshal([]any{map[string]any{
		"name":   "compat",
		"match":  map[string]any{"providerIDPrefix": "kwok://"},
		"labels": map[string]string{labelKey: labelValue},
	}})
	if err != nil {
		t.Fatal(err)
	}
	helm := filepath.Join(binDir, "helm")
	cmd := exec.Command(helm, "install", releaseName, filepath.Join(root, "charts", "app-controller"),
		"--kubeconfig", framework.Cluster().Kubeconfig, "--namespace", releaseNamespace, "--create-namespace",
		"--set-json", "nodeLabelRules="+string(rules), "--wait", "--timeout", converge.String())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helm install: %v: %s", err, out)
	}
	ctx := context.Background()
	waitFor(t, "the App CRD established", func() (bool, string) {
		out, err := exec.Command(filepath.Join(binDir, "kubectl"), "--kubeconfig", framework.Cluster().Kubeconfig,
			"get", "crd", "apps.appcontroller.k8s.io", "-o", `jsonpath={.status.conditions[?(@.type=="Established")].status}`).CombinedOutput()
		return err == nil && string(out) == "True", string(out)
	})
	fsName := releaseName + "-leader-election"
	waitFor(t, "FlowSchema "+fsName+" Dangling=False", func() (bool, string) {
		fs, err := s.kube.FlowcontrolV1().FlowSchemas().Get(ctx, fsName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range fs.Status.Conditions {
			if c.Type == "Dangling" {
				return c.Status == "False", fmt.Sprintf("Dangling=%s: %s", c.Status, c.Message)
			}
		}
		return false, "no Dangling condition"
	})
	vapName := releaseName + "-node-labels-only"
	waitFor(t, "ValidatingAdmissionPolicy "+vapName+" type-checked", func() (bool, string) {
		vap, err := s.kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, vapName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if vap.Status.ObservedGeneration != vap.Generation || vap.Status.TypeChecking == nil {
			return false, "not type-checked yet"
		}
		if w := vap.Status.TypeChecking.ExpressionWarnings; len(w) > 0 {
			t.Fatalf("ValidatingAdmissionPolicy %s: type-checking warnings: %+v", vapName, w)
		}
		return true, ""
	})
	if _, err := s.kube.PolicyV1().PodDisruptionBudgets(releaseNamespace).Get(ctx, releaseName, metav1.GetOptions{}); err != nil {
		t.Fatalf("the chart's PodDisruptionBudget: %v", err)
	}
}

// controller runs the controller binary as the chart's ServiceAccount with the
// arguments of the chart's Deployment and the rules of its ConfigMap, and waits until
// it leads (the Lease of the release namespace).
func (s *smoke) controller(t testing.TB) {
	ctx := context.Background()
	d, err := s.kube.AppsV1().Deployments(releaseNamespace).Get(ctx, releaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm, err := s.kube.CoreV1().ConfigMaps(releaseNamespace).Get(ctx, releaseName+"-node-label-rules", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(rules, []byte(cm.Data["rules.yaml"]), 0o600); err != nil {
		t.Fatal(err)
	}
	s.controllerKubeconfig = framework.ServiceAccountKubeconfig(t, releaseNamespace, releaseName)
	args := framework.LocalArgs(d.Spec.Template.Spec.Containers[0].Args, rules)
	s.logs = framework.RunController(t, releaseNamespace, append(args, "--kubeconfig="+s.controllerKubeconfig))
	waitFor(t, "the controller to lead (Lease "+releaseNamespace+"/app-controller)", func() (bool, string) {
		lease, err := s.kube.CoordinationV1().Leases(releaseNamespace).Get(ctx, "app-controller", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "", "no holder"
	})
}

// seedApps applies the seed's example Apps (artifacts/example) with kubectl, server-side,
// and waits until they are Ready.
func (s *smoke) seedApps(t testing.TB) {
	root := framework.RepoRoot(t)
	framework.Kubectl(t, "create", "namespace", "tcs")
	framework.Kubectl(t, "apply", "--server-side", "-f", filepath.Join(root, "artifacts", "example"))
	for _, name := range []string{"test-app", "test-app-2"} {
		s.waitReady(t, "tcs", name)
	}
}

// celValidation creates an App whose pod label key is not a qualified name: the CRD's
// CEL rule (the format library) refuses it with its message.
func (s *smoke) celValidation(t testing.TB) {
	ns := framework.Namespace(t)
	app := appfixture.NewApp(ns, "bad", "nginx", 1)
	app.Spec.DeploymentTemplate.PodLabels = map[string]appv1.LabelValue{"not valid!": "x"}
	_, err := s.apps.AppcontrollerV1().Apps(ns).Create(context.Background(), app, metav1.CreateOptions{})
	want := "podLabels: not valid! is not a valid label key"
	if err == nil || !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) {
		t.Fatalf("creating an App with pod label key %q: %v, want Invalid saying %q", "not valid!", err, want)
	}
}

// route checks that an App's route becomes an Ingress named as the App, routing the
// host to the App's Service, and that the App reports it accepted.
func (s *smoke) route(t testing.TB) {
	ns := framework.Namespace(t)
	app := appfixture.NewApp(ns, "shop", "nginx", 1)
	app.Spec.Route = &appv1.Route{Hosts: []appv1.Hostname{"shop.example.com"}}
	s.create(t, app)
	waitFor(t, "Ingress "+ns+"/shop of the route", func() (bool, string) {
		ing, err := s.kube.NetworkingV1().Ingresses(ns).Get(context.Background(), "shop", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		ok := len(ing.Spec.Rules) == 1 && ing.Spec.Rules[0].Host == "shop.example.com" && ing.Spec.Rules[0].HTTP != nil &&
			len(ing.Spec.Rules[0].HTTP.Paths) > 0 && ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name == "shop-svc"
		return ok, fmt.Sprintf("rules %+v", ing.Spec.Rules)
	})
	s.waitCondition(t, ns, "shop", appv1.ConditionRouteAccepted, "True/"+appv1.ReasonRouted)
}

// disruptionBudget checks that an App's disruption budget becomes a PodDisruptionBudget
// of its pods, which the cluster's disruption controller counts.
func (s *smoke) disruptionBudget(t testing.TB) {
	ns := framework.Namespace(t)
	app := appfixture.NewApp(ns, "web", "nginx", 2)
	app.Spec.DisruptionBudget = &appv1.DisruptionBudget{MaxUnavailable: new(intstr.FromInt32(1))}
	s.create(t, app)
	s.waitReady(t, ns, "web")
	waitFor(t, "PodDisruptionBudget "+ns+"/web-deploy counting 2 pods", func() (bool, string) {
		pdb, err := s.kube.PolicyV1().PodDisruptionBudgets(ns).Get(context.Background(), "web-deploy", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return pdb.Status.ExpectedPods == 2 && pdb.Status.CurrentHealthy == 2,
			fmt.Sprintf("expected %d, healthy %d", pdb.Status.ExpectedPods, pdb.Status.CurrentHealthy)
	})
}

// sidecar checks that an App's sidecar becomes a native sidecar (an init container with
// restartPolicy Always) and that the App becomes Ready.
func (s *smoke) sidecar(t testing.TB) {
	ns := framework.Namespace(t)
	app := appfixture.NewApp(ns, "web", "nginx", 1)
	app.Spec.DeploymentTemplate.Sidecars = []appv1.Container{{Name: "proxy", Image: "envoy"}}
	s.create(t, app)
	s.waitReady(t, ns, "web")
	d, err := s.kube.AppsV1().Deployments(ns).Get(context.Background(), "web-deploy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	init := d.Spec.Template.Spec.InitContainers
	if len(init) != 1 || init[0].Name != "proxy" || init[0].RestartPolicy == nil || *init[0].RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Fatalf("Deployment web-deploy's init containers %+v, want the sidecar proxy with restartPolicy Always", init)
	}
}

// configRollout checks that a change of a ConfigMap the App's pods read rolls them (a
// new ReplicaSet).
func (s *smoke) configRollout(t testing.TB) {
	ns := framework.Namespace(t)
	ctx := context.Background()
	cms := s.kube.CoreV1().ConfigMaps(ns)
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"MODE": "a"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	app := appfixture.NewApp(ns, "web", "nginx", 1)
	app.Spec.DeploymentTemplate.EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}}
	s.create(t, app)
	s.waitReady(t, ns, "web")
	before := s.replicaSets(t, ns, "web")
	if _, err := cms.Patch(ctx, "settings", types.MergePatchType, []byte(`{"data":{"MODE":"b"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a new ReplicaSet of App web after its ConfigMap changed", func() (bool, string) {
		now := s.replicaSets(t, ns, "web")
		return slices.ContainsFunc(now, func(rs string) bool { return !slices.Contains(before, rs) }), fmt.Sprintf("ReplicaSets %v, were %v", now, before)
	})
	s.waitReady(t, ns, "web")
}

// revisionRollback records two revisions of an App and rolls it back to the first with
// kubectl app rollback: the first image comes back, as a third revision.
func (s *smoke) revisionRollback(t testing.TB) {
	ns := framework.Namespace(t)
	s.create(t, appfixture.NewApp(ns, "web", "nginx:1", 1))
	s.waitReady(t, ns, "web")
	s.update(t, ns, "web", func(a *appv1.App) { a.Spec.DeploymentTemplate.Image = "nginx:2" })
	s.waitImage(t, ns, "web-deploy", "nginx:2")
	s.waitRevisions(t, ns, "web", 1, 2)

	plugin := framework.BuildBinary(t, "kubectl-app")
	out, err := exec.Command(plugin, "rollback", "web", "--to-revision", "1", "-n", ns, "--kubeconfig", framework.Cluster().Kubeconfig).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl app rollback web --to-revision 1: %v: %s", err, out)
	}
	s.waitImage(t, ns, "web-deploy", "nginx:1")
	s.waitRevisions(t, ns, "web", 2, 3)
	s.waitReady(t, ns, "web")
}

// canaryRollout changes the image of an App with a canary strategy (setWeight 25, then a
// pause until promoted): the change runs first in a canary Deployment of one of the four
// replicas beside three stable ones, the rollout waits at the pause, and kubectl app
// promote makes the new image the stable Deployment's, at four replicas, the canary gone.
func (s *smoke) canaryRollout(t testing.TB) {
	ns := framework.Namespace(t)
	ctx := context.Background()
	app := appfixture.NewApp(ns, "web", "nginx:1", 4)
	app.Spec.Rollout = &appv1.Rollout{Canary: &appv1.CanaryStrategy{
		Steps:                 []appv1.CanaryStep{{SetWeight: new(int32(25))}, {Pause: &appv1.CanaryPause{}}},
		ScaleDownDelaySeconds: new(int32(0)),
	}}
	s.create(t, app)
	s.waitReady(t, ns, "web")
	s.update(t, ns, "web", func(a *appv1.App) { a.Spec.DeploymentTemplate.Image = "nginx:2" })
	s.waitCondition(t, ns, "web", appv1.ConditionProgressing, "True/"+appv1.ReasonRolloutPaused)
	s.waitDeployment(t, ns, "web-deploy-canary", 1, "nginx:2")
	s.waitDeployment(t, ns, "web-deploy", 3, "nginx:1")

	plugin := framework.BuildBinary(t, "kubectl-app")
	out, err := exec.Command(plugin, "promote", "web", "-n", ns, "--kubeconfig", framework.Cluster().Kubeconfig).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl app promote web: %v: %s", err, out)
	}
	s.waitDeployment(t, ns, "web-deploy", 4, "nginx:2")
	waitFor(t, "the canary Deployment "+ns+"/web-deploy-canary gone", func() (bool, string) {
		_, err := s.kube.AppsV1().Deployments(ns).Get(ctx, "web-deploy-canary", metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	s.waitReady(t, ns, "web")
}

// autoscaling checks that an App's spec.autoscaling becomes a HorizontalPodAutoscaler of
// its Deployment, and that the App reads the autoscaler's state as the cluster's
// HorizontalPodAutoscaler controller reports it (no metrics API here: not scaling yet,
// ScalingActive Unknown) while it stays Ready.
func (s *smoke) autoscaling(t testing.TB) {
	ns := framework.Namespace(t)
	s.create(t, appfixture.WithAutoscaling(appfixture.NewApp(ns, "web", "nginx", 1), 1, 3, 50, "100m"))
	waitFor(t, "HorizontalPodAutoscaler "+ns+"/web-deploy of Deployment web-deploy, 1 to 3 at 50% CPU", func() (bool, string) {
		hpa, err := s.kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(context.Background(), "web-deploy", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		spec := hpa.Spec
		ok := spec.ScaleTargetRef.Kind == "Deployment" && spec.ScaleTargetRef.Name == "web-deploy" && ptr.Deref(spec.MinReplicas, 0) == 1 &&
			spec.MaxReplicas == 3 && len(spec.Metrics) == 1 && spec.Metrics[0].Resource != nil && spec.Metrics[0].Resource.Name == corev1.ResourceCPU &&
			ptr.Deref(spec.Metrics[0].Resource.Target.AverageUtilization, 0) == 50
		return ok, fmt.Sprintf("spec %+v", spec)
	})
	s.waitCondition(t, ns, "web", appv1.ConditionScalingActive, "Unknown/"+appv1.ReasonAutoscalerPending)
	s.waitReady(t, ns, "web")
}

// serviceIngress checks that a Service annotated ingress/http gets an Ingress.
func (s *smoke) serviceIngress(t testing.TB) {
	ns := framework.Namespace(t)
	ctx := context.Background()
	_, err := s.kube.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "shop", Annotations: map[string]string{ingressctrl.AnnotationHTTP: "true"}},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "Ingress "+ns+"/shop of the annotated Service", func() (bool, string) {
		ing, err := s.kube.NetworkingV1().Ingresses(ns).Get(ctx, "shop", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(ing.Spec.Rules) == 1 && ing.Spec.Rules[0].HTTP != nil && ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name == "shop",
			fmt.Sprintf("rules %+v", ing.Spec.Rules)
	})
}

// nodeLabeler checks that the node gets the label of the install's rule (written by the
// chart's ServiceAccount, through the chart's admission policy).
func (s *smoke) nodeLabeler(t testing.TB) {
	waitFor(t, "node "+localcluster.DefaultNodeName+" labelled "+labelKey+"="+labelValue, func() (bool, string) {
		node, err := s.kube.CoreV1().Nodes().Get(context.Background(), localcluster.DefaultNodeName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return node.Labels[labelKey] == labelValue, fmt.Sprintf("labels %v", node.Labels)
	})
}

// admissionPolicy checks that the chart's ValidatingAdmissionPolicy refuses, to the
// controller's ServiceAccount, a change of a node beyond its labels (a taint).
func (s *smoke) admissionPolicy(t testing.TB) {
	cfg, err := clientcmd.BuildConfigFromFlags("", s.controllerKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	sa, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	patch := `{"spec":{"taints":[{"key":"compat.example.com/tainted","effect":"NoSchedule"}]}}`
	_, err = sa.CoreV1().Nodes().Patch(context.Background(), localcluster.DefaultNodeName, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
	want := "app-controller may change only node labels: it may not change spec.taints"
	if err == nil || !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
		t.Fatalf("tainting node %s as the controller's ServiceAccount: %v, want Forbidden saying %q", localcluster.DefaultNodeName, err, want)
	}
}

// noRefusal checks that RBAC refused the controller nothing under the chart's roles
// while the checks above ran: the authorizer's refusal reads `... is forbidden: User
// "system:serviceaccount:..." cannot VERB resource ...` (a write into a namespace being
// deleted, as each check's is at its end, is refused too, by admission: not counted).
func (s *smoke) noRefusal(t testing.TB) {
	if lines := framework.GrepLines(s.logs(), "is forbidden: User "); lines != "" {
		t.Fatalf("RBAC refused the controller something under the chart's roles: %s", lines)
	}
}

// create creates the App.
func (s *smoke) create(t testing.TB, app *appv1.App) {
	t.Helper()
	if _, err := s.apps.AppcontrollerV1().Apps(app.Namespace).Create(context.Background(), app, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating App %s/%s: %v", app.Namespace, app.Name, err)
	}
}

// waitReady waits until the App is Ready at its current generation.
func (s *smoke) waitReady(t testing.TB, ns, name string) {
	t.Helper()
	s.waitCondition(t, ns, name, appv1.ConditionReady, "True/"+appv1.ReasonAvailable)
}

// waitCondition waits until the App, observed at its current generation, has the
// condition with "Status/Reason" want.
func (s *smoke) waitCondition(t testing.TB, ns, name, conditionType, want string) {
	t.Helper()
	waitFor(t, fmt.Sprintf("App %s/%s %s=%s", ns, name, conditionType, want), func() (bool, string) {
		app, err := s.apps.AppcontrollerV1().Apps(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(app.Status.Conditions, conditionType)
		if c == nil {
			return false, fmt.Sprintf("no %s condition (generation %d, observed %d)", conditionType, app.Generation, app.Status.ObservedGeneration)
		}
		got := string(c.Status) + "/" + c.Reason
		return got == want && app.Status.ObservedGeneration == app.Generation,
			fmt.Sprintf("%s=%s: %s (generation %d, observed %d)", conditionType, got, c.Message, app.Generation, app.Status.ObservedGeneration)
	})
}

// update applies mutate to the latest App and updates it, retrying on conflicts.
func (s *smoke) update(t testing.TB, ns, name string, mutate func(*appv1.App)) {
	t.Helper()
	waitFor(t, fmt.Sprintf("App %s/%s updated", ns, name), func() (bool, string) {
		app, err := s.apps.AppcontrollerV1().Apps(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		mutate(app)
		_, err = s.apps.AppcontrollerV1().Apps(ns).Update(context.Background(), app, metav1.UpdateOptions{})
		return err == nil, fmt.Sprint(err)
	})
}

// waitDeployment waits until the Deployment's spec asks for replicas pods running image.
func (s *smoke) waitDeployment(t testing.TB, ns, name string, replicas int32, image string) {
	t.Helper()
	waitFor(t, fmt.Sprintf("Deployment %s/%s at %d replicas of %s", ns, name, replicas, image), func() (bool, string) {
		d, err := s.kube.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		got, gotImage := ptr.Deref(d.Spec.Replicas, 1), d.Spec.Template.Spec.Containers[0].Image
		return got == replicas && gotImage == image, fmt.Sprintf("%d replicas of %s", got, gotImage)
	})
}

// waitImage waits until the Deployment's container runs image.
func (s *smoke) waitImage(t testing.TB, ns, name, image string) {
	t.Helper()
	waitFor(t, fmt.Sprintf("Deployment %s/%s running %s", ns, name, image), func() (bool, string) {
		d, err := s.kube.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		got := d.Spec.Template.Spec.Containers[0].Image
		return got == image, "image " + got
	})
}

// waitRevisions waits until the App's revisions are exactly the numbers from..to.
func (s *smoke) waitRevisions(t testing.TB, ns, app string, from, to int64) {
	t.Helper()
	waitFor(t, fmt.Sprintf("App %s/%s's revisions %d to %d", ns, app, from, to), func() (bool, string) {
		list, err := s.kube.AppsV1().ControllerRevisions(ns).List(context.Background(), metav1.ListOptions{LabelSelector: appv1.InstanceLabel + "=" + app})
		if err != nil {
			return false, err.Error()
		}
		var got []int64
		for _, r := range list.Items {
			got = append(got, r.Revision)
		}
		slices.Sort(got)
		var want []int64
		for n := from; n <= to; n++ {
			want = append(want, n)
		}
		return slices.Equal(got, want), fmt.Sprintf("revisions %v", got)
	})
}

// replicaSets returns the names of the ReplicaSets of the App's Deployment.
func (s *smoke) replicaSets(t testing.TB, ns, app string) []string {
	t.Helper()
	list, err := s.kube.AppsV1().ReplicaSets(ns).List(context.Background(), metav1.ListOptions{LabelSelector: appv1.InstanceLabel + "=" + app})
	if err != nil {
		t.Fatal(err)
	}
	return names(list.Items)
}

func names(sets []appsv1.ReplicaSet) []string {
	out := make([]string, 0, len(sets))
	for _, rs := range sets {
		out = append(out, rs.Name)
	}
	slices.Sort(out)
	return out
}

// waitFor polls done every 200ms for up to converge and fails the check, saying what it
// waited for and the last state done reported, if it never reports true.
func waitFor(t testing.TB, what string, done func() (ok bool, state string)) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, converge, true, func(context.Context) (bool, error) {
		ok, state := done()
		last = state
		return ok, nil
	})
	if err != nil {
		t.Fatalf("waiting %v for %s: last seen: %s", converge, what, last)
	}
}

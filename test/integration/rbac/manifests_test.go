package rbac

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/app-controller/app-controller/pkg/controllermanager"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// TestDeployableManifests renders config/default with kubectl kustomize, as users
// install it, and checks that the pieces fit: the Deployment runs as the ServiceAccount
// that the ClusterRoleBinding and the RoleBinding name, in the namespace they share; its
// arguments are flags the binary accepts; with more than one replica it elects a leader,
// through a Lease in the namespace where the Role grants it Leases; its probes and ports
// are those the binary serves; it stops within its grace period; and its pod is admitted
// by the API server under the Pod Security level its namespace enforces (restricted),
// with a read-only root filesystem and resource limits on top.
func TestDeployableManifests(t *testing.T) {
	root, binDir := framework.RepoRoot(t), framework.BinDir(t)
	cmd := exec.Command(filepath.Join(binDir, "kubectl"), "kustomize", filepath.Join(root, "config", "default"))
	rendered, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl kustomize config/default: %v\n%s", err, stderrOf(err))
	}

	var (
		kinds      []string
		namespace  corev1.Namespace
		sa         corev1.ServiceAccount
		binding    rbacv1.ClusterRoleBinding
		role       rbacv1.Role
		rb         rbacv1.RoleBinding
		deployment appsv1.Deployment
		pdb        policyv1.PodDisruptionBudget
		metrics    corev1.Service
		policy     admissionregistrationv1.ValidatingAdmissionPolicy
		flows      flowcontrolv1.FlowSchema
	)
	for i, doc := range splitYAML(rendered) {
		where := fmt.Sprintf("config/default document %d", i+1)
		kind := kindOf(t, where, doc)
		kinds = append(kinds, kind)
		var obj any
		switch kind {
		case "Namespace":
			obj = &namespace
		case "ServiceAccount":
			obj = &sa
		case "ClusterRoleBinding":
			obj = &binding
		case "Role":
			obj = &role
		case "RoleBinding":
			obj = &rb
		case "Deployment":
			obj = &deployment
		case "PodDisruptionBudget":
			obj = &pdb
		case "Service":
			obj = &metrics
		case "ValidatingAdmissionPolicy":
			obj = &policy
		case "FlowSchema":
			obj = &flows
		default:
			continue
		}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			t.Fatalf("%s (%s): %v", where, kind, err)
		}
	}
	slices.Sort(kinds)
	// Three ClusterRoles: the controller's and the aggregated view and edit roles; the CRDs of App, AnalysisTemplate and ClusterAnalysisTemplate.
	if want := []string{"ClusterRole", "ClusterRole", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition", "CustomResourceDefinition", "CustomResourceDefinition", "Deployment", "FlowSchema", "Namespace",
		"PodDisruptionBudget", "Role", "RoleBinding", "Service", "ServiceAccount",
		"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}; !slices.Equal(kinds, want) {
		t.Fatalf("config/default renders %v, want %v", kinds, want)
	}

	// The node label policy names the ServiceAccount that config/default deploys
	// (kustomize does not rewrite the CEL string).
	user := "'system:serviceaccount:" + sa.Namespace + ":" + sa.Name + "'"
	if len(policy.Spec.MatchConditions) != 1 || !strings.Contains(policy.Spec.MatchConditions[0].Expression, user) {
		t.Errorf("the node label policy's match conditions %+v do not name the deployed ServiceAccount %s", policy.Spec.MatchConditions, user)
	}

	// The FlowSchema of the leader election Lease names the deployed ServiceAccount and
	// the Lease's namespace (kustomize does not rewrite them either).
	if len(flows.Spec.Rules) != 1 || len(flows.Spec.Rules[0].Subjects) != 1 || flows.Spec.Rules[0].Subjects[0].ServiceAccount == nil ||
		*flows.Spec.Rules[0].Subjects[0].ServiceAccount != (flowcontrolv1.ServiceAccountSubject{Name: sa.Name, Namespace: sa.Namespace}) ||
		!slices.Equal(flows.Spec.Rules[0].ResourceRules[0].Namespaces, []string{sa.Namespace}) {
		t.Errorf("the FlowSchema's rules %+v do not name the deployed ServiceAccount %s/%s and its namespace", flows.Spec.Rules, sa.Namespace, sa.Name)
	}

	// The PodDisruptionBudget and the metrics Service select the controller's pods, and
	// the Service targets the metrics port.
	podLabels := labels.Set(deployment.Spec.Template.Labels)
	if sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector); err != nil || sel.Empty() || !sel.Matches(podLabels) {
		t.Errorf("PodDisruptionBudget selector %v (%v) does not select the pods (labels %v)", pdb.Spec.Selector, err, podLabels)
	}
	if sel := labels.SelectorFromSet(metrics.Spec.Selector); len(metrics.Spec.Selector) == 0 || !sel.Matches(podLabels) {
		t.Errorf("metrics Service selector %v does not select the pods (labels %v)", metrics.Spec.Selector, podLabels)
	}
	if pdb.Namespace != controllerNamespace || metrics.Namespace != controllerNamespace {
		t.Errorf("PodDisruptionBudget in %q, metrics Service in %q; want %s", pdb.Namespace, metrics.Namespace, controllerNamespace)
	}

	// One identity throughout.
	pod := deployment.Spec.Template.Spec
	if namespace.Name != controllerNamespace || sa.Namespace != controllerNamespace || deployment.Namespace != controllerNamespace ||
		role.Namespace != controllerNamespace || rb.Namespace != controllerNamespace {
		t.Errorf("namespaces: Namespace %s, ServiceAccount %s, Deployment %s, Role %s, RoleBinding %s; want %s",
			namespace.Name, sa.Namespace, deployment.Namespace, role.Namespace, rb.Namespace, controllerNamespace)
	}
	if sa.Name != controllerServiceAccount || pod.ServiceAccountName != sa.Name {
		t.Errorf("ServiceAccount %s, Deployment's serviceAccountName %s; want %s", sa.Name, pod.ServiceAccountName, controllerServiceAccount)
	}
	if !slices.Contains(binding.Subjects, rbacv1.Subject{Kind: "ServiceAccount", Name: sa.Name, Namespace: sa.Namespace}) {
		t.Errorf("ClusterRoleBinding subjects %+v do not include ServiceAccount %s/%s", binding.Subjects, sa.Namespace, sa.Name)
	}
	if rb.RoleRef.Kind != "Role" || rb.RoleRef.Name != role.Name {
		t.Errorf("RoleBinding roleRef %+v, want the Role %s", rb.RoleRef, role.Name)
	}
	if !slices.Contains(rb.Subjects, rbacv1.Subject{Kind: "ServiceAccount", Name: sa.Name, Namespace: sa.Namespace}) {
		t.Errorf("RoleBinding subjects %+v do not include ServiceAccount %s/%s", rb.Subjects, sa.Namespace, sa.Name)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("the pod has %d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]

	// The arguments are the binary's flags, with valid values, and it stops in time.
	opts, given := parseArgs(t, c.Args)
	if grace := time.Duration(ptr.Deref(pod.TerminationGracePeriodSeconds, 30)) * time.Second; opts.ShutdownTimeout >= grace {
		t.Errorf("--shutdown-timeout %s is not below terminationGracePeriodSeconds %s: in-flight syncs would be killed", opts.ShutdownTimeout, grace)
	}

	// More than one instance only with leader election, whose Lease is in the namespace
	// of the Role that grants Leases.
	if replicas := ptr.Deref(deployment.Spec.Replicas, 1); replicas > 1 && !opts.LeaderElect {
		t.Errorf("replicas = %d without --leader-elect: every instance would reconcile every object", replicas)
	}
	if opts.LeaderElect {
		if got := leaseNamespace(c, pod, opts, given, deployment.Namespace); got != role.Namespace {
			t.Errorf("the leader election Lease would be in namespace %q, but the Role granting Leases is in %q", got, role.Namespace)
		}
	}

	// The probes and ports are what the binary serves.
	healthPort := bindPort(t, "--health-probe-bind-address", opts.HealthProbeBindAddress)
	for _, probe := range []struct {
		kind  string
		probe *corev1.Probe
		path  string
	}{{"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}} {
		if probe.probe == nil || probe.probe.HTTPGet == nil {
			t.Errorf("container %s: no HTTP %s probe", c.Name, probe.kind)
			continue
		}
		get := probe.probe.HTTPGet
		if get.Path != probe.path || containerPort(c, get.Port) != healthPort {
			t.Errorf("container %s: %s probe on %s port %s (%d), want %s on --health-probe-bind-address's port %d",
				c.Name, probe.kind, get.Path, get.Port.String(), containerPort(c, get.Port), probe.path, healthPort)
		}
	}
	if c.StartupProbe != nil {
		t.Errorf("container %s has a startup probe: the binary serves its probes at once", c.Name)
	}
	metricsPort := bindPort(t, "--metrics-bind-address", opts.MetricsBindAddress)
	if got := containerPort(c, intstr.FromString("metrics")); got != metricsPort {
		t.Errorf("container %s: port metrics is %d, want --metrics-bind-address's port %d", c.Name, got, metricsPort)
	}
	if len(metrics.Spec.Ports) != 1 || containerPort(c, metrics.Spec.Ports[0].TargetPort) != metricsPort {
		t.Errorf("metrics Service ports %+v: want one, targeting the container's metrics port %d", metrics.Spec.Ports, metricsPort)
	}

	// Hardening that Pod Security's restricted level does not check.
	if sc := c.SecurityContext; sc == nil || !ptr.Deref(sc.ReadOnlyRootFilesystem, false) {
		t.Errorf("container %s: the root filesystem is not read-only", c.Name)
	}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if _, ok := c.Resources.Requests[r]; !ok {
			t.Errorf("container %s: no %s request", c.Name, r)
		}
		if _, ok := c.Resources.Limits[r]; !ok {
			t.Errorf("container %s: no %s limit", c.Name, r)
		}
	}

	// The API server admits the pod in a namespace labelled like the shipped one.
	if namespace.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
		t.Errorf("namespace %s does not enforce Pod Security level restricted: labels %v", namespace.Name, namespace.Labels)
	}
	admin := framework.Client(t)
	ctx := context.Background()
	ns := framework.Namespace(t)
	live, err := admin.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range namespace.Labels {
		if strings.HasPrefix(k, "pod-security.kubernetes.io/") {
			live.Labels[k] = v
		}
	}
	if _, err := admin.CoreV1().Namespaces().Update(ctx, live, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The ServiceAccount admission plugin refuses pods whose ServiceAccount does not exist.
	if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa.Name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	newPod := func(spec corev1.PodSpec) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "app-controller-", Namespace: ns, Labels: deployment.Spec.Template.Labels},
			Spec:       spec,
		}
	}
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	if _, err := admin.CoreV1().Pods(ns).Create(ctx, newPod(*pod.DeepCopy()), dryRun); err != nil {
		t.Errorf("the API server refuses the controller's pod: %v", err)
	}
	// Control: the same pod, allowed to escalate privileges, is refused, so the namespace
	// labels do enforce the level.
	weakened := pod.DeepCopy()
	weakened.Containers[0].SecurityContext.AllowPrivilegeEscalation = ptr.To(true)
	_, err = admin.CoreV1().Pods(ns).Create(ctx, newPod(*weakened), dryRun)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "PodSecurity") {
		t.Errorf("a pod allowed to escalate privileges: err = %v, want a PodSecurity refusal", err)
	}
}

// parseArgs parses args as the binary does (cmd/app-controller) and validates the
// result; given holds the names of the flags args set. klog's flags get stand-ins, so
// that parsing does not change this process's logging.
func parseArgs(t *testing.T, args []string) (opts *controllermanager.Options, given map[string]bool) {
	t.Helper()
	fs := flag.NewFlagSet("app-controller", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	opts = controllermanager.NewOptions()
	opts.AddFlags(fs)
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	klogFlags.VisitAll(func(f *flag.Flag) { fs.String(f.Name, f.DefValue, f.Usage) })
	if err := fs.Parse(args); err != nil {
		t.Fatalf("the Deployment's arguments %q: %v", args, err)
	}
	if fs.NArg() > 0 {
		t.Fatalf("the Deployment's arguments %q: unexpected arguments %q", args, fs.Args())
	}
	if err := opts.Validate(); err != nil {
		t.Fatalf("the Deployment's arguments %q: %v", args, err)
	}
	given = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	return opts, given
}

// leaseNamespace returns the namespace of the leader election Lease of container c of
// pod, in namespace podNamespace, as the binary would choose it: --leader-elect-namespace
// if given, else $POD_NAMESPACE, else the namespace of its ServiceAccount token, else
// default. The default of opts is that of this process, hence given.
func leaseNamespace(c corev1.Container, pod corev1.PodSpec, opts *controllermanager.Options, given map[string]bool, podNamespace string) string {
	if given["leader-elect-namespace"] {
		return opts.LeaderElectNamespace
	}
	for _, env := range c.Env {
		if env.Name != "POD_NAMESPACE" {
			continue
		}
		switch {
		case env.ValueFrom == nil:
			if env.Value != "" {
				return env.Value
			}
		case env.ValueFrom.FieldRef != nil && env.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			return podNamespace
		case env.ValueFrom.FieldRef != nil:
			return "$POD_NAMESPACE from field " + env.ValueFrom.FieldRef.FieldPath
		default:
			return "$POD_NAMESPACE from a ConfigMap, a Secret or a resource"
		}
	}
	if ptr.Deref(pod.AutomountServiceAccountToken, true) {
		return podNamespace
	}
	return metav1.NamespaceDefault
}

// bindPort returns the port of a bind address flag's value, which must listen on every
// interface (the kubelet and Prometheus reach the pod's IP).
func bindPort(t *testing.T, flagName, addr string) int32 {
	t.Helper()
	if addr == "" || addr == "0" {
		t.Fatalf("%s is not set: the binary serves nothing there", flagName)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("%s=%q: %v", flagName, addr, err)
	}
	if host != "" && host != "0.0.0.0" && host != "::" {
		t.Errorf("%s=%q listens on %s only, not on the pod's IP", flagName, addr, host)
	}
	n, err := strconv.ParseInt(port, 10, 32)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: not a fixed port", flagName, addr)
	}
	return int32(n)
}

// containerPort resolves port, a number or the name of one of c's ports, to a number;
// 0 if c has no port of that name.
func containerPort(c corev1.Container, port intstr.IntOrString) int32 {
	if port.Type == intstr.Int {
		return port.IntVal
	}
	for _, p := range c.Ports {
		if p.Name == port.StrVal {
			return p.ContainerPort
		}
	}
	return 0
}

// stderrOf returns the standard error of a failed command, if err carries it.
func stderrOf(err error) string {
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		return string(exitErr.Stderr)
	}
	return ""
}

package app

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
	appctrl "github.com/app-controller/app-controller/pkg/controller/app"
	"github.com/app-controller/app-controller/test/integration/framework"
)

var (
	fuzzSeed    = flag.Uint64("fuzz-seed", 1, "seed of TestGeneratedApps' random Apps")
	fuzzSamples = flag.Int("fuzz-samples", 60, "number of random Apps TestGeneratedApps generates")
)

// gen draws the parts of random Apps: mostly what a user would write, sometimes values at
// or past the schema's limits, so that the sample covers both sides of what the schema
// accepts. A fixed node port is allocated for real, so it comes from nodePort, which
// returns one free in the cluster.
type gen struct {
	r        *rand.Rand
	nodePort func() int32
}

func (g gen) chance(p float64) bool { return g.r.Float64() < p }

func (g gen) pick(s ...string) string { return s[g.r.IntN(len(s))] }

// label returns a DNS-1123 label of 1..limit characters, starting with a letter.
func (g gen) label(limit int) string {
	const first, rest = "abcdefghijklmnopqrstuvwxyz", "abcdefghijklmnopqrstuvwxyz0123456789-"
	n := 1 + g.r.IntN(limit)
	b := []byte{first[g.r.IntN(len(first))]}
	for len(b) < n {
		b = append(b, rest[g.r.IntN(len(rest))])
	}
	return strings.TrimRight(string(b), "-")
}

// text returns printable ASCII, sometimes with spaces and quotes.
func (g gen) text(limit int) string {
	b := make([]byte, g.r.IntN(limit+1))
	for i := range b {
		b[i] = byte(' ' + g.r.IntN(95))
	}
	return string(b)
}

func (g gen) port() int32 {
	switch {
	case g.chance(0.05):
		return []int32{0, 65536, 70000}[g.r.IntN(3)] // out of the schema's range
	case g.chance(0.1):
		return 65535
	}
	return int32(1 + g.r.IntN(65535))
}

func (g gen) quantity(kind string) resource.Quantity {
	if kind == "cpu" {
		return resource.MustParse(g.pick("1m", "10m", "100m", "250m", "1", "2", "1500m", "64"))
	}
	return resource.MustParse(g.pick("1Ki", "64Mi", "128Mi", "1Gi", "1G", "500M", "3Ti"))
}

func (g gen) labels(limit int, reserved bool) map[string]string {
	if !g.chance(0.4) {
		return nil
	}
	m := map[string]string{}
	for range 1 + g.r.IntN(limit) {
		key := g.label(20)
		if g.chance(0.3) {
			key = g.label(10) + ".example.com/" + g.label(20)
		}
		if reserved && g.chance(0.05) {
			key = appv1.InstanceLabel // the schema refuses it
		}
		if g.chance(0.04) {
			// Not a qualified name: the schema refuses it as a label or annotation key.
			key = g.pick("not valid!", "-"+g.label(10), "a/b/c", g.label(10)+"/", strings.Repeat("k", 64), "Example.COM/x")
		}
		m[key] = g.pick("", g.label(30), "v1.2.3", "a_b.c-d")
		if g.chance(0.04) {
			// Not a label value (the schema refuses it in labels and node selectors;
			// an annotation may hold it).
			m[key] = g.pick("not valid!", "-x", "x.", strings.Repeat("v", 64))
		}
	}
	return m
}

// labelValues returns m as labels of the App's API.
func labelValues(m map[string]string) map[string]appv1.LabelValue {
	if m == nil {
		return nil
	}
	out := make(map[string]appv1.LabelValue, len(m))
	for k, v := range m {
		out[k] = appv1.LabelValue(v)
	}
	return out
}

// app returns a random App named name.
func (g gen) app(ns, name string) *appv1.App {
	app := &appv1.App{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if g.chance(0.9) {
		t := &appv1.DeploymentTemplate{Name: g.label(40), Image: g.pick("nginx", "nginx:1.27", "registry.example.com:5000/team/app:v1.2.3",
			"ghcr.io/org/app@sha256:"+strings.Repeat("ab", 32), "busybox:latest", "my image", g.label(60))}
		if g.chance(0.7) {
			t.Replicas = ptr.To(int32(g.r.IntN(6)))
		}
		if g.chance(0.6) {
			t.ContainerPort = ptr.To(g.port())
		}
		if g.chance(0.3) {
			t.Command = []string{"/bin/" + g.label(8), g.text(20)}
			t.Args = []string{g.text(30)}
		}
		for range g.r.IntN(4) {
			env := corev1.EnvVar{Name: g.pick("HOME", "A_B", "log.level", "x-y", g.label(20)), Value: g.text(40)}
			if g.chance(0.3) {
				env.Value = ""
				env.ValueFrom = &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: g.pick("metadata.name", "status.podIP", "spec.nodeName")}}
			}
			if !strings.Contains(fmt.Sprint(t.Env), env.Name+" ") {
				t.Env = append(t.Env, env)
			}
		}
		if g.chance(0.4) {
			t.Resources = &appv1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}
			for _, r := range []string{"cpu", "memory"} {
				if g.chance(0.7) {
					t.Resources.Requests[corev1.ResourceName(r)] = g.quantity(r)
				}
				if g.chance(0.5) {
					t.Resources.Limits[corev1.ResourceName(r)] = g.quantity(r)
				}
			}
		}
		if g.chance(0.3) {
			probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/" + g.label(10), Port: intstr.FromInt32(g.port())}},
				PeriodSeconds: int32(g.r.IntN(30))}
			if g.chance(0.3) {
				probe.ProbeHandler = corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString(appv1.PortName)}}
			}
			t.ReadinessProbe = probe
		}
		if g.chance(0.3) {
			t.SecurityContext = &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), RunAsNonRoot: ptr.To(true),
				Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
			t.PodSecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To(int64(g.r.IntN(70000))), FSGroup: ptr.To(int64(2000)),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
		}
		for v := range g.r.IntN(4) {
			vol := appv1.Volume{Name: fmt.Sprintf("v%d-%s", v, g.label(10))}
			switch g.r.IntN(4) {
			case 0:
				vol.EmptyDir = &corev1.EmptyDirVolumeSource{}
			case 1:
				vol.ConfigMap = &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: g.label(20)}}
			case 2:
				vol.Secret = &corev1.SecretVolumeSource{SecretName: g.label(20), DefaultMode: ptr.To[int32](0o440)}
			default:
				vol.PersistentVolumeClaim = &corev1.PersistentVolumeClaimVolumeSource{ClaimName: g.label(20), ReadOnly: g.chance(0.5)}
			}
			t.Volumes = append(t.Volumes, vol)
			if g.chance(0.8) {
				t.VolumeMounts = append(t.VolumeMounts, appv1.VolumeMount{Name: vol.Name, MountPath: fmt.Sprintf("/mnt/%d/%s", v, g.label(10)),
					ReadOnly: ptr.To(g.chance(0.5))})
			}
		}
		if g.chance(0.2) {
			t.ServiceAccountName = g.label(20)
			t.ImagePullSecrets = []corev1.LocalObjectReference{{Name: g.label(20)}}
		}
		if g.chance(0.3) {
			t.ImagePullPolicy = corev1.PullPolicy(g.pick("Always", "IfNotPresent", "Never"))
		}
		t.PodLabels = labelValues(g.labels(4, true))
		t.PodAnnotations = g.labels(3, false)
		g.oversize(t)
		t.NodeSelector = labelValues(g.labels(2, false))
		if g.chance(0.2) {
			t.Tolerations = []corev1.Toleration{{Key: g.label(15), Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
		}
		if g.chance(0.3) {
			if g.chance(0.5) {
				t.Strategy = &appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
			} else {
				surge, unavailable := intstr.FromString(g.pick("0%", "25%", "100%")), intstr.FromInt32(int32(g.r.IntN(3)))
				t.Strategy = &appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
					RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &surge, MaxUnavailable: &unavailable}}
			}
		}
		if g.chance(0.2) {
			t.MinReadySeconds = ptr.To(int32(g.r.IntN(60)))
			t.RevisionHistoryLimit = ptr.To(int32(g.r.IntN(20)))
		}
		app.Spec.DeploymentTemplate = t
	}
	if app.Spec.DeploymentTemplate == nil || g.chance(0.8) {
		t := &appv1.ServiceTemplate{Name: g.label(40)}
		if g.chance(0.6) {
			t.Port = g.port()
		}
		if g.chance(0.3) {
			t.TargetPort = ptr.To(g.port())
		}
		if g.chance(0.4) {
			t.Type = corev1.ServiceType(g.pick("ClusterIP", "NodePort", "LoadBalancer"))
			if t.Type != corev1.ServiceTypeClusterIP && g.chance(0.3) {
				t.NodePort = ptr.To(g.nodePort())
			}
		}
		if g.chance(0.3) {
			t.PortName = g.pick("web", "h2c", "grpc-api", g.label(15))
		}
		if g.chance(0.2) {
			t.Protocol = corev1.Protocol(g.pick("TCP", "UDP", "SCTP"))
		}
		if g.chance(0.2) {
			t.SessionAffinity = corev1.ServiceAffinity(g.pick("None", "ClientIP"))
		}
		t.Labels = labelValues(g.labels(3, true))
		t.Annotations = g.labels(3, false)
		app.Spec.ServiceTemplate = t
	}
	return app
}

// oversize makes, rarely, one list, map or string of t longer than the schema allows
// (the bounds that keep one namespace from growing the controller's caches without
// limit): the schema must refuse it and name the field.
func (g gen) oversize(t *appv1.DeploymentTemplate) {
	if !g.chance(0.08) {
		return
	}
	switch g.r.IntN(5) {
	case 0:
		t.Args = slices.Repeat([]string{"a"}, 257) // maxItems 256
	case 1:
		t.Command = []string{strings.Repeat("c", 32769)} // maxLength 32768
	case 2:
		t.Env = nil
		for i := range 257 { // maxItems 256
			t.Env = append(t.Env, corev1.EnvVar{Name: fmt.Sprintf("V%d", i), Value: "x"})
		}
	case 3:
		t.Image = "registry.example.com/" + strings.Repeat("i", 1024) // maxLength 1024
	default:
		t.PodAnnotations = map[string]string{}
		for i := range 65 { // maxProperties 64
			t.PodAnnotations[fmt.Sprintf("a%d", i)] = "x"
		}
	}
}

// TestGeneratedApps draws random Apps (seed -fuzz-seed, -fuzz-samples of them) and, for
// each one the CRD schema accepts (a server dry-run create says so), checks against the
// real API server that the Deployment and Service the controller would write are valid
// (server-side apply, dry run), then applies them for real twice with the controller's
// field manager: the second apply must change nothing (same resourceVersion), and the
// controller's own "up to date?" check must agree, or it would write on every sync.
// No controller runs: the App exists only so that the children's owner is real.
func TestGeneratedApps(t *testing.T) {
	c := newClients(t)
	ns := framework.Namespace(t)
	ctx := context.Background()
	g := gen{r: rand.New(rand.NewPCG(*fuzzSeed, 0x5eed)), nodePort: func() int32 { return framework.FreeNodePort(t, c.Kube) }}
	apply := func(app *appv1.App, dryRun bool) (*appsv1.Deployment, *corev1.Service, error) {
		opts := metav1.ApplyOptions{FieldManager: appv1.FieldManager, Force: true}
		if dryRun {
			opts.DryRun = []string{metav1.DryRunAll}
		}
		desired, err := appctrl.DesiredDeployment(app)
		d, err := applyUpToDate("Deployment", desired, err, func(desired *appsv1ac.DeploymentApplyConfiguration) (*appsv1.Deployment, error) {
			return c.Kube.AppsV1().Deployments(ns).Apply(ctx, desired, opts)
		})
		if err != nil {
			return nil, nil, err
		}
		desiredService, err := appctrl.DesiredService(app)
		s, err := applyUpToDate("Service", desiredService, err, func(desired *corev1ac.ServiceApplyConfiguration) (*corev1.Service, error) {
			return c.Kube.CoreV1().Services(ns).Apply(ctx, desired, opts)
		})
		return d, s, err
	}

	accepted, fixedNodePorts, refused := 0, 0, map[string]int{}
	usedNames := map[string]bool{}
	for i := range *fuzzSamples {
		app := g.app(ns, fmt.Sprintf("gen-%d", i))
		// Child names must be unique in the namespace across samples.
		if d := app.Spec.DeploymentTemplate; d != nil {
			d.Name = prefixed(fmt.Sprintf("d%d-", i), d.Name)
		}
		if s := app.Spec.ServiceTemplate; s != nil {
			s.Name = prefixed(fmt.Sprintf("s%d-", i), s.Name)
			if s.NodePort != nil {
				fixedNodePorts++
			}
		}
		spec, _ := json.Marshal(app.Spec)
		_, err := c.App.AppcontrollerV1().Apps(ns).Create(ctx, app, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			if !strings.Contains(err.Error(), "spec.") {
				t.Errorf("App %d (spec %s): the schema refused it without naming the field: %v", i, spec, err)
			}
			refused[firstCause(err.Error())]++
			continue
		}
		created, err := c.App.AppcontrollerV1().Apps(ns).Create(ctx, app, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("App %d: the dry run accepted it, the create did not: %v", i, err)
		}
		accepted++
		if usedNames[created.Name] {
			t.Fatalf("duplicate App name %s", created.Name)
		}
		usedNames[created.Name] = true

		if _, _, err := apply(created, true); err != nil {
			t.Errorf("App %d (spec %s): schema accepts it, but %v", i, spec, err)
			continue
		}
		d1, s1, err := apply(created, false)
		if err != nil {
			t.Errorf("App %d (spec %s): %v", i, spec, err)
			continue
		}
		d2, s2, err := apply(created, false)
		if err != nil {
			t.Errorf("App %d (spec %s): second apply: %v", i, spec, err)
			continue
		}
		// The deployment controller writes the Deployment's status meanwhile, so its
		// resourceVersion moves: a no-op apply keeps the generation and the field
		// manager's entry (time included) as they were.
		if d1 != nil && (d1.Generation != d2.Generation || !equality.Semantic.DeepEqual(ownEntry(d1), ownEntry(d2))) {
			t.Errorf("App %d (spec %s): applying the Deployment again changed it (generation %d -> %d, entry %+v -> %+v)",
				i, spec, d1.Generation, d2.Generation, ownEntry(d1), ownEntry(d2))
		}
		if s1 != nil && s1.ResourceVersion != s2.ResourceVersion {
			t.Errorf("App %d (spec %s): applying the Service again changed it (resourceVersion %s -> %s)", i, spec, s1.ResourceVersion, s2.ResourceVersion)
		}
	}
	t.Logf("seed %d: %d Apps generated (%d with a fixed node port), %d accepted by the schema; refused: %v",
		*fuzzSeed, *fuzzSamples, fixedNodePorts, accepted, refused)
	if accepted < *fuzzSamples/3 {
		t.Errorf("only %d of %d generated Apps accepted by the schema: the generator misses its target", accepted, *fuzzSamples)
	}
}

// ownEntry returns the managedFields entry of the controller's field manager.
func ownEntry(obj metav1.Object) *metav1.ManagedFieldsEntry {
	for _, e := range obj.GetManagedFields() {
		if e.Manager == appv1.FieldManager && e.Subresource == "" {
			return &e
		}
	}
	return nil
}

// prefixed returns prefix+name cut to 63 characters, without a trailing "-".
func prefixed(prefix, name string) string {
	s := prefix + name
	return strings.TrimRight(s[:min(63, len(s))], "-")
}

// firstCause shortens an API error to its first field path, for the tally of refusals.
func firstCause(msg string) string {
	if i := strings.Index(msg, "spec."); i >= 0 {
		msg = msg[i:]
	}
	if i := strings.IndexAny(msg, ":"); i >= 0 {
		msg = msg[:i]
	}
	return msg
}

// applyUpToDate applies desired, an apply configuration built with err (nil: nothing to
// apply), with apply, and checks that the controller finds the object applied up to
// date: otherwise it would write again on every sync.
func applyUpToDate[T any, A comparable](kind string, desired A, err error, apply func(A) (T, error)) (T, error) {
	var none T
	var zero A
	switch {
	case err != nil:
		return none, fmt.Errorf("building the %s: %w", kind, err)
	case desired == zero:
		return none, nil
	}
	obj, err := apply(desired)
	if err != nil {
		return none, fmt.Errorf("applying the %s: %w", kind, err)
	}
	if ok, err := controller.UpToDate(obj, desired); err != nil {
		return none, fmt.Errorf("comparing the applied %s with the desired one: %w", kind, err)
	} else if !ok {
		return none, fmt.Errorf("the applied %s is not up to date for the controller: it would write again on every sync", kind)
	}
	return obj, nil
}

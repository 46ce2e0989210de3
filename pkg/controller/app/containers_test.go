package app

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// serviceShapedApp returns an App shaped like a real service: a migration before the app,
// a log shipper and a proxy beside it, a metrics port on the app and an admin port on
// the proxy, both exposed by the Service, and a disruption budget.
func serviceShapedApp() *appv1.App {
	app := newApp("web", testNow.Add(-time.Hour))
	t := app.Spec.DeploymentTemplate
	t.ContainerPort = ptr.To[int32](8080)
	t.Ports = []appv1.ContainerPort{{Name: "metrics", ContainerPort: 9090, Protocol: corev1.ProtocolTCP}}
	t.Volumes = []appv1.Volume{{Name: "logs", EmptyDir: &corev1.EmptyDirVolumeSource{}}}
	t.InitContainers = []appv1.Container{{
		Name: "migrate", Image: "registry.example.com/migrate:1", Args: []string{"up"},
		EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}}}},
	}}
	t.Sidecars = []appv1.Container{
		{Name: "shipper", Image: "fluent-bit:3", VolumeMounts: []appv1.VolumeMount{{Name: "logs", MountPath: "/logs", ReadOnly: ptr.To(true)}}},
		{
			Name: "proxy", Image: "envoy:1", Ports: []appv1.ContainerPort{{Name: "admin", ContainerPort: 9901}},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromString("admin")}}},
		},
	}
	app.Spec.ServiceTemplate.Ports = []appv1.ServicePort{
		{Name: "metrics", Port: 9090, TargetPort: ptr.To(intstr.FromString("metrics")), Protocol: corev1.ProtocolTCP},
		{Name: "admin", Port: 9901, TargetPort: ptr.To(intstr.FromString("admin"))},
	}
	app.Spec.DisruptionBudget = &appv1.DisruptionBudget{MinAvailable: ptr.To(intstr.FromInt32(1))}
	return app
}

func TestContainersAndPorts(t *testing.T) {
	app := serviceShapedApp()
	d := liveDeployment(t, app)
	pod := d.Spec.Template.Spec

	// Sidecars first (native: restartPolicy Always), then the init containers.
	var names []string
	for _, c := range pod.InitContainers {
		names = append(names, c.Name)
	}
	if !slices.Equal(names, []string{"shipper", "proxy", "migrate"}) {
		t.Fatalf("init containers %q, want the sidecars shipper and proxy, then migrate", names)
	}
	for _, c := range pod.InitContainers[:2] {
		if c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
			t.Errorf("sidecar %s: restartPolicy %v, want Always", c.Name, c.RestartPolicy)
		}
	}
	migrate := pod.InitContainers[2]
	if migrate.RestartPolicy != nil || migrate.Image != "registry.example.com/migrate:1" || !slices.Equal(migrate.Args, []string{"up"}) ||
		len(migrate.EnvFrom) != 1 || migrate.EnvFrom[0].SecretRef.Name != "db" {
		t.Errorf("init container migrate = %+v", migrate)
	}
	proxy := pod.InitContainers[1]
	if len(proxy.Ports) != 1 || proxy.Ports[0] != (corev1.ContainerPort{Name: "admin", ContainerPort: 9901, Protocol: corev1.ProtocolTCP}) ||
		proxy.ReadinessProbe == nil || proxy.ReadinessProbe.HTTPGet.Port != intstr.FromString("admin") {
		t.Errorf("sidecar proxy = %+v", proxy)
	}
	if m := pod.InitContainers[0].VolumeMounts; len(m) != 1 || m[0].MountPath != "/logs" || !m[0].ReadOnly {
		t.Errorf("sidecar shipper mounts %+v", m)
	}
	want := []corev1.ContainerPort{
		{Name: appv1.PortName, ContainerPort: 8080, Protocol: corev1.ProtocolTCP},
		{Name: "metrics", ContainerPort: 9090, Protocol: corev1.ProtocolTCP},
	}
	if got := pod.Containers[0].Ports; !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("app container ports %+v, want %+v", got, want)
	}

	s := liveService(t, app)
	wantPorts := []corev1.ServicePort{
		{Name: appv1.PortName, Port: 8080, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP},
		{Name: "metrics", Port: 9090, TargetPort: intstr.FromString("metrics"), Protocol: corev1.ProtocolTCP},
		{Name: "admin", Port: 9901, TargetPort: intstr.FromString("admin"), Protocol: corev1.ProtocolTCP},
	}
	if !equality.Semantic.DeepEqual(s.Spec.Ports, wantPorts) {
		t.Errorf("Service ports %+v, want %+v", s.Spec.Ports, wantPorts)
	}

	// The init container's Secret is followed like the app's.
	refs := configRefs(app.Spec.DeploymentTemplate)
	if len(refs) != 1 || refs[0] != (configRef{kind: "Secret", name: "db"}) {
		t.Errorf("config refs %+v, want the init container's Secret db", refs)
	}

	// Removed: gone from the children.
	bare := serviceShapedApp()
	bare.Spec.DeploymentTemplate.InitContainers, bare.Spec.DeploymentTemplate.Sidecars, bare.Spec.DeploymentTemplate.Ports = nil, nil, nil
	bare.Spec.ServiceTemplate.Ports = nil
	if d := liveDeployment(t, bare); len(d.Spec.Template.Spec.InitContainers) != 0 || len(d.Spec.Template.Spec.Containers[0].Ports) != 1 {
		t.Errorf("without them: init containers %v, ports %v", d.Spec.Template.Spec.InitContainers, d.Spec.Template.Spec.Containers[0].Ports)
	}
	if s := liveService(t, bare); len(s.Spec.Ports) != 1 {
		t.Errorf("without them: Service ports %v", s.Spec.Ports)
	}
}

// liveBudget returns the PodDisruptionBudget the API server would hold after applying
// what app wants.
func liveBudget(t *testing.T, app *appv1.App) *policyv1.PodDisruptionBudget {
	t.Helper()
	b := desiredObject[policyv1.PodDisruptionBudget](t, DesiredDisruptionBudget, app)
	b.UID = "pdb-uid"
	b.ResourceVersion = "12"
	return b
}

func TestDisruptionBudget(t *testing.T) {
	app := serviceShapedApp()
	b := liveBudget(t, app)
	if b.Name != "web-deploy" || b.Spec.MinAvailable == nil || *b.Spec.MinAvailable != intstr.FromInt32(1) || b.Spec.MaxUnavailable != nil ||
		!equalMaps(b.Spec.Selector.MatchLabels, selectorLabels(app)) || !controllerIs2(b.OwnerReferences, app) {
		t.Fatalf("PodDisruptionBudget = %+v", b)
	}

	t.Run("a new App with a budget: one more write", func(t *testing.T) {
		f := newFixture(t)
		f.addApps(app)
		f.mustSync("web")
		want := []string{"patch deployments", "patch services", "patch poddisruptionbudgets", "create controllerrevisions", "patch apps/status"}
		if w := f.writeNames(); !sameMultiset(w, want) {
			t.Errorf("writes %q, want %q", w, want)
		}
	})

	synced := func(t *testing.T) *fixture {
		f := newFixture(t)
		a := serviceShapedApp()
		f.addDeployments(liveDeployment(t, a))
		f.addServices(liveService(t, a))
		controllerSeedBudget(t, f, liveBudget(t, a))
		a.Status.ObservedGeneration = a.Generation
		f.addApps(a)
		f.mustSync("web")
		f.catchUp()
		f.events()
		return f
	}
	t.Run("up to date: nothing written, the status names it", func(t *testing.T) {
		f := synced(t)
		f.mustSync("web")
		if w := f.writeNames(); len(w) != 0 {
			t.Errorf("writes %q", w)
		}
		if got := f.appNow("web").Status.DisruptionBudget; got != "web-deploy" {
			t.Errorf("status.disruptionBudget = %q", got)
		}
	})
	t.Run("edited by hand: repaired", func(t *testing.T) {
		f := synced(t)
		b := liveBudget(t, serviceShapedApp())
		b.Spec.MinAvailable = ptr.To(intstr.FromInt32(0))
		b.ResourceVersion = "99"
		controllerUpdateBudget(t, f, b)
		f.mustSync("web")
		if w := f.writeNames(); !slices.Equal(w, []string{"patch poddisruptionbudgets"}) {
			t.Errorf("writes %q, want the budget repaired", w)
		}
	})
	t.Run("removed from the spec: pruned", func(t *testing.T) {
		f := synced(t)
		f.changeSpec(serviceShapedApp(), func(a *appv1.App) { a.Spec.DisruptionBudget = nil })
		f.mustSync("web")
		if w := f.writeNames(); !sameMultiset(w, []string{"delete poddisruptionbudgets", "create controllerrevisions", "patch apps/status"}) {
			t.Errorf("writes %q, want the budget deleted", w)
		}
		if got := f.appNow("web").Status.DisruptionBudget; got != "" {
			t.Errorf("status.disruptionBudget = %q after the prune", got)
		}
	})
}

// controllerSeedBudget seeds the managed PodDisruptionBudget cache and the fake API
// server.
func controllerSeedBudget(t *testing.T, f *fixture, b *policyv1.PodDisruptionBudget) {
	t.Helper()
	if err := f.kubeClient.Tracker().Add(b.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	if err := f.inf.DisruptionBudgets.Informer().GetIndexer().Add(b); err != nil {
		t.Fatal(err)
	}
}

// controllerUpdateBudget replaces the PodDisruptionBudget in the fake API server and
// the cache, as a hand edit seen by the informer.
func controllerUpdateBudget(t *testing.T, f *fixture, b *policyv1.PodDisruptionBudget) {
	t.Helper()
	if err := f.kubeClient.Tracker().Update(policyv1.SchemeGroupVersion.WithResource("poddisruptionbudgets"), b.DeepCopy(), b.Namespace); err != nil {
		t.Fatal(err)
	}
	if err := f.inf.DisruptionBudgets.Informer().GetIndexer().Update(b); err != nil {
		t.Fatal(err)
	}
	childOf[*budgetChild](t, f.c).managed.Observed(b)
}

// controllerIs2 reports whether app is the controller in refs.
func controllerIs2(refs []metav1.OwnerReference, app *appv1.App) bool {
	for _, ref := range refs {
		if ptr.Deref(ref.Controller, false) && ref.UID == app.UID && ref.Kind == "App" {
			return true
		}
	}
	return false
}

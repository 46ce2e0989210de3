package app

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	appctrl "github.com/app-controller/app-controller/pkg/controller/app"
	"github.com/app-controller/app-controller/pkg/controller/appfixture"
	ingressctrl "github.com/app-controller/app-controller/pkg/controller/ingress"
	"github.com/app-controller/app-controller/pkg/controllermanager"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// TestEveryFieldConverges runs an App that uses every optional field, in a namespace that
// enforces the restricted Pod Security Standard, with the App and the Service->Ingress
// controllers: the App becomes Ready, its Deployment and Service carry exactly its
// settings, the Service's ingress/http annotation gets it an Ingress, drift on the new
// fields is repaired, and fields removed from the App are removed from the children.
// An App without the security contexts gets no pod in that namespace.
func TestEveryFieldConverges(t *testing.T) {
	c := newClients(t)
	opts := controllermanager.NewOptions()
	opts.Controllers = []string{appctrl.ControllerName, ingressctrl.ControllerName}
	opts.ShutdownTimeout = 5 * time.Second
	framework.StartManager(t, framework.Config(t), opts)
	ns := framework.Namespace(t)
	ctx := context.Background()

	// The restricted namespace, and what the pods refer to that admission or the
	// scheduler checks: a ServiceAccount, a PriorityClass, a bound claim.
	patch := `{"metadata":{"labels":{"pod-security.kubernetes.io/enforce":"restricted"}}}`
	if _, err := c.Kube.CoreV1().Namespaces().Patch(ctx, ns, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	refs := appfixture.EveryField{ServiceAccount: "web", PriorityClass: ns + "-high", Claim: "data"}
	if _, err := c.Kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: refs.ServiceAccount}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Kube.SchedulingV1().PriorityClasses().Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: refs.PriorityClass}, Value: 1000}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Kube.SchedulingV1().PriorityClasses().Delete(context.Background(), refs.PriorityClass, metav1.DeleteOptions{})
	})
	createBoundClaim(t, c, ns, refs.Claim)
	// The ConfigMap the pods read (envFrom, a volume): without it the App is not Ready
	// (ConfigNotFound). The Secrets are optional.
	if _, err := c.Kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"MODE": "test"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	app := appfixture.WithEveryField(newApp(ns, "web", "nginx", 2), refs)
	c.Create(t, app)
	c.WaitReady(t, ns, "web")
	// waitChildren waits until the App's Deployment and Service pass check.
	waitChildren := func(check func(*appsv1.Deployment, *corev1.Service) bool) {
		t.Helper()
		framework.Eventually(t, converge, func() (bool, error) {
			d, err := c.Kube.AppsV1().Deployments(ns).Get(ctx, "web-deploy", metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			s, err := c.Kube.CoreV1().Services(ns).Get(ctx, "web-svc", metav1.GetOptions{})
			return err == nil && check(d, s), nil
		})
	}
	checkChildren := func(app *appv1.App) {
		t.Helper()
		waitChildren(func(d *appsv1.Deployment, s *corev1.Service) bool {
			diffs := appfixture.EveryFieldDiffs(app, d, s)
			if len(diffs) > 0 {
				t.Logf("children differ from the App: %s", strings.Join(diffs, "; "))
			}
			return len(diffs) == 0
		})
	}
	checkChildren(app)

	// The Service's annotation gets it an Ingress, routed to the named port.
	framework.Eventually(t, converge, func() (bool, error) {
		ing, err := c.Kube.NetworkingV1().Ingresses(ns).Get(ctx, "web-svc", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		r := ing.Spec.Rules
		return len(r) == 1 && r[0].Host == "web.example.com" && r[0].HTTP.Paths[0].Backend.Service.Port.Name == "web", nil
	})

	// Drift on the new fields is repaired.
	if _, err := c.editDeployment(t, ns, "web-deploy", func(d *appsv1.Deployment) {
		pod := &d.Spec.Template.Spec
		pod.Containers[0].ReadinessProbe.HTTPGet.Path = "/other"
		pod.Containers[0].EnvFrom = nil
		pod.Tolerations = nil
		pod.NodeSelector = nil
		pod.Volumes = pod.Volumes[:3]
		pod.Containers[0].VolumeMounts = pod.Containers[0].VolumeMounts[:3]
		pod.Containers[0].LivenessProbe = nil
		pod.Containers[0].StartupProbe.PeriodSeconds = 30
		pod.Containers[0].SecurityContext.ReadOnlyRootFilesystem = ptr.To(false)
		pod.Containers[0].ImagePullPolicy = corev1.PullAlways
		pod.SecurityContext.FSGroup = nil
		pod.ServiceAccountName, pod.DeprecatedServiceAccount = "default", "default"
		pod.ImagePullSecrets = nil
		pod.Affinity = nil
		pod.TopologySpreadConstraints = nil
		pod.PriorityClassName, pod.Priority = "", nil
		d.Spec.Template.Labels["team"] = "other"
		d.Spec.Template.Annotations = nil
		d.Spec.MinReadySeconds = 0
		d.Spec.RevisionHistoryLimit = ptr.To[int32](10)
		d.Spec.Strategy.RollingUpdate.MaxSurge = ptr.To(intstr.FromString("50%"))
	}); err != nil {
		t.Fatalf("editing the Deployment by hand: %v", err)
	}
	c.editService(t, ns, "web-svc", func(s *corev1.Service) {
		s.Spec.SessionAffinity = corev1.ServiceAffinityNone
		s.Spec.SessionAffinityConfig = nil
		s.Spec.Ports[0].Name = "http"
		delete(s.Labels, "team")
	})
	checkChildren(app)

	// Fields removed from the App are removed from the children; the security contexts
	// stay, or the restricted namespace would refuse the new pods.
	c.Update(t, ns, "web", func(a *appv1.App) {
		plain := newApp(ns, "web", "nginx", 2)
		plain.Spec.DeploymentTemplate.SecurityContext = a.Spec.DeploymentTemplate.SecurityContext
		plain.Spec.DeploymentTemplate.PodSecurityContext = a.Spec.DeploymentTemplate.PodSecurityContext
		a.Spec = plain.Spec
	})
	app = c.WaitReady(t, ns, "web")
	checkChildren(app)
	waitChildren(func(d *appsv1.Deployment, s *corev1.Service) bool {
		p := d.Spec.Template.Spec
		gone := p.Containers[0].ReadinessProbe == nil && len(p.Volumes) == 0 && len(p.Tolerations) == 0 &&
			p.Affinity == nil && p.PriorityClassName == "" && p.ServiceAccountName == "" && p.DeprecatedServiceAccount == "" &&
			d.Spec.Template.Labels["team"] == "" && len(d.Spec.Template.Annotations) == 0 &&
			d.Spec.Strategy.RollingUpdate.MaxSurge.String() == "25%" && d.Spec.RevisionHistoryLimit != nil && *d.Spec.RevisionHistoryLimit == 10 &&
			s.Spec.Type == corev1.ServiceTypeClusterIP && s.Spec.SessionAffinity == corev1.ServiceAffinityNone &&
			s.Spec.Ports[0].Name == appv1.PortName && s.Labels["team"] == "" && s.Annotations["ingress/http"] == ""
		return gone
	})
	// Without the annotation the Ingress goes.
	waitGone(t, "Ingress web-svc", func() error {
		_, err := c.Kube.NetworkingV1().Ingresses(ns).Get(ctx, "web-svc", metav1.GetOptions{})
		return err
	})

	// An App without the security contexts: the restricted namespace refuses its pods.
	c.Create(t, newApp(ns, "plain", "nginx", 1))
	framework.Eventually(t, converge, func() (bool, error) {
		d, err := c.Kube.AppsV1().Deployments(ns).Get(ctx, "plain-deploy", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, cond := range d.Status.Conditions {
			if cond.Type == appsv1.DeploymentReplicaFailure && strings.Contains(cond.Message, "violates PodSecurity") {
				return true, nil
			}
		}
		return false, nil
	})
	if got := framework.AppCondition(c.GetApp(t, ns, "plain"), appv1.ConditionReady); strings.HasPrefix(got, "True") {
		t.Errorf("App without security contexts in a restricted namespace: Ready %s", got)
	}
}

// createBoundClaim creates a PersistentVolumeClaim name bound to a hostPath
// PersistentVolume made for it (the local cluster has no provisioner), and waits until
// the claim is Bound.
func createBoundClaim(t *testing.T, c clients, ns, name string) {
	t.Helper()
	ctx := context.Background()
	size := corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      size,
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              "",
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + ns}},
			ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: name},
		},
	}
	if _, err := c.Kube.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Kube.CoreV1().PersistentVolumes().Delete(context.Background(), pv.Name, metav1.DeleteOptions{})
	})
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			Resources:        corev1.VolumeResourceRequirements{Requests: size},
			StorageClassName: ptr.To(""),
			VolumeName:       pv.Name,
		},
	}
	if _, err := c.Kube.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, converge, func() (bool, error) {
		got, err := c.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && got.Status.Phase == corev1.ClaimBound, nil
	})
}

// TestScale scales an App through its scale subresource, with kubectl scale and with a
// HorizontalPodAutoscaler (autoscaling/v2) that targets the App: the App's replicas
// change and the controller applies them to the Deployment; the scale subresource reports
// the Deployment's replicas and the App's pod selector.
func TestScale(t *testing.T) {
	c, ns := readyWeb(t, 1)
	ctx := context.Background()

	framework.Kubectl(t, "-n", ns, "scale", "app/web", "--replicas", "3")
	if got := *c.GetApp(t, ns, "web").Spec.DeploymentTemplate.Replicas; got != 3 {
		t.Errorf("App replicas after kubectl scale = %d, want 3", got)
	}
	c.WaitDeployment(t, ns, "web-deploy", func(d *appsv1.Deployment) bool { return *d.Spec.Replicas == 3 })
	app := c.WaitReady(t, ns, "web")
	wantSelector := "app.kubernetes.io/instance=web,app.kubernetes.io/name=web"
	if app.Status.Selector != wantSelector {
		t.Errorf("status.selector = %q, want %q", app.Status.Selector, wantSelector)
	}

	readScale := func() *autoscalingv1.Scale {
		t.Helper()
		raw, err := c.Kube.CoreV1().RESTClient().Get().
			AbsPath("/apis/appcontroller.k8s.io/v1/namespaces", ns, "apps", "web", "scale").DoRaw(ctx)
		if err != nil {
			t.Fatalf("reading the scale subresource: %v", err)
		}
		scale := &autoscalingv1.Scale{}
		if err := json.Unmarshal(raw, scale); err != nil {
			t.Fatal(err)
		}
		return scale
	}
	if s := readScale(); s.Spec.Replicas != 3 || s.Status.Replicas != 3 || s.Status.Selector != wantSelector {
		t.Errorf("scale = spec %d, status %d, selector %q; want 3, 3, %q", s.Spec.Replicas, s.Status.Replicas, s.Status.Selector, wantSelector)
	}

	// An HPA that targets the App. There is no metrics server here, but minReplicas above
	// the current count makes the HPA controller scale the App up through the scale
	// subresource, and the App controller follows: they never fight.
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: appv1.GroupVersion.String(), Kind: "App", Name: "web"},
			MinReplicas:    ptr.To[int32](4),
			MaxReplicas:    6,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
				Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](80)},
			}}},
		},
	}
	if _, err := c.Kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, hpa, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating an HPA that targets the App: %v", err)
	}
	c.WaitDeployment(t, ns, "web-deploy", func(d *appsv1.Deployment) bool { return *d.Spec.Replicas == 4 })
	app = c.WaitReady(t, ns, "web")
	if *app.Spec.DeploymentTemplate.Replicas != 4 || app.Status.DeploymentStatus.AvailableReplicas != 4 {
		t.Errorf("after the HPA: App replicas %d, available %d; want 4, 4", *app.Spec.DeploymentTemplate.Replicas, app.Status.DeploymentStatus.AvailableReplicas)
	}
	framework.Eventually(t, converge, func() (bool, error) {
		got, err := c.Kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "web", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, err
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == autoscalingv2.AbleToScale && cond.Status == corev1.ConditionTrue {
				return got.Status.CurrentReplicas == 4, nil
			}
		}
		return false, nil
	})
	if s := readScale(); s.Spec.Replicas != 4 || s.Status.Replicas != 4 {
		t.Errorf("scale after the HPA = spec %d, status %d; want 4, 4", s.Spec.Replicas, s.Status.Replicas)
	}
}

// TestUnsetReplicasLeftToTheDeployment shows the other way to autoscale: an App without
// replicas leaves its Deployment's replica count to whoever scales the Deployment (here
// `kubectl scale deployment`, as a HorizontalPodAutoscaler of the Deployment would through
// its scale subresource). The controller keeps every other field and never sets the
// count back, also when the App changes; the App is Ready at the new count.
func TestUnsetReplicasLeftToTheDeployment(t *testing.T) {
	c, ns := eventDriven(t)
	app := newApp(ns, "web", "nginx", 1)
	app.Spec.DeploymentTemplate.Replicas = nil
	c.Create(t, app)
	c.WaitDeployment(t, ns, "web-deploy", func(d *appsv1.Deployment) bool { return *d.Spec.Replicas == 1 })
	c.WaitReady(t, ns, "web")

	framework.Kubectl(t, "-n", ns, "scale", "deployment/web-deploy", "--replicas", "3")
	// A change of the App makes the controller apply its Deployment again.
	c.Update(t, ns, "web", func(a *appv1.App) { a.Spec.DeploymentTemplate.Image = "nginx:1.27" })
	d := c.WaitDeployment(t, ns, "web-deploy", func(d *appsv1.Deployment) bool {
		return d.Spec.Template.Spec.Containers[0].Image == "nginx:1.27"
	})
	if *d.Spec.Replicas != 3 {
		t.Errorf("Deployment replicas after the App changed = %d, want 3 (set by the scaler, not the App's)", *d.Spec.Replicas)
	}
	got := c.WaitReady(t, ns, "web")
	if got.Status.DeploymentStatus.AvailableReplicas != 3 {
		t.Errorf("available replicas = %d, want 3", got.Status.DeploymentStatus.AvailableReplicas)
	}
}

package controller

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"
)

func TestUpToDate(t *testing.T) {
	desired := func() *appsv1ac.DeploymentApplyConfiguration {
		return appsv1ac.Deployment("web", "ns").
			WithLabels(map[string]string{"a": "1"}).
			WithAnnotations(map[string]string{AppliedConfigHashAnnotation: "h1"}).
			WithSpec(appsv1ac.DeploymentSpec().
				WithReplicas(2).
				WithTemplate(corev1ac.PodTemplateSpec().WithSpec(corev1ac.PodSpec().WithContainers(
					corev1ac.Container().WithName("c").WithImage("nginx").
						WithArgs("-a", "-b").
						WithEnv(corev1ac.EnvVar().WithName("X").WithValue("1")).
						WithResources(corev1ac.ResourceRequirements().WithRequests(corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse("500m")})),
				))))
	}
	live := func() *appsv1.Deployment {
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "u", ResourceVersion: "7",
				Labels:      map[string]string{"a": "1", "other": "x"},
				Annotations: map[string]string{AppliedConfigHashAnnotation: "h1", "deployment.kubernetes.io/revision": "1"}},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](2),
				Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType},
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyAlways,
					Containers: []corev1.Container{
						{Name: "sidecar", Image: "envoy"},
						{Name: "c", Image: "nginx", Args: []string{"-a", "-b"}, ImagePullPolicy: corev1.PullAlways,
							Env: []corev1.EnvVar{{Name: "Y", Value: "2"}, {Name: "X", Value: "1"}},
							Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
								corev1.ResourceCPU: resource.MustParse("0.5")}}},
					},
				}},
			},
		}
	}
	tests := []struct {
		name   string
		mutate func(*appsv1.Deployment)
		want   bool
	}{
		{"server defaults, other managers' fields and reordered keyed lists are fine", nil, true},
		{"replicas scaled", func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](5) }, false},
		{"image edited", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[1].Image = "httpd" }, false},
		{"owned env var removed", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[1].Env = nil }, false},
		{"owned label changed", func(d *appsv1.Deployment) { d.Labels["a"] = "2" }, false},
		{"hash differs (the configuration dropped a field)", func(d *appsv1.Deployment) { d.Annotations[AppliedConfigHashAnnotation] = "h0" }, false},
		{"atomic list differs", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[1].Args = []string{"-a"} }, false},
		{"our container gone", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers = d.Spec.Template.Spec.Containers[:1] }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := live()
			if tc.mutate != nil {
				tc.mutate(l)
			}
			got, err := UpToDate(l, desired())
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("UpToDate = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestUpToDateService(t *testing.T) {
	desired := corev1ac.Service("s", "ns").WithSpec(corev1ac.ServiceSpec().
		WithPorts(corev1ac.ServicePort().WithName("http").WithPort(8080).WithTargetPort(intstr.FromInt32(80))))
	live := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns"}, Spec: corev1.ServiceSpec{
		ClusterIP: "10.96.0.1",
		Ports:     []corev1.ServicePort{{Name: "http", Port: 8080, TargetPort: intstr.FromInt32(80), Protocol: corev1.ProtocolTCP}},
	}}
	if ok, err := UpToDate(live, desired); err != nil || !ok {
		t.Errorf("UpToDate = %v, %v; want true", ok, err)
	}
	live.Spec.Ports[0].TargetPort = intstr.FromString("http")
	if ok, _ := UpToDate(live, desired); ok {
		t.Error("a changed target port is up to date")
	}
}

// TestUpToDateZeroValues checks that a zero value the API server drops (omitempty)
// matches its absence, and that a non-zero value does not. Found by
// test/integration/app TestGeneratedApps: a volume mount with readOnly: false was
// never up to date, so every sync wrote the Deployment again.
func TestUpToDateZeroValues(t *testing.T) {
	desired := func(readOnly bool, minReady int32) *appsv1ac.DeploymentApplyConfiguration {
		return appsv1ac.Deployment("web", "ns").WithSpec(appsv1ac.DeploymentSpec().
			WithMinReadySeconds(minReady).
			WithTemplate(corev1ac.PodTemplateSpec().WithSpec(corev1ac.PodSpec().WithContainers(
				corev1ac.Container().WithName("c").WithImage("nginx").
					WithVolumeMounts(corev1ac.VolumeMount().WithName("v").WithMountPath("/v").WithReadOnly(readOnly))))))
	}
	live := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"}, Spec: appsv1.DeploymentSpec{
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "c", Image: "nginx", VolumeMounts: []corev1.VolumeMount{{Name: "v", MountPath: "/v"}}},
		}}},
	}}
	for _, tt := range []struct {
		name     string
		readOnly bool
		minReady int32
		want     bool
	}{
		{"zero values dropped by the server", false, 0, true},
		{"readOnly true is a difference", true, 0, false},
		{"minReadySeconds 5 is a difference", false, 5, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got, err := UpToDate(live, desired(tt.readOnly, tt.minReady)); err != nil || got != tt.want {
				t.Errorf("UpToDate = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

package app

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
	"github.com/app-controller/app-controller/pkg/controller/appfixture"
)

func TestNewDeployment(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*appv1.App)
		check  func(t *testing.T, app *appv1.App, d *appsv1.Deployment)
	}{
		{
			name: "seed example: name, image, replicas, per-App labels and selector, controller reference",
			check: func(t *testing.T, app *appv1.App, d *appsv1.Deployment) {
				if d.Name != "test-app-deploy" || d.Namespace != "tcs" {
					t.Errorf("name = %s/%s", d.Namespace, d.Name)
				}
				if *d.Spec.Replicas != 2 || d.Spec.Template.Spec.Containers[0].Image != "nginx" {
					t.Errorf("replicas/image = %d/%s", *d.Spec.Replicas, d.Spec.Template.Spec.Containers[0].Image)
				}
				if c := d.Spec.Template.Spec.Containers[0]; c.Name != appv1.ContainerName || len(c.Ports) != 0 {
					t.Errorf("container = %+v", c)
				}
				wantSel := map[string]string{appv1.NameLabel: "test-app", appv1.InstanceLabel: "test-app"}
				if !equalMaps(d.Spec.Selector.MatchLabels, wantSel) {
					t.Errorf("selector = %v, want %v", d.Spec.Selector.MatchLabels, wantSel)
				}
				wantLabels := map[string]string{appv1.NameLabel: "test-app", appv1.InstanceLabel: "test-app", appv1.ManagedByLabel: appv1.ManagedByValue}
				if !equalMaps(d.Labels, wantLabels) || !equalMaps(d.Spec.Template.Labels, wantLabels) {
					t.Errorf("labels = %v, pod labels = %v, want %v", d.Labels, d.Spec.Template.Labels, wantLabels)
				}
				ref := d.OwnerReferences[0]
				if ref.Kind != "App" || ref.UID != app.UID || !*ref.Controller || !*ref.BlockOwnerDeletion {
					t.Errorf("owner reference = %+v", ref)
				}
				if d.Annotations[controller.AppliedConfigHashAnnotation] == "" {
					t.Error("no applied-config hash annotation")
				}
			},
		},
		{
			name:   "replicas unset: not applied, the Deployment's count is not ours",
			mutate: func(a *appv1.App) { a.Spec.DeploymentTemplate.Replicas = nil },
			check: func(t *testing.T, _ *appv1.App, d *appsv1.Deployment) {
				if d.Spec.Replicas != nil {
					t.Errorf("replicas = %d, want unset", *d.Spec.Replicas)
				}
			},
		},
		{
			name:   "replicas 0 is kept",
			mutate: func(a *appv1.App) { a.Spec.DeploymentTemplate.Replicas = ptr.To[int32](0) },
			check: func(t *testing.T, _ *appv1.App, d *appsv1.Deployment) {
				if *d.Spec.Replicas != 0 {
					t.Errorf("replicas = %d, want 0", *d.Spec.Replicas)
				}
			},
		},
		{
			name: "optional container fields",
			mutate: func(a *appv1.App) {
				t := a.Spec.DeploymentTemplate
				t.ContainerPort = ptr.To[int32](80)
				t.Command = []string{"nginx"}
				t.Args = []string{"-g", "daemon off;"}
				t.Env = []corev1.EnvVar{
					{Name: "A", Value: "1"},
					{Name: "B", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
				}
				t.Resources = &appv1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0.5")},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
				}
			},
			check: func(t *testing.T, _ *appv1.App, d *appsv1.Deployment) {
				c := d.Spec.Template.Spec.Containers[0]
				if len(c.Ports) != 1 || c.Ports[0].ContainerPort != 80 || c.Ports[0].Name != appv1.PortName {
					t.Errorf("ports = %+v", c.Ports)
				}
				if len(c.Command) != 1 || len(c.Args) != 2 || c.Args[1] != "daemon off;" {
					t.Errorf("command/args = %q %q", c.Command, c.Args)
				}
				if len(c.Env) != 2 || c.Env[1].ValueFrom.FieldRef.FieldPath != "metadata.name" {
					t.Errorf("env = %+v", c.Env)
				}
				if got := c.Resources.Requests.Cpu().String(); got != "500m" {
					t.Errorf("cpu request = %s, want canonical 500m", got)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			app := newApp("test-app", time.Now())
			if tc.mutate != nil {
				tc.mutate(app)
			}
			tc.check(t, app, desiredObject[appsv1.Deployment](t, DesiredDeployment, app))
		})
	}
}

func TestNewService(t *testing.T) {
	tests := []struct {
		name           string
		mutate         func(*appv1.App)
		wantPort       int32
		wantTargetPort intstr.IntOrString
		wantType       corev1.ServiceType
	}{
		{name: "seed defaults", wantPort: 8080, wantTargetPort: intstr.FromInt32(8080), wantType: corev1.ServiceTypeClusterIP},
		{
			name:     "port unset in Go: 8080",
			mutate:   func(a *appv1.App) { a.Spec.ServiceTemplate.Port = 0; a.Spec.ServiceTemplate.Type = "" },
			wantPort: 8080, wantTargetPort: intstr.FromInt32(8080), wantType: corev1.ServiceTypeClusterIP,
		},
		{
			name:     "target port defaults to the container port",
			mutate:   func(a *appv1.App) { a.Spec.DeploymentTemplate.ContainerPort = ptr.To[int32](80) },
			wantPort: 8080, wantTargetPort: intstr.FromInt32(80), wantType: corev1.ServiceTypeClusterIP,
		},
		{
			name: "explicit target port and type win",
			mutate: func(a *appv1.App) {
				a.Spec.DeploymentTemplate.ContainerPort = ptr.To[int32](80)
				a.Spec.ServiceTemplate.TargetPort = ptr.To[int32](9090)
				a.Spec.ServiceTemplate.Port = 443
				a.Spec.ServiceTemplate.Type = corev1.ServiceTypeNodePort
			},
			wantPort: 443, wantTargetPort: intstr.FromInt32(9090), wantType: corev1.ServiceTypeNodePort,
		},
		{
			name:     "no deployment template: target port is the port",
			mutate:   func(a *appv1.App) { a.Spec.DeploymentTemplate = nil; a.Spec.ServiceTemplate.Port = 81 },
			wantPort: 81, wantTargetPort: intstr.FromInt32(81), wantType: corev1.ServiceTypeClusterIP,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			app := newApp("test-app", time.Now())
			if tc.mutate != nil {
				tc.mutate(app)
			}
			s := desiredObject[corev1.Service](t, DesiredService, app)
			p := s.Spec.Ports[0]
			if p.Port != tc.wantPort || p.TargetPort != tc.wantTargetPort || s.Spec.Type != tc.wantType {
				t.Errorf("port %d -> %s type %s, want %d -> %s type %s", p.Port, p.TargetPort.String(), s.Spec.Type,
					tc.wantPort, tc.wantTargetPort.String(), tc.wantType)
			}
			want := map[string]string{appv1.NameLabel: "test-app", appv1.InstanceLabel: "test-app"}
			if !equalMaps(s.Spec.Selector, want) {
				t.Errorf("selector = %v, want %v", s.Spec.Selector, want)
			}
		})
	}
}

// TestServicePortsList checks serviceTemplate.ports written as the whole list, as a
// Service lists them: the entry that restates the first port (by name, else by number
// and protocol) is the first port, the others follow in order; a list that restates
// nothing is the ports beyond the first, as before.
func TestServicePortsList(t *testing.T) {
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	port := func(name string, n int32, target intstr.IntOrString, protocol corev1.Protocol) corev1.ServicePort {
		return corev1.ServicePort{Name: name, Port: n, TargetPort: target, Protocol: protocol}
	}
	tests := []struct {
		name   string
		mutate func(*appv1.ServiceTemplate)
		// containerPort is the Deployment's, 0 for none.
		containerPort int32
		want          []corev1.ServicePort
		// wantContainerProtocol is the protocol of the container port, "" without one.
		wantContainerProtocol corev1.Protocol
	}{
		{
			name: "the whole list: http restates the first port",
			mutate: func(s *appv1.ServiceTemplate) {
				s.Ports = []appv1.ServicePort{{Name: "http", Port: 80, TargetPort: ptr.To(intstr.FromInt32(8080))}, {Name: "metrics", Port: 9090}}
			},
			want: []corev1.ServicePort{port("http", 80, intstr.FromInt32(8080), tcp), port("metrics", 9090, intstr.FromInt32(9090), tcp)},
		},
		{
			name: "the first port listed second: it comes first, its targetPort the container port",
			mutate: func(s *appv1.ServiceTemplate) {
				s.Ports = []appv1.ServicePort{{Name: "metrics", Port: 9090}, {Name: "http", Port: 80}}
			},
			containerPort: 8080,
			want:          []corev1.ServicePort{port("http", 80, intstr.FromInt32(8080), tcp), port("metrics", 9090, intstr.FromInt32(9090), tcp)},
		},
		{
			name: "restated by number: the entry names the first port",
			mutate: func(s *appv1.ServiceTemplate) {
				s.Ports = []appv1.ServicePort{{Name: "web", Port: 8080}, {Name: "metrics", Port: 9090}}
			},
			want: []corev1.ServicePort{port("web", 8080, intstr.FromInt32(8080), tcp), port("metrics", 9090, intstr.FromInt32(9090), tcp)},
		},
		{
			name: "the name wins over the number: 8080 is another port",
			mutate: func(s *appv1.ServiceTemplate) {
				s.Ports = []appv1.ServicePort{{Name: "http", Port: 80}, {Name: "alt", Port: 8080}}
			},
			want: []corev1.ServicePort{port("http", 80, intstr.FromInt32(80), tcp), port("alt", 8080, intstr.FromInt32(8080), tcp)},
		},
		{
			name: "nothing restated: the ports beyond the first, as before",
			mutate: func(s *appv1.ServiceTemplate) {
				s.Ports = []appv1.ServicePort{{Name: "api", Port: 80}, {Name: "metrics", Port: 9090}}
			},
			want: []corev1.ServicePort{port("http", 8080, intstr.FromInt32(8080), tcp), port("api", 80, intstr.FromInt32(80), tcp), port("metrics", 9090, intstr.FromInt32(9090), tcp)},
		},
		{
			name: "the first port's other fields fill what the entry leaves unset",
			mutate: func(s *appv1.ServiceTemplate) {
				s.Type, s.TargetPort, s.NodePort = corev1.ServiceTypeNodePort, ptr.To[int32](9000), ptr.To[int32](30080)
				s.Ports = []appv1.ServicePort{{Name: "http", Port: 80}}
			},
			want: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(9000), Protocol: tcp, NodePort: 30080}},
		},
		{
			name: "the entry's protocol is the first port's and the container port's",
			mutate: func(s *appv1.ServiceTemplate) {
				s.Ports = []appv1.ServicePort{{Name: "http", Port: 53, Protocol: udp}}
			},
			containerPort:         53,
			want:                  []corev1.ServicePort{port("http", 53, intstr.FromInt32(53), udp)},
			wantContainerProtocol: udp,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			app := newApp("test-app", time.Now())
			tc.mutate(app.Spec.ServiceTemplate)
			if tc.containerPort != 0 {
				app.Spec.DeploymentTemplate.ContainerPort = ptr.To(tc.containerPort)
			}
			s := desiredObject[corev1.Service](t, DesiredService, app)
			if !equality.Semantic.DeepEqual(s.Spec.Ports, tc.want) {
				t.Errorf("Service ports %+v, want %+v", s.Spec.Ports, tc.want)
			}
			var protocol corev1.Protocol
			if p := desiredObject[appsv1.Deployment](t, DesiredDeployment, app).Spec.Template.Spec.Containers[0].Ports; len(p) > 0 {
				protocol = p[0].Protocol
			}
			if want := tc.wantContainerProtocol; want != "" && protocol != want {
				t.Errorf("container port protocol %s, want %s", protocol, want)
			}
			// A route goes to the first port by default.
			app.Spec.Route = &appv1.Route{Hosts: []appv1.Hostname{"shop.example.com"}}
			if p, err := routePort(app); err != nil || p.name != tc.want[0].Name || p.port != tc.want[0].Port {
				t.Errorf("the route's port %+v, %v, want the first, %s %d", p, err, tc.want[0].Name, tc.want[0].Port)
			}
		})
	}
}

// TestSelectorsAreDisjoint checks that two Apps in one namespace never select each
// other's pods.
func TestSelectorsAreDisjoint(t *testing.T) {
	a, b := newApp("a", time.Now()), newApp("b", time.Now())
	da, _ := DesiredDeployment(a)
	sb, _ := DesiredService(b)
	podLabels := da.Spec.Template.Labels
	for k, v := range sb.Spec.Selector {
		if podLabels[k] != v {
			return // b's Service does not select a's pods
		}
	}
	t.Errorf("Service of App b (selector %v) selects the pods of App a (labels %v)", sb.Spec.Selector, podLabels)
}

func TestConfigHash(t *testing.T) {
	a := newApp("test-app", time.Now())
	d1, _ := DesiredDeployment(a)
	d2, _ := DesiredDeployment(a.DeepCopy())
	if h1, h2 := d1.Annotations[controller.AppliedConfigHashAnnotation], d2.Annotations[controller.AppliedConfigHashAnnotation]; h1 != h2 {
		t.Errorf("hash not stable: %s != %s", h1, h2)
	}
	b := a.DeepCopy()
	b.Spec.DeploymentTemplate.Env = nil
	b.Spec.DeploymentTemplate.Image = "nginx:1.27"
	d3, _ := DesiredDeployment(b)
	if d1.Annotations[controller.AppliedConfigHashAnnotation] == d3.Annotations[controller.AppliedConfigHashAnnotation] {
		t.Error("hash did not change with the spec")
	}
	if n, _ := DesiredDeployment(&appv1.App{Spec: appv1.AppSpec{ServiceTemplate: a.Spec.ServiceTemplate}}); n != nil {
		t.Error("an App without deploymentTemplate wants a Deployment")
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestEveryField checks that every optional field of the templates reaches the
// Deployment and the Service exactly, alone or with the others.
func TestEveryField(t *testing.T) {
	refs := appfixture.EveryField{ServiceAccount: "app", PriorityClass: "high", Claim: "data"}
	tests := []struct {
		name   string
		mutate func(*appv1.App)
	}{
		{name: "every field", mutate: func(a *appv1.App) { appfixture.WithEveryField(a, refs) }},
		{name: "Recreate strategy", mutate: func(a *appv1.App) {
			a.Spec.DeploymentTemplate.Strategy = &appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
		}},
		{name: "NodePort with a nodePort, UDP, default port name", mutate: func(a *appv1.App) {
			a.Spec.ServiceTemplate.Type = corev1.ServiceTypeNodePort
			a.Spec.ServiceTemplate.NodePort = ptr.To[int32](30080)
			a.Spec.ServiceTemplate.Protocol = corev1.ProtocolUDP
		}},
		{name: "pod labels never replace the selector labels", mutate: func(a *appv1.App) {
			// The schema refuses this; the builder keeps the App's labels anyway.
			a.Spec.DeploymentTemplate.PodLabels = map[string]appv1.LabelValue{"team": "x", appv1.InstanceLabel: "other"}
			a.Spec.ServiceTemplate.Labels = map[string]appv1.LabelValue{"team": "x", appv1.ManagedByLabel: "someone"}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			app := newApp("test-app", time.Now())
			tc.mutate(app)
			d, s := desiredObject[appsv1.Deployment](t, DesiredDeployment, app), desiredObject[corev1.Service](t, DesiredService, app)
			if d.Spec.Template.Spec.SecurityContext == nil {
				d.Spec.Template.Spec.SecurityContext = &corev1.PodSecurityContext{} // the apiserver's default
			}
			for _, diff := range appfixture.EveryFieldDiffs(app, d, s) {
				t.Error(diff)
			}
			if p := d.Spec.Template.Spec.Containers[0].Ports; len(p) > 0 && p[0].Protocol != s.Spec.Ports[0].Protocol {
				t.Errorf("container port protocol %s, Service port protocol %s", p[0].Protocol, s.Spec.Ports[0].Protocol)
			}
		})
	}
}

package app

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// TestHandEdits edits an App's children by hand to values the controller never writes,
// one edit after the other, and checks for each that the controller restores the child
// (same object) or reports why it cannot (condition and Event), and that the App is
// Ready again after. A panic in the controller would end the test process.
//
// What the API server refuses is checked too: a Deployment's selector is immutable, and
// pod template labels that the selector does not match are invalid, so neither can drift.
func TestHandEdits(t *testing.T) {
	// A long resync: repairs must come from watch events.
	c, ns := eventDriven(t)
	ctx := context.Background()
	app := newApp(ns, "web", "nginx", 2)
	app.Spec.DeploymentTemplate.ContainerPort = ptr.To[int32](8080)
	c.Create(t, app)
	c.WaitReady(t, ns, "web")
	deployments := c.Kube.AppsV1().Deployments(ns)
	services := c.Kube.CoreV1().Services(ns)
	editDeployment := func(t *testing.T, mutate func(*appsv1.Deployment)) error {
		_, err := c.editDeployment(t, ns, "web-deploy", mutate)
		return err
	}
	editService := func(t *testing.T, mutate func(*corev1.Service)) { c.editService(t, ns, "web-svc", mutate) }
	deployment := func(t *testing.T) *appsv1.Deployment {
		d, err := deployments.Get(ctx, "web-deploy", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	service := func(t *testing.T) *corev1.Service {
		s, err := services.Get(ctx, "web-svc", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// wantService is the App's Service as the controller writes it.
	wantService := func(s *corev1.Service) bool {
		return s.Labels[appv1.ManagedByLabel] == appv1.ManagedByValue && len(s.Spec.Ports) == 1 &&
			s.Spec.Ports[0].Name == appv1.PortName && s.Spec.Ports[0].Port == 8080 &&
			s.Spec.Ports[0].Protocol == corev1.ProtocolTCP && s.Spec.Ports[0].TargetPort == intstr.FromInt32(8080) &&
			s.Spec.Type == corev1.ServiceTypeClusterIP && len(s.Spec.Selector) == 2 && s.Spec.Selector[appv1.InstanceLabel] == "web"
	}
	d0, s0 := deployment(t), service(t)
	if !wantService(s0) {
		t.Fatalf("the App's Service is not as the test expects: %+v", s0.Spec)
	}

	t.Run("deployment selector is immutable", func(t *testing.T) {
		err := editDeployment(t, func(d *appsv1.Deployment) {
			d.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}}
			d.Spec.Template.Labels = map[string]string{"app": "other"}
		})
		if err == nil || !strings.Contains(err.Error(), "field is immutable") {
			t.Errorf("changing the selector: %v, want the API server to refuse it as immutable", err)
		}
	})
	t.Run("pod labels the selector does not match are invalid", func(t *testing.T) {
		err := editDeployment(t, func(d *appsv1.Deployment) { delete(d.Spec.Template.Labels, appv1.InstanceLabel) })
		if err == nil || !strings.Contains(err.Error(), "does not match template") {
			t.Errorf("removing a selected pod label: %v, want the API server to refuse it", err)
		}
	})

	tests := []struct {
		name string
		edit func(t *testing.T)
		// restored waits until the child is back; it must be the same object.
		restored func(t *testing.T) bool
	}{
		{
			name: "deployment managed-by label removed",
			edit: func(t *testing.T) {
				if err := editDeployment(t, func(d *appsv1.Deployment) { delete(d.Labels, appv1.ManagedByLabel) }); err != nil {
					t.Fatal(err)
				}
			},
			restored: func(t *testing.T) bool { return deployment(t).Labels[appv1.ManagedByLabel] == appv1.ManagedByValue },
		},
		{
			name: "deployment labels and applied-config hash replaced",
			edit: func(t *testing.T) {
				if err := editDeployment(t, func(d *appsv1.Deployment) {
					d.Labels = map[string]string{"owner": "someone"}
					delete(d.Annotations, controller.AppliedConfigHashAnnotation)
				}); err != nil {
					t.Fatal(err)
				}
			},
			restored: func(t *testing.T) bool {
				d := deployment(t)
				return d.Labels[appv1.ManagedByLabel] == appv1.ManagedByValue && d.Labels[appv1.InstanceLabel] == "web" &&
					d.Annotations[controller.AppliedConfigHashAnnotation] == d0.Annotations[controller.AppliedConfigHashAnnotation]
			},
		},
		{
			// Server-side apply restores the fields the App owns; a list entry that someone
			// else added (here the UDP port) stays theirs.
			name: "deployment image and container ports replaced",
			edit: func(t *testing.T) {
				if err := editDeployment(t, func(d *appsv1.Deployment) {
					ctr := &d.Spec.Template.Spec.Containers[0]
					ctr.Ports = []corev1.ContainerPort{{Name: "other", ContainerPort: 1234, Protocol: corev1.ProtocolUDP}}
					ctr.Image = "busybox"
				}); err != nil {
					t.Fatal(err)
				}
			},
			restored: func(t *testing.T) bool {
				ctr := deployment(t).Spec.Template.Spec.Containers[0]
				ours := false
				for _, p := range ctr.Ports {
					ours = ours || (p.Name == appv1.PortName && p.ContainerPort == 8080 && p.Protocol == corev1.ProtocolTCP)
				}
				return ctr.Image == "nginx" && ours
			},
		},
		{
			name:     "service managed-by label removed",
			edit:     func(t *testing.T) { editService(t, func(s *corev1.Service) { delete(s.Labels, appv1.ManagedByLabel) }) },
			restored: func(t *testing.T) bool { return wantService(service(t)) },
		},
		{
			name: "service ports renamed, renumbered, UDP, one added",
			edit: func(t *testing.T) {
				editService(t, func(s *corev1.Service) {
					s.Spec.Ports = []corev1.ServicePort{
						{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(53)},
						{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(9999)},
					}
				})
			},
			restored: func(t *testing.T) bool { return wantService(service(t)) },
		},
		{
			name: "service selector emptied",
			edit: func(t *testing.T) {
				editService(t, func(s *corev1.Service) { s.Spec.Selector = nil })
			},
			restored: func(t *testing.T) bool { return wantService(service(t)) },
		},
		{
			name: "service made a NodePort",
			edit: func(t *testing.T) {
				editService(t, func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort })
			},
			restored: func(t *testing.T) bool {
				s := service(t)
				return wantService(s) && s.Spec.Ports[0].NodePort == 0
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			tt.edit(t)
			framework.Eventually(t, converge, func() (bool, error) { return tt.restored(t), nil })
			if d, s := deployment(t), service(t); d.UID != d0.UID || s.UID != s0.UID {
				t.Errorf("the child was replaced, not restored")
			}
			t.Logf("restored in %s", time.Since(start).Round(time.Millisecond))
			c.WaitReady(t, ns, "web")
		})
	}

	// Three Service repairs in a row within the contest window: the App reports the
	// hand edits as a competing writer, naming its field manager, and paced the last
	// repair (the NodePort one waited its backoff).
	framework.Eventually(t, converge, func() (bool, error) {
		for _, ev := range c.Events(t, ns, "App", "web") {
			if strings.HasPrefix(ev, "Warning "+appv1.EventReasonContested+` Service "web-svc"`) && strings.Contains(ev, `"kubectl-edit"`) {
				return true, nil
			}
		}
		return false, nil
	})

	// Owner references removed: the Deployment is no longer the App's. The controller
	// never adopts an object it does not control: it reports the name as taken and does
	// not write to it. Deleting that Deployment gives the name back.
	t.Run("deployment owner references removed", func(t *testing.T) {
		if err := editDeployment(t, func(d *appsv1.Deployment) { d.OwnerReferences = nil }); err != nil {
			t.Fatal(err)
		}
		orphan := deployment(t)
		app = c.WaitCondition(t, ns, "web", appv1.ConditionNamesAccepted, "False/"+appv1.ReasonNameConflict)
		if got := framework.AppCondition(app, appv1.ConditionReady); got != "False/"+appv1.ReasonNameConflict {
			t.Errorf("Ready = %s, want False/%s", got, appv1.ReasonNameConflict)
		}
		framework.WaitEvent(t, c.Kube, ns, "App", "web", "Warning "+appv1.EventReasonResourceExists, converge)
		time.Sleep(2 * time.Second)
		if d := deployment(t); d.ResourceVersion != orphan.ResourceVersion && len(d.OwnerReferences) > 0 {
			t.Errorf("the orphaned Deployment was written to: owners %v", d.OwnerReferences)
		}
		if err := deployments.Delete(ctx, "web-deploy", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		c.WaitDeployment(t, ns, "web-deploy", func(d *appsv1.Deployment) bool { return d.UID != orphan.UID })
		c.WaitReady(t, ns, "web")
	})
}

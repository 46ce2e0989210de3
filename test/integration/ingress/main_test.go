// Package ingress tests the Service->Ingress controller end to end against a real control
// plane: kube-apiserver (validation, defaulting, admission, server-side apply) and
// kube-controller-manager (garbage collection).
package ingress

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/app-controller/app-controller/internal/localcluster"
	ingressctrl "github.com/app-controller/app-controller/pkg/controller/ingress"
	"github.com/app-controller/app-controller/pkg/controllermanager"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// The Gateway API CRDs are installed: App routes with parentRefs become HTTPRoutes.
func TestMain(m *testing.M) {
	framework.MainWithOptions(m, func(o *localcluster.Options) { o.GatewayAPI = true })
}

// converge bounds how long the controller and the cluster may take to converge.
const converge = 60 * time.Second

// startManager runs the ingress controller (only) in the test process until the test
// ends, with ingressClass as --ingress-class.
func startManager(t *testing.T, ingressClass string) {
	t.Helper()
	startManagerWith(t, ingressOptions(ingressClass))
}

// ingressOptions are the options of startManager: the ingress controller only, with
// ingressClass as --ingress-class and a 10s resync.
func ingressOptions(ingressClass string) *controllermanager.Options {
	opts := controllermanager.NewOptions()
	opts.Controllers = []string{ingressctrl.ControllerName}
	opts.IngressClass = ingressClass
	opts.ResyncPeriod = 10 * time.Second
	opts.ShutdownTimeout = 5 * time.Second
	return opts
}

// startManagerWith runs the controllers of opts in the test process until the test ends.
func startManagerWith(t *testing.T, opts *controllermanager.Options) {
	t.Helper()
	framework.StartManager(t, framework.Config(t), opts)
}

// env is a test's client and namespace.
type env struct {
	kube kubernetes.Interface
	ns   string
}

func newEnv(t *testing.T) env {
	t.Helper()
	return env{kube: framework.Client(t), ns: framework.Namespace(t)}
}

// service returns a ClusterIP Service named name with one port and the annotations.
func (e env) service(name string, annotations map[string]string, ports ...corev1.ServicePort) *corev1.Service {
	if len(ports) == 0 {
		ports = []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}}
	}
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name, Annotations: annotations},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": name}, Ports: ports},
	}
}

// createService creates svc or fails the test.
func (e env) createService(t *testing.T, svc *corev1.Service) *corev1.Service {
	t.Helper()
	created, err := e.kube.CoreV1().Services(e.ns).Create(context.Background(), svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating Service %s: %v", svc.Name, err)
	}
	return created
}

// updateService applies mutate to the latest Service and updates it, retrying on
// conflicts.
func (e env) updateService(t *testing.T, name string, mutate func(*corev1.Service)) {
	t.Helper()
	framework.Eventually(t, converge, func() (bool, error) {
		svc, err := e.kube.CoreV1().Services(e.ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		mutate(svc)
		_, err = e.kube.CoreV1().Services(e.ns).Update(context.Background(), svc, metav1.UpdateOptions{})
		return err == nil, nil
	})
}

// getIngress returns the Ingress, or nil if it does not exist.
func (e env) getIngress(t *testing.T, name string) *networkingv1.Ingress {
	t.Helper()
	ing, err := e.kube.NetworkingV1().Ingresses(e.ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		if strings.Contains(err.Error(), "not found") {
			return nil
		}
		t.Fatalf("getting Ingress %s: %v", name, err)
	}
	return ing
}

// waitIngress waits until the Ingress exists and check passes, and returns it.
func (e env) waitIngress(t *testing.T, name string, check func(*networkingv1.Ingress) bool) *networkingv1.Ingress {
	t.Helper()
	var ing *networkingv1.Ingress
	framework.Eventually(t, converge, func() (bool, error) {
		ing = e.getIngress(t, name)
		return ing != nil && check(ing), nil
	})
	return ing
}

// waitIngressGone waits until the Ingress does not exist.
func (e env) waitIngressGone(t *testing.T, name string) {
	t.Helper()
	framework.Eventually(t, converge, func() (bool, error) {
		return e.getIngress(t, name) == nil, nil
	})
}

// events returns "Type Reason Message" of the Events about the Service.
func (e env) events(t *testing.T, service string) []string {
	t.Helper()
	return framework.Events(t, e.kube, e.ns, "Service", service)
}

// waitEvent waits for an Event about the Service that starts with prefix ("Type Reason
// Message...") and returns it.
func (e env) waitEvent(t *testing.T, service, prefix string) string {
	t.Helper()
	var found string
	framework.Eventually(t, converge, func() (bool, error) {
		for _, ev := range e.events(t, service) {
			if strings.HasPrefix(ev, prefix) {
				found = ev
				return true, nil
			}
		}
		return false, nil
	})
	return found
}

// route returns the path, path type, backend Service and port of the Ingress's only
// rule, and its host.
func route(ing *networkingv1.Ingress) (host, path string, pathType networkingv1.PathType, backend string, port networkingv1.ServiceBackendPort) {
	if len(ing.Spec.Rules) != 1 || ing.Spec.Rules[0].HTTP == nil || len(ing.Spec.Rules[0].HTTP.Paths) != 1 {
		return "", "", "", "", port
	}
	r := ing.Spec.Rules[0]
	p := r.HTTP.Paths[0]
	if p.PathType != nil {
		pathType = *p.PathType
	}
	if p.Backend.Service != nil {
		backend, port = p.Backend.Service.Name, p.Backend.Service.Port
	}
	return r.Host, p.Path, pathType, backend, port
}

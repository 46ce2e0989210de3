package ingress

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	gatewayfake "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/fake"
	gatewayinformers "sigs.k8s.io/gateway-api/pkg/client/informers/externalversions"

	"github.com/app-controller/app-controller/pkg/controller/controllertest"
)

// fixture is a Controller on a fake clientset, which models server-side apply, with
// informer caches seeded by hand (the informers never run).
type fixture struct {
	t        *testing.T
	ctx      context.Context
	c        *Controller
	client   *kubefake.Clientset
	inf      Informers
	recorder *record.FakeRecorder
}

// newFixture builds a Controller with the given default IngressClass.
func newFixture(t *testing.T, ingressClass string) *fixture {
	t.Helper()
	return newFixtureWith(t, Options{IngressClass: ingressClass})
}

// newFixtureWith builds a Controller with opts.
func newFixtureWith(t *testing.T, opts Options) *fixture {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	f := &fixture{t: t, ctx: ctx, client: kubefake.NewClientset(), recorder: record.NewFakeRecorder(100)}
	factory := informers.NewSharedInformerFactory(f.client, 0)
	f.inf = Informers{Services: factory.Core().V1().Services(), Ingresses: factory.Networking().V1().Ingresses(),
		HTTPRoutes: gatewayinformers.NewSharedInformerFactory(gatewayfake.NewClientset(), 0).Gateway().V1().HTTPRoutes()}
	c, err := NewController(ctx, f.client, f.inf, f.recorder, opts)
	if err != nil {
		t.Fatalf("NewController: %v", err)
	}
	f.c = c
	t.Cleanup(c.loop.Queue().ShutDown)
	return f
}

// addServices seeds the Service cache.
func (f *fixture) addServices(svcs ...*corev1.Service) {
	for _, s := range svcs {
		controllertest.Seed(f.t, f.inf.Services.Informer().GetIndexer(), nil, s)
	}
}

// addIngresses seeds the Ingress cache and the clientset.
func (f *fixture) addIngresses(ings ...*networkingv1.Ingress) {
	for _, ing := range ings {
		controllertest.Seed(f.t, f.inf.Ingresses.Informer().GetIndexer(), f.client.Tracker(), ing)
	}
}

// sync runs syncService for namespace/name after clearing the recorded actions.
func (f *fixture) sync(name string) error {
	f.client.ClearActions()
	_, err := f.c.syncService(f.ctx, cache.ObjectName{Namespace: testNamespace, Name: name})
	return err
}

// writes returns the write actions (everything but get, list and watch) since the last
// sync.
func (f *fixture) writes() []core.Action { return controllertest.Writes(f.client.Actions()) }

// liveIngress returns the Ingress the clientset holds, or nil.
func (f *fixture) liveIngress(name string) *networkingv1.Ingress {
	f.t.Helper()
	ing, err := f.client.NetworkingV1().Ingresses(testNamespace).Get(f.ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return ing
}

// events drains the recorded events and returns their "Type Reason" prefixes.
func (f *fixture) events() []string {
	out := controllertest.DrainEvents(f.recorder)
	for i, e := range out {
		if fields := strings.Fields(e); len(fields) >= 2 {
			out[i] = fields[0] + " " + fields[1]
		}
	}
	return out
}

// rawEvents drains the recorded events in full.
func (f *fixture) rawEvents() []string { return controllertest.DrainEvents(f.recorder) }

// queued drains the queue and returns the keys it held, sorted.
func (f *fixture) queued() []string { return controllertest.DrainQueue(f.c.loop.Queue()) }

const testNamespace = "web"

// newService returns a Service with one port and the given annotations.
func newService(name string, annotations map[string]string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: testNamespace, UID: types.UID(name + "-uid"), ResourceVersion: "1",
			Annotations: annotations,
		},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 8080, Protocol: corev1.ProtocolTCP}}},
	}
}

// annotated returns the annotations asking for an Ingress, plus extra key/value pairs.
func annotated(kv ...string) map[string]string {
	a := map[string]string{AnnotationHTTP: "true"}
	for i := 0; i+1 < len(kv); i += 2 {
		a[kv[i]] = kv[i+1]
	}
	return a
}

// controlledBy returns owner references making svc the controller.
func controlledBy(svc *corev1.Service) []metav1.OwnerReference {
	return []metav1.OwnerReference{*metav1.NewControllerRef(svc, corev1.SchemeGroupVersion.WithKind("Service"))}
}

// newTestIngress returns an Ingress of the test namespace with the given owners.
func newTestIngress(name string, owners []metav1.OwnerReference) *networkingv1.Ingress {
	return &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: testNamespace, UID: types.UID(name + "-ingress-uid"), ResourceVersion: "1",
			OwnerReferences: owners,
		},
	}
}

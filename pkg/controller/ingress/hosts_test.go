package ingress

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
	"github.com/app-controller/app-controller/pkg/controller/controllertest"
)

func TestHostsConflict(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want bool
	}{
		{"shop.example.com", "shop.example.com", true},
		{"shop.example.com", "api.example.com", false},
		{"*.example.com", "shop.example.com", true},
		{"shop.example.com", "*.example.com", true},
		{"*.example.com", "a.shop.example.com", false}, // a wildcard matches one label
		{"*.example.com", "example.com", false},
		{"*.example.com", "*.example.com", true},
		{"*.shop.example.com", "*.example.com", false},
	} {
		if got := controller.HostsConflict(tt.a, tt.b); got != tt.want {
			t.Errorf("controller.HostsConflict(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

// claimant returns a Service of namespace ns asking for an Ingress for host, created at
// created.
func claimant(ns, name, host string, created time.Time) *corev1.Service {
	svc := newService(name, annotated(AnnotationHost, host))
	svc.Namespace, svc.UID = ns, types.UID(ns+"-"+name+"-uid")
	svc.CreationTimestamp = metav1.NewTime(created)
	return svc
}

// routing returns the Ingress the controller made for svc, created at created.
func routing(svc *corev1.Service, host string, created time.Time) *networkingv1.Ingress {
	ing := newTestIngress(svc.Name, controlledBy(svc))
	ing.Namespace, ing.UID = svc.Namespace, types.UID(svc.Namespace+"-"+svc.Name+"-ingress-uid")
	ing.Labels = map[string]string{appv1.ManagedByLabel: appv1.ManagedByValue}
	ing.CreationTimestamp = metav1.NewTime(created)
	ing.Spec.Rules = []networkingv1.IngressRule{{Host: host}}
	return ing
}

// syncIn runs syncService for ns/name after clearing the recorded actions, stops the
// test if it fails, and returns the verbs of its writes.
func (f *fixture) syncIn(ns, name string) []string {
	f.t.Helper()
	f.client.ClearActions()
	if _, err := f.c.syncService(f.ctx, cache.ObjectName{Namespace: ns, Name: name}); err != nil {
		f.t.Fatal(err)
	}
	return controllertest.Verbs(f.writes())
}

// TestHostOwnership is the repro and its variants: namespace a holds
// shop.example.com; namespace b's claims get no Ingress and a HostConflict Warning
// naming a, until a lets the host go.
func TestHostOwnership(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	a := claimant("a", "shop", "shop.example.com", t0)
	aIngress := routing(a, "shop.example.com", t0.Add(time.Minute))

	for _, tt := range []struct {
		name    string
		claim   *corev1.Service
		shared  []string
		refused bool
	}{
		{name: "the same host from namespace b", claim: claimant("b", "x", "shop.example.com", t0.Add(-time.Hour)), refused: true},
		{name: "a wildcard covering it from namespace b", claim: claimant("b", "x", "*.example.com", t0.Add(-time.Hour)), refused: true},
		{name: "the host in upper case from namespace b", claim: claimant("b", "x", "SHOP.example.com", t0), refused: true},
		{name: "another host of the domain from namespace b", claim: claimant("b", "x", "api.example.com", t0)},
		{name: "the same host from namespace a (another path)", claim: claimant("a", "x", "shop.example.com", t0)},
		{name: "namespaces the administrator lets share", claim: claimant("b", "x", "shop.example.com", t0), shared: []string{"a", "b"}},
		{name: "only one of the two may share", claim: claimant("b", "x", "shop.example.com", t0), shared: []string{"b"}, refused: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, "")
			f.c.sharedNamespaces.Insert(tt.shared...)
			f.addServices(a, tt.claim)
			f.addIngresses(aIngress)
			writes := f.syncIn(tt.claim.Namespace, tt.claim.Name)
			events := controllertest.DrainEvents(f.recorder)
			if !tt.refused {
				if !reflect.DeepEqual(writes, []string{"patch ingresses"}) {
					t.Errorf("writes %q, want the Ingress", writes)
				}
				return
			}
			if len(writes) != 0 {
				t.Errorf("writes %q, want none", writes)
			}
			if len(events) != 1 || !strings.HasPrefix(events[0], "Warning HostConflict") || !strings.Contains(events[0], `held by namespace "a"`) {
				t.Errorf("events %q, want a HostConflict Warning naming namespace a", events)
			}
		})
	}
}

// TestHostHeldByHTTPRoute checks that an App's route attached to a Gateway (its
// HTTPRoute) holds its host against a Service of another namespace, and that the
// HTTPRoute's deletion queues the waiting Service.
func TestHostHeldByHTTPRoute(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	f := newFixture(t, "")
	route := &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{
		Namespace: "a", Name: "shop", UID: "route-uid", ResourceVersion: "2", CreationTimestamp: metav1.NewTime(t0),
		Labels:          map[string]string{appv1.ManagedByLabel: appv1.ManagedByValue},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: appv1.GroupVersion.String(), Kind: "App", Name: "shop", UID: "app-uid", Controller: ptr.To(true)}},
	}, Spec: gatewayv1.HTTPRouteSpec{Hostnames: []gatewayv1.Hostname{"shop.example.com"}}}
	controllertest.Seed(t, f.inf.HTTPRoutes.Informer().GetIndexer(), nil, route)
	claim := claimant("b", "x", "*.example.com", t0.Add(-time.Hour)) // older than the route, but waiting
	f.addServices(claim)
	if writes := f.syncIn("b", "x"); len(writes) != 0 {
		t.Errorf("writes %q, want none", writes)
	}
	if events := controllertest.DrainEvents(f.recorder); len(events) != 1 || !strings.Contains(events[0], `held by namespace "a" (the route of App shop: its HTTPRoute routes it since`) {
		t.Errorf("events %q, want a HostConflict naming the App's route", events)
	}
	// The HTTPRoute goes: the claim is queued and gets the host.
	if err := f.inf.HTTPRoutes.Informer().GetIndexer().Delete(route); err != nil {
		t.Fatal(err)
	}
	f.c.enqueueHostClaimants(hostBuckets(route))
	if n := f.c.loop.Queue().Len(); n != 1 {
		t.Errorf("queued %d claims, want the Service", n)
	}
	if writes := f.syncIn("b", "x"); !reflect.DeepEqual(writes, []string{"patch ingresses"}) {
		t.Errorf("writes %q, want the Ingress", writes)
	}
}

// TestHostHandOver checks that the younger of two Ingresses of one host from two
// namespaces (made in a race) is deleted, that a waiting claim gets the host once the
// holder lets it go, and that a restarted controller (new caches) keeps the holder.
func TestHostHandOver(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	a := claimant("a", "shop", "shop.example.com", t0)
	b := claimant("b", "shop", "shop.example.com", t0.Add(-time.Hour)) // an older Service: it does not matter
	f := newFixture(t, "")
	f.addServices(a, b)
	f.addIngresses(routing(a, "shop.example.com", t0.Add(time.Minute)), routing(b, "shop.example.com", t0.Add(2*time.Minute)))

	if got := f.syncIn("b", "shop"); !reflect.DeepEqual(got, []string{"delete ingresses"}) {
		t.Errorf("b, younger Ingress: writes %q, want it deleted", got)
	}
	// (The fixture's Ingress lacks the backend: the holder's sync completes it.)
	if got := f.syncIn("a", "shop"); slices.Contains(got, "delete ingresses") {
		t.Errorf("a, the holder: writes %q, want its Ingress kept", got)
	}

	// a lets it go: b's claim is queued by the deletion and gets the host.
	bIng, _, _ := f.inf.Ingresses.Informer().GetIndexer().GetByKey("b/shop")
	if err := f.inf.Ingresses.Informer().GetIndexer().Delete(bIng); err != nil {
		t.Fatal(err)
	}
	f.c.ingressHandlers(testLogger(t)).OnDelete(bIng)
	aIng, _, _ := f.inf.Ingresses.Informer().GetIndexer().GetByKey("a/shop")
	released := a.DeepCopy()
	delete(released.Annotations, AnnotationHTTP)
	if err := f.inf.Services.Informer().GetIndexer().Update(released); err != nil {
		t.Fatal(err)
	}
	if err := f.inf.Ingresses.Informer().GetIndexer().Delete(aIng); err != nil {
		t.Fatal(err)
	}
	f.queued()
	f.c.ingressHandlers(testLogger(t)).OnDelete(aIng)
	if q := f.queued(); !slices.Contains(q, "b/shop") {
		t.Errorf("the holder's Ingress deleted: queued %q, want b/shop", q)
	}
	if got := f.syncIn("b", "shop"); !reflect.DeepEqual(got, []string{"patch ingresses"}) {
		t.Errorf("b after a let the host go: writes %q, want its Ingress", got)
	}
}

// TestCatchAll checks --ingress-catch-all-namespaces.
func TestCatchAll(t *testing.T) {
	for _, tt := range []struct {
		allowed []string
		want    []string
	}{
		{nil, []string{"patch ingresses"}}, // unset: every namespace
		{[]string{"*"}, []string{"patch ingresses"}},
		{[]string{testNamespace}, []string{"patch ingresses"}},
		{[]string{}, nil},
		{[]string{"other"}, nil},
	} {
		f := newFixtureWith(t, Options{CatchAllNamespaces: tt.allowed})
		f.addServices(newService("shop", annotated()))
		if err := f.sync("shop"); err != nil {
			t.Fatal(err)
		}
		if got := controllertest.Verbs(f.writes()); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("catch-all namespaces %q: writes %q, want %q", tt.allowed, got, tt.want)
		}
		if tt.want == nil {
			if ev := f.events(); !reflect.DeepEqual(ev, []string{"Warning CatchAllRefused"}) {
				t.Errorf("catch-all namespaces %q: events %q", tt.allowed, ev)
			}
		}
	}
}

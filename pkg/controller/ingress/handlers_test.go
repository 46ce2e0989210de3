package ingress

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/app-controller/app-controller/pkg/controller/controllertest"
)

func TestServiceHandlers(t *testing.T) {
	svc := newService("shop", annotated())
	changed := svc.DeepCopy()
	changed.ResourceVersion = "2"
	tests := []struct {
		name   string
		handle func(c *Controller)
		want   []string
	}{
		{"add", func(c *Controller) { c.serviceHandlers(testLogger(t)).OnAdd(svc, false) }, []string{"web/shop"}},
		{"add of something else", func(c *Controller) { c.serviceHandlers(testLogger(t)).OnAdd(&corev1.Pod{}, false) }, nil},
		{"update", func(c *Controller) { c.serviceHandlers(testLogger(t)).OnUpdate(svc, changed) }, []string{"web/shop"}},
		{"resync", func(c *Controller) { c.serviceHandlers(testLogger(t)).OnUpdate(svc, svc.DeepCopy()) }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, "")
			tt.handle(f.c)
			if got := f.queued(); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("queued %v, want %v", got, tt.want)
			}
		})
	}
}

// testLogger returns a logger that writes to t.
func testLogger(t *testing.T) klog.Logger {
	logger, _ := ktesting.NewTestContext(t)
	return logger
}

func TestIngressHandlers(t *testing.T) {
	shop := newService("shop", annotated())
	cart := newService("cart", annotated())
	// recreated is a Service named like a deleted one whose Ingress is still around.
	oldShop := newService("shop", annotated())
	oldShop.UID = "deleted-shop-uid"

	owned := newTestIngress("shop", controlledBy(shop))
	stale := newTestIngress("shop", controlledBy(oldShop))
	foreign := newTestIngress("shop", nil)
	foreignOther := newTestIngress("blog", nil)
	// crossNamed is controlled by cart but named like shop (made by hand).
	crossNamed := newTestIngress("shop", controlledBy(cart))
	notAService := newTestIngress("shop", []metav1.OwnerReference{{
		APIVersion: "apps/v1", Kind: "Deployment", Name: "shop", UID: shop.UID, Controller: ptr.To(true),
	}})
	bumped := func(ing *networkingv1.Ingress, owners []metav1.OwnerReference) *networkingv1.Ingress {
		ing = ing.DeepCopy()
		ing.ResourceVersion = "2"
		if owners != nil {
			ing.OwnerReferences = owners
		}
		return ing
	}

	tests := []struct {
		name   string
		handle func(c *Controller)
		want   []string
	}{
		{"add owned", func(c *Controller) { c.ingressHandlers(testLogger(t)).OnAdd(owned, false) }, []string{"web/shop"}},
		{"add foreign of a Service's name", func(c *Controller) { c.ingressHandlers(testLogger(t)).OnAdd(foreign, false) }, []string{"web/shop"}},
		{"add foreign of no Service's name", func(c *Controller) { c.ingressHandlers(testLogger(t)).OnAdd(foreignOther, false) }, nil},
		{"add controlled by another Service", func(c *Controller) { c.ingressHandlers(testLogger(t)).OnAdd(crossNamed, false) }, []string{"web/cart", "web/shop"}},
		{"add stale (owner UID gone)", func(c *Controller) { c.ingressHandlers(testLogger(t)).OnAdd(stale, false) }, []string{"web/shop"}},
		{"add controlled by a non-Service", func(c *Controller) { c.ingressHandlers(testLogger(t)).OnAdd(notAService, false) }, []string{"web/shop"}},
		{"update owned (edit)", func(c *Controller) { c.ingressHandlers(testLogger(t)).OnUpdate(owned, bumped(owned, nil)) }, []string{"web/shop"}},
		{"update resync", func(c *Controller) { c.ingressHandlers(testLogger(t)).OnUpdate(owned, owned.DeepCopy()) }, nil},
		{"update foreign, same controller", func(c *Controller) { c.ingressHandlers(testLogger(t)).OnUpdate(foreign, bumped(foreign, nil)) }, nil},
		{"update foreign gains the Service as controller", func(c *Controller) {
			c.ingressHandlers(testLogger(t)).OnUpdate(foreign, bumped(foreign, controlledBy(shop)))
		}, []string{"web/shop"}},
		{"update owned loses its controller", func(c *Controller) {
			c.ingressHandlers(testLogger(t)).OnUpdate(owned, bumped(owned, []metav1.OwnerReference{}))
		}, []string{"web/shop"}},
		{"update changes controller to another Service", func(c *Controller) {
			c.ingressHandlers(testLogger(t)).OnUpdate(owned, bumped(owned, controlledBy(cart)))
		}, []string{"web/cart", "web/shop"}},
		{"delete owned", func(c *Controller) { c.ingressHandlers(testLogger(t)).OnDelete(owned) }, []string{"web/shop"}},
		{"delete owned, tombstone", func(c *Controller) {
			c.ingressHandlers(testLogger(t)).OnDelete(cache.DeletedFinalStateUnknown{Key: "web/shop", Obj: owned})
		}, []string{"web/shop"}},
		{"delete foreign frees the name", func(c *Controller) { c.ingressHandlers(testLogger(t)).OnDelete(foreign) }, []string{"web/shop"}},
		{"delete tombstone of something else", func(c *Controller) {
			c.ingressHandlers(testLogger(t)).OnDelete(cache.DeletedFinalStateUnknown{Key: "x", Obj: "garbage"})
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, "")
			f.addServices(shop, cart)
			tt.handle(f.c)
			if got := f.queued(); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("queued %v, want %v", got, tt.want)
			}
		})
	}
}

// TestOwnWriteUntilDeleted checks the write cache of Ingresses: a sync that runs before
// the informer delivers the Ingress the controller just created does not write it again,
// and once the informer delivers its deletion, the next sync creates it again.
func TestOwnWriteUntilDeleted(t *testing.T) {
	f := newFixture(t, "")
	f.addServices(newService("shop", annotated()))
	for _, step := range []struct {
		name  string
		want  []string
		after func()
	}{
		{name: "create", want: []string{"patch ingresses"}},
		{name: "informer behind: nothing to write", want: nil, after: func() {
			f.c.ingressHandlers(testLogger(t)).OnDelete(f.liveIngress("shop"))
		}},
		{name: "deleted: created again", want: []string{"patch ingresses"}},
	} {
		if err := f.sync("shop"); err != nil {
			t.Fatalf("%s: sync: %v", step.name, err)
		}
		if got := controllertest.Verbs(f.writes()); !reflect.DeepEqual(got, step.want) {
			t.Errorf("%s: writes %q, want %q", step.name, got, step.want)
		}
		if step.after != nil {
			step.after()
		}
	}
}

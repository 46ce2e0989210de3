package ingress

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
	"github.com/app-controller/app-controller/pkg/controller/controllertest"
)

// appliedIngress returns the Ingress the API server holds after applying what svc asks
// for with the given settings.
func appliedIngress(t *testing.T, svc *corev1.Service, s settings) *networkingv1.Ingress {
	t.Helper()
	config, err := newIngress(svc, s)
	if err != nil {
		t.Fatal(err)
	}
	ing := toIngress(t, config)
	ing.TypeMeta = metav1.TypeMeta{}
	ing.UID = types.UID(svc.Name + "-ingress-uid")
	ing.ResourceVersion = "5"
	return ing
}

// withPath returns ing with its only path changed, as if someone edited it.
func withPath(ing *networkingv1.Ingress, path string) *networkingv1.Ingress {
	ing = ing.DeepCopy()
	ing.Spec.Rules[0].HTTP.Paths[0].Path = path
	return ing
}

func TestSyncService(t *testing.T) {
	shop := newService("shop", annotated())
	plain := newService("shop", nil)
	disabled := newService("shop", map[string]string{AnnotationHTTP: "false"})
	withAPI := newService("shop", annotated(AnnotationPath, "/api"))
	badPath := newService("shop", annotated(AnnotationPath, "api"))
	noPorts := newService("shop", annotated())
	noPorts.Spec.Ports = nil
	deleting := newService("shop", annotated())
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	oldShop := newService("shop", annotated())
	oldShop.UID = "deleted-shop-uid"

	owned := appliedIngress(t, shop, settings{path: "/"})
	foreign := newTestIngress("shop", nil)
	stale := appliedIngress(t, oldShop, settings{path: "/"})

	invalidErr := apierrors.NewInvalid(schema.GroupKind{Group: "networking.k8s.io", Kind: "Ingress"}, "shop",
		field.ErrorList{field.Invalid(field.NewPath("spec", "ingressClassName"), "x", "no such class")})
	conflictErr := apierrors.NewConflict(schema.GroupResource{Group: "networking.k8s.io", Resource: "ingresses"}, "shop",
		errors.New("Apply failed with 1 conflict"))

	tests := []struct {
		name         string
		ingressClass string
		services     []*corev1.Service
		// ingresses are in the cache and the clientset; liveOnly only in the clientset.
		ingresses []*networkingv1.Ingress
		liveOnly  []*networkingv1.Ingress
		// patchErr, when set, is what the API server answers to applies.
		patchErr   error
		wantWrites []string
		wantEvents []string
		// wantForce is the Force option of the apply, when there is one.
		wantForce bool
		wantErr   string
		// wantLive checks the Ingress the clientset holds afterwards (nil: none).
		wantLive func(t *testing.T, ing *networkingv1.Ingress)
	}{
		{
			name:       "annotated Service gets an Ingress",
			services:   []*corev1.Service{shop},
			wantWrites: []string{"patch ingresses"},
			wantEvents: []string{"Normal " + ReasonIngressCreated},
			wantLive: func(t *testing.T, ing *networkingv1.Ingress) {
				if ing == nil || !metav1.IsControlledBy(ing, shop) || ing.Labels[appv1.ManagedByLabel] != appv1.ManagedByValue {
					t.Fatalf("Ingress = %+v, want one controlled by the Service and labelled managed", ing)
				}
				if ing.Spec.IngressClassName != nil {
					t.Errorf("class %q set, want the cluster default (unset)", *ing.Spec.IngressClassName)
				}
				path := ing.Spec.Rules[0].HTTP.Paths[0]
				if ing.Spec.Rules[0].Host != "" || path.Path != "/" || *path.PathType != networkingv1.PathTypePrefix ||
					path.Backend.Service.Name != "shop" || path.Backend.Service.Port.Number != 8080 {
					t.Errorf("rule = %+v, want / (Prefix) on every host to shop:8080", ing.Spec.Rules[0])
				}
			},
		},
		{
			name:         "class from the flag",
			ingressClass: "nginx",
			services:     []*corev1.Service{shop},
			wantWrites:   []string{"patch ingresses"},
			wantEvents:   []string{"Normal " + ReasonIngressCreated},
			wantLive: func(t *testing.T, ing *networkingv1.Ingress) {
				if ing == nil || ing.Spec.IngressClassName == nil || *ing.Spec.IngressClassName != "nginx" {
					t.Errorf("Ingress = %+v, want class nginx", ing)
				}
			},
		},
		{
			name:      "up to date: no write",
			services:  []*corev1.Service{shop},
			ingresses: []*networkingv1.Ingress{owned},
		},
		{
			name:       "edited Ingress is restored, forced",
			services:   []*corev1.Service{shop},
			ingresses:  []*networkingv1.Ingress{withPath(owned, "/edited")},
			wantWrites: []string{"patch ingresses"},
			wantEvents: []string{"Normal " + ReasonIngressUpdated},
			wantForce:  true,
			wantLive: func(t *testing.T, ing *networkingv1.Ingress) {
				if got := ing.Spec.Rules[0].HTTP.Paths[0].Path; got != "/" {
					t.Errorf("path = %q, want / restored", got)
				}
			},
		},
		{
			name:       "changed annotation updates the Ingress",
			services:   []*corev1.Service{withAPI},
			ingresses:  []*networkingv1.Ingress{owned},
			wantWrites: []string{"patch ingresses"},
			wantEvents: []string{"Normal " + ReasonIngressUpdated},
			wantForce:  true,
			wantLive: func(t *testing.T, ing *networkingv1.Ingress) {
				if got := ing.Spec.Rules[0].HTTP.Paths[0].Path; got != "/api" {
					t.Errorf("path = %q, want /api", got)
				}
			},
		},
		{
			name:       "annotation removed: the controlled Ingress is deleted",
			services:   []*corev1.Service{plain},
			ingresses:  []*networkingv1.Ingress{owned},
			wantWrites: []string{"delete ingresses"},
			wantEvents: []string{"Normal " + ReasonIngressDeleted},
		},
		{
			name:       "annotation not \"true\": the controlled Ingress is deleted",
			services:   []*corev1.Service{disabled},
			ingresses:  []*networkingv1.Ingress{owned},
			wantWrites: []string{"delete ingresses"},
			wantEvents: []string{"Normal " + ReasonIngressDeleted},
		},
		{
			name:      "annotation removed: a foreign Ingress is untouched",
			services:  []*corev1.Service{plain},
			ingresses: []*networkingv1.Ingress{foreign},
			wantLive:  func(t *testing.T, ing *networkingv1.Ingress) {},
		},
		{
			name:       "foreign Ingress of the name: untouched, Warning",
			services:   []*corev1.Service{shop},
			ingresses:  []*networkingv1.Ingress{foreign},
			wantEvents: []string{"Warning " + ErrResourceExists},
			wantLive: func(t *testing.T, ing *networkingv1.Ingress) {
				if ing == nil || len(ing.OwnerReferences) != 0 || ing.Spec.Rules != nil {
					t.Errorf("foreign Ingress changed: %+v", ing)
				}
			},
		},
		{
			name:       "Ingress of a deleted Service of the same name: untouched, Warning",
			services:   []*corev1.Service{shop},
			ingresses:  []*networkingv1.Ingress{stale},
			wantEvents: []string{"Warning " + ErrResourceExists},
		},
		{
			name:       "invalid annotation: Warning, no write",
			services:   []*corev1.Service{badPath},
			wantEvents: []string{"Warning " + ReasonInvalidAnnotation},
		},
		{
			name:       "invalid annotation keeps the existing Ingress",
			services:   []*corev1.Service{badPath},
			ingresses:  []*networkingv1.Ingress{owned},
			wantEvents: []string{"Warning " + ReasonInvalidAnnotation},
		},
		{
			name:       "Service without ports: Warning, no write",
			services:   []*corev1.Service{noPorts},
			wantEvents: []string{"Warning " + ReasonNoServicePort},
		},
		{name: "Service gone: nothing to do"},
		{name: "Service being deleted: left to garbage collection", services: []*corev1.Service{deleting}},
		{
			name:       "API server rejects the Ingress: Warning, no retry",
			services:   []*corev1.Service{shop},
			patchErr:   invalidErr,
			wantWrites: []string{"patch ingresses"},
			wantEvents: []string{"Warning " + ReasonIngressRejected},
		},
		{
			name:       "create conflicts with an Ingress the cache has not seen: Warning, no retry",
			services:   []*corev1.Service{shop},
			liveOnly:   []*networkingv1.Ingress{foreign},
			patchErr:   conflictErr,
			wantWrites: []string{"patch ingresses"},
			wantEvents: []string{"Warning " + ErrResourceExists},
		},
		{
			name:       "other API errors are returned for a retry",
			services:   []*corev1.Service{shop},
			patchErr:   apierrors.NewServiceUnavailable("etcd is down"),
			wantWrites: []string{"patch ingresses"},
			wantErr:    "applying Ingress web/shop: etcd is down",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.ingressClass)
			f.addServices(tt.services...)
			f.addIngresses(tt.ingresses...)
			for _, ing := range tt.liveOnly {
				if err := f.client.Tracker().Add(ing); err != nil {
					t.Fatal(err)
				}
			}
			if tt.patchErr != nil {
				f.client.PrependReactor("patch", "ingresses", func(core.Action) (bool, runtime.Object, error) {
					return true, nil, tt.patchErr
				})
			}

			err := f.sync("shop")
			if tt.wantErr == "" && err != nil {
				t.Fatalf("sync: %v", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("sync error = %v, want %q", err, tt.wantErr)
			}
			if got := controllertest.Verbs(f.writes()); !reflect.DeepEqual(got, tt.wantWrites) {
				t.Errorf("writes = %v, want %v", got, tt.wantWrites)
			}
			if got := f.events(); !reflect.DeepEqual(got, tt.wantEvents) {
				t.Errorf("events = %v, want %v", got, tt.wantEvents)
			}
			for _, a := range f.client.Actions() {
				switch a := a.(type) {
				case core.PatchActionImpl:
					opts := a.GetPatchOptions()
					if a.GetPatchType() != types.ApplyPatchType || opts.FieldManager != appv1.FieldManager ||
						ptr.Deref(opts.Force, false) != tt.wantForce {
						t.Errorf("patch %s, field manager %q, force %v; want an apply by %q, force %v",
							a.GetPatchType(), opts.FieldManager, ptr.Deref(opts.Force, false), appv1.FieldManager, tt.wantForce)
					}
				case core.DeleteActionImpl:
					pre := a.GetDeleteOptions().Preconditions
					if pre == nil || pre.UID == nil || *pre.UID != owned.UID {
						t.Errorf("delete without the Ingress's UID as precondition: %+v", pre)
					}
				}
			}
			if tt.wantLive != nil {
				tt.wantLive(t, f.liveIngress("shop"))
			}
		})
	}
}

func TestSyncServiceCreatedThenUpToDate(t *testing.T) {
	f := newFixture(t, "")
	svc := newService("shop", annotated(AnnotationHost, "shop.example.com"))
	f.addServices(svc)
	if err := f.sync("shop"); err != nil {
		t.Fatalf("sync: %v", err)
	}
	// The informer sees what the API server stored (without managedFields).
	live := f.liveIngress("shop")
	live.ManagedFields = nil
	if err := f.inf.Ingresses.Informer().GetIndexer().Add(live); err != nil {
		t.Fatal(err)
	}
	f.events()
	if err := f.sync("shop"); err != nil {
		t.Fatalf("second sync: %v", err)
	}
	if w := f.writes(); len(w) != 0 {
		t.Errorf("second sync wrote %v; want nothing: the Ingress is up to date", w)
	}
	if e := f.events(); len(e) != 0 {
		t.Errorf("second sync emitted %v", e)
	}
}

func TestSyncServiceEventMessages(t *testing.T) {
	tests := []struct {
		name    string
		svc     *corev1.Service
		ingress *networkingv1.Ingress
		want    []string
	}{
		{
			name:    "foreign Ingress names the Ingress",
			svc:     newService("shop", annotated()),
			ingress: newTestIngress("shop", nil),
			want:    []string{`Ingress "shop" already exists and is not controlled by this Service`},
		},
		{
			name: "invalid annotation names the annotation and value",
			svc:  newService("shop", annotated(AnnotationHost, "10.1.2.3")),
			want: []string{`annotation ingress/host: invalid value "10.1.2.3": must be a DNS name, not an IP address`},
		},
		{
			name: "no port says what to do",
			svc: func() *corev1.Service {
				s := newService("shop", annotated())
				s.Spec.Ports = nil
				return s
			}(),
			want: []string{"no port", AnnotationHTTP},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, "")
			f.addServices(tt.svc)
			if tt.ingress != nil {
				f.addIngresses(tt.ingress)
			}
			if err := f.sync("shop"); err != nil {
				t.Fatal(err)
			}
			events := f.rawEvents()
			if len(events) != 1 {
				t.Fatalf("events = %v, want one", events)
			}
			for _, want := range tt.want {
				if !strings.Contains(events[0], want) {
					t.Errorf("event %q does not contain %q", events[0], want)
				}
			}
		})
	}
}

func TestHandleErr(t *testing.T) {
	f := newFixture(t, "")
	_, ctx := ktesting.NewTestContext(t)
	f.addServices(newService("shop", annotated()))
	key := cache.ObjectName{Namespace: testNamespace, Name: "shop"}
	failure := errors.New("boom")
	for i := 1; i < MaxRetries; i++ {
		f.c.loop.HandleErr(ctx, key, failure)
		if got := f.c.loop.Queue().NumRequeues(key); got != i {
			t.Fatalf("after %d failures NumRequeues = %d", i, got)
		}
	}
	if got := f.events(); !reflect.DeepEqual(got, []string{"Warning " + controller.ReasonSyncFailed}) {
		t.Errorf("events = %v, want one SyncFailed for the streak", got)
	}
	// The last allowed failure gives up: the key is forgotten, and the Service says so.
	f.c.loop.HandleErr(ctx, key, failure)
	if got := f.c.loop.Queue().NumRequeues(key); got != 0 {
		t.Errorf("after giving up NumRequeues = %d, want 0", got)
	}
	if got := f.events(); !reflect.DeepEqual(got, []string{"Warning " + controller.ReasonReconcileFailed}) {
		t.Errorf("events = %v, want one ReconcileFailed when giving up", got)
	}
	// The next resync retries it; a resync of a healthy Service queues nothing.
	svc := newService("shop", annotated())
	f.c.serviceHandlers(klog.FromContext(ctx)).OnUpdate(svc, svc)
	if got := f.queued(); !reflect.DeepEqual(got, []string{key.String()}) {
		t.Errorf("resync after giving up queued %v, want %s", got, key)
	}
	f.c.loop.HandleErr(ctx, key, nil)
	f.c.serviceHandlers(klog.FromContext(ctx)).OnUpdate(svc, svc)
	if got := f.queued(); len(got) != 0 {
		t.Errorf("resync of a healthy Service queued %v", got)
	}
}

func TestNewControllerRejectsInvalidClass(t *testing.T) {
	f := newFixture(t, "")
	_, ctx := ktesting.NewTestContext(t)
	_, err := NewController(ctx, f.client, f.inf, f.recorder, Options{IngressClass: "Not Valid"})
	if err == nil || !strings.Contains(err.Error(), "--ingress-class") {
		t.Errorf("NewController error = %v, want one naming --ingress-class", err)
	}
}

package ingress

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	ingressctrl "github.com/app-controller/app-controller/pkg/controller/ingress"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// annotations asks for an Ingress, with extra key/value pairs.
func annotations(kv ...string) map[string]string {
	a := map[string]string{ingressctrl.AnnotationHTTP: "true"}
	for i := 0; i+1 < len(kv); i += 2 {
		a[kv[i]] = kv[i+1]
	}
	return a
}

// TestIngressLifecycle follows one annotated Service: its Ingress is created, follows the
// annotations, is restored after an edit and after a delete, goes when the annotation
// goes, comes back with it, and is garbage collected with the Service.
func TestIngressLifecycle(t *testing.T) {
	e := newEnv(t)
	startManager(t, "")
	ctx := context.Background()

	svc := e.createService(t, e.service("shop", annotations()))

	// Created: controlled by the Service, labelled, routing / (Prefix) on every host to
	// the first port (unnamed: by number).
	ing := e.waitIngress(t, "shop", func(*networkingv1.Ingress) bool { return true })
	if !metav1.IsControlledBy(ing, svc) {
		t.Errorf("Ingress owners = %+v, want the Service %s as controller", ing.OwnerReferences, svc.UID)
	}
	if ing.Labels[appv1.ManagedByLabel] != appv1.ManagedByValue {
		t.Errorf("Ingress labels = %v, want %s=%s", ing.Labels, appv1.ManagedByLabel, appv1.ManagedByValue)
	}
	host, path, pathType, backend, port := route(ing)
	if host != "" || path != "/" || pathType != networkingv1.PathTypePrefix || backend != "shop" || port.Number != 80 {
		t.Errorf("route = host %q path %q type %q backend %s:%+v; want every host, / Prefix, shop:80", host, path, pathType, backend, port)
	}
	if ing.Spec.IngressClassName != nil {
		t.Errorf("class = %q; want none (no default IngressClass in the cluster)", *ing.Spec.IngressClassName)
	}
	e.waitEvent(t, "shop", "Normal "+ingressctrl.ReasonIngressCreated)

	// Updated: host, path and class from the annotations; a named first port by name.
	e.updateService(t, "shop", func(s *corev1.Service) {
		s.Annotations[ingressctrl.AnnotationHost] = "shop.example.com"
		s.Annotations[ingressctrl.AnnotationPath] = "/api"
		s.Annotations[ingressctrl.AnnotationClass] = "nginx"
		s.Spec.Ports = []corev1.ServicePort{
			{Name: "web", Port: 8080, Protocol: corev1.ProtocolTCP},
			{Name: "metrics", Port: 9090, Protocol: corev1.ProtocolTCP},
		}
	})
	ing = e.waitIngress(t, "shop", func(ing *networkingv1.Ingress) bool {
		host, path, _, _, port := route(ing)
		return host == "shop.example.com" && path == "/api" && port.Name == "web" &&
			ptr.Deref(ing.Spec.IngressClassName, "") == "nginx"
	})
	uid := ing.UID

	// Edited by someone else: restored, same object.
	edited := ing.DeepCopy()
	edited.Spec.Rules[0].HTTP.Paths[0].Path = "/hijacked"
	edited.Spec.Rules[0].Host = "evil.example.com"
	if _, err := e.kube.NetworkingV1().Ingresses(e.ns).Update(ctx, edited, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatalf("editing the Ingress: %v", err)
	}
	ing = e.waitIngress(t, "shop", func(ing *networkingv1.Ingress) bool {
		host, path, _, _, _ := route(ing)
		return host == "shop.example.com" && path == "/api"
	})
	if ing.UID != uid {
		t.Errorf("edited Ingress was replaced, not restored")
	}

	// Deleted: restored, as a new object.
	if err := e.kube.NetworkingV1().Ingresses(e.ns).Delete(ctx, "shop", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ing = e.waitIngress(t, "shop", func(ing *networkingv1.Ingress) bool { return ing.UID != uid })
	if host, path, _, _, _ := route(ing); host != "shop.example.com" || path != "/api" || !metav1.IsControlledBy(ing, svc) {
		t.Errorf("restored Ingress = %+v", ing)
	}

	// Annotation set to anything but "true": deleted.
	e.updateService(t, "shop", func(s *corev1.Service) { s.Annotations[ingressctrl.AnnotationHTTP] = "false" })
	e.waitIngressGone(t, "shop")
	e.waitEvent(t, "shop", "Normal "+ingressctrl.ReasonIngressDeleted)

	// Back to "true": created again. Annotation removed: deleted again.
	e.updateService(t, "shop", func(s *corev1.Service) { s.Annotations[ingressctrl.AnnotationHTTP] = "true" })
	e.waitIngress(t, "shop", func(*networkingv1.Ingress) bool { return true })
	e.updateService(t, "shop", func(s *corev1.Service) { delete(s.Annotations, ingressctrl.AnnotationHTTP) })
	e.waitIngressGone(t, "shop")

	// Service deleted: its Ingress goes through garbage collection.
	e.updateService(t, "shop", func(s *corev1.Service) { s.Annotations[ingressctrl.AnnotationHTTP] = "true" })
	e.waitIngress(t, "shop", func(*networkingv1.Ingress) bool { return true })
	if err := e.kube.CoreV1().Services(e.ns).Delete(ctx, "shop", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitIngressGone(t, "shop")
}

// TestForeignIngressUntouched checks that an Ingress the Service does not control is
// never written to, that the Service gets a Warning saying so, and that the Service takes
// the name once that Ingress is gone.
func TestForeignIngressUntouched(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	prefix := networkingv1.PathTypePrefix
	foreign, err := e.kube.NetworkingV1().Ingresses(e.ns).Create(ctx, &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{"team": "edge"}},
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{
			Host: "legacy.example.com",
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
				Paths: []networkingv1.HTTPIngressPath{{
					Path: "/", PathType: &prefix,
					Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
						Name: "legacy", Port: networkingv1.ServiceBackendPort{Number: 80},
					}},
				}},
			}},
		}}},
	}, metav1.CreateOptions{FieldManager: "kubectl-create"})
	if err != nil {
		t.Fatal(err)
	}
	startManager(t, "")

	svc := e.createService(t, e.service("shop", annotations(ingressctrl.AnnotationPath, "/shop")))
	msg := e.waitEvent(t, "shop", "Warning "+ingressctrl.ErrResourceExists)
	if !strings.Contains(msg, `Ingress "shop" already exists`) {
		t.Errorf("warning %q does not name the Ingress", msg)
	}
	// A Service change makes the controller look again; it still leaves the Ingress alone.
	// The second warning proves that the second sync ran; the event recorder aggregates
	// it into the first Event, so wait for the count.
	e.updateService(t, "shop", func(s *corev1.Service) { s.Annotations[ingressctrl.AnnotationPath] = "/store" })
	framework.Eventually(t, converge, func() (bool, error) {
		list, err := e.kube.CoreV1().Events(e.ns).List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.kind=Service,involvedObject.name=shop,reason=" + ingressctrl.ErrResourceExists,
		})
		if err != nil {
			return false, err
		}
		var count int32
		for _, ev := range list.Items {
			count += max(ev.Count, 1)
		}
		return count >= 2, nil
	})
	now := e.getIngress(t, "shop")
	if now.ResourceVersion != foreign.ResourceVersion || len(now.OwnerReferences) != 0 {
		t.Fatalf("foreign Ingress was written to: resourceVersion %s -> %s, owners %v",
			foreign.ResourceVersion, now.ResourceVersion, now.OwnerReferences)
	}
	for _, f := range now.ManagedFields {
		if f.Manager == appv1.FieldManager {
			t.Errorf("foreign Ingress has fields managed by %s: %+v", appv1.FieldManager, f)
		}
	}

	// The foreign Ingress goes: the Service takes the name.
	if err := e.kube.NetworkingV1().Ingresses(e.ns).Delete(ctx, "shop", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ing := e.waitIngress(t, "shop", func(ing *networkingv1.Ingress) bool { return metav1.IsControlledBy(ing, svc) })
	if _, path, _, _, _ := route(ing); path != "/store" {
		t.Errorf("path = %q, want /store", path)
	}
}

// TestInvalidServices checks that a Service whose Ingress cannot be built gets a Warning
// and no Ingress, and gets one once fixed.
func TestInvalidServices(t *testing.T) {
	e := newEnv(t)
	startManager(t, "")

	tests := []struct {
		name    string
		svc     *corev1.Service
		warning string
		fix     func(*corev1.Service)
	}{
		{
			name:    "bad-path",
			svc:     e.service("bad-path", annotations(ingressctrl.AnnotationPath, "api")),
			warning: "Warning " + ingressctrl.ReasonInvalidAnnotation + ` annotation ingress/path: invalid value "api"`,
			fix:     func(s *corev1.Service) { s.Annotations[ingressctrl.AnnotationPath] = "/api" },
		},
		{
			name:    "ip-host",
			svc:     e.service("ip-host", annotations(ingressctrl.AnnotationHost, "192.0.2.1")),
			warning: "Warning " + ingressctrl.ReasonInvalidAnnotation + ` annotation ingress/host: invalid value "192.0.2.1"`,
			fix:     func(s *corev1.Service) { s.Annotations[ingressctrl.AnnotationHost] = "ip-host.example.com" },
		},
		{
			// A headless Service may have no ports.
			name: "no-ports",
			svc: func() *corev1.Service {
				s := e.service("no-ports", annotations())
				s.Spec.ClusterIP = corev1.ClusterIPNone
				s.Spec.Ports = nil
				return s
			}(),
			warning: "Warning " + ingressctrl.ReasonNoServicePort,
			fix: func(s *corev1.Service) {
				s.Spec.Ports = []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.createService(t, tt.svc)
			e.waitEvent(t, tt.svc.Name, tt.warning)
			if ing := e.getIngress(t, tt.svc.Name); ing != nil {
				t.Errorf("Ingress created for an invalid Service: %+v", ing.Spec)
			}
			e.updateService(t, tt.svc.Name, tt.fix)
			e.waitIngress(t, tt.svc.Name, func(*networkingv1.Ingress) bool { return true })
		})
	}
}

// TestIngressClass checks where the class comes from: the ingress/class annotation, else
// --ingress-class, else the cluster's default IngressClass, which the API server sets at
// creation and which later applies keep.
func TestIngressClass(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()

	// A default class for this test only (IngressClasses are cluster-scoped).
	defaultClass := &networkingv1.IngressClass{
		ObjectMeta: metav1.ObjectMeta{
			Name:        "it-default",
			Annotations: map[string]string{networkingv1.AnnotationIsDefaultIngressClass: "true"},
		},
		Spec: networkingv1.IngressClassSpec{Controller: "example.com/ingress"},
	}
	if _, err := e.kube.NetworkingV1().IngressClasses().Create(ctx, defaultClass, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.kube.NetworkingV1().IngressClasses().Delete(context.Background(), defaultClass.Name, metav1.DeleteOptions{})
	})

	t.Run("cluster default", func(t *testing.T) {
		startManager(t, "")
		e.createService(t, e.service("default-class", annotations()))
		ing := e.waitIngress(t, "default-class", func(*networkingv1.Ingress) bool { return true })
		if got := ptr.Deref(ing.Spec.IngressClassName, ""); got != "it-default" {
			t.Fatalf("class = %q, want the cluster default it-default", got)
		}
		// A later apply (path change) keeps the class the API server defaulted.
		e.updateService(t, "default-class", func(s *corev1.Service) { s.Annotations[ingressctrl.AnnotationPath] = "/v2" })
		ing = e.waitIngress(t, "default-class", func(ing *networkingv1.Ingress) bool {
			_, path, _, _, _ := route(ing)
			return path == "/v2"
		})
		if got := ptr.Deref(ing.Spec.IngressClassName, ""); got != "it-default" {
			t.Errorf("after an update class = %q, want it-default kept", got)
		}
	})

	t.Run("flag and annotation", func(t *testing.T) {
		startManager(t, "from-flag")
		e.createService(t, e.service("flag-class", annotations()))
		e.createService(t, e.service("annotation-class", annotations(ingressctrl.AnnotationClass, "from-annotation")))
		e.waitIngress(t, "flag-class", func(ing *networkingv1.Ingress) bool {
			return ptr.Deref(ing.Spec.IngressClassName, "") == "from-flag"
		})
		e.waitIngress(t, "annotation-class", func(ing *networkingv1.Ingress) bool {
			return ptr.Deref(ing.Spec.IngressClassName, "") == "from-annotation"
		})
	})
}

// TestServiceRecreatedWithSameName checks that an Ingress left behind by a deleted
// Service (deleted with orphan propagation) is not adopted by a new Service of the same
// name, which gets its own Ingress once the old one is gone.
func TestServiceRecreatedWithSameName(t *testing.T) {
	e := newEnv(t)
	startManager(t, "")
	ctx := context.Background()

	first := e.createService(t, e.service("shop", annotations()))
	e.waitIngress(t, "shop", func(ing *networkingv1.Ingress) bool { return metav1.IsControlledBy(ing, first) })
	if err := e.kube.CoreV1().Services(e.ns).Delete(ctx, "shop", metav1.DeleteOptions{
		PropagationPolicy: ptr.To(metav1.DeletePropagationOrphan),
	}); err != nil {
		t.Fatal(err)
	}
	// The garbage collector orphans the Ingress: it loses its owner reference.
	e.waitIngress(t, "shop", func(ing *networkingv1.Ingress) bool { return len(ing.OwnerReferences) == 0 })
	framework.Eventually(t, converge, func() (bool, error) {
		_, err := e.kube.CoreV1().Services(e.ns).Get(ctx, "shop", metav1.GetOptions{})
		return err != nil && strings.Contains(err.Error(), "not found"), nil
	})

	second := e.createService(t, e.service("shop", annotations()))
	e.waitEvent(t, "shop", "Warning "+ingressctrl.ErrResourceExists)
	if ing := e.getIngress(t, "shop"); ing == nil || len(ing.OwnerReferences) != 0 {
		t.Fatalf("orphaned Ingress adopted: %+v", ing)
	}
	// Once it is deleted, the new Service gets its own.
	if err := e.kube.NetworkingV1().Ingresses(e.ns).Delete(ctx, "shop", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitIngress(t, "shop", func(ing *networkingv1.Ingress) bool { return metav1.IsControlledBy(ing, second) })
}

// TestServiceCreatedByKubectl drives the controller the way a user does: a Service made
// by `kubectl create service` (port named "8080-8080", not a valid Ingress backend port
// name) and annotated with `kubectl annotate` gets an Ingress routing to its port by
// number.
func TestServiceCreatedByKubectl(t *testing.T) {
	e := newEnv(t)
	startManager(t, "")

	framework.Kubectl(t, "create", "service", "clusterip", "shop", "--tcp=8080:8080", "-n", e.ns)
	framework.Kubectl(t, "annotate", "service", "shop", ingressctrl.AnnotationHTTP+"=true", "-n", e.ns)

	ing := e.waitIngress(t, "shop", func(*networkingv1.Ingress) bool { return true })
	_, path, _, backend, port := route(ing)
	if path != "/" || backend != "shop" || port.Number != 8080 || port.Name != "" {
		t.Errorf("route = %s %s:%+v, want / to shop:8080 by number", path, backend, port)
	}
	e.waitEvent(t, "shop", "Normal "+ingressctrl.ReasonIngressCreated)
}

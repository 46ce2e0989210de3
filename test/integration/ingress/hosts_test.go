package ingress

import (
	"context"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ingressctrl "github.com/app-controller/app-controller/pkg/controller/ingress"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// TestHostOwnership is the repro, run as a user runs it: Services created and
// annotated with kubectl in namespaces a and b for the same host. Namespace a, first,
// gets the Ingress; namespace b none and a HostConflict Warning naming a; when a lets
// the host go, b gets it within a second; a restarted controller keeps the holder.
func TestHostOwnership(t *testing.T) {
	a, b := newEnv(t), newEnv(t)
	stop := framework.StartManager(t, framework.Config(t), ingressOptions(""))
	ctx := context.Background()
	claim := func(e env) {
		framework.Kubectl(t, "-n", e.ns, "create", "service", "clusterip", "shop", "--tcp=80:8080")
		framework.Kubectl(t, "-n", e.ns, "annotate", "service", "shop", ingressctrl.AnnotationHTTP+"=true", ingressctrl.AnnotationHost+"=shop.example.com")
	}
	claim(a)
	a.waitIngress(t, "shop", func(*networkingv1.Ingress) bool { return true })
	claim(b)
	ev := b.waitEvent(t, "shop", "Warning "+ingressctrl.ReasonHostConflict)
	t.Logf("namespace b: %s", ev)
	if !strings.Contains(ev, `held by namespace "`+a.ns+`"`) {
		t.Errorf("the Warning does not name the holder: %q", ev)
	}
	if _, err := b.kube.NetworkingV1().Ingresses(b.ns).Get(ctx, "shop", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace b has an Ingress for a host namespace a holds: %v", err)
	}

	// A restarted controller keeps a as the holder.
	if err := stop.Stop(t); err != nil {
		t.Fatal(err)
	}
	framework.StartManager(t, framework.Config(t), ingressOptions(""))
	time.Sleep(2 * time.Second)
	if _, err := b.kube.NetworkingV1().Ingresses(b.ns).Get(ctx, "shop", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after a restart namespace b has an Ingress for the host: %v", err)
	}
	a.getIngress(t, "shop")

	// a lets it go: b gets it.
	framework.Kubectl(t, "-n", a.ns, "annotate", "service", "shop", ingressctrl.AnnotationHTTP+"-")
	a.waitIngressGone(t, "shop")
	released := time.Now()
	b.waitIngress(t, "shop", func(ing *networkingv1.Ingress) bool { return ing.Spec.Rules[0].Host == "shop.example.com" })
	t.Logf("namespace b got the host %v after namespace a's Ingress was gone", time.Since(released).Round(time.Millisecond))
}

// TestIngressTLS annotates a Service as a user would for TLS issued by cert-manager: the
// API server accepts the Ingress, which names the Secret for the host and carries
// cert-manager's ingress-shim annotation.
func TestIngressTLS(t *testing.T) {
	e := newEnv(t)
	startManager(t, "")
	framework.Kubectl(t, "-n", e.ns, "create", "service", "clusterip", "shop", "--tcp=80:8080")
	framework.Kubectl(t, "-n", e.ns, "annotate", "service", "shop", ingressctrl.AnnotationHTTP+"=true",
		ingressctrl.AnnotationHost+"=shop.example.com", ingressctrl.AnnotationTLSSecret+"=shop-tls", ingressctrl.AnnotationClusterIssuer+"=letsencrypt")
	ing := e.waitIngress(t, "shop", func(ing *networkingv1.Ingress) bool { return len(ing.Spec.TLS) == 1 })
	if tls := ing.Spec.TLS[0]; tls.SecretName != "shop-tls" || len(tls.Hosts) != 1 || tls.Hosts[0] != "shop.example.com" ||
		ing.Annotations["cert-manager.io/cluster-issuer"] != "letsencrypt" {
		t.Errorf("Ingress TLS %+v, annotations %v", ing.Spec.TLS, ing.Annotations)
	}
	// Dropping the annotations drops the TLS.
	framework.Kubectl(t, "-n", e.ns, "annotate", "service", "shop", ingressctrl.AnnotationTLSSecret+"-", ingressctrl.AnnotationClusterIssuer+"-")
	ing = e.waitIngress(t, "shop", func(ing *networkingv1.Ingress) bool { return len(ing.Spec.TLS) == 0 })
	if _, set := ing.Annotations["cert-manager.io/cluster-issuer"]; set {
		t.Errorf("the issuer annotation stayed: %v", ing.Annotations)
	}
}

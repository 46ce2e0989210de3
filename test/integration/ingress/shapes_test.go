package ingress

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	ingressctrl "github.com/app-controller/app-controller/pkg/controller/ingress"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// serviceYAML creates the Service of a manifest with kubectl create -f, for the shapes
// kubectl's create service and expose cannot make (named ports, mixed protocols).
func serviceYAML(t *testing.T, ns, manifest string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "service.yaml")
	if err := os.WriteFile(file, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	framework.Kubectl(t, "-n", ns, "create", "-f", file)
}

// TestServiceShapes makes every shape of Service a user can make with kubectl, asks
// each for an Ingress, and checks that the desired Ingress the controller builds for it
// (ingress.DesiredIngress) is accepted by the API server (server-side apply, dry run),
// routes to the right port, and that the running controller creates it. The shapes no
// Ingress can route to (ExternalName, no port, UDP only) get one clear Warning Event and
// no Ingress, and are not retried: with a 1s resync the Event is not repeated.
func TestServiceShapes(t *testing.T) {
	e := newEnv(t)
	ns := e.ns
	kubectl := func(args ...string) { framework.Kubectl(t, append([]string{"-n", ns}, args...)...) }
	kubectl("create", "deployment", "web", "--image=nginx", "--port=8080")
	kubectl("create", "deployment", "dns", "--image=coredns")
	nodePort := framework.FreeNodePort(t, e.kube)

	tests := []struct {
		name   string
		create func()
		// port is the backend port the Ingress must route to; reason, for a Service that
		// cannot have one, the reason of the Warning.
		port   networkingv1.ServiceBackendPort
		reason string
	}{
		{name: "clusterip", create: func() { kubectl("create", "service", "clusterip", "clusterip", "--tcp=8080:8080") },
			port: networkingv1.ServiceBackendPort{Number: 8080}}, // port named "8080-8080": no letter
		{name: "clusterip-multi", create: func() {
			kubectl("create", "service", "clusterip", "clusterip-multi", "--tcp=80:8080", "--tcp=443:8443")
		},
			port: networkingv1.ServiceBackendPort{Number: 80}},
		{name: "headless", create: func() { kubectl("create", "service", "clusterip", "headless", "--clusterip=None", "--tcp=5678:8080") },
			port: networkingv1.ServiceBackendPort{Number: 5678}},
		{name: "headless-noports", create: func() { kubectl("create", "service", "clusterip", "headless-noports", "--clusterip=None") },
			reason: ingressctrl.ReasonNoServicePort},
		{name: "nodeport", create: func() { kubectl("create", "service", "nodeport", "nodeport", "--tcp=5678:8080") },
			port: networkingv1.ServiceBackendPort{Number: 5678}},
		{name: "nodeport-fixed", create: func() {
			kubectl("create", "service", "nodeport", "nodeport-fixed", "--tcp=80:8080", "--node-port="+strconv.Itoa(int(nodePort)))
		}, port: networkingv1.ServiceBackendPort{Number: 80}},
		{name: "loadbalancer", create: func() {
			kubectl("create", "service", "loadbalancer", "loadbalancer", "--tcp=80:8080", "--tcp=443:8443")
		},
			port: networkingv1.ServiceBackendPort{Number: 80}},
		{name: "externalname", create: func() { kubectl("create", "service", "externalname", "externalname", "--external-name=db.example.com") },
			reason: ingressctrl.ReasonUnsupportedServiceType},
		{name: "externalname-port", create: func() {
			kubectl("create", "service", "externalname", "externalname-port", "--external-name=db.example.com", "--tcp=80:80")
		}, reason: ingressctrl.ReasonUnsupportedServiceType},
		{name: "expose", create: func() { kubectl("expose", "deployment", "web", "--name=expose") },
			port: networkingv1.ServiceBackendPort{Number: 8080}}, // port from the container, unnamed
		{name: "expose-port", create: func() {
			kubectl("expose", "deployment", "web", "--name=expose-port", "--port=80", "--target-port=8080")
		},
			port: networkingv1.ServiceBackendPort{Number: 80}},
		{name: "expose-nodeport", create: func() {
			kubectl("expose", "deployment", "web", "--name=expose-nodeport", "--port=80", "--type=NodePort")
		},
			port: networkingv1.ServiceBackendPort{Number: 80}},
		{name: "expose-udp", create: func() { kubectl("expose", "deployment", "dns", "--name=expose-udp", "--port=53", "--protocol=UDP") },
			reason: ingressctrl.ReasonNoServicePort},
		{name: "named", create: func() {
			serviceYAML(t, ns, `{"apiVersion":"v1","kind":"Service","metadata":{"name":"named"},"spec":{"selector":{"app":"web"},`+
				`"ports":[{"name":"http","port":80,"targetPort":8080},{"name":"metrics","port":9090}]}}`)
		}, port: networkingv1.ServiceBackendPort{Name: "http"}},
		{name: "named-udp-first", create: func() {
			serviceYAML(t, ns, `{"apiVersion":"v1","kind":"Service","metadata":{"name":"named-udp-first"},"spec":{"selector":{"app":"dns"},`+
				`"ports":[{"name":"dns","port":53,"protocol":"UDP"},{"name":"dns-tcp","port":53,"protocol":"TCP"}]}}`)
		}, port: networkingv1.ServiceBackendPort{Name: "dns-tcp"}},
	}

	ctx := context.Background()
	for _, tt := range tests {
		tt.create()
		kubectl("annotate", "service", tt.name, ingressctrl.AnnotationHTTP+"=true")
	}
	// Server-side dry run of the desired Ingress of each shape, before the controller runs.
	for _, tt := range tests {
		t.Run("dry-run/"+tt.name, func(t *testing.T) {
			svc, err := e.kube.CoreV1().Services(ns).Get(ctx, tt.name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			desired, err := ingressctrl.DesiredIngress(svc, "")
			if tt.reason != "" {
				if got := ingressctrl.InvalidServiceReason(err); got != tt.reason {
					t.Fatalf("DesiredIngress: %v (reason %q), want reason %q", err, got, tt.reason)
				}
				return
			}
			if err != nil {
				t.Fatalf("DesiredIngress: %v", err)
			}
			ing, err := e.kube.NetworkingV1().Ingresses(ns).Apply(ctx, desired, metav1.ApplyOptions{
				FieldManager: appv1.FieldManager, DryRun: []string{metav1.DryRunAll}})
			if err != nil {
				t.Fatalf("the API server rejects the Ingress of Service %s (ports %+v): %v", tt.name, svc.Spec.Ports, err)
			}
			if _, _, _, backend, port := route(ing); backend != tt.name || port != tt.port {
				t.Errorf("backend = %s:%+v, want %s:%+v", backend, port, tt.name, tt.port)
			}
		})
	}

	// The controller, with a 1s resync: an Ingress for every valid shape, one Warning and
	// nothing else for the others.
	opts := ingressOptions("")
	opts.ResyncPeriod = time.Second
	startManagerWith(t, opts)
	for _, tt := range tests {
		if tt.reason == "" {
			e.waitIngress(t, tt.name, func(ing *networkingv1.Ingress) bool {
				_, _, _, _, port := route(ing)
				return port == tt.port
			})
			continue
		}
		ev := e.waitEvent(t, tt.name, "Warning "+tt.reason)
		t.Logf("%s: %s", tt.name, ev)
	}
	time.Sleep(5 * time.Second) // five resyncs
	for _, tt := range tests {
		if tt.reason == "" {
			continue
		}
		t.Run("refused/"+tt.name, func(t *testing.T) {
			if ing := e.getIngress(t, tt.name); ing != nil {
				t.Errorf("Ingress %s exists, want none", tt.name)
			}
			list, err := e.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{
				FieldSelector: "involvedObject.kind=Service,involvedObject.name=" + tt.name})
			if err != nil {
				t.Fatal(err)
			}
			var warnings []string
			for _, ev := range list.Items {
				if ev.Type != corev1.EventTypeWarning {
					continue
				}
				if ev.Source.Component != appv1.FieldManager {
					// The API server's own, such as its ClusterIP repair loop's
					// ClusterIPNotAllocated when it checks a Service before the Service's
					// IPAddress reached its cache.
					t.Logf("not the controller's: Warning %s from %q: %s", ev.Reason, ev.Source.Component, ev.Message)
					continue
				}
				warnings = append(warnings, ev.Reason)
				if ev.Reason != tt.reason || ev.Count > 1 || ev.Series != nil {
					t.Errorf("Warning %s %q count %d series %v; want one %s, not repeated", ev.Reason, ev.Message, ev.Count, ev.Series, tt.reason)
				}
			}
			if len(warnings) != 1 {
				t.Errorf("Warnings = %v, want exactly one %s", warnings, tt.reason)
			}
			if !strings.Contains(strings.Join(warnings, ","), tt.reason) {
				t.Errorf("no %s Warning", tt.reason)
			}
		})
	}
}

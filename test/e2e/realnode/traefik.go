package realnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/app-controller/app-controller/internal/localcluster"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// TraefikLayoutEnv names the OCI layout of Traefik's image (make e2e builds it when
// E2E_PKGS has a package that needs it: the Makefile's E2E_TRAEFIK).
const TraefikLayoutEnv = "TRAEFIK_IMAGE_LAYOUT"

// TraefikImage is the name and tag under which InstallTraefik pushes Traefik's image to
// the cluster's registry.
const TraefikImage = "traefik:v3.6.12"

// TraefikGateway is the Gateway InstallTraefik makes in its namespace, listener web on
// TraefikWebPort, open to routes of every namespace.
const TraefikGateway = "public"

// Traefik's ports: the entry point of the Gateway and Ingresses (web), and its own
// (ping, /metrics).
const (
	TraefikWebPort     = 8000
	TraefikMetricsPort = 8080
)

// MainWithTraefik is Main for a package whose tests run Traefik (InstallTraefik): a
// real node with the App CRD and the Gateway API CRDs, when $TRAEFIK_IMAGE_LAYOUT names
// Traefik's image; without it the package prints one line saying it skipped (pkg names
// the package) and passes.
func MainWithTraefik(m *testing.M, pkg string) {
	if dir := os.Getenv(TraefikLayoutEnv); dir == "" {
		fmt.Printf("%s: skipped: $%s is not set (make e2e and make e2e-traffic build Traefik and set it)\n", pkg, TraefikLayoutEnv)
		os.Exit(0)
	} else if _, err := os.Stat(filepath.Join(dir, "index.json")); err != nil {
		fmt.Printf("%s: skipped: no image layout in $%s: %v\n", pkg, TraefikLayoutEnv, err)
		os.Exit(0)
	}
	framework.MainWithOptions(m, func(o *localcluster.Options) {
		o.Node = localcluster.NodeReal
		o.GatewayAPI = true
	})
}

// traefikManifest runs Traefik in namespace %[1]s as the ingress controller of class
// traefik and the Gateway controller of GatewayClass traefik, with Gateway "public"
// (listener web, port 8000, routes from every namespace); %[2]s is its image. Its
// Prometheus metrics are on its own entry point (port 8080, /metrics, with the services'
// labels and buckets from 5 ms to 5 s), and its pod carries the prometheus.io annotations
// that InstallPrometheus's job keeps. The Service traefik (ports web and metrics) is
// what a pod sends requests to.
const traefikManifest = `apiVersion: v1
kind: ServiceAccount
metadata: {name: traefik, namespace: %[1]s}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: traefik-%[1]s}
rules:
- apiGroups: [""]
  resources: [services, endpoints, secrets, configmaps, namespaces, nodes]
  verbs: [get, list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
- apiGroups: [networking.k8s.io]
  resources: [ingresses, ingressclasses]
  verbs: [get, list, watch]
- apiGroups: [networking.k8s.io]
  resources: [ingresses/status]
  verbs: [update]
- apiGroups: [gateway.networking.k8s.io]
  resources: ["*"]
  verbs: [get, list, watch]
- apiGroups: [gateway.networking.k8s.io]
  resources: ["*/status"]
  verbs: [update, patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: traefik-%[1]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: traefik-%[1]s}
subjects: [{kind: ServiceAccount, name: traefik, namespace: %[1]s}]
---
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: traefik}
spec: {controller: traefik.io/ingress-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: traefik}
spec: {controllerName: traefik.io/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: public, namespace: %[1]s}
spec:
  gatewayClassName: traefik
  listeners:
  - name: web
    port: 8000
    protocol: HTTP
    allowedRoutes:
      namespaces: {from: All}
---
apiVersion: v1
kind: Service
metadata: {name: traefik, namespace: %[1]s}
spec:
  selector: {app: traefik}
  ports:
  - {name: web, port: 8000, targetPort: web}
  - {name: metrics, port: 8080, targetPort: admin}
---
apiVersion: v1
kind: Pod
metadata:
  name: traefik
  namespace: %[1]s
  labels: {app: traefik}
  annotations: {prometheus.io/scrape: "true", prometheus.io/port: "8080"}
spec:
  serviceAccountName: traefik
  terminationGracePeriodSeconds: 0
  containers:
  - name: traefik
    image: %[2]s
    args:
    - --entryPoints.web.address=:8000
    - --entryPoints.traefik.address=:8080
    - --ping=true
    - --metrics.prometheus=true
    - --metrics.prometheus.entryPoint=traefik
    - --metrics.prometheus.addServicesLabels=true
    - --metrics.prometheus.buckets=0.005,0.01,0.025,0.05,0.1,0.25,0.5,1,2.5,5
    - --providers.kubernetesingress=true
    - --providers.kubernetesgateway=true
    - --log.level=INFO
    ports:
    - {name: web, containerPort: 8000}
    - {name: admin, containerPort: 8080}
    readinessProbe:
      httpGet: {path: /ping, port: admin}
      periodSeconds: 1
`

// InstallTraefik pushes Traefik's image ($TRAEFIK_IMAGE_LAYOUT) to the cluster's registry
// and runs Traefik in namespace (traefikManifest: IngressClass and GatewayClass traefik,
// Gateway TraefikGateway, the pod and Service traefik), and waits until its pod is Ready.
// The cluster-wide objects are deleted when the test ends. Requests reach it from this
// machine through PortForward(t, namespace, "pod/traefik", TraefikWebPort), from a pod at
// the Service traefik's address.
func InstallTraefik(t testing.TB, namespace string) {
	t.Helper()
	image := Registry(t) + "/" + TraefikImage
	Run(t, filepath.Join(BinDir(t), "imagebuild"), "push", "--layout", os.Getenv(TraefikLayoutEnv), image)
	kubectl := filepath.Join(BinDir(t), "kubectl")
	RunStdin(t, fmt.Appendf(nil, traefikManifest, namespace, image), kubectl, "--kubeconfig", framework.Cluster().Kubeconfig, "apply", "-f", "-")
	t.Cleanup(func() {
		_, _ = TryRun(kubectl, "--kubeconfig", framework.Cluster().Kubeconfig, "delete", "--ignore-not-found",
			"clusterrole/traefik-"+namespace, "clusterrolebinding/traefik-"+namespace, "ingressclass/traefik", "gatewayclass/traefik")
	})
	client := framework.Client(t)
	framework.Eventually(t, 3*time.Minute, func() (bool, error) {
		p, err := client.CoreV1().Pods(namespace).Get(context.Background(), "traefik", metav1.GetOptions{})
		return err == nil && PodReady(p), nil
	})
}

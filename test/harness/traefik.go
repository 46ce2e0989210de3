package harness

import (
	"strings"
	"text/template"
)

// TraefikTag is the name and tag under which the end-to-end tests and the soak push
// Traefik's image (the Makefile's TRAEFIK_IMAGE) to the cluster's registry.
const TraefikTag = "traefik:v3.6.12"

// TraefikOptions says what TraefikManifest runs.
type TraefikOptions struct {
	// Namespace holds Traefik and its Gateway; Image is Traefik's image.
	Namespace, Image string
	// CreateNamespace adds the Namespace itself.
	CreateNamespace bool
	// Ingress makes Traefik the ingress controller of IngressClass traefik too.
	Ingress bool
	// Metrics serves Prometheus metrics on Traefik's own entry point (port 8080,
	// /metrics, with the services' labels and buckets from 5 ms to 5 s), annotates the
	// pod for Prometheus's job (prometheus.io/scrape, port) and adds the Service traefik
	// (ports web and metrics): what a pod sends requests to.
	Metrics bool
	// PriorityClass is the pod's priority class ("": none).
	PriorityClass string
}

// TraefikManifest returns the objects that run Traefik, as one YAML stream for kubectl
// apply: its RBAC, GatewayClass traefik and the Gateway "public" in o.Namespace
// (listener web, port 8000, routes from every namespace), and a bare pod traefik (the
// kubelet restarts its container; Ready when /ping answers on port 8080, and kept in its
// Service through 30 s of a starved /ping).
func TraefikManifest(o TraefikOptions) string {
	var b strings.Builder
	if err := traefikTemplate.Execute(&b, o); err != nil {
		panic("harness: Traefik's manifest: " + err.Error()) // a template of this file's
	}
	return b.String()
}

var traefikTemplate = template.Must(template.New("traefik").Parse(`{{if .CreateNamespace}}apiVersion: v1
kind: Namespace
metadata: {name: {{.Namespace}}}
---
{{end}}apiVersion: v1
kind: ServiceAccount
metadata: {name: traefik, namespace: {{.Namespace}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: traefik-{{.Namespace}}}
rules:
- apiGroups: [""]
  resources: [services, endpoints, secrets, configmaps, namespaces, nodes]
  verbs: [get, list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
{{- if .Ingress}}
- apiGroups: [networking.k8s.io]
  resources: [ingresses, ingressclasses]
  verbs: [get, list, watch]
- apiGroups: [networking.k8s.io]
  resources: [ingresses/status]
  verbs: [update]
{{- end}}
- apiGroups: [gateway.networking.k8s.io]
  resources: ["*"]
  verbs: [get, list, watch]
- apiGroups: [gateway.networking.k8s.io]
  resources: ["*/status"]
  verbs: [update, patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: traefik-{{.Namespace}}}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: traefik-{{.Namespace}}}
subjects: [{kind: ServiceAccount, name: traefik, namespace: {{.Namespace}}}]
---
{{- if .Ingress}}
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: traefik}
spec: {controller: traefik.io/ingress-controller}
---
{{- end}}
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: traefik}
spec: {controllerName: traefik.io/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: public, namespace: {{.Namespace}}}
spec:
  gatewayClassName: traefik
  listeners:
  - name: web
    port: 8000
    protocol: HTTP
    allowedRoutes:
      namespaces: {from: All}
---
{{- if .Metrics}}
apiVersion: v1
kind: Service
metadata: {name: traefik, namespace: {{.Namespace}}}
spec:
  selector: {app: traefik}
  ports:
  - {name: web, port: 8000, targetPort: web}
  - {name: metrics, port: 8080, targetPort: admin}
---
{{- end}}
apiVersion: v1
kind: Pod
metadata:
  name: traefik
  namespace: {{.Namespace}}
  labels: {app: traefik}
{{- if .Metrics}}
  annotations: {prometheus.io/scrape: "true", prometheus.io/port: "8080"}
{{- end}}
spec:
  serviceAccountName: traefik
  terminationGracePeriodSeconds: 0
{{- if .PriorityClass}}
  priorityClassName: {{.PriorityClass}}
{{- end}}
  containers:
  - name: traefik
    image: {{.Image}}
    args:
    - --entryPoints.web.address=:8000
    - --entryPoints.traefik.address=:8080
    - --ping=true
{{- if .Metrics}}
    - --metrics.prometheus=true
    - --metrics.prometheus.entryPoint=traefik
    - --metrics.prometheus.addServicesLabels=true
    - --metrics.prometheus.buckets=0.005,0.01,0.025,0.05,0.1,0.25,0.5,1,2.5,5
{{- end}}
{{- if .Ingress}}
    - --providers.kubernetesingress=true
{{- end}}
    - --providers.kubernetesgateway=true
    - --log.level=INFO
    ports:
    - {name: web, containerPort: 8000}
    - {name: admin, containerPort: 8080}
    # Ready at its first answer; taken out of its Service only after 30 s without one.
    # It is the only endpoint: a pod sending to the Service of a Traefik taken out gets
    # "network is unreachable" (kube-proxy leaves no rule for a Service without
    # endpoints, and the node has no route to the Service range), and a whole make test
    # on 2 cores starves /ping past the default 1 s timeout three times in a row.
    readinessProbe:
      httpGet: {path: /ping, port: admin}
      periodSeconds: 1
      timeoutSeconds: 5
      failureThreshold: 30
`))

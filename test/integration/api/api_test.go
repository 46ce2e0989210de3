// Package api tests the App API as the real kube-apiserver serves it from the generated
// CRD: schema validation, CEL rules, defaults, the status subresource, printer columns,
// the seed's examples, and the generated clientset, lister and informer.
package api

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	appv1ac "github.com/app-controller/app-controller/pkg/generated/applyconfiguration/appcontroller/v1"
	appclientset "github.com/app-controller/app-controller/pkg/generated/clientset/versioned"
	appinformers "github.com/app-controller/app-controller/pkg/generated/informers/externalversions"
	"github.com/app-controller/app-controller/test/integration/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

var appsGVR = schema.GroupVersionResource{Group: "appcontroller.k8s.io", Version: "v1", Resource: "apps"}

// TestCRDInstalled checks the CRD's names, scope, subresources and printer columns.
func TestCRDInstalled(t *testing.T) {
	crd := framework.AppCRD(t)
	if crd.Spec.Names.Kind != "App" || crd.Spec.Names.Plural != "apps" || crd.Spec.Scope != "Namespaced" || len(crd.Spec.Names.ShortNames) == 0 {
		t.Errorf("names = %+v, scope %s", crd.Spec.Names, crd.Spec.Scope)
	}
	v := crd.Spec.Versions[0]
	if v.Name != "v1" || v.Subresources == nil || v.Subresources.Status == nil {
		t.Errorf("version %s: status subresource missing", v.Name)
	}
	var columns []string
	for _, c := range v.AdditionalPrinterColumns {
		columns = append(columns, c.Name)
	}
	for _, want := range []string{"Ready", "Image", "Replicas", "Available", "Age"} {
		if !strings.Contains(strings.Join(columns, ","), want) {
			t.Errorf("printer columns %v lack %s", columns, want)
		}
	}
}

// TestExamplesApply applies the seed's examples with kubectl, as a user would, and checks
// that the server stored them with their defaults.
func TestExamplesApply(t *testing.T) {
	root := framework.RepoRoot(t)
	framework.Kubectl(t, "create", "namespace", "tcs")
	t.Cleanup(func() { framework.Kubectl(t, "delete", "namespace", "tcs", "--wait=false") })
	out := framework.Kubectl(t, "apply", "-f", filepath.Join(root, "artifacts", "example"))
	for _, want := range []string{"app.appcontroller.k8s.io/test-app created", "app.appcontroller.k8s.io/test-app-2 created"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl apply printed %q, want %q", out, want)
		}
	}

	apps := appClient(t).AppcontrollerV1().Apps("tcs")
	for name, want := range map[string]struct {
		deploy, image, service string
		replicas               int32
	}{
		"test-app":   {"app-deploy", "nginx", "app-service", 2},
		"test-app-2": {"app-deploy-test", "tomcat", "app-service-test", 3},
	} {
		app, err := apps.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("getting App %s: %v", name, err)
		}
		d, s := app.Spec.DeploymentTemplate, app.Spec.ServiceTemplate
		if d.Name != want.deploy || d.Image != want.image || *d.Replicas != want.replicas || s.Name != want.service {
			t.Errorf("App %s spec = %+v / %+v", name, d, s)
		}
		if s.Port != 8080 || s.Type != "ClusterIP" {
			t.Errorf("App %s: service defaults port=%d type=%s, want 8080 ClusterIP", name, s.Port, s.Type)
		}
	}
	// The short name and the printer columns work.
	if out := framework.Kubectl(t, "get", "ap", "-n", "tcs"); !strings.Contains(out, "IMAGE") || !strings.Contains(out, "test-app-2") {
		t.Errorf("kubectl get ap:\n%s", out)
	}
}

// TestWebSampleApplies applies config/samples/web_app.yaml (the sample of the fields beyond
// the seed's) into its restricted namespace with kubectl's strict validation: every field
// of it is known and valid.
func TestWebSampleApplies(t *testing.T) {
	root := framework.RepoRoot(t)
	samples := filepath.Join(root, "config", "samples")
	out := framework.Kubectl(t, "apply", "--server-side", "--validate=strict",
		"-f", filepath.Join(samples, "namespace-restricted.yaml"), "-f", filepath.Join(samples, "web_app.yaml"))
	t.Cleanup(func() { framework.Kubectl(t, "delete", "namespace", "web", "--wait=false") })
	if !strings.Contains(out, "app.appcontroller.k8s.io/web serverside-applied") {
		t.Errorf("kubectl apply printed %q", out)
	}
}

// TestDefaults checks the schema defaults the API server applies.
func TestDefaults(t *testing.T) {
	ns := framework.Namespace(t)
	app, err := appClient(t).AppcontrollerV1().Apps(ns).Create(context.Background(), &appv1.App{
		ObjectMeta: metav1.ObjectMeta{Name: "defaults"},
		Spec: appv1.AppSpec{
			DeploymentTemplate: &appv1.DeploymentTemplate{Name: "web", Image: "nginx"},
			ServiceTemplate:    &appv1.ServiceTemplate{Name: "web"},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r := app.Spec.DeploymentTemplate.Replicas; r != nil {
		t.Errorf("replicas = %d, want unset (no default: an unset count is left to the Deployment)", *r)
	}
	if s := app.Spec.ServiceTemplate; s.Port != 8080 || s.Type != "ClusterIP" || s.TargetPort != nil {
		t.Errorf("service defaults = %+v, want port 8080, type ClusterIP, no targetPort", s)
	}
}

// TestValidation checks that invalid Apps are rejected with a message that names the
// offending field. The objects are sent as unstructured JSON so that every value,
// including zeros the Go types would omit, reaches the server as written.
func TestValidation(t *testing.T) {
	ns := framework.Namespace(t)
	dyn := framework.DynamicClient(t)
	valid := `
deploymentTemplate: {name: web, image: nginx, replicas: 2}
serviceTemplate: {name: web}`
	tests := []struct {
		name     string
		metaName string
		spec     string // YAML of spec; "-" for no spec at all
		strict   bool   // server-side strict field validation
		want     []string
	}{
		{name: "no spec", spec: "-", want: []string{"spec: Required value"}},
		{name: "no template", spec: `{}`, want: []string{"spec", "at least one of deploymentTemplate and serviceTemplate must be set"}},
		{name: "image missing", spec: `deploymentTemplate: {name: web}`, want: []string{"spec.deploymentTemplate.image: Required value"}},
		{name: "image empty", spec: `deploymentTemplate: {name: web, image: ""}`, want: []string{"spec.deploymentTemplate.image"}},
		{name: "image with spaces", spec: `deploymentTemplate: {name: web, image: "nginx latest"}`, want: []string{"spec.deploymentTemplate.image"}},
		{name: "deployment name not DNS-1123", spec: `deploymentTemplate: {name: Web_1, image: nginx}`, want: []string{"spec.deploymentTemplate.name", "should match"}},
		{name: "deployment name too long", spec: `deploymentTemplate: {name: ` + strings.Repeat("a", 64) + `, image: nginx}`, want: []string{"spec.deploymentTemplate.name", "63"}},
		{name: "deployment name missing", spec: `deploymentTemplate: {image: nginx}`, want: []string{"spec.deploymentTemplate.name: Required value"}},
		{name: "negative replicas", spec: `deploymentTemplate: {name: web, image: nginx, replicas: -1}`, want: []string{"spec.deploymentTemplate.replicas", "greater than or equal to 0"}},
		{name: "container port 0", spec: `deploymentTemplate: {name: web, image: nginx, containerPort: 0}`, want: []string{"spec.deploymentTemplate.containerPort", "greater than or equal to 1"}},
		{name: "container port too big", spec: `deploymentTemplate: {name: web, image: nginx, containerPort: 65536}`, want: []string{"spec.deploymentTemplate.containerPort", "less than or equal to 65535"}},
		{name: "service port 0", spec: `serviceTemplate: {name: web, port: 0}`, want: []string{"spec.serviceTemplate.port"}},
		{name: "target port too big", spec: `serviceTemplate: {name: web, targetPort: 70000}`, want: []string{"spec.serviceTemplate.targetPort"}},
		{name: "service name not DNS-1035", spec: `serviceTemplate: {name: 1web}`, want: []string{"spec.serviceTemplate.name", "should match"}},
		{name: "unsupported service type", spec: `serviceTemplate: {name: web, type: ExternalName}`, want: []string{"spec.serviceTemplate.type", "Unsupported value"}},
		{name: "duplicate env names", spec: `deploymentTemplate: {name: web, image: nginx, env: [{name: A, value: "1"}, {name: A, value: "2"}]}`, want: []string{"spec.deploymentTemplate.env[1]", "Duplicate value"}},
		{name: "requests above limits (CEL)", spec: `deploymentTemplate: {name: web, image: nginx, resources: {requests: {cpu: "2"}, limits: {cpu: 500m}}}`, want: []string{"spec.deploymentTemplate.resources", "requests must not exceed limits"}},
		{name: "App name too long for a label value (CEL)", metaName: strings.Repeat("a", 64), spec: valid, want: []string{"metadata.name must be no more than 63 characters"}},
		{name: "unknown field, strict", spec: `deploymentTemplate: {name: web, image: nginx, hostNetwork: true}`, strict: true, want: []string{`unknown field "spec.deploymentTemplate.hostNetwork"`}},
		// The fields added for real workloads.
		{name: "probe of the wrong shape", spec: `deploymentTemplate: {name: web, image: nginx, readinessProbe: {httpGet: {path: /}, periodSeconds: often}}`, want: []string{"spec.deploymentTemplate.readinessProbe.periodSeconds", "integer"}},
		{name: "liveness probe handler of the wrong type", spec: `deploymentTemplate: {name: web, image: nginx, livenessProbe: {exec: {command: ls}}}`, want: []string{"spec.deploymentTemplate.livenessProbe.exec.command", "array"}},
		{name: "startup probe unknown field, strict", spec: `deploymentTemplate: {name: web, image: nginx, startupProbe: {tcpSocket: {port: 80}, everySeconds: 1}}`, strict: true, want: []string{`unknown field "spec.deploymentTemplate.startupProbe.everySeconds"`}},
		{name: "securityContext of the wrong type", spec: `deploymentTemplate: {name: web, image: nginx, securityContext: {runAsNonRoot: "yes"}}`, want: []string{"spec.deploymentTemplate.securityContext.runAsNonRoot", "boolean"}},
		{name: "podSecurityContext of the wrong type", spec: `deploymentTemplate: {name: web, image: nginx, podSecurityContext: {runAsUser: root}}`, want: []string{"spec.deploymentTemplate.podSecurityContext.runAsUser", "integer"}},
		{name: "envFrom of the wrong type", spec: `deploymentTemplate: {name: web, image: nginx, envFrom: {configMapRef: {name: c}}}`, want: []string{"spec.deploymentTemplate.envFrom", "array"}},
		{name: "volume without a source (CEL)", spec: `deploymentTemplate: {name: web, image: nginx, volumes: [{name: v}]}`, want: []string{"spec.deploymentTemplate.volumes[0]", "volume must set exactly one of configMap, secret, emptyDir and persistentVolumeClaim"}},
		{name: "volume with two sources (CEL)", spec: `deploymentTemplate: {name: web, image: nginx, volumes: [{name: v, emptyDir: {}, secret: {secretName: s}}]}`, want: []string{"spec.deploymentTemplate.volumes[0]", "exactly one of"}},
		{name: "volume kind not supported", spec: `deploymentTemplate: {name: web, image: nginx, volumes: [{name: v, hostPath: {path: /}}]}`, strict: true, want: []string{`unknown field "spec.deploymentTemplate.volumes[0].hostPath"`}},
		{name: "duplicate volume names", spec: `deploymentTemplate: {name: web, image: nginx, volumes: [{name: v, emptyDir: {}}, {name: v, emptyDir: {}}]}`, want: []string{"spec.deploymentTemplate.volumes[1]", "Duplicate value"}},
		{name: "volume name not DNS-1123", spec: `deploymentTemplate: {name: web, image: nginx, volumes: [{name: V_1, emptyDir: {}}]}`, want: []string{"spec.deploymentTemplate.volumes[0].name", "should match"}},
		{name: "volumeMount of an undeclared volume (CEL)", spec: `deploymentTemplate: {name: web, image: nginx, volumes: [{name: v, emptyDir: {}}], volumeMounts: [{name: w, mountPath: /w}]}`, want: []string{"spec.deploymentTemplate", "every volumeMounts[].name must name a volume of deploymentTemplate.volumes"}},
		{name: "volumeMount without volumes (CEL)", spec: `deploymentTemplate: {name: web, image: nginx, volumeMounts: [{name: w, mountPath: /w}]}`, want: []string{"every volumeMounts[].name must name a volume"}},
		{name: "volumeMount path not absolute", spec: `deploymentTemplate: {name: web, image: nginx, volumes: [{name: v, emptyDir: {}}], volumeMounts: [{name: v, mountPath: data}]}`, want: []string{"spec.deploymentTemplate.volumeMounts[0].mountPath", "should match"}},
		{name: "serviceAccountName not a DNS subdomain", spec: `deploymentTemplate: {name: web, image: nginx, serviceAccountName: My_SA}`, want: []string{"spec.deploymentTemplate.serviceAccountName", "should match"}},
		{name: "imagePullSecrets of the wrong type", spec: `deploymentTemplate: {name: web, image: nginx, imagePullSecrets: [registry]}`, want: []string{"spec.deploymentTemplate.imagePullSecrets[0]", "object"}},
		{name: "imagePullPolicy unknown", spec: `deploymentTemplate: {name: web, image: nginx, imagePullPolicy: Sometimes}`, want: []string{"spec.deploymentTemplate.imagePullPolicy", "Unsupported value"}},
		{name: "podLabels set the instance label (CEL)", spec: `deploymentTemplate: {name: web, image: nginx, podLabels: {app.kubernetes.io/instance: other}}`, want: []string{"spec.deploymentTemplate.podLabels", "podLabels must not set app.kubernetes.io/name, app.kubernetes.io/instance or app.kubernetes.io/managed-by"}},
		{name: "podLabels set the name label (CEL)", spec: `deploymentTemplate: {name: web, image: nginx, podLabels: {app.kubernetes.io/name: other}}`, want: []string{"spec.deploymentTemplate.podLabels", "podLabels must not set"}},
		{name: "podLabels set managed-by (CEL)", spec: `deploymentTemplate: {name: web, image: nginx, podLabels: {app.kubernetes.io/managed-by: me}}`, want: []string{"spec.deploymentTemplate.podLabels", "podLabels must not set"}},
		{name: "podLabels value not a label value (the issue's repro)", spec: `deploymentTemplate: {name: web, image: nginx, podLabels: {team: "not valid!"}}`, want: []string{"spec.deploymentTemplate.podLabels.team", "should match"}},
		{name: "podLabels value too long", spec: `deploymentTemplate: {name: web, image: nginx, podLabels: {team: ` + strings.Repeat("v", 64) + `}}`, want: []string{"spec.deploymentTemplate.podLabels.team", "63"}},
		{name: "podLabels key not a qualified name (CEL)", spec: `deploymentTemplate: {name: web, image: nginx, podLabels: {"not valid!": x}}`, want: []string{"spec.deploymentTemplate.podLabels", "podLabels: not valid! is not a valid label key"}},
		{name: "podLabels key with two slashes (CEL)", spec: `deploymentTemplate: {name: web, image: nginx, podLabels: {a/b/c: x}}`, want: []string{"spec.deploymentTemplate.podLabels", "a/b/c is not a valid label key"}},
		{name: "podAnnotations key not a qualified name (CEL)", spec: `deploymentTemplate: {name: web, image: nginx, podAnnotations: {"-x": "v"}}`, want: []string{"spec.deploymentTemplate.podAnnotations", "-x is not a valid annotation key"}},
		{name: "nodeSelector value not a label value", spec: `deploymentTemplate: {name: web, image: nginx, nodeSelector: {zone: "a b"}}`, want: []string{"spec.deploymentTemplate.nodeSelector.zone", "should match"}},
		{name: "nodeSelector key not a qualified name (CEL)", spec: `deploymentTemplate: {name: web, image: nginx, nodeSelector: {"zone!": a}}`, want: []string{"spec.deploymentTemplate.nodeSelector", "zone! is not a valid label key"}},
		{name: "service labels value not a label value", spec: `serviceTemplate: {name: web, labels: {team: "x y"}}`, want: []string{"spec.serviceTemplate.labels.team", "should match"}},
		{name: "service labels key not a qualified name (CEL)", spec: `serviceTemplate: {name: web, labels: {"x y": a}}`, want: []string{"spec.serviceTemplate.labels", "x y is not a valid label key"}},
		{name: "service annotations key not a qualified name (CEL)", spec: `serviceTemplate: {name: web, annotations: {"ingress http": "true"}}`, want: []string{"spec.serviceTemplate.annotations", "ingress http is not a valid annotation key"}},
		{name: "readiness probe port 0 (CEL)", spec: `deploymentTemplate: {name: web, image: nginx, readinessProbe: {httpGet: {path: /, port: 0}}}`, want: []string{"spec.deploymentTemplate.readinessProbe", "readinessProbe: the port of httpGet, tcpSocket or grpc must be from 1 to 65535"}},
		{name: "liveness probe port too big (CEL)", spec: `deploymentTemplate: {name: web, image: nginx, livenessProbe: {tcpSocket: {port: 65536}}}`, want: []string{"spec.deploymentTemplate.livenessProbe", "livenessProbe: the port"}},
		{name: "startup probe port name not a port name (CEL)", spec: `deploymentTemplate: {name: web, image: nginx, startupProbe: {httpGet: {port: "Not_A_Port"}}}`, want: []string{"spec.deploymentTemplate.startupProbe", "startupProbe: the port"}},
		{name: "too many args (bound)", spec: `deploymentTemplate: {name: web, image: nginx, args: [` + strings.Repeat(`a, `, 256) + `a]}`, want: []string{"spec.deploymentTemplate.args", "must have at most 256 items"}},
		{name: "an arg too long (bound)", spec: `deploymentTemplate: {name: web, image: nginx, args: [` + strings.Repeat("a", 32769) + `]}`, want: []string{"spec.deploymentTemplate.args[0]", "32768"}},
		{name: "an env value too long (bound)", spec: `deploymentTemplate: {name: web, image: nginx, env: [{name: A, value: ` + strings.Repeat("v", 32769) + `}]}`, want: []string{"spec.deploymentTemplate.env[0].value", "32768"}},
		{name: "too many affinity terms (bound of an embedded type)", spec: `deploymentTemplate: {name: web, image: nginx, affinity: {nodeAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [` + strings.Repeat(`{weight: 1, preference: {}}, `, 64) + `{weight: 1, preference: {}}]}}}`, want: []string{"spec.deploymentTemplate.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution", "must have at most 64 items"}},
		{name: "a probe header too long (bound of an embedded type)", spec: `deploymentTemplate: {name: web, image: nginx, readinessProbe: {httpGet: {port: 80, httpHeaders: [{name: X, value: ` + strings.Repeat("h", 4097) + `}]}}}`, want: []string{"spec.deploymentTemplate.readinessProbe.httpGet.httpHeaders[0].value", "4096"}},
		{name: "init container and sidecar share a name (CEL)", spec: `deploymentTemplate: {name: web, image: nginx, initContainers: [{name: a, image: x}], sidecars: [{name: a, image: busybox}]}`, want: []string{"spec.deploymentTemplate", "container names must be unique in the pod"}},
		{name: "sidecar named as the App's container (CEL)", spec: `deploymentTemplate: {name: web, image: nginx, sidecars: [{name: app-deploy-container, image: busybox}]}`, want: []string{"container names must be unique in the pod"}},
		{name: "two sidecars with one name", spec: `deploymentTemplate: {name: web, image: nginx, sidecars: [{name: a, image: x}, {name: a, image: busybox}]}`, want: []string{"spec.deploymentTemplate.sidecars[1]", "Duplicate value"}},
		{name: "init container with a probe (CEL)", spec: `deploymentTemplate: {name: web, image: nginx, initContainers: [{name: a, image: x, readinessProbe: {tcpSocket: {port: 80}}}]}`, want: []string{"spec.deploymentTemplate.initContainers", "initContainers may not have probes"}},
		{name: "sidecar mounts an undeclared volume (CEL)", spec: `deploymentTemplate: {name: web, image: nginx, sidecars: [{name: a, image: x, volumeMounts: [{name: nope, mountPath: /x}]}]}`, want: []string{"must name a volume of deploymentTemplate.volumes"}},
		{name: "a port name used twice in the pod (CEL)", spec: `deploymentTemplate: {name: web, image: nginx, ports: [{name: metrics, containerPort: 9090}], sidecars: [{name: a, image: x, ports: [{name: metrics, containerPort: 9091}]}]}`, want: []string{"spec.deploymentTemplate.sidecars", "a port name is used by two containers of the pod"}},
		{name: "a container port named http beside containerPort (CEL)", spec: `deploymentTemplate: {name: web, image: nginx, containerPort: 80, ports: [{name: http, containerPort: 9090}]}`, want: []string{"spec.deploymentTemplate.ports", "http is the name of containerPort"}},
		{name: "a targetPort naming no container port (CEL)", spec: `deploymentTemplate: {name: web, image: nginx, containerPort: 80}
serviceTemplate: {name: web, ports: [{name: metrics, port: 9090, targetPort: metrics}]}`, want: []string{"spec.serviceTemplate.ports", "a targetPort given by name must name a container port"}},
		{name: "a Service port number used twice (CEL)", spec: `serviceTemplate: {name: web, ports: [{name: metrics, port: 9090}, {name: admin, port: 9090}]}`, want: []string{"spec.serviceTemplate.ports", "each port number (and protocol) may be used once: give each entry its own number"}},
		{name: "the first port's number under another name than portName (CEL)", spec: `serviceTemplate: {name: web, portName: web, ports: [{name: api, port: 8080}]}`, want: []string{"spec.serviceTemplate.ports", "under another name than portName: name it as portName to list the first port there, or give it another number"}},
		{name: "the first port restated with another number than port (CEL)", spec: `serviceTemplate: {name: web, port: 80, ports: [{name: http, port: 81}]}`, want: []string{"spec.serviceTemplate.ports", "with another number than port: write the number once, in the entry (drop port) or the same in both"}},
		{name: "the first port restated with another protocol (CEL)", spec: `serviceTemplate: {name: web, protocol: UDP, ports: [{name: http, port: 53}]}`, want: []string{"spec.serviceTemplate.ports", "with another protocol than protocol: write the same protocol in both, or drop protocol"}},
		{name: "the first port restated with another targetPort (CEL)", spec: `serviceTemplate: {name: web, targetPort: 8080, ports: [{name: http, port: 80, targetPort: 8081}]}`, want: []string{"spec.serviceTemplate.ports", "another targetPort than targetPort: write it once, in the entry (drop targetPort) or the same in both"}},
		{name: "the first port restated by number with another nodePort (CEL)", spec: `serviceTemplate: {name: web, type: NodePort, nodePort: 30080, ports: [{name: web, port: 8080, nodePort: 30081}]}`, want: []string{"spec.serviceTemplate.ports", "another nodePort than nodePort: write it once, in the entry (drop nodePort) or the same in both"}},
		{name: "minAvailable and maxUnavailable both set (CEL)", spec: `deploymentTemplate: {name: web, image: nginx}
disruptionBudget: {minAvailable: 1, maxUnavailable: 1}`, want: []string{"spec.disruptionBudget", "exactly one of minAvailable and maxUnavailable"}},
		{name: "a disruption budget without a Deployment (CEL)", spec: `serviceTemplate: {name: web}
disruptionBudget: {minAvailable: 1}`, want: []string{"spec.disruptionBudget", "disruptionBudget requires deploymentTemplate"}},
		{name: "minAvailable neither a number nor a percentage (CEL)", spec: `deploymentTemplate: {name: web, image: nginx}
disruptionBudget: {minAvailable: half}`, want: []string{"minAvailable must be a number of pods or a percentage"}},
		{name: "a route without a Service (CEL)", spec: `deploymentTemplate: {name: web, image: nginx}
route: {hosts: [shop.example.com]}`, want: []string{"spec.route", "route requires serviceTemplate"}},
		{name: "a route host that is no host", spec: `serviceTemplate: {name: web}
route: {hosts: ["shop example"]}`, want: []string{"spec.route.hosts[0]", "should match"}},
		{name: "a route with both issuers (CEL)", spec: `serviceTemplate: {name: web}
route: {hosts: [shop.example.com], tls: {secretName: t, issuer: a, clusterIssuer: b}}`, want: []string{"spec.route.tls", "set one of issuer and clusterIssuer"}},
		{name: "a route path that is not absolute", spec: `serviceTemplate: {name: web}
route: {hosts: [shop.example.com], paths: [{path: api}]}`, want: []string{"spec.route.paths[0].path", "should match"}},
		{name: "a route to a Gateway with TLS (CEL)", spec: `serviceTemplate: {name: web}
route: {hosts: [shop.example.com], parentRefs: [{name: public}], tls: {secretName: t}}`, want: []string{"spec.route.parentRefs", "an HTTPRoute takes neither tls nor ingressClassName"}},
		{name: "a Gateway reference without a name", spec: `serviceTemplate: {name: web}
route: {hosts: [shop.example.com], parentRefs: [{namespace: infra}]}`, want: []string{"spec.route.parentRefs[0].name", "Required value"}},
		{name: "an empty list of Gateways", spec: `serviceTemplate: {name: web}
route: {hosts: [shop.example.com], parentRefs: []}`, want: []string{"spec.route.parentRefs", "should have at least 1 items"}},
		{name: "podAnnotations not strings", spec: `deploymentTemplate: {name: web, image: nginx, podAnnotations: {a: {b: c}}}`, want: []string{"spec.deploymentTemplate.podAnnotations.a", "string"}},
		{name: "nodeSelector not strings", spec: `deploymentTemplate: {name: web, image: nginx, nodeSelector: {zone: [a]}}`, want: []string{"spec.deploymentTemplate.nodeSelector.zone", "string"}},
		{name: "tolerations of the wrong type", spec: `deploymentTemplate: {name: web, image: nginx, tolerations: {key: a}}`, want: []string{"spec.deploymentTemplate.tolerations", "array"}},
		{name: "affinity of the wrong type", spec: `deploymentTemplate: {name: web, image: nginx, affinity: {nodeAffinity: []}}`, want: []string{"spec.deploymentTemplate.affinity.nodeAffinity", "object"}},
		{name: "topologySpreadConstraints missing maxSkew", spec: `deploymentTemplate: {name: web, image: nginx, topologySpreadConstraints: [{topologyKey: zone, whenUnsatisfiable: DoNotSchedule}]}`, want: []string{"spec.deploymentTemplate.topologySpreadConstraints[0].maxSkew: Required value"}},
		{name: "priorityClassName too long", spec: `deploymentTemplate: {name: web, image: nginx, priorityClassName: ` + strings.Repeat("p", 254) + `}`, want: []string{"spec.deploymentTemplate.priorityClassName", "253"}},
		{name: "strategy Recreate with rollingUpdate (CEL)", spec: `deploymentTemplate: {name: web, image: nginx, strategy: {type: Recreate, rollingUpdate: {maxSurge: 1}}}`, want: []string{"spec.deploymentTemplate.strategy", "strategy.rollingUpdate may only be set when strategy.type is RollingUpdate"}},
		{name: "negative minReadySeconds", spec: `deploymentTemplate: {name: web, image: nginx, minReadySeconds: -1}`, want: []string{"spec.deploymentTemplate.minReadySeconds", "greater than or equal to 0"}},
		{name: "negative revisionHistoryLimit", spec: `deploymentTemplate: {name: web, image: nginx, revisionHistoryLimit: -1}`, want: []string{"spec.deploymentTemplate.revisionHistoryLimit", "greater than or equal to 0"}},
		{name: "service labels set the instance label (CEL)", spec: `serviceTemplate: {name: web, labels: {app.kubernetes.io/instance: x}}`, want: []string{"spec.serviceTemplate.labels", "serviceTemplate.labels must not set"}},
		{name: "service annotations set the hash (CEL)", spec: `serviceTemplate: {name: web, annotations: {appcontroller.k8s.io/applied-config-hash: x}}`, want: []string{"spec.serviceTemplate.annotations", "must not set appcontroller.k8s.io/applied-config-hash"}},
		{name: "port name too long", spec: `serviceTemplate: {name: web, portName: abcdefghijklmnop}`, want: []string{"spec.serviceTemplate.portName", "15"}},
		{name: "port name without a letter (CEL)", spec: `serviceTemplate: {name: web, portName: "8080"}`, want: []string{"spec.serviceTemplate.portName", "portName must contain a letter"}},
		{name: "protocol unknown", spec: `serviceTemplate: {name: web, protocol: HTTP}`, want: []string{"spec.serviceTemplate.protocol", "Unsupported value"}},
		{name: "nodePort with ClusterIP (CEL)", spec: `serviceTemplate: {name: web, nodePort: 30080}`, want: []string{"spec.serviceTemplate", "nodePort requires type NodePort or LoadBalancer"}},
		{name: "nodePort too big", spec: `serviceTemplate: {name: web, type: NodePort, nodePort: 70000}`, want: []string{"spec.serviceTemplate.nodePort", "less than or equal to 65535"}},
		{name: "sessionAffinity unknown", spec: `serviceTemplate: {name: web, sessionAffinity: Sticky}`, want: []string{"spec.serviceTemplate.sessionAffinity", "Unsupported value"}},
		{name: "replicas of the wrong type", spec: `deploymentTemplate: {name: web, image: nginx, replicas: two}`, want: []string{"spec.deploymentTemplate.replicas", "integer"}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			obj := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "appcontroller.k8s.io/v1",
				"kind":       "App",
				"metadata":   map[string]any{"name": tc.metaName},
			}}
			if tc.metaName == "" {
				obj.SetName(fmt.Sprintf("invalid-%d", i))
			}
			if tc.spec != "-" {
				var spec map[string]any
				if err := yaml.Unmarshal([]byte(tc.spec), &spec); err != nil {
					t.Fatalf("test spec: %v", err)
				}
				if spec == nil {
					spec = map[string]any{}
				}
				obj.Object["spec"] = spec
			}
			opts := metav1.CreateOptions{}
			if tc.strict {
				opts.FieldValidation = metav1.FieldValidationStrict
			}
			_, err := dyn.Resource(appsGVR).Namespace(ns).Create(context.Background(), obj, opts)
			if err == nil {
				t.Fatalf("created an invalid App: %v", obj.Object)
			}
			if !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err) {
				t.Errorf("error %v is neither Invalid nor BadRequest", err)
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}

	// And valid specs are accepted (strictly: no field dropped), so the cases above fail
	// for their own reason: the seed's valid spec, and each new field alone.
	validSpecs := []acceptedSpec{
		{"seed", valid},
		{"probes", `deploymentTemplate: {name: web, image: nginx, readinessProbe: {httpGet: {path: /ready, port: 8080}}, livenessProbe: {tcpSocket: {port: 8080}, periodSeconds: 20}, startupProbe: {exec: {command: [cat, /ready]}, failureThreshold: 30}}`},
		{"grpc probe", `deploymentTemplate: {name: web, image: nginx, readinessProbe: {grpc: {port: 9000}}}`},
		{"restricted security contexts", `deploymentTemplate: {name: web, image: nginx, securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}, podSecurityContext: {runAsNonRoot: true, runAsUser: 1000, seccompProfile: {type: RuntimeDefault}}}`},
		{"envFrom", `deploymentTemplate: {name: web, image: nginx, envFrom: [{configMapRef: {name: c}}, {prefix: S_, secretRef: {name: s, optional: true}}]}`},
		{"every volume source, mounted", `deploymentTemplate: {name: web, image: nginx, volumes: [{name: c, configMap: {name: c, items: [{key: k, path: p}]}}, {name: s, secret: {secretName: s}}, {name: e, emptyDir: {sizeLimit: 1Gi}}, {name: p, persistentVolumeClaim: {claimName: p, readOnly: true}}], volumeMounts: [{name: c, mountPath: /c}, {name: s, mountPath: /s, readOnly: true}, {name: e, mountPath: /e}, {name: p, mountPath: /p, subPath: x}]}`},
		{"pod identity and pull", `deploymentTemplate: {name: web, image: nginx, serviceAccountName: app.sa, imagePullSecrets: [{name: registry}], imagePullPolicy: Always}`},
		{"pod labels and annotations", `deploymentTemplate: {name: web, image: nginx, podLabels: {team: a, app.kubernetes.io/component: web}, podAnnotations: {prometheus.io/scrape: "true"}}`},
		{"scheduling", `deploymentTemplate: {name: web, image: nginx, nodeSelector: {zone: a}, tolerations: [{key: k, operator: Exists, effect: NoSchedule}], affinity: {podAntiAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 1, podAffinityTerm: {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app.kubernetes.io/instance: a}}}}]}}, topologySpreadConstraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: ScheduleAnyway}], priorityClassName: high}`},
		{"rolling update", `deploymentTemplate: {name: web, image: nginx, strategy: {type: RollingUpdate, rollingUpdate: {maxSurge: 25%, maxUnavailable: 0}}, minReadySeconds: 5, revisionHistoryLimit: 2}`},
		{"recreate", `deploymentTemplate: {name: web, image: nginx, strategy: {type: Recreate}}`},
		{"service settings", `serviceTemplate: {name: web, type: NodePort, nodePort: 30080, portName: web, protocol: UDP, sessionAffinity: ClientIP, labels: {team: a}, annotations: {ingress/http: "true"}}`},
		{"nodePort on a LoadBalancer", `serviceTemplate: {name: web, type: LoadBalancer, nodePort: 30081}`},
		{"a route to Gateways", `serviceTemplate: {name: web}
route: {hosts: [shop.example.com], paths: [{path: /api}], port: 8080, parentRefs: [{name: public, namespace: infra, sectionName: https}, {name: internal}]}`},
		{"a route", `serviceTemplate: {name: web}
route: {hosts: [shop.example.com, "*.shop.example.com"], paths: [{path: /api, type: Exact}, {path: /}], port: http, tls: {secretName: shop-tls, clusterIssuer: letsencrypt}, ingressClassName: traefik}`},
		// serviceTemplate.ports as a Service lists them: an entry restates the first port.
		{"ports, the whole list, as a Service lists them", `serviceTemplate: {name: web, ports: [{name: http, port: 80, targetPort: 8080}, {name: metrics, port: 9090}]}`},
		{"ports, the whole list, the first port by its number", `serviceTemplate: {name: web, ports: [{name: web, port: 8080}, {name: metrics, port: 9090}]}`},
		{"ports, the whole list, agreeing with the first port's fields", `deploymentTemplate: {name: web, image: nginx, containerPort: 8080}
serviceTemplate: {name: web, type: NodePort, port: 80, portName: web, protocol: TCP, targetPort: 8080, nodePort: 30080, ports: [{name: web, port: 80, targetPort: 8080, nodePort: 30080}, {name: metrics, port: 9090}]}`},
		{"ports beyond the first, 80 beside the default 8080", `serviceTemplate: {name: web, ports: [{name: api, port: 80}, {name: metrics, port: 9090}]}`},
		{"a real service: init container, sidecars, ports, budget", `deploymentTemplate: {name: web, image: nginx, containerPort: 8080, ports: [{name: metrics, containerPort: 9090}], volumes: [{name: logs, emptyDir: {}}], initContainers: [{name: migrate, image: migrate:1, args: [up]}], sidecars: [{name: shipper, image: fluent-bit:3, volumeMounts: [{name: logs, mountPath: /logs}]}, {name: proxy, image: envoy:1, ports: [{name: admin, containerPort: 9901}], readinessProbe: {httpGet: {path: /ready, port: admin}}}]}
serviceTemplate: {name: web, ports: [{name: metrics, port: 9090, targetPort: metrics}, {name: admin, port: 9901, targetPort: admin}, {name: dns, port: 53, protocol: UDP}]}
disruptionBudget: {maxUnavailable: 25%}`},
	}
	assertAccepted(t, dyn, ns, "valid", validSpecs)
}

// TestStatusSubresource checks that status is written only through the status
// subresource, and that spec changes bump the generation while status changes do not.
func TestStatusSubresource(t *testing.T) {
	ns := framework.Namespace(t)
	apps := appClient(t).AppcontrollerV1().Apps(ns)
	ctx := context.Background()
	app, err := apps.Create(ctx, &appv1.App{
		ObjectMeta: metav1.ObjectMeta{Name: "status"},
		Spec:       appv1.AppSpec{ServiceTemplate: &appv1.ServiceTemplate{Name: "web"}},
		Status:     appv1.AppStatus{ObservedGeneration: 42},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Create drops the status it is given; the schema default (observedGeneration -1,
	// for kstatus: not observed yet) is what a new App shows.
	if app.Status.ObservedGeneration != -1 || len(app.Status.Conditions) != 0 {
		t.Errorf("create wrote status: %+v, want only the default observedGeneration -1", app.Status)
	}
	app.Status.ObservedGeneration = 1
	app, err = apps.UpdateStatus(ctx, app, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if app.Status.ObservedGeneration != 1 || app.Generation != 1 {
		t.Errorf("after UpdateStatus: observedGeneration %d generation %d", app.Status.ObservedGeneration, app.Generation)
	}
	app.Spec.ServiceTemplate.Port = 9090
	if app, err = apps.Update(ctx, app, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if app.Generation != 2 {
		t.Errorf("spec update: generation %d, want 2", app.Generation)
	}
}

// TestGeneratedClient round-trips an App through the generated clientset, watch,
// informer and lister.
func TestGeneratedClient(t *testing.T) {
	ns := framework.Namespace(t)
	client := appClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	factory := appinformers.NewSharedInformerFactoryWithOptions(client, 0, appinformers.WithNamespace(ns))
	informer := factory.Appcontroller().V1().Apps()
	lister := informer.Lister()
	events := make(chan string, 10)
	if _, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { events <- "add" },
		UpdateFunc: func(any, any) { events <- "update" },
		DeleteFunc: func(any) { events <- "delete" },
	}); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	defer func() {
		cancel() // Shutdown waits for the informers, which stop when ctx ends
		factory.Shutdown()
	}()
	if !cache.WaitForCacheSync(ctx.Done(), informer.Informer().HasSynced) {
		t.Fatal("informer did not sync")
	}

	w, err := client.AppcontrollerV1().Apps(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	created, err := client.AppcontrollerV1().Apps(ns).Create(ctx, &appv1.App{
		ObjectMeta: metav1.ObjectMeta{Name: "roundtrip"},
		Spec: appv1.AppSpec{DeploymentTemplate: &appv1.DeploymentTemplate{
			Name: "web", Image: "nginx", Replicas: ptr.To[int32](3)}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	expect(t, events, "add")
	if ev := <-w.ResultChan(); ev.Type != watch.Added || ev.Object.(*appv1.App).Name != "roundtrip" {
		t.Errorf("watch event %s %T, want ADDED roundtrip", ev.Type, ev.Object)
	}
	cached, err := lister.Apps(ns).Get("roundtrip")
	if err != nil || cached.UID != created.UID || *cached.Spec.DeploymentTemplate.Replicas != 3 {
		t.Fatalf("lister: %v %+v", err, cached)
	}

	update := cached.DeepCopy()
	update.Spec.DeploymentTemplate.Image = "nginx:1.27"
	if _, err := client.AppcontrollerV1().Apps(ns).Update(ctx, update, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect(t, events, "update")
	if got, _ := lister.Apps(ns).Get("roundtrip"); got.Spec.DeploymentTemplate.Image != "nginx:1.27" {
		t.Errorf("lister image = %s", got.Spec.DeploymentTemplate.Image)
	}
	if ev := <-w.ResultChan(); ev.Type != watch.Modified {
		t.Errorf("watch event %s, want MODIFIED", ev.Type)
	}

	if err := client.AppcontrollerV1().Apps(ns).Delete(ctx, "roundtrip", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expect(t, events, "delete")
	if _, err := lister.Apps(ns).Get("roundtrip"); !apierrors.IsNotFound(err) {
		t.Errorf("lister after delete: %v, want NotFound", err)
	}
}

func expect(t *testing.T, events <-chan string, want string) {
	t.Helper()
	select {
	case got := <-events:
		if got != want {
			t.Errorf("informer event %s, want %s", got, want)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("no informer %s event", want)
	}
}

func appClient(t *testing.T) appclientset.Interface {
	t.Helper()
	return framework.AppClient(t)
}

// TestApplyConfiguration writes Apps with server-side apply through the generated apply
// configurations: fields are owned per manager, and a second manager changing an owned
// field gets a conflict unless it forces.
func TestApplyConfiguration(t *testing.T) {
	ns := framework.Namespace(t)
	apps := appClient(t).AppcontrollerV1().Apps(ns)
	ctx := context.Background()
	desired := appv1ac.App("applied", ns).WithSpec(appv1ac.AppSpec().
		WithDeploymentTemplate(appv1ac.DeploymentTemplate().WithName("web").WithImage("nginx").WithReplicas(2)))
	app, err := apps.Apply(ctx, desired, metav1.ApplyOptions{FieldManager: "team-a"})
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	if *app.Spec.DeploymentTemplate.Replicas != 2 || app.Spec.DeploymentTemplate.Image != "nginx" {
		t.Errorf("applied spec = %+v", app.Spec.DeploymentTemplate)
	}
	managers := map[string]metav1.ManagedFieldsOperationType{}
	for _, m := range app.ManagedFields {
		managers[m.Manager] = m.Operation
	}
	if managers["team-a"] != metav1.ManagedFieldsOperationApply {
		t.Errorf("managed fields %v, want team-a as Apply", managers)
	}
	// Applying the same configuration again changes nothing, but for the first write
	// after the create: create resets the status before storing the App, and the status
	// default (observedGeneration -1) is applied on read, so the first update stores it.
	first, err := apps.Apply(ctx, desired, metav1.ApplyOptions{FieldManager: "team-a"})
	if err != nil {
		t.Fatalf("re-apply: %v", err)
	}
	t.Logf("first re-apply: resourceVersion %s -> %s", app.ResourceVersion, first.ResourceVersion)
	again, err := apps.Apply(ctx, desired, metav1.ApplyOptions{FieldManager: "team-a"})
	if err != nil || again.ResourceVersion != first.ResourceVersion {
		t.Errorf("re-apply: %v; resourceVersion %s -> %s, want unchanged", err, first.ResourceVersion, again.ResourceVersion)
	}

	other := appv1ac.App("applied", ns).WithSpec(appv1ac.AppSpec().
		WithDeploymentTemplate(appv1ac.DeploymentTemplate().WithName("web").WithImage("httpd")))
	if _, err := apps.Apply(ctx, other, metav1.ApplyOptions{FieldManager: "team-b"}); !apierrors.IsConflict(err) {
		t.Errorf("apply of an owned field by another manager: %v, want a conflict", err)
	}
	forced, err := apps.Apply(ctx, other, metav1.ApplyOptions{FieldManager: "team-b", Force: true})
	if err != nil || forced.Spec.DeploymentTemplate.Image != "httpd" {
		t.Errorf("forced apply: %v, image %v", err, forced)
	}
}

package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// runResult is the outcome of a command line run against fakes.
type runResult struct {
	stdout, stderr string
	code           int
}

// runWith runs the command line args against f, as the user would run kubectl app.
func runWith(t *testing.T, f fakes, args ...string) runResult {
	t.Helper()
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
	var stdout, stderr bytes.Buffer
	c := &command{
		streams: genericiooptions.IOStreams{In: strings.NewReader(""), Out: &stdout, ErrOut: &stderr},
		flags:   genericclioptions.NewConfigFlags(true),
		now:     func() time.Time { return testNow },
	}
	c.newClients = func() (Clients, error) { return f.clients(), nil }
	code := c.run(context.Background(), args)
	return runResult{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

// TestOutputFormats runs list, status and tree with each kind of -o: every printed
// object has its apiVersion and kind, lists are v1 Lists.
func TestOutputFormats(t *testing.T) {
	objects := append(healthyTree(), readyApp("api", "api-deploy", ""))
	tests := []struct {
		name     string
		args     []string
		wantCode int
		// want is stdout, exactly; wantOut substrings of it in order; wantErr of stderr.
		want    string
		wantOut []string
		wantErr []string
	}{
		{name: "list -o name", args: []string{"list", "-n", testNamespace, "-o", "name"},
			want: "app.appcontroller.k8s.io/api\napp.appcontroller.k8s.io/new\napp.appcontroller.k8s.io/web\n"},
		{name: "list -o wide", args: []string{"list", "-n", testNamespace, "-o", "wide"},
			want: "NAME   READY     REASON      AVAILABLE   AGE         IMAGE   DEPLOYMENT   SERVICE\n" +
				"api    True      Available   0/2         <unknown>   nginx   api-deploy   <none>\n" +
				"new    Unknown   <none>      0/2         <unknown>   nginx   new-deploy   <none>\n" +
				"web    True      Available   0/2         <unknown>   nginx   web-deploy   web-svc\n"},
		{name: "list -o jsonpath", args: []string{"list", "-n", testNamespace, "-o", `jsonpath={range .items[*]}{.apiVersion} {.kind} {.metadata.name}{"\n"}{end}`},
			want: "appcontroller.k8s.io/v1 App api\nappcontroller.k8s.io/v1 App new\nappcontroller.k8s.io/v1 App web\n"},
		{name: "list -o go-template", args: []string{"list", "-n", testNamespace, "-o", `go-template={{range .items}}{{.metadata.name}} {{.spec.deploymentTemplate.image}};{{end}}`},
			want: "api nginx;new nginx;web nginx;"},
		{name: "list --template without -o", args: []string{"list", "-n", testNamespace, "--template", `{{len .items}}`},
			want: "3"},
		{name: "list of an empty namespace -o json is an empty List", args: []string{"list", "-n", "empty", "-o", "json"},
			wantOut: []string{`"apiVersion": "v1"`, `"items": []`, `"kind": "List"`}},
		{name: "status -o jsonpath", args: []string{"status", "web", "-n", testNamespace, "-o", `jsonpath={.kind} {.status.conditions[?(@.type=="Ready")].reason}`},
			want: "App Available"},
		{name: "status -o name of an App that is not Ready exits 1", args: []string{"status", "new", "-n", testNamespace, "-o", "name"}, wantCode: ExitNotReady,
			want: "app.appcontroller.k8s.io/new\n"},
		{name: "tree -o name", args: []string{"tree", "web", "-n", testNamespace, "-o", "name"},
			want: "app.appcontroller.k8s.io/web\ndeployment.apps/web-deploy\nreplicaset.apps/web-deploy-5c9f\npod/web-deploy-5c9f-a1\npod/web-deploy-5c9f-b2\n" +
				"service/web-svc\nendpointslice.discovery.k8s.io/web-svc-x7k2p\ningress.networking.k8s.io/web-svc\n"},
		{name: "unknown format", args: []string{"list", "-o", "table"}, wantCode: ExitError,
			wantErr: []string{`error: unable to match a printer suitable for the output format "table", allowed formats are: wide,json,yaml,kyaml,name,go-template`}},
		{name: "wide is list's only", args: []string{"tree", "web", "-o", "wide"}, wantCode: ExitError,
			wantErr: []string{`output format "wide", allowed formats are: json,yaml`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runWith(t, newFakes(t, append(objects, newApp("new", "new-deploy", ""))), tt.args...)
			if r.code != tt.wantCode {
				t.Errorf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, tt.wantCode, r.stdout, r.stderr)
			}
			if tt.want != "" && r.stdout != tt.want {
				t.Errorf("stdout:\n%s\nwant:\n%s", r.stdout, tt.want)
			}
			checkContainsInOrder(t, "stdout", r.stdout, tt.wantOut)
			checkContainsInOrder(t, "stderr", r.stderr, tt.wantErr)
		})
	}
}

// TestObjectOutputsHaveTypes decodes -o json and -o yaml of each command: every object
// has apiVersion and kind, and the right ones.
func TestObjectOutputsHaveTypes(t *testing.T) {
	tests := []struct {
		args      []string
		wantKinds []string // the List's items, or the one object
	}{
		{args: []string{"list", "-A"}, wantKinds: []string{"appcontroller.k8s.io/v1 App"}},
		{args: []string{"status", "web", "-n", testNamespace}, wantKinds: []string{"appcontroller.k8s.io/v1 App"}},
		{args: []string{"tree", "web", "-n", testNamespace}, wantKinds: []string{
			"appcontroller.k8s.io/v1 App", "apps/v1 Deployment", "apps/v1 ReplicaSet", "v1 Pod", "v1 Pod",
			"v1 Service", "discovery.k8s.io/v1 EndpointSlice", "networking.k8s.io/v1 Ingress"}},
	}
	for _, tt := range tests {
		for _, format := range []string{"json", "yaml"} {
			t.Run(tt.args[0]+" -o "+format, func(t *testing.T) {
				r := runWith(t, newFakes(t, healthyTree()), append(tt.args, "-o", format)...)
				if r.code != ExitOK {
					t.Fatalf("exit code %d: %s", r.code, r.stderr)
				}
				var obj map[string]any
				if err := yaml.Unmarshal([]byte(r.stdout), &obj); err != nil {
					t.Fatalf("decoding the output: %v\n%s", err, r.stdout)
				}
				u := &unstructured.Unstructured{Object: obj}
				var got []string
				if u.IsList() {
					if u.GetAPIVersion() != "v1" || u.GetKind() != "List" {
						t.Errorf("list is %s %s, want v1 List", u.GetAPIVersion(), u.GetKind())
					}
					list, err := u.ToList()
					if err != nil {
						t.Fatal(err)
					}
					for _, item := range list.Items {
						got = append(got, item.GetAPIVersion()+" "+item.GetKind())
					}
				} else {
					got = append(got, u.GetAPIVersion()+" "+u.GetKind())
				}
				if strings.Join(got, ",") != strings.Join(tt.wantKinds, ",") {
					t.Errorf("objects %q, want %q", got, tt.wantKinds)
				}
			})
		}
	}
}

func TestCreate(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		existing bool // an App web exists already
		wantCode int
		want     string
		wantErr  string
		// wantSpec is the spec of the App sent to the server; nil when none is sent.
		wantSpec *appv1.AppSpec
		wantOpts metav1.CreateOptions
	}{
		{
			name: "an image", args: []string{"create", "web", "--image", "nginx", "-n", testNamespace},
			want:     "app.appcontroller.k8s.io/web created\n",
			wantSpec: &appv1.AppSpec{DeploymentTemplate: &appv1.DeploymentTemplate{Name: "web", Image: "nginx"}},
			wantOpts: metav1.CreateOptions{FieldManager: "kubectl-app"},
		},
		{
			name: "replicas, port and a Service", args: []string{"create", "web", "--image", "nginx", "--replicas", "3", "--port", "80", "--deployment", "web-d", "-n", testNamespace},
			want: "app.appcontroller.k8s.io/web created\n",
			wantSpec: &appv1.AppSpec{
				DeploymentTemplate: &appv1.DeploymentTemplate{Name: "web-d", Image: "nginx", Replicas: ptr.To[int32](3), ContainerPort: ptr.To[int32](80)},
				ServiceTemplate:    &appv1.ServiceTemplate{Name: "web", Port: 80},
			},
			wantOpts: metav1.CreateOptions{FieldManager: "kubectl-app"},
		},
		{
			name: "several ports, the first named", args: []string{"create", "web", "--image", "api:1", "--port", "web=8080", "--port", "metrics=9090", "--port", "grpc=9000", "-n", testNamespace},
			want: "app.appcontroller.k8s.io/web created\n",
			wantSpec: &appv1.AppSpec{
				DeploymentTemplate: &appv1.DeploymentTemplate{Name: "web", Image: "api:1", ContainerPort: ptr.To[int32](8080),
					Ports: []appv1.ContainerPort{{Name: "metrics", ContainerPort: 9090}, {Name: "grpc", ContainerPort: 9000}}},
				ServiceTemplate: &appv1.ServiceTemplate{Name: "web", Port: 8080, PortName: "web", Ports: []appv1.ServicePort{
					{Name: "metrics", Port: 9090, TargetPort: ptr.To(intstr.FromString("metrics"))},
					{Name: "grpc", Port: 9000, TargetPort: ptr.To(intstr.FromString("grpc"))},
				}},
			},
			wantOpts: metav1.CreateOptions{FieldManager: "kubectl-app"},
		},
		{name: "a further port without a name", args: []string{"create", "api", "--image", "api:1", "--port", "8080", "--port", "9090"}, wantCode: ExitError,
			wantErr: "error: invalid --port \"9090\": a port after the first needs a name, say --port metrics=9090\n"},
		{name: "a port out of range", args: []string{"create", "api", "--image", "api:1", "--port", "70000"}, wantCode: ExitError,
			wantErr: "error: invalid --port \"70000\": want [NAME=]PORT with PORT from 1 to 65535\n"},
		{
			name: "a named Service without a port", args: []string{"create", "web", "--image", "nginx", "--service", "web-svc", "-n", testNamespace},
			want: "app.appcontroller.k8s.io/web created\n",
			wantSpec: &appv1.AppSpec{
				DeploymentTemplate: &appv1.DeploymentTemplate{Name: "web", Image: "nginx"},
				ServiceTemplate:    &appv1.ServiceTemplate{Name: "web-svc"},
			},
			wantOpts: metav1.CreateOptions{FieldManager: "kubectl-app"},
		},
		{
			name: "server dry run", args: []string{"create", "web", "--image", "nginx", "--dry-run=server", "-n", testNamespace},
			want:     "app.appcontroller.k8s.io/web created (server dry run)\n",
			wantSpec: &appv1.AppSpec{DeploymentTemplate: &appv1.DeploymentTemplate{Name: "web", Image: "nginx"}},
			wantOpts: metav1.CreateOptions{FieldManager: "kubectl-app", DryRun: []string{"All"}},
		},
		{
			name: "client dry run", args: []string{"create", "web", "--image", "nginx", "--dry-run=client"},
			want: "app.appcontroller.k8s.io/web created (dry run)\n",
		},
		{
			name: "client dry run -o yaml", args: []string{"create", "web", "--image", "nginx", "--port", "8080", "--dry-run=client", "-o", "yaml", "-n", testNamespace},
			want: `apiVersion: appcontroller.k8s.io/v1
kind: App
metadata:
  name: web
  namespace: ns
spec:
  deploymentTemplate:
    containerPort: 8080
    image: nginx
    name: web
  serviceTemplate:
    name: web
    port: 8080
status: {}
`,
		},
		{
			name: "-o name", args: []string{"create", "web", "--image", "nginx", "-o", "name", "-n", testNamespace},
			want:     "app.appcontroller.k8s.io/web\n",
			wantSpec: &appv1.AppSpec{DeploymentTemplate: &appv1.DeploymentTemplate{Name: "web", Image: "nginx"}},
			wantOpts: metav1.CreateOptions{FieldManager: "kubectl-app"},
		},
		{
			name: "an App of that name exists", args: []string{"create", "web", "--image", "nginx", "-n", testNamespace}, existing: true, wantCode: ExitError,
			wantErr:  `Error from server (AlreadyExists): apps.appcontroller.k8s.io "web" already exists` + "\n",
			wantSpec: &appv1.AppSpec{DeploymentTemplate: &appv1.DeploymentTemplate{Name: "web", Image: "nginx"}},
			wantOpts: metav1.CreateOptions{FieldManager: "kubectl-app"},
		},
		{name: "no image", args: []string{"create", "web"}, wantCode: ExitError, wantErr: "error: required flag(s) \"image\" not set\n"},
		{name: "bad dry run", args: []string{"create", "web", "--image", "nginx", "--dry-run=yes"}, wantCode: ExitError,
			wantErr: "error: invalid --dry-run value \"yes\": must be \"none\", \"server\", or \"client\"\n"},
		{name: "two names", args: []string{"create", "a", "b", "--image", "nginx"}, wantCode: ExitError, wantErr: "error: expected the name of one App, got 2 arguments"},
		{
			// As kubectl create deployment: what follows -- is the container's command.
			name: "a command after --", args: []string{"create", "web", "--image", "agnhost:2.66.1", "--port", "8080", "-n", testNamespace, "--", "/agnhost", "netexec", "--http-port", "8080"},
			want: "app.appcontroller.k8s.io/web created\n",
			wantSpec: &appv1.AppSpec{
				DeploymentTemplate: &appv1.DeploymentTemplate{Name: "web", Image: "agnhost:2.66.1", ContainerPort: ptr.To[int32](8080),
					Command: []string{"/agnhost", "netexec", "--http-port", "8080"}},
				ServiceTemplate: &appv1.ServiceTemplate{Name: "web", Port: 8080},
			},
			wantOpts: metav1.CreateOptions{FieldManager: "kubectl-app"},
		},
		{
			name: "flags after the name, a one-word command", args: []string{"create", "web", "-n", testNamespace, "--image", "agnhost:2.66.1", "--", "netexec"},
			want:     "app.appcontroller.k8s.io/web created\n",
			wantSpec: &appv1.AppSpec{DeploymentTemplate: &appv1.DeploymentTemplate{Name: "web", Image: "agnhost:2.66.1", Command: []string{"netexec"}}},
			wantOpts: metav1.CreateOptions{FieldManager: "kubectl-app"},
		},
		{name: "two names before --", args: []string{"create", "a", "b", "--image", "nginx", "--", "/bin/app"}, wantCode: ExitError,
			wantErr: "error: expected the name of one App, got 2 arguments (the container's command and its arguments go after --)"},
		{name: "no name before --", args: []string{"create", "--image", "nginx", "--", "web", "/bin/app"}, wantCode: ExitError,
			wantErr: "error: expected the name of one App, got 0 arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakes(t, nil)
			if tt.existing {
				if err := f.apps.Tracker().Add(&appv1.App{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: testNamespace}}); err != nil {
					t.Fatal(err)
				}
			}
			r := runWith(t, f, tt.args...)
			if r.code != tt.wantCode {
				t.Errorf("exit code %d, want %d\nstderr:\n%s", r.code, tt.wantCode, r.stderr)
			}
			if r.stdout != tt.want {
				t.Errorf("stdout:\n%s\nwant:\n%s", r.stdout, tt.want)
			}
			if !strings.HasPrefix(r.stderr, tt.wantErr) || (tt.wantErr == "" && r.stderr != "") {
				t.Errorf("stderr:\n%s\nwant it to start with:\n%s", r.stderr, tt.wantErr)
			}
			var creates []clienttesting.CreateActionImpl
			for _, a := range f.apps.Actions() {
				if c, ok := a.(clienttesting.CreateActionImpl); ok {
					creates = append(creates, c)
				}
			}
			if tt.wantSpec == nil {
				if len(creates) != 0 {
					t.Errorf("sent %d creates, want none", len(creates))
				}
				return
			}
			if len(creates) != 1 {
				t.Fatalf("sent %d creates, want 1", len(creates))
			}
			app := creates[0].GetObject().(*appv1.App)
			if app.Name != "web" || app.Namespace != testNamespace {
				t.Errorf("created %s/%s, want %s/web", app.Namespace, app.Name, testNamespace)
			}
			gotSpec, _ := json.Marshal(app.Spec)
			wantSpec, _ := json.Marshal(tt.wantSpec)
			if string(gotSpec) != string(wantSpec) {
				t.Errorf("spec %s, want %s", gotSpec, wantSpec)
			}
			gotOpts, wantOpts := creates[0].CreateOptions, tt.wantOpts
			if gotOpts.FieldManager != wantOpts.FieldManager || strings.Join(gotOpts.DryRun, ",") != strings.Join(wantOpts.DryRun, ",") {
				t.Errorf("create options %+v, want %+v", gotOpts, wantOpts)
			}
		})
	}
}

func TestKubectlMessage(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"not an API error", errInvalid("x"), "error: x\n"},
		{"invalid with one cause", apiInvalid(metav1.StatusCause{Field: "spec.image", Message: "Required value"}),
			"The App \"web\" is invalid: spec.image: Required value\n"},
		{"invalid with causes", apiInvalid(metav1.StatusCause{Field: "metadata.name", Message: "Invalid value"}, metav1.StatusCause{Field: "spec.port", Message: "too big"}),
			"The App \"web\" is invalid: \n* metadata.name: Invalid value\n* spec.port: too big\n"},
		{"forbidden", apiStatus(metav1.StatusReasonForbidden, "apps.appcontroller.k8s.io is forbidden"),
			"Error from server (Forbidden): apps.appcontroller.k8s.io is forbidden\n"},
		{"unauthorized", apiStatus(metav1.StatusReasonUnauthorized, "Unauthorized"),
			"error: You must be logged in to the server (Unauthorized)\n"},
		{"no reason", apiStatus("", "boom"), "Error from server: boom\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := kubectlMessage(tt.err); got != tt.want {
				t.Errorf("kubectlMessage:\n%q\nwant:\n%q", got, tt.want)
			}
		})
	}
}

type errInvalid string

func (e errInvalid) Error() string { return string(e) }

// statusError is an apierrors.APIStatus.
type statusError struct{ s metav1.Status }

func (e *statusError) Error() string         { return e.s.Message }
func (e *statusError) Status() metav1.Status { return e.s }

func apiStatus(reason metav1.StatusReason, message string) error {
	return &statusError{metav1.Status{Status: metav1.StatusFailure, Reason: reason, Message: message}}
}

func apiInvalid(causes ...metav1.StatusCause) error {
	return &statusError{metav1.Status{Status: metav1.StatusFailure, Reason: metav1.StatusReasonInvalid, Message: "invalid",
		Details: &metav1.StatusDetails{Kind: "App", Name: "web", Causes: causes}}}
}

// controllerDeployment returns a Deployment labelled as the controller's.
func controllerDeployment(namespace, name, image string, podLabels map[string]string) *unstructured.Unstructured {
	u := newObject("apps/v1", "Deployment", name, types.UID("uid-ctrl-"+name))
	u.SetNamespace(namespace)
	u.SetLabels(map[string]string{"app.kubernetes.io/name": "app-controller"})
	labels := map[string]any{}
	for k, v := range podLabels {
		labels[k] = v
	}
	set(u, map[string]any{"metadata": map[string]any{"labels": labels}, "spec": map[string]any{"containers": []any{
		map[string]any{"name": "manager", "image": image},
	}}}, "spec", "template")
	return u
}

func TestVersion(t *testing.T) {
	chart := controllerDeployment("app-controller-system", "app-controller", "registry.example.com:5000/app-controller:v0.3.0",
		map[string]string{"app.kubernetes.io/version": "0.3.1"})
	kustomize := controllerDeployment("ops", "app-controller", "registry.example.com:5000/app-controller:v0.2.0", nil)
	other := newObject("apps/v1", "Deployment", "web", "uid-web-deploy")
	tests := []struct {
		name    string
		args    []string
		objects []*unstructured.Unstructured
		// want are the lines after the plugin's.
		want []string
	}{
		{name: "client only", args: []string{"version", "--client"}, objects: []*unstructured.Unstructured{chart}},
		{name: "not found", args: []string{"version"}, objects: []*unstructured.Unstructured{other},
			want: []string{"Controller Version: unknown (controller not found)"}},
		{name: "pod label, then image tag", args: []string{"version"}, objects: []*unstructured.Unstructured{chart, kustomize, other},
			want: []string{
				"Controller Version: 0.3.1 (Deployment app-controller-system/app-controller, image registry.example.com:5000/app-controller:v0.3.0)",
				"Controller Version: v0.2.0 (Deployment ops/app-controller, image registry.example.com:5000/app-controller:v0.2.0)",
			}},
		{name: "one namespace", args: []string{"version", "--controller-namespace", "ops"}, objects: []*unstructured.Unstructured{chart, kustomize},
			want: []string{"Controller Version: v0.2.0 (Deployment ops/app-controller, image registry.example.com:5000/app-controller:v0.2.0)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runWith(t, newFakes(t, tt.objects), tt.args...)
			if r.code != ExitOK {
				t.Fatalf("exit code %d: %s", r.code, r.stderr)
			}
			lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
			if !strings.HasPrefix(lines[0], "Plugin Version: ") {
				t.Errorf("first line %q, want the plugin's version", lines[0])
			}
			if got := strings.Join(lines[1:], "\n"); got != strings.Join(tt.want, "\n") {
				t.Errorf("controller lines:\n%s\nwant:\n%s", got, strings.Join(tt.want, "\n"))
			}
		})
	}

	t.Run("-o json", func(t *testing.T) {
		r := runWith(t, newFakes(t, []*unstructured.Unstructured{chart}), "version", "-o", "json")
		var info VersionInfo
		if err := json.Unmarshal([]byte(r.stdout), &info); err != nil {
			t.Fatalf("decoding %s: %v", r.stdout, err)
		}
		if info.Plugin.Version == "" || info.Plugin.GoVersion == "" || len(info.Controllers) != 1 || info.Controllers[0].Version != "0.3.1" {
			t.Errorf("version %+v", info)
		}
	})
	t.Run("-o yaml --client", func(t *testing.T) {
		r := runWith(t, newFakes(t, nil), "version", "--client", "-o", "yaml")
		if !strings.HasPrefix(r.stdout, "plugin:\n  commit: ") || strings.Contains(r.stdout, "controller") {
			t.Errorf("stdout:\n%s", r.stdout)
		}
	})
}

func TestImageTag(t *testing.T) {
	for image, want := range map[string]string{
		"app-controller:v1":                      "v1",
		"registry:5000/app-controller":           "",
		"registry:5000/app-controller:v2":        "v2",
		"app-controller@sha256:abc":              "",
		"app-controller:v3@sha256:abc":           "v3",
		"ghcr.io/org/app-controller:v0.1.0-rc.1": "v0.1.0-rc.1",
	} {
		t.Run(image, func(t *testing.T) {
			if got := imageTag(image); got != want {
				t.Errorf("imageTag(%q) = %q, want %q", image, got, want)
			}
		})
	}
}

// TestCompletion runs cobra's __complete as kubectl_complete-app does.
func TestCompletion(t *testing.T) {
	objects := append(healthyTree(), readyApp("api", "api-deploy", ""), namespace("ns"), namespace("other"), namespace("kube-system"))
	other := readyApp("elsewhere", "e-deploy", "")
	other.SetNamespace("other")
	objects = append(objects, other)
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"App names of -n", []string{"__complete", "tree", "-n", testNamespace, ""}, []string{"api", "web"}},
		{"App names with a prefix", []string{"__complete", "status", "--namespace", testNamespace, "w"}, []string{"web"}},
		{"App names of another namespace", []string{"__complete", "tree", "-n", "other", ""}, []string{"elsewhere"}},
		{"one name only", []string{"__complete", "tree", "-n", testNamespace, "web", ""}, nil},
		{"namespaces", []string{"__complete", "list", "-n", ""}, []string{"kube-system", "ns", "other"}},
		{"namespaces with a prefix", []string{"__complete", "tree", "--namespace", "o"}, []string{"other"}},
		{"output formats", []string{"__complete", "list", "-o", "w"}, []string{"wide"}},
		{"dry run", []string{"__complete", "create", "web", "--dry-run", ""}, []string{"none", "client", "server"}},
		{"subcommands", []string{"__complete", "ver"}, []string{"version\tPrint the plugin's version and the controller's"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runWith(t, newFakes(t, objects), tt.args...)
			if r.code != ExitOK {
				t.Fatalf("exit code %d: %s", r.code, r.stderr)
			}
			lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
			directive := lines[len(lines)-1]
			if directive != ":"+strconv.Itoa(int(cobra.ShellCompDirectiveNoFileComp)) {
				t.Errorf("directive %s, want NoFileComp", directive)
			}
			if got := lines[:len(lines)-1]; strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("completions %q, want %q", got, tt.want)
			}
		})
	}

	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		t.Run("completion "+shell, func(t *testing.T) {
			r := runWith(t, newFakes(t, nil), "completion", shell)
			if r.code != ExitOK || !strings.Contains(r.stdout, "kubectl-app") || !strings.Contains(r.stdout, "__complete") {
				t.Errorf("exit code %d, script:\n%.300s", r.code, r.stdout)
			}
		})
	}
}

// namespace returns a Namespace.
func namespace(name string) *unstructured.Unstructured {
	u := newObject("v1", "Namespace", name, types.UID("uid-ns-"+name))
	u.SetNamespace("")
	return u
}

package plugin

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

func TestCommand(t *testing.T) {
	healthy := healthyTree()
	notReady := []*unstructured.Unstructured{
		newApp("web", "web-deploy", "web-svc",
			cond("Ready", "False", "NameConflict", `Deployment "web-deploy" already exists and is not managed by App "web"`, 1),
			cond("Stalled", "True", "NameConflict", `Deployment "web-deploy" already exists and is not managed by App "web"`, 1),
		),
		readyDeployment("web-deploy"),
	}
	tests := []struct {
		name    string
		args    []string
		objects []*unstructured.Unstructured
		// resources is what discovery serves; testResources if empty.
		resources  []*metav1.APIResourceList
		clientsErr error
		wantCode   int
		// wantOut and wantErr are substrings of stdout and stderr, each in order.
		wantOut []string
		wantErr []string
	}{
		{
			name: "tree", args: []string{"tree", "web", "-n", testNamespace}, objects: healthy, wantCode: ExitOK,
			wantOut: []string{"NAME", "App/web", "├─Deployment/web-deploy", "│ └─ReplicaSet/web-deploy-5c9f", "└─Service/web-svc", "  └─Ingress/web-svc"},
		},
		{
			name: "tree shows a conflict", args: []string{"tree", "web", "--namespace=" + testNamespace}, objects: notReady, wantCode: ExitOK,
			wantOut: []string{"App/web", "Failed", "NameConflict", "Deployment/web-deploy", "Conflict", "no controller"},
		},
		{
			name: "tree of a missing App", args: []string{"tree", "nope", "-n", testNamespace}, objects: healthy, wantCode: ExitError,
			wantErr: []string{`error: App "nope" not found in namespace "ns"`},
		},
		{
			name: "tree without a name", args: []string{"tree"}, wantCode: ExitError,
			wantErr: []string{"error: expected the name of one App, got 0 arguments", "Usage: kubectl app tree NAME"},
		},
		{
			name: "status of a Ready App", args: []string{"status", "web", "-n", testNamespace}, objects: healthy, wantCode: ExitOK,
			wantOut: []string{"App:", "ns/web", "Ready:", "True, Available", "CONDITION"},
		},
		{
			name: "status of an App that is not Ready", args: []string{"status", "web", "-n", testNamespace}, objects: notReady, wantCode: ExitNotReady,
			wantOut: []string{"Ready:", "False, NameConflict"},
		},
		{
			name: "status of a missing App", args: []string{"status", "nope", "-n", testNamespace}, objects: healthy, wantCode: ExitError,
			wantErr: []string{`error: App "nope" not found in namespace "ns"`},
		},
		{
			name: "clients cannot be made", args: []string{"status", "web"}, clientsErr: errors.New("loading the kubeconfig: no such file"), wantCode: ExitError,
			wantErr: []string{"error: loading the kubeconfig: no such file"},
		},
		{
			name: "App API not served", args: []string{"status", "web", "-n", testNamespace}, wantCode: ExitError,
			resources: []*metav1.APIResourceList{testResources[0]},
			wantErr:   []string{"error: reading the status of App ns/web: the server does not serve the App API", "is the App CRD installed?"},
		},
		{
			name: "list", args: []string{"list", "-n", testNamespace}, objects: healthy, wantCode: ExitOK,
			wantOut: []string{"NAME", "READY", "REASON", "web", "True", "Available"},
		},
		{
			name: "list of every namespace", args: []string{"ls", "-A"}, objects: healthy, wantCode: ExitOK,
			wantOut: []string{"NAMESPACE", "NAME", "ns", "web"},
		},
		{
			name: "list of an empty namespace", args: []string{"list", "-n", "empty"}, objects: healthy, wantCode: ExitOK,
			wantErr: []string{"No Apps found in namespace empty."},
		},
		{
			name: "unknown flag", args: []string{"tree", "web", "--bogus"}, wantCode: ExitError,
			wantErr: []string{"error: unknown flag: --bogus", "See 'kubectl app tree --help'."},
		},
		{
			name: "help", args: []string{"--help"}, wantCode: ExitOK,
			wantOut: []string{"kubectl app creates and shows Apps", "Usage:", "kubectl app [command]", "completion", "create", "list", "status", "tree", "version", "--context", "--kubeconfig", "-n, --namespace"},
		},
		{
			name: "help of status", args: []string{"status", "--help"}, wantCode: ExitOK,
			wantOut: []string{"Exit code: 0 when Ready, 1 when not, 2 on errors", "kubectl app status NAME"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// No kubeconfig from the environment: the namespace is -n's, else "default".
			t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
			f := newFakes(t, tt.objects, tt.resources...)
			var stdout, stderr bytes.Buffer
			c := &command{
				streams: genericiooptions.IOStreams{In: strings.NewReader(""), Out: &stdout, ErrOut: &stderr},
				flags:   genericclioptions.NewConfigFlags(true),
				now:     func() time.Time { return testNow },
			}
			c.newClients = func() (Clients, error) { return f.clients(), tt.clientsErr }
			code := c.run(context.Background(), tt.args)
			if code != tt.wantCode {
				t.Errorf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.wantCode, stdout.String(), stderr.String())
			}
			checkContainsInOrder(t, "stdout", stdout.String(), tt.wantOut)
			checkContainsInOrder(t, "stderr", stderr.String(), tt.wantErr)
		})
	}
}

// checkContainsInOrder fails the test unless got contains each of want, in order.
func checkContainsInOrder(t *testing.T, what, got string, want []string) {
	t.Helper()
	rest := got
	for _, w := range want {
		i := strings.Index(rest, w)
		if i < 0 {
			t.Errorf("%s does not contain %q (after the previous expectations):\n%s", what, w, got)
			return
		}
		rest = rest[i+len(w):]
	}
}

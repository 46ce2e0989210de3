package plugin

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

func TestBuildTree(t *testing.T) {
	// Objects shared by several cases.
	app := readyApp("web", "web-deploy", "web-svc")
	deploy := readyDeployment("web-deploy", controlledBy(app))
	rs := readyReplicaSet("web-deploy-5c9f", controlledBy(deploy))
	svc := service("web-svc", controlledBy(app))
	// impostor has the name and kind of rs but another UID.
	impostor := newObject("apps/v1", "ReplicaSet", "web-deploy-5c9f", "uid-impostor")

	forbidden := func(resource string) func(clienttesting.Action) (bool, runtime.Object, error) {
		return func(clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: resource}, "", errors.New("RBAC says no"))
		}
	}

	tests := []struct {
		name    string
		objects []*unstructured.Unstructured
		// metadataReactors and dynamicReactors are prepended to the fakes, by resource.
		metadataReactors map[string]clienttesting.ReactionFunc
		dynamicReactors  map[string]clienttesting.ReactionFunc
		want             string
		wantWarnings     []string
	}{
		{
			name:    "healthy App: Deployment, ReplicaSet, Pods, Service, EndpointSlice, Ingress",
			objects: healthyTree(),
			want: `
NAME                             HEALTH   MESSAGE
App/web                          Ready    Available: Deployment "web-deploy": 2 of 2 replicas available; Service "web-svc" selects the App's pods
├─Deployment/web-deploy          Ready    Deployment is available. Replicas: 2
│ └─ReplicaSet/web-deploy-5c9f   Ready    ReplicaSet is available. Replicas: 2
│   ├─Pod/web-deploy-5c9f-a1     Ready    Pod is Ready
│   └─Pod/web-deploy-5c9f-b2     Ready    Pod is Ready
└─Service/web-svc                Ready    Service is ready
  ├─EndpointSlice/web-svc-x7k2p  Ready    Resource is current
  └─Ingress/web-svc              Ready    Resource is current
`,
		},
		{
			name: "owners are matched by UID: an owner reference with a tree object's name but another UID is not followed",
			objects: []*unstructured.Unstructured{
				app, deploy, rs,
				readyPod("mine", controlledBy(rs)),
				readyPod("not-mine", controlledBy(impostor)),
				// An owner reference that names the App but carries another UID.
				newObject("v1", "ConfigMap", "claims-web", "uid-claims", metav1.OwnerReference{APIVersion: "appcontroller.k8s.io/v1", Kind: "App", Name: "web", UID: "uid-other-web"}),
				svc,
			},
			want: `
NAME                           HEALTH   MESSAGE
App/web                        Ready    Available: Deployment "web-deploy": 2 of 2 replicas available; Service "web-svc" selects the App's pods
├─Deployment/web-deploy        Ready    Deployment is available. Replicas: 2
│ └─ReplicaSet/web-deploy-5c9f Ready    ReplicaSet is available. Replicas: 2
│   └─Pod/mine                 Ready    Pod is Ready
└─Service/web-svc              Ready    Service is ready
`,
		},
		{
			name: "an ownership cycle is walked once, objects whose owner is gone are left out",
			objects: []*unstructured.Unstructured{
				// The App is owned by its own child: a cycle through the root.
				func() *unstructured.Unstructured {
					u := app.DeepCopy()
					u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "self", UID: "uid-self"}})
					return u
				}(),
				svc,
				// a is owned by the Service and by b; b is owned by a.
				newObject("v1", "ConfigMap", "a", "uid-a", ownedBy(svc), metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "b", UID: "uid-b"}),
				newObject("v1", "ConfigMap", "b", "uid-b", metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "a", UID: "uid-a"}),
				// c and d own each other, unreachable from the App.
				newObject("v1", "ConfigMap", "c", "uid-c", metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "d", UID: "uid-d"}),
				newObject("v1", "ConfigMap", "d", "uid-d", metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "c", UID: "uid-c"}),
				// The ReplicaSet that owned this Pod is gone.
				readyPod("orphan", metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "gone", UID: "uid-gone"}),
				newObject("v1", "ConfigMap", "self", "uid-self", ownedBy(app)),
			},
			want: `
NAME                    HEALTH   MESSAGE
App/web                 Ready    Available: Deployment "web-deploy": 2 of 2 replicas available; Service "web-svc" selects the App's pods
├─ConfigMap/self        Ready    Resource is always ready
├─Deployment/web-deploy Missing  does not exist
└─Service/web-svc       Ready    Service is ready
  └─ConfigMap/a         Ready    Resource is always ready
    └─ConfigMap/b       Ready    Resource is always ready
`,
		},
		{
			name: "autoscaled App: its HorizontalPodAutoscaler, with its replicas and metrics",
			objects: []*unstructured.Unstructured{
				autoscaledApp("web", "web-deploy", "web-svc"),
				readyDeployment("web-deploy", controlledBy(app)), svc,
				autoscaler("web-deploy", 3, 3, 80, hpaConditions(true), controlledBy(app)),
			},
			want: `
NAME                                          HEALTH   MESSAGE
App/web                                       Ready    Available: Deployment "web-deploy": 2 of 2 replicas available; Service "web-svc" selects the App's pods
├─Deployment/web-deploy                       Ready    Deployment is available. Replicas: 2
├─HorizontalPodAutoscaler/web-deploy          Ready    web-deploy: 3 of 1..3 replicas, desired 3, cpu 80%/50%; at maxReplicas, the load asks for more
└─Service/web-svc                             Ready    Service is ready
`,
		},
		{
			name: "autoscaled App: an autoscaler without metrics, and one the App asks for that does not exist",
			objects: []*unstructured.Unstructured{
				autoscaledApp("web", "web-deploy", "web-svc"),
				readyDeployment("web-deploy", controlledBy(app)), svc,
				autoscaler("other", 1, 1, -1, []any{
					cond("AbleToScale", "True", "SucceededGetScale", "the HPA controller was able to get the target's current scale", 0),
					cond("ScalingActive", "False", "FailedGetResourceMetric", "the HPA was unable to compute the replica count: no metrics returned from resource metrics API", 0),
				}, controlledBy(app)),
			},
			want: `
NAME                                          HEALTH   MESSAGE
App/web                                       Ready    Available: Deployment "web-deploy": 2 of 2 replicas available; Service "web-svc" selects the App's pods
├─Deployment/web-deploy                       Ready    Deployment is available. Replicas: 2
├─HorizontalPodAutoscaler/other               Failed   other: 1 of 1..3 replicas, desired 1, cpu ?/50%; ScalingActive False, FailedGetResourceMetric: the HPA was unable to compute the replica count: no metrics returned from resource metrics API
├─HorizontalPodAutoscaler/web-deploy          Missing  does not exist
└─Service/web-svc                             Ready    Service is ready
`,
		},
		{
			name: "an object owned twice is shown once, under the owner nearest to the App",
			objects: []*unstructured.Unstructured{
				app, deploy, svc,
				newObject("v1", "ConfigMap", "shared", "uid-shared", ownedBy(deploy), ownedBy(app), ownedBy(svc)),
			},
			want: `
NAME                    HEALTH   MESSAGE
App/web                 Ready    Available: Deployment "web-deploy": 2 of 2 replicas available; Service "web-svc" selects the App's pods
├─ConfigMap/shared      Ready    Resource is always ready
├─Deployment/web-deploy Ready    Deployment is available. Replicas: 2
└─Service/web-svc       Ready    Service is ready
`,
		},
		{
			name: "name conflict: the App is Failed, the Deployment name held by a foreign object is a Conflict",
			objects: []*unstructured.Unstructured{
				newApp("web", "web-deploy", "web-svc",
					cond("Ready", "False", "NameConflict", `Deployment "web-deploy" already exists and is not managed by App "web"`, 1),
					cond("NamesAccepted", "False", "NameConflict", `Deployment "web-deploy" already exists and is not managed by App "web"`, 1),
					cond("Stalled", "True", "NameConflict", `Deployment "web-deploy" already exists and is not managed by App "web"`, 1),
				),
				readyDeployment("web-deploy"),
				readyReplicaSet("web-deploy-77aa", controlledBy(readyDeployment("web-deploy"))),
				svc,
			},
			want: `
NAME                    HEALTH     MESSAGE
App/web                 Failed     NameConflict: Deployment "web-deploy" already exists and is not managed by App "web"
├─Deployment/web-deploy Conflict   name held by an object this App does not control (no controller)
└─Service/web-svc       Ready      Service is ready
`,
		},
		{
			name: "name held by another App's child",
			objects: []*unstructured.Unstructured{
				newApp("web", "", "web-svc", cond("Ready", "False", "NameConflict", `Service "web-svc" already exists and is not managed by App "web"`, 1)),
				service("web-svc", metav1.OwnerReference{APIVersion: "appcontroller.k8s.io/v1", Kind: "App", Name: "older", UID: "uid-older", Controller: ptr.To(true)}),
			},
			want: `
NAME                 HEALTH       MESSAGE
App/web              Progressing  NameConflict: Service "web-svc" already exists and is not managed by App "web"
└─Service/web-svc    Conflict     name held by an object this App does not control (controlled by App older)
`,
		},
		{
			name: "health words: Progressing, Failed, Unknown, terminating",
			objects: []*unstructured.Unstructured{
				newApp("web", "web-deploy", "",
					cond("Ready", "False", "RollingOut", `Deployment "web-deploy": 1 of 2 replicas updated`, 1),
					cond("Reconciling", "True", "RollingOut", `Deployment "web-deploy": 1 of 2 replicas updated`, 1),
				),
				set(readyDeployment("web-deploy", controlledBy(app)), int64(1), "status", "updatedReplicas"),
				set(readyPod("crashing", controlledBy(rs)), map[string]any{
					"phase": "Running",
					"containerStatuses": []any{map[string]any{"name": "app", "restartCount": int64(4),
						"state":     map[string]any{"waiting": map[string]any{"reason": "CrashLoopBackOff"}},
						"lastState": map[string]any{"terminated": map[string]any{"reason": "Error", "exitCode": int64(1)}}}},
				}, "status"),
				set(readyPod("weird", controlledBy(rs)), "Bogus", "status", "phase"),
				set(readyPod("leaving", controlledBy(rs)), "2026-01-01T00:00:00Z", "metadata", "deletionTimestamp"),
				rs,
			},
			want: `
NAME                             HEALTH       MESSAGE
App/web                          Progressing  RollingOut: Deployment "web-deploy": 1 of 2 replicas updated
└─Deployment/web-deploy          Progressing  Updated: 1/2
  └─ReplicaSet/web-deploy-5c9f   Ready        ReplicaSet is available. Replicas: 2
    ├─Pod/crashing               Failed       CrashLoopBackOff: Pod "crashing" container "app" keeps exiting: exit code 1 (Error), restarted 4 times
    ├─Pod/leaving                Progressing  Terminating: Resource scheduled for deletion
    └─Pod/weird                  Unknown      computing the status: unknown phase Bogus
`,
		},
		{
			name: "an App whose Ready condition is older than its spec shows kstatus's message",
			objects: []*unstructured.Unstructured{
				func() *unstructured.Unstructured {
					u := readyApp("web", "web-deploy", "web-svc")
					u.SetGeneration(2)
					return u
				}(),
				deploy, svc,
			},
			want: `
NAME                    HEALTH       MESSAGE
App/web                 Progressing  App generation is 2, but latest observed generation is 1
├─Deployment/web-deploy Ready        Deployment is available. Replicas: 2
└─Service/web-svc       Ready        Service is ready
`,
		},
		{
			name:    "a resource that cannot be listed is skipped with a warning",
			objects: healthyTree(),
			metadataReactors: map[string]clienttesting.ReactionFunc{
				"secrets":     forbidden("secrets"),
				"deployments": forbidden("deployments"),
				"configmaps": func(clienttesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewServiceUnavailable("the metrics server is down")
				},
			},
			want: `
NAME                             HEALTH   MESSAGE
App/web                          Ready    Available: Deployment "web-deploy": 2 of 2 replicas available; Service "web-svc" selects the App's pods
├─Deployment/web-deploy          Unknown  cannot tell whether it exists: listing Deployment.apps failed
└─Service/web-svc                Ready    Service is ready
  ├─EndpointSlice/web-svc-x7k2p  Ready    Resource is current
  └─Ingress/web-svc              Ready    Resource is current
`,
			wantWarnings: []string{
				`skipping configmaps.v1: listing them failed: the metrics server is down`,
				`skipping secrets.v1, deployments.v1.apps: listing them is forbidden; objects of these kinds are not shown`,
			},
		},
		{
			name:    "objects whose full list fails are Unknown",
			objects: healthyTree(),
			dynamicReactors: map[string]clienttesting.ReactionFunc{
				"pods": forbidden("pods"),
			},
			want: `
NAME                             HEALTH   MESSAGE
App/web                          Ready    Available: Deployment "web-deploy": 2 of 2 replicas available; Service "web-svc" selects the App's pods
├─Deployment/web-deploy          Ready    Deployment is available. Replicas: 2
│ └─ReplicaSet/web-deploy-5c9f   Ready    ReplicaSet is available. Replicas: 2
│   ├─Pod/web-deploy-5c9f-a1     Unknown  cannot read it: pods is forbidden: RBAC says no
│   └─Pod/web-deploy-5c9f-b2     Unknown  cannot read it: pods is forbidden: RBAC says no
└─Service/web-svc                Ready    Service is ready
  ├─EndpointSlice/web-svc-x7k2p  Ready    Resource is current
  └─Ingress/web-svc              Ready    Resource is current
`,
			wantWarnings: []string{
				`cannot tell the health of pods.v1: listing them failed: pods is forbidden: RBAC says no`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakes(t, tt.objects)
			for resource, fn := range tt.metadataReactors {
				f.metadata.PrependReactor("list", resource, fn)
			}
			for resource, fn := range tt.dynamicReactors {
				f.dynamic.PrependReactor("list", resource, fn)
			}
			tree, err := BuildTree(context.Background(), f.clients(), testNamespace, "web")
			if err != nil {
				t.Fatalf("BuildTree: %v", err)
			}
			var out bytes.Buffer
			if err := PrintTree(&out, tree); err != nil {
				t.Fatal(err)
			}
			if got, want := normalizeTable(out.String()), normalizeTable(tt.want); got != want {
				t.Errorf("tree:\n%s\nwant:\n%s", got, want)
			}
			if got, want := strings.Join(tree.Warnings, "\n"), strings.Join(tt.wantWarnings, "\n"); got != want {
				t.Errorf("warnings:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

// normalizeTable collapses the runs of spaces of a table's lines after their tree
// drawing, so that expectations need not align columns exactly.
func normalizeTable(s string) string {
	var lines []string
	for line := range strings.SplitSeq(strings.Trim(s, "\n"), "\n") {
		rest := strings.TrimLeft(line, "│├└─ ")
		drawing := line[:len(line)-len(rest)]
		lines = append(lines, drawing+strings.Join(strings.Fields(rest), " "))
	}
	return strings.Join(lines, "\n")
}

// TestBuildTreeListsOncePerResource checks that the walk lists each listable namespaced
// resource once, metadata only, never events, subresources, create-only or
// cluster-scoped resources, and reads full objects only of the kinds in the tree.
func TestBuildTreeListsOncePerResource(t *testing.T) {
	f := newFakes(t, healthyTree())
	if _, err := BuildTree(context.Background(), f.clients(), testNamespace, "web"); err != nil {
		t.Fatal(err)
	}
	count := func(actions []clienttesting.Action) map[string]int {
		out := map[string]int{}
		for _, a := range actions {
			if a.GetVerb() != "list" {
				continue
			}
			if a.GetNamespace() != testNamespace {
				t.Errorf("list of %s in namespace %q, want %q", a.GetResource(), a.GetNamespace(), testNamespace)
			}
			r := a.GetResource()
			out[resourceString(r)]++
		}
		return out
	}
	wantMetadata := map[string]int{
		"apps.v1.appcontroller.k8s.io": 1, "configmaps.v1": 1, "deployments.v1.apps": 1, "horizontalpodautoscalers.v2.autoscaling": 1,
		"endpointslices.v1.discovery.k8s.io": 1, "ingresses.v1.networking.k8s.io": 1,
		"pods.v1": 1, "replicasets.v1.apps": 1, "secrets.v1": 1, "services.v1": 1,
	}
	if got := count(f.metadata.Actions()); !equalCounts(got, wantMetadata) {
		t.Errorf("metadata lists: %v, want %v", got, wantMetadata)
	}
	wantDynamic := map[string]int{
		"deployments.v1.apps": 1, "endpointslices.v1.discovery.k8s.io": 1,
		"ingresses.v1.networking.k8s.io": 1, "pods.v1": 1, "replicasets.v1.apps": 1, "services.v1": 1,
	}
	if got := count(f.dynamic.Actions()); !equalCounts(got, wantDynamic) {
		t.Errorf("dynamic lists: %v, want %v", got, wantDynamic)
	}
}

func equalCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestBuildTreeErrors(t *testing.T) {
	withoutApps := []*metav1.APIResourceList{testResources[0]}
	tests := []struct {
		name      string
		objects   []*unstructured.Unstructured
		resources []*metav1.APIResourceList
		getError  error
		want      string
		wantType  any
	}{
		{
			name:     "App not found",
			objects:  healthyTree()[1:],
			want:     `App "web" not found in namespace "ns"`,
			wantType: &AppNotFoundError{},
		},
		{
			name:      "App API not served",
			resources: withoutApps,
			want:      "the server does not serve the App API (appcontroller.k8s.io/v1, resource apps): is the App CRD installed?",
		},
		{
			name:     "App cannot be read",
			objects:  healthyTree(),
			getError: apierrors.NewForbidden(schema.GroupResource{Group: "appcontroller.k8s.io", Resource: "apps"}, "web", errors.New("RBAC says no")),
			want:     `getting App ns/web: apps.appcontroller.k8s.io "web" is forbidden: RBAC says no`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakes(t, tt.objects, tt.resources...)
			if tt.getError != nil {
				f.dynamic.PrependReactor("get", "apps", func(clienttesting.Action) (bool, runtime.Object, error) {
					return true, nil, tt.getError
				})
			}
			_, err := BuildTree(context.Background(), f.clients(), testNamespace, "web")
			if err == nil || err.Error() != tt.want {
				t.Fatalf("error: %v, want %q", err, tt.want)
			}
			var notFound *AppNotFoundError
			if _, want := tt.wantType.(*AppNotFoundError); errors.As(err, &notFound) != want {
				t.Errorf("error is *AppNotFoundError: %t, want %t", !want, want)
			}
		})
	}
}

func TestNamespacedResources(t *testing.T) {
	f := newFakes(t, nil)
	got, warnings, err := namespacedResources(f.discovery)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range got {
		names = append(names, resourceString(r.gvr)+"="+r.kind)
	}
	want := []string{
		"configmaps.v1=ConfigMap", "pods.v1=Pod", "secrets.v1=Secret", "services.v1=Service",
		"apps.v1.appcontroller.k8s.io=App", "deployments.v1.apps=Deployment", "replicasets.v1.apps=ReplicaSet", "horizontalpodautoscalers.v2.autoscaling=HorizontalPodAutoscaler",
		"endpointslices.v1.discovery.k8s.io=EndpointSlice", "ingresses.v1.networking.k8s.io=Ingress",
	}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("resources:\n%v\nwant:\n%v", names, want)
	}
	if len(warnings) != 0 {
		t.Errorf("warnings: %v", warnings)
	}
}

func TestPrintTree(t *testing.T) {
	leaf := func(kind, name string, h Health, msg string) *Node {
		return &Node{Kind: kind, Name: name, UID: types.UID(name), Health: h, Message: msg}
	}
	tests := []struct {
		name string
		tree *Tree
		want string
	}{
		{
			name: "root only",
			tree: &Tree{Root: leaf("App", "a", HealthUnknown, "")},
			want: "NAME    HEALTH    MESSAGE\nApp/a   Unknown   \n",
		},
		{
			name: "branches: a pipe continues past a child that is not the last",
			tree: &Tree{Root: &Node{Kind: "App", Name: "a", Health: HealthReady, Message: "ok", Children: []*Node{
				{Kind: "Deployment", Name: "d", Health: HealthReady, Children: []*Node{
					{Kind: "ReplicaSet", Name: "r1", Health: HealthReady, Children: []*Node{leaf("Pod", "p", HealthReady, "")}},
					leaf("ReplicaSet", "r2", HealthReady, ""),
				}},
				{Kind: "Service", Name: "s", Health: HealthReady, Children: []*Node{leaf("Ingress", "i", HealthReady, "")}},
			}}},
			want: `NAME                HEALTH   MESSAGE
App/a               Ready    ok
├─Deployment/d      Ready    
│ ├─ReplicaSet/r1   Ready    
│ │ └─Pod/p         Ready    
│ └─ReplicaSet/r2   Ready    
└─Service/s         Ready    
  └─Ingress/i       Ready    
`,
		},
		{
			name: "messages are cut to one line",
			tree: &Tree{Root: leaf("App", "a", HealthFailed, "line one\nline\ttwo \x1b[31mred\x1b[0m "+strings.Repeat("x", 300))},
			want: "NAME    HEALTH   MESSAGE\nApp/a   Failed   line one line two [31mred [0m " + strings.Repeat("x", maxMessage-1-30) + "…\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := PrintTree(&out, tt.tree); err != nil {
				t.Fatal(err)
			}
			if out.String() != tt.want {
				t.Errorf("got:\n%q\nwant:\n%q", out.String(), tt.want)
			}
		})
	}
}

// TestBuildTreeCancelled checks that a cancelled walk (Ctrl-C) is an error, not a tree
// whose every kind was skipped.
func TestBuildTreeCancelled(t *testing.T) {
	f := newFakes(t, healthyTree())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tree, err := BuildTree(ctx, f.clients(), testNamespace, "web")
	if !errors.Is(err, context.Canceled) || tree != nil {
		t.Fatalf("BuildTree with a cancelled context = %v, %v; want nil, context.Canceled", tree, err)
	}
}

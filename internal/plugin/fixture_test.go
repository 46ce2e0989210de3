package plugin

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	discoveryfake "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"

	appfake "github.com/app-controller/app-controller/pkg/generated/clientset/versioned/fake"
)

const testNamespace = "ns"

// listVerbs are the verbs of a resource the walk lists.
var listVerbs = metav1.Verbs{"get", "list", "watch", "create", "update", "patch", "delete"}

// testResources is what the fake discovery serves: the kinds of an App's tree, a
// ConfigMap and Secret the walk lists too, and resources it must not list (events,
// subresources, create-only, cluster-scoped).
var testResources = []*metav1.APIResourceList{
	{GroupVersion: "v1", APIResources: []metav1.APIResource{
		{Name: "pods", Kind: "Pod", Namespaced: true, Verbs: listVerbs},
		{Name: "pods/status", Kind: "Pod", Namespaced: true, Verbs: metav1.Verbs{"get", "update"}},
		{Name: "services", Kind: "Service", Namespaced: true, Verbs: listVerbs},
		{Name: "configmaps", Kind: "ConfigMap", Namespaced: true, Verbs: listVerbs},
		{Name: "secrets", Kind: "Secret", Namespaced: true, Verbs: listVerbs},
		{Name: "events", Kind: "Event", Namespaced: true, Verbs: listVerbs},
		{Name: "bindings", Kind: "Binding", Namespaced: true, Verbs: metav1.Verbs{"create"}},
		{Name: "nodes", Kind: "Node", Namespaced: false, Verbs: listVerbs},
		{Name: "namespaces", Kind: "Namespace", Namespaced: false, Verbs: listVerbs},
	}},
	{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{
		{Name: "deployments", Kind: "Deployment", Namespaced: true, Verbs: listVerbs},
		{Name: "replicasets", Kind: "ReplicaSet", Namespaced: true, Verbs: listVerbs},
	}},
	{GroupVersion: "discovery.k8s.io/v1", APIResources: []metav1.APIResource{
		{Name: "endpointslices", Kind: "EndpointSlice", Namespaced: true, Verbs: listVerbs},
	}},
	{GroupVersion: "networking.k8s.io/v1", APIResources: []metav1.APIResource{
		{Name: "ingresses", Kind: "Ingress", Namespaced: true, Verbs: listVerbs},
	}},
	{GroupVersion: "events.k8s.io/v1", APIResources: []metav1.APIResource{
		{Name: "events", Kind: "Event", Namespaced: true, Verbs: listVerbs},
	}},
	{GroupVersion: "appcontroller.k8s.io/v1", APIResources: []metav1.APIResource{
		{Name: "apps", Kind: "App", Namespaced: true, Verbs: listVerbs},
		{Name: "apps/status", Kind: "App", Namespaced: true, Verbs: metav1.Verbs{"get", "update", "patch"}},
	}},
}

// listKinds maps the listable resources of testResources to their list kinds, for the
// fake dynamic client.
func listKinds() map[schema.GroupVersionResource]string {
	out := map[schema.GroupVersionResource]string{}
	for _, l := range testResources {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			panic(err)
		}
		for _, r := range l.APIResources {
			out[gv.WithResource(r.Name)] = r.Kind + "List"
		}
	}
	return out
}

// fakes are fake clients serving the same objects.
type fakes struct {
	discovery *discoveryfake.FakeDiscovery
	metadata  *metadatafake.FakeMetadataClient
	dynamic   *dynamicfake.FakeDynamicClient
	apps      *appfake.Clientset
	kube      *kubefake.Clientset
}

func (f fakes) clients() Clients {
	return Clients{Discovery: f.discovery, Metadata: f.metadata, Dynamic: f.dynamic, Apps: f.apps, Kube: f.kube}
}

// newFakes returns fake clients serving testResources (or resources, if given) and
// objects.
func newFakes(t *testing.T, objects []*unstructured.Unstructured, resources ...*metav1.APIResourceList) fakes {
	t.Helper()
	if len(resources) == 0 {
		resources = testResources
	}
	var dynObjects, metaObjects []runtime.Object
	for _, u := range objects {
		dynObjects = append(dynObjects, u.DeepCopy())
		m := &metav1.PartialObjectMetadata{}
		m.APIVersion, m.Kind = u.GetAPIVersion(), u.GetKind()
		m.ObjectMeta = metav1.ObjectMeta{
			Namespace:         u.GetNamespace(),
			Name:              u.GetName(),
			UID:               u.GetUID(),
			OwnerReferences:   u.GetOwnerReferences(),
			DeletionTimestamp: u.GetDeletionTimestamp(),
		}
		metaObjects = append(metaObjects, m)
	}
	scheme := runtime.NewScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return fakes{
		discovery: &discoveryfake.FakeDiscovery{Fake: &clienttesting.Fake{Resources: resources}},
		metadata:  metadatafake.NewSimpleMetadataClient(scheme, metaObjects...),
		dynamic:   dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds(), dynObjects...),
		apps:      appfake.NewSimpleClientset(),
		kube:      kubefake.NewClientset(),
	}
}

// newObject returns an object of namespace ns with the given UID and owners; fields
// are set with set(path, value) afterwards.
func newObject(apiVersion, kind, name string, uid types.UID, owners ...metav1.OwnerReference) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(testNamespace)
	u.SetName(name)
	u.SetUID(uid)
	u.SetOwnerReferences(owners)
	return u
}

// set sets a field of u, path separated by dots; it panics on a bad path.
func set(u *unstructured.Unstructured, value any, path ...string) *unstructured.Unstructured {
	if err := unstructured.SetNestedField(u.Object, value, path...); err != nil {
		panic(err)
	}
	return u
}

// controlledBy returns a controller reference to u.
func controlledBy(u *unstructured.Unstructured) metav1.OwnerReference {
	yes := true
	return metav1.OwnerReference{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Name: u.GetName(), UID: u.GetUID(), Controller: &yes}
}

// ownedBy returns an owner reference (not a controller one) to u.
func ownedBy(u *unstructured.Unstructured) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Name: u.GetName(), UID: u.GetUID()}
}

// cond returns a condition as the API serves it.
func cond(conditionType, status, reason, message string, observedGeneration int64) any {
	return map[string]any{
		"type": conditionType, "status": status, "reason": reason, "message": message,
		"observedGeneration": observedGeneration, "lastTransitionTime": "2026-01-01T00:00:00Z",
	}
}

// newApp returns an App at generation 1 asking for Deployment deploy (2 replicas) and
// Service svc, with the given conditions, observed at generation 1.
func newApp(name, deploy, svc string, conditions ...any) *unstructured.Unstructured {
	u := newObject("appcontroller.k8s.io/v1", "App", name, types.UID("uid-"+name))
	u.SetGeneration(1)
	if deploy != "" {
		set(u, map[string]any{"name": deploy, "image": "nginx", "replicas": int64(2)}, "spec", "deploymentTemplate")
	}
	if svc != "" {
		set(u, map[string]any{"name": svc, "port": int64(8080), "type": "ClusterIP"}, "spec", "serviceTemplate")
	}
	set(u, int64(1), "status", "observedGeneration")
	if len(conditions) > 0 {
		set(u, conditions, "status", "conditions")
	}
	return u
}

// readyApp returns newApp with the conditions of a Ready App.
func readyApp(name, deploy, svc string) *unstructured.Unstructured {
	return newApp(name, deploy, svc,
		cond("Ready", "True", "Available", `Deployment "`+deploy+`": 2 of 2 replicas available; Service "`+svc+`" selects the App's pods`, 1),
		cond("Progressing", "False", "RolloutComplete", `Deployment "`+deploy+`": 2 of 2 replicas available`, 1),
		cond("NamesAccepted", "True", "NoConflicts", "Every child name is held by this App", 1),
	)
}

// readyDeployment returns a rolled out Deployment with 2 replicas.
func readyDeployment(name string, owners ...metav1.OwnerReference) *unstructured.Unstructured {
	u := newObject("apps/v1", "Deployment", name, types.UID("uid-"+name), owners...)
	u.SetGeneration(1)
	set(u, int64(2), "spec", "replicas")
	set(u, int64(600), "spec", "progressDeadlineSeconds")
	set(u, map[string]any{
		"observedGeneration": int64(1), "replicas": int64(2), "updatedReplicas": int64(2),
		"readyReplicas": int64(2), "availableReplicas": int64(2),
		"conditions": []any{
			map[string]any{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
			map[string]any{"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"},
		},
	}, "status")
	return u
}

// readyReplicaSet returns a ReplicaSet with 2 available replicas.
func readyReplicaSet(name string, owners ...metav1.OwnerReference) *unstructured.Unstructured {
	u := newObject("apps/v1", "ReplicaSet", name, types.UID("uid-"+name), owners...)
	u.SetGeneration(1)
	set(u, int64(2), "spec", "replicas")
	set(u, map[string]any{
		"observedGeneration": int64(1), "replicas": int64(2), "fullyLabeledReplicas": int64(2),
		"readyReplicas": int64(2), "availableReplicas": int64(2),
	}, "status")
	return u
}

// readyPod returns a running, ready Pod.
func readyPod(name string, owners ...metav1.OwnerReference) *unstructured.Unstructured {
	u := newObject("v1", "Pod", name, types.UID("uid-"+name), owners...)
	set(u, map[string]any{
		"phase":      "Running",
		"conditions": []any{map[string]any{"type": "Ready", "status": "True"}},
	}, "status")
	return u
}

// service returns a ClusterIP Service.
func service(name string, owners ...metav1.OwnerReference) *unstructured.Unstructured {
	u := newObject("v1", "Service", name, types.UID("uid-"+name), owners...)
	set(u, "ClusterIP", "spec", "type")
	set(u, "10.0.0.10", "spec", "clusterIP")
	set(u, []any{map[string]any{"name": "http", "port": int64(8080), "protocol": "TCP", "targetPort": int64(8080)}}, "spec", "ports")
	return u
}

// healthyTree returns the objects of a healthy App web: its Deployment, ReplicaSet, two
// Pods, its Service, EndpointSlice and Ingress, and an unrelated ConfigMap and Secret.
func healthyTree() []*unstructured.Unstructured {
	app := readyApp("web", "web-deploy", "web-svc")
	deploy := readyDeployment("web-deploy", controlledBy(app))
	rs := readyReplicaSet("web-deploy-5c9f", controlledBy(deploy))
	svc := service("web-svc", controlledBy(app))
	return []*unstructured.Unstructured{
		app, deploy, rs,
		readyPod("web-deploy-5c9f-b2", controlledBy(rs)),
		readyPod("web-deploy-5c9f-a1", controlledBy(rs)),
		svc,
		newObject("discovery.k8s.io/v1", "EndpointSlice", "web-svc-x7k2p", "uid-slice", controlledBy(svc)),
		newObject("networking.k8s.io/v1", "Ingress", "web-svc", "uid-ingress", controlledBy(svc)),
		newObject("v1", "ConfigMap", "kube-root-ca.crt", "uid-cm"),
		newObject("v1", "Secret", "web-tls", "uid-secret"),
	}
}

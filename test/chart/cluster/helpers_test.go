package cluster

import (
	"context"
	"fmt"
	"os"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	chart "github.com/app-controller/app-controller/test/chart"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// applier applies objects by server-side apply through the dynamic client, as the admin.
type applier struct {
	client dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
}

func newApplier(t *testing.T) *applier {
	t.Helper()
	cfg := framework.Config(t)
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &applier{client: client, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))}
}

// resource returns the client of obj's resource, in obj's namespace if it is namespaced
// (namespace when obj has none).
func (a *applier) resource(obj *unstructured.Unstructured, namespace string) (dynamic.ResourceInterface, error) {
	gvk := obj.GroupVersionKind()
	mapping, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		a.mapper.Reset() // a CRD installed since the last discovery
		mapping, err = a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return nil, fmt.Errorf("mapping %s: %w", gvk, err)
	}
	if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		return a.client.Resource(mapping.Resource), nil
	}
	ns := obj.GetNamespace()
	if ns == "" {
		ns = namespace
	}
	return a.client.Resource(mapping.Resource).Namespace(ns), nil
}

// apply server-side applies obj (a dry run when dryRun) and returns what the API server
// made of it.
func (a *applier) apply(ctx context.Context, obj *unstructured.Unstructured, namespace string, dryRun bool) (*unstructured.Unstructured, error) {
	res, err := a.resource(obj, namespace)
	if err != nil {
		return nil, err
	}
	data, err := obj.MarshalJSON()
	if err != nil {
		return nil, err
	}
	opts := metav1.PatchOptions{FieldManager: "chart-test", Force: new(true)}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	out, err := res.Patch(ctx, obj.GetName(), types.ApplyPatchType, data, opts)
	if err != nil {
		return nil, fmt.Errorf("applying %s %s (dry run %v): %w", obj.GetKind(), obj.GetName(), dryRun, err)
	}
	return out, nil
}

// exists tells whether obj exists in the cluster.
func (a *applier) exists(ctx context.Context, obj *unstructured.Unstructured, namespace string) (bool, error) {
	res, err := a.resource(obj, namespace)
	if err != nil {
		return false, err
	}
	_, err = res.Get(ctx, obj.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// decodeFile returns the objects of the YAML file at path, or fails t.
func decodeFile(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := chart.Decode(data)
	if err != nil {
		t.Fatalf("decoding %s: %v", path, err)
	}
	return objs
}

package plugin

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// listParallelism bounds the list requests in flight at once.
const listParallelism = 8

// listPageSize is the page size of list requests: a namespace with many objects of a
// kind is read in several requests rather than one huge response.
const listPageSize = 500

// Tree is an App and the objects it owns, directly or through its children.
type Tree struct {
	// Namespace of the App and of every object of the tree.
	Namespace string
	// Root is the App.
	Root *Node
	// Warnings say what could not be read: when there are any the tree may be
	// incomplete.
	Warnings []string
}

// Node is a line of a tree: an object, or a placeholder for a child the App asks for in
// its spec but does not control (UID empty, Health HealthConflict or HealthMissing).
type Node struct {
	// Group, Kind and Name identify the object.
	Group, Kind, Name string
	// UID is the object's UID; empty for a placeholder.
	UID types.UID
	// Health is a one-word health and Message says why.
	Health  Health
	Message string
	// Children are the objects with an ownerReference to this one, sorted by kind and
	// name. An object owned by several objects of the tree appears once, under the owner
	// nearest to the App.
	Children []*Node

	resource schema.GroupVersionResource
	// object is the object read from the server, for -o json|yaml|name; nil for a
	// placeholder or an object that could not be read.
	object *unstructured.Unstructured
}

// object is an object found by the walk: its resource and its metadata.
type object struct {
	resource resourceType
	meta     metav1.PartialObjectMetadata
}

// AppNotFoundError is returned when the App does not exist.
type AppNotFoundError struct {
	Namespace, Name string
}

// Error says which App is missing, and where.
func (e *AppNotFoundError) Error() string {
	return fmt.Sprintf("App %q not found in namespace %q", e.Name, e.Namespace)
}

// BuildTree returns the tree of the App namespace/name. It lists, once each, the
// namespaced resources that discovery reports as listable (metadata only), links objects
// to their owners by the UID of their ownerReferences, and walks down from the App. The
// objects of the kinds found in the tree are then listed in full, once per kind, to
// compute their health. Resources that cannot be listed (forbidden, an unavailable
// aggregated API) are skipped with a warning.
func BuildTree(ctx context.Context, c Clients, namespace, name string) (*Tree, error) {
	appGVR, err := appResource(c.Discovery)
	if err != nil {
		return nil, err
	}
	app, err := getApp(ctx, c.Dynamic, appGVR, namespace, name)
	if err != nil {
		return nil, err
	}
	resources, warnings, err := namespacedResources(c.Discovery)
	if err != nil {
		return nil, err
	}
	objects, failed, listWarnings := listMetadata(ctx, c, namespace, resources)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("listing the objects of namespace %s: %w", namespace, err)
	}
	warnings = append(warnings, listWarnings...)

	root := &Node{Group: appGVR.Group, Kind: "App", Name: app.GetName(), UID: app.GetUID(), resource: appGVR, object: app}
	root.Health, root.Message = appHealth(app)
	nodes := link(root, objects)
	addPlaceholders(root, app, objects, failed)
	warnings = append(warnings, fillHealth(ctx, c.Dynamic, namespace, nodes)...)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("reading the objects of the tree: %w", err)
	}
	return &Tree{Namespace: namespace, Root: root, Warnings: warnings}, nil
}

// getApp reads the App namespace/name; an absent App is an *AppNotFoundError.
func getApp(ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error) {
	app, err := dyn.Resource(gvr).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, &AppNotFoundError{Namespace: namespace, Name: name}
	}
	if err != nil {
		return nil, fmt.Errorf("getting App %s/%s: %w", namespace, name, err)
	}
	return app, nil
}

// listMetadata lists the metadata of the objects of every resource in namespace, in
// parallel, one paged list per resource. It returns the objects, the group-kinds whose
// list failed, and warnings about the failures (one for all the forbidden ones).
func listMetadata(ctx context.Context, c Clients, namespace string, resources []resourceType) ([]object, map[schema.GroupKind]bool, []string) {
	results := make([][]object, len(resources))
	errs := make([]error, len(resources))
	parallel(len(resources), listParallelism, func(i int) {
		r := resources[i]
		client := c.Metadata.Resource(r.gvr).Namespace(namespace)
		errs[i] = paged(ctx, func(opts metav1.ListOptions) (string, error) {
			list, err := client.List(ctx, opts)
			if err != nil {
				return "", err
			}
			for _, item := range list.Items {
				results[i] = append(results[i], object{resource: r, meta: item})
			}
			return list.Continue, nil
		})
	})
	var objects []object
	failed := map[schema.GroupKind]bool{}
	var warnings, forbidden []string
	for i, r := range resources {
		switch {
		case errs[i] == nil:
			objects = append(objects, results[i]...)
			continue
		case apierrors.IsForbidden(errs[i]):
			// Common for users with namespace-scoped roles: one warning for all of them.
			forbidden = append(forbidden, resourceString(r.gvr))
		default:
			warnings = append(warnings, fmt.Sprintf("skipping %s: listing them failed: %v", resourceString(r.gvr), errs[i]))
		}
		failed[r.groupKind()] = true
	}
	if len(forbidden) > 0 {
		warnings = append(warnings, fmt.Sprintf("skipping %s: listing them is forbidden; objects of these kinds are not shown",
			strings.Join(forbidden, ", ")))
	}
	return objects, failed, warnings
}

// paged calls list with a continue token until it returns an empty one.
func paged(ctx context.Context, list func(metav1.ListOptions) (string, error)) error {
	opts := metav1.ListOptions{Limit: listPageSize}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		next, err := list(opts)
		if err != nil {
			return err
		}
		if next == "" {
			return nil
		}
		opts.Continue = next
	}
}

// parallel calls fn(i) for i in [0, n), at most limit at a time, and waits for all.
func parallel(n, limit int, fn func(i int)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, limit)
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			fn(i)
		})
	}
	wg.Wait()
}

// link builds the tree below root from the objects' ownerReferences, matched by UID
// only: an object whose owner has the name of a tree object but another UID is not in
// the tree. The walk is breadth first and places each object once, under the owner
// nearest to root; ownership cycles and objects whose owners are gone end the walk.
// It returns the nodes below root.
func link(root *Node, objects []object) []*Node {
	byOwner := map[types.UID][]*object{}
	for i := range objects {
		o := &objects[i]
		for _, ref := range o.meta.OwnerReferences {
			byOwner[ref.UID] = append(byOwner[ref.UID], o)
		}
	}
	seen := map[types.UID]bool{root.UID: true}
	var nodes []*Node
	queue := []*Node{root}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		for _, o := range byOwner[n.UID] {
			if seen[o.meta.UID] {
				continue
			}
			seen[o.meta.UID] = true
			child := &Node{
				Group:    o.resource.gvr.Group,
				Kind:     o.resource.kind,
				Name:     o.meta.Name,
				UID:      o.meta.UID,
				resource: o.resource.gvr,
			}
			n.Children = append(n.Children, child)
			nodes = append(nodes, child)
		}
		sortNodes(n.Children)
		queue = append(queue, n.Children...)
	}
	return nodes
}

// sortNodes sorts nodes by kind, then name, then group.
func sortNodes(nodes []*Node) {
	sort.SliceStable(nodes, func(i, j int) bool {
		a, b := nodes[i], nodes[j]
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Group < b.Group
	})
}

// wantedChild is a child an App asks for in its spec.
type wantedChild struct {
	groupKind schema.GroupKind
	name      string
}

// wantedChildren returns the children the App's spec asks for.
func wantedChildren(app *appv1.App) []wantedChild {
	var out []wantedChild
	if t := app.Spec.DeploymentTemplate; t != nil && t.Name != "" {
		out = append(out, wantedChild{schema.GroupKind{Group: "apps", Kind: "Deployment"}, t.Name})
	}
	if t := app.Spec.ServiceTemplate; t != nil && t.Name != "" {
		out = append(out, wantedChild{schema.GroupKind{Kind: "Service"}, t.Name})
	}
	if t := app.Spec.DeploymentTemplate; t != nil && t.Name != "" && app.Spec.Autoscaling != nil {
		out = append(out, wantedChild{schema.GroupKind{Group: "autoscaling", Kind: "HorizontalPodAutoscaler"}, t.Name})
	}
	return out
}

// addPlaceholders adds a placeholder under root for each child the App asks for that is
// not among root's children: HealthConflict when an object the App does not control
// holds the name (the App's NamesAccepted=False), HealthMissing when none does, and
// HealthUnknown when the kind could not be listed.
func addPlaceholders(root *Node, u *unstructured.Unstructured, objects []object, failed map[schema.GroupKind]bool) {
	var app appv1.App
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &app); err != nil {
		return // the App's line shows its status; nothing to add
	}
	for _, want := range wantedChildren(&app) {
		if hasChild(root, want) {
			continue
		}
		n := &Node{Group: want.groupKind.Group, Kind: want.groupKind.Kind, Name: want.name}
		switch holder := findObject(objects, want); {
		case holder != nil:
			n.Health = HealthConflict
			n.Message = "name held by an object this App does not control (" + controllerString(holder) + ")"
		case failed[want.groupKind]:
			n.Health = HealthUnknown
			n.Message = "cannot tell whether it exists: listing " + want.groupKind.String() + " failed"
		default:
			n.Health = HealthMissing
			n.Message = "does not exist"
		}
		root.Children = append(root.Children, n)
	}
	sortNodes(root.Children)
}

// hasChild tells whether root has a child of the wanted kind and name.
func hasChild(root *Node, want wantedChild) bool {
	for _, c := range root.Children {
		if c.Group == want.groupKind.Group && c.Kind == want.groupKind.Kind && c.Name == want.name {
			return true
		}
	}
	return false
}

// findObject returns the object of the wanted kind and name, or nil.
func findObject(objects []object, want wantedChild) *object {
	for i := range objects {
		o := &objects[i]
		if o.resource.groupKind() == want.groupKind && o.meta.Name == want.name {
			return o
		}
	}
	return nil
}

// controllerString says who controls o: "controlled by App other" or "no controller".
func controllerString(o *object) string {
	ref := metav1.GetControllerOfNoCopy(&o.meta)
	if ref == nil {
		return "no controller"
	}
	return fmt.Sprintf("controlled by %s %s", ref.Kind, ref.Name)
}

// fillHealth sets the health of nodes (none of them a placeholder). The objects are
// listed in full, one paged list per resource, in parallel. A node whose object could
// not be read is HealthUnknown; a warning says why.
func fillHealth(ctx context.Context, dyn dynamic.Interface, namespace string, nodes []*Node) []string {
	byResource := map[schema.GroupVersionResource][]*Node{}
	var resources []schema.GroupVersionResource
	for _, n := range nodes {
		if _, ok := byResource[n.resource]; !ok {
			resources = append(resources, n.resource)
		}
		byResource[n.resource] = append(byResource[n.resource], n)
	}
	byUID := make([]map[types.UID]*unstructured.Unstructured, len(resources))
	errs := make([]error, len(resources))
	parallel(len(resources), listParallelism, func(i int) {
		client := dyn.Resource(resources[i]).Namespace(namespace)
		byUID[i] = map[types.UID]*unstructured.Unstructured{}
		errs[i] = paged(ctx, func(opts metav1.ListOptions) (string, error) {
			list, err := client.List(ctx, opts)
			if err != nil {
				return "", err
			}
			for j := range list.Items {
				byUID[i][list.Items[j].GetUID()] = &list.Items[j]
			}
			return list.GetContinue(), nil
		})
	})
	var warnings []string
	for i, r := range resources {
		for _, n := range byResource[r] {
			switch u, ok := byUID[i][n.UID]; {
			case errs[i] != nil:
				n.Health, n.Message = HealthUnknown, "cannot read it: "+errs[i].Error()
			case !ok:
				n.Health, n.Message = HealthUnknown, "deleted while the tree was read"
			default:
				n.Health, n.Message = healthOf(u)
				switch {
				case n.Group == "" && n.Kind == "Pod":
					n.Health, n.Message = podHealth(u, n.Health, n.Message)
				case n.Group == "autoscaling" && n.Kind == "HorizontalPodAutoscaler":
					n.Health, n.Message = autoscalerHealth(u, time.Now())
				}
				n.object = u
			}
		}
		if errs[i] != nil {
			warnings = append(warnings, fmt.Sprintf("cannot tell the health of %s: listing them failed: %v", resourceString(r), errs[i]))
		}
	}
	return warnings
}

// resourceString names a resource as kubectl does: "deployments.v1.apps", "pods.v1".
func resourceString(gvr schema.GroupVersionResource) string {
	if gvr.Group == "" {
		return gvr.Resource + "." + gvr.Version
	}
	return gvr.Resource + "." + gvr.Version + "." + gvr.Group
}

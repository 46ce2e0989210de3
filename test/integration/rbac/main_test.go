// Package rbac proves, against a real kube-apiserver with RBAC authorization, that the
// RBAC app-controller ships in config/rbac is enough for everything the controllers and
// leader election do and no more than that, and that the Deployment in config/manager
// can run under it.
//
// The controller-manager runs in the test process as the app-controller ServiceAccount,
// through impersonation. Every request it makes is recorded: a single 403 fails the
// tests, which catches a missing permission even where a controller only logs the error
// (the event recorder, an informer that keeps retrying its list).
package rbac

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/app-controller/app-controller/pkg/controllermanager"
	"github.com/app-controller/app-controller/test/integration/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

// converge bounds how long the controllers and the cluster may take to converge.
const converge = 60 * time.Second

// The identity the shipped manifests give the controller.
const (
	controllerNamespace      = "app-controller-system"
	controllerServiceAccount = "app-controller"
	controllerUser           = "system:serviceaccount:" + controllerNamespace + ":" + controllerServiceAccount
)

// shippedRBAC is what config/rbac holds.
type shippedRBAC struct {
	// clusterRole is what the controllers need, in every namespace; clusterBinding grants
	// it to the ServiceAccount.
	clusterRole    *rbacv1.ClusterRole
	clusterBinding *rbacv1.ClusterRoleBinding
	// role is what leader election needs, in the controller's namespace only; binding
	// grants it to the ServiceAccount there.
	role           *rbacv1.Role
	binding        *rbacv1.RoleBinding
	serviceAccount *corev1.ServiceAccount
	// aggregated are the ClusterRoles for users (aggregate_roles.yaml), labelled to
	// aggregate into the built-in view, edit and admin roles.
	aggregated []*rbacv1.ClusterRole
}

// aggregateLabelPrefix starts the labels by which a ClusterRole aggregates into the
// built-in view, edit and admin roles.
const aggregateLabelPrefix = "rbac.authorization.k8s.io/aggregate-to-"

// isAggregated tells whether the ClusterRole document doc aggregates into a built-in role.
func isAggregated(t *testing.T, where string, doc []byte) bool {
	t.Helper()
	var meta metav1.PartialObjectMetadata
	if err := yaml.Unmarshal(doc, &meta); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	for key := range meta.Labels {
		if strings.HasPrefix(key, aggregateLabelPrefix) {
			return true
		}
	}
	return false
}

// loadRBAC reads config/rbac/*.yaml. Each file may hold several YAML documents; the
// kustomization is skipped, and any kind other than a ClusterRole, a ClusterRoleBinding,
// a Role, a RoleBinding or a ServiceAccount fails the test, as does a second object of
// one of those kinds, aggregated ClusterRoles aside: this test must be updated when the
// RBAC grows.
func loadRBAC(t *testing.T) shippedRBAC {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(framework.RepoRoot(t), "config", "rbac", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var out shippedRBAC
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range splitYAML(data) {
			where := fmt.Sprintf("%s (document %d)", filepath.Base(file), i+1)
			var obj any
			switch kind := kindOf(t, where, doc); kind {
			case "Kustomization":
				continue
			case "ClusterRole":
				if isAggregated(t, where, doc) {
					role := &rbacv1.ClusterRole{}
					out.aggregated = append(out.aggregated, role)
					obj = role
					break
				}
				obj = setOnce(t, where, &out.clusterRole)
			case "ClusterRoleBinding":
				obj = setOnce(t, where, &out.clusterBinding)
			case "Role":
				obj = setOnce(t, where, &out.role)
			case "RoleBinding":
				obj = setOnce(t, where, &out.binding)
			case "ServiceAccount":
				obj = setOnce(t, where, &out.serviceAccount)
			default:
				t.Fatalf("%s: unexpected kind %q in config/rbac", where, kind)
			}
			if err := yaml.UnmarshalStrict(doc, obj); err != nil {
				t.Fatalf("%s: %v", where, err)
			}
		}
	}
	if out.clusterRole == nil || out.clusterBinding == nil || out.role == nil || out.binding == nil || out.serviceAccount == nil {
		t.Fatalf("config/rbac must hold a ClusterRole, a ClusterRoleBinding, a Role, a RoleBinding and a ServiceAccount; got %+v", out)
	}
	return out
}

// setOnce allocates *p and returns it, failing the test if it was already set.
func setOnce[T any](t *testing.T, where string, p **T) *T {
	t.Helper()
	if *p != nil {
		t.Fatalf("%s: a second %T in config/rbac", where, *p)
	}
	*p = new(T)
	return *p
}

// splitYAML splits a multi-document YAML file into its non-empty documents.
func splitYAML(data []byte) [][]byte {
	var docs [][]byte
	for _, doc := range bytes.Split(append([]byte("\n"), data...), []byte("\n---")) {
		// A separator line may carry a comment or trailing spaces after the dashes.
		if i := bytes.IndexByte(doc, '\n'); i >= 0 {
			doc = doc[i+1:]
		}
		if len(bytes.TrimSpace(stripComments(doc))) > 0 {
			docs = append(docs, doc)
		}
	}
	return docs
}

// stripComments drops the lines that hold only a YAML comment.
func stripComments(doc []byte) []byte {
	var out [][]byte
	for line := range bytes.Lines(doc) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out = append(out, line)
		}
	}
	return bytes.Join(out, nil)
}

// kindOf returns the kind of a YAML document.
func kindOf(t *testing.T, where string, doc []byte) string {
	t.Helper()
	var meta metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &meta); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	return meta.Kind
}

// installRBAC creates the namespace app-controller-system and the objects of
// config/rbac, as the admin, unless they exist already (another test of this binary
// installed them; they stay until the control plane stops). It returns once the API
// server authorizes the ServiceAccount by them, so that the controller's first requests
// are not refused by an authorizer that has not seen the binding yet.
func installRBAC(t *testing.T) shippedRBAC {
	t.Helper()
	rb := loadRBAC(t)
	admin := framework.Client(t)
	ctx := context.Background()
	ignoreExists := func(what string, err error) {
		t.Helper()
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("creating %s: %v", what, err)
		}
	}
	_, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: controllerNamespace}}, metav1.CreateOptions{})
	ignoreExists("namespace "+controllerNamespace, err)
	_, err = admin.CoreV1().ServiceAccounts(rb.serviceAccount.Namespace).Create(ctx, rb.serviceAccount, metav1.CreateOptions{})
	ignoreExists("the ServiceAccount", err)
	_, err = admin.RbacV1().ClusterRoles().Create(ctx, rb.clusterRole, metav1.CreateOptions{})
	ignoreExists("the ClusterRole", err)
	_, err = admin.RbacV1().ClusterRoleBindings().Create(ctx, rb.clusterBinding, metav1.CreateOptions{})
	ignoreExists("the ClusterRoleBinding", err)
	_, err = admin.RbacV1().Roles(rb.role.Namespace).Create(ctx, rb.role, metav1.CreateOptions{})
	ignoreExists("the Role", err)
	_, err = admin.RbacV1().RoleBindings(rb.binding.Namespace).Create(ctx, rb.binding, metav1.CreateOptions{})
	ignoreExists("the RoleBinding", err)
	for _, role := range rb.aggregated {
		_, err = admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{})
		ignoreExists("the ClusterRole "+role.Name, err)
	}

	// Probe each binding with the first permission of its role: whether the role gives
	// what it should is for the tests to tell, not a reason to wait here.
	sa := impersonatedClient(t)
	for _, probe := range []authorizationv1.ResourceAttributes{
		firstPermission(t, "ClusterRole", rb.clusterRole.Rules, metav1.NamespaceAll),
		firstPermission(t, "Role", rb.role.Rules, rb.role.Namespace),
	} {
		framework.Eventually(t, converge, func() (bool, error) {
			allowed, _, err := canI(ctx, sa, probe)
			return allowed, err
		})
	}
	return rb
}

// firstPermission returns the first permission of rules, in namespace, as the
// attributes of an access review.
func firstPermission(t *testing.T, kind string, rules []rbacv1.PolicyRule, namespace string) authorizationv1.ResourceAttributes {
	t.Helper()
	if len(rules) == 0 || len(rules[0].APIGroups) == 0 || len(rules[0].Resources) == 0 || len(rules[0].Verbs) == 0 {
		t.Fatalf("the %s grants nothing", kind)
	}
	attrs := permission{rules[0].Verbs[0], rules[0].APIGroups[0], rules[0].Resources[0]}.attributes()
	attrs.Namespace = namespace
	return attrs
}

// impersonatedConfig returns the admin config of the test cluster, impersonating the
// controller's ServiceAccount. The API server then authenticates requests as that
// ServiceAccount, with its groups, exactly as with its token inside the cluster.
func impersonatedConfig(t *testing.T) *rest.Config {
	t.Helper()
	cfg := framework.Config(t)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: controllerUser}
	return cfg
}

// impersonatedClient returns a clientset acting as the controller's ServiceAccount.
func impersonatedClient(t *testing.T) kubernetes.Interface {
	t.Helper()
	client, err := kubernetes.NewForConfig(impersonatedConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// canI asks the API server whether the client's user may do what attrs describe.
func canI(ctx context.Context, client kubernetes.Interface, attrs authorizationv1.ResourceAttributes) (bool, string, error) {
	review, err := client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attrs},
	}, metav1.CreateOptions{})
	if err != nil {
		return false, "", fmt.Errorf("reviewing access %+v: %w", attrs, err)
	}
	return review.Status.Allowed, review.Status.Reason, nil
}

// permission is a verb on a resource (with its subresource, if any) of an API group, as
// RBAC sees a request.
type permission struct {
	verb, group, resource string
}

// String renders p as "verb group/resource", with "core" for the core group.
func (p permission) String() string {
	group := p.group
	if group == "" {
		group = "core"
	}
	return p.verb + " " + group + "/" + p.resource
}

// attributes returns p as the attributes of an access review, in every namespace.
func (p permission) attributes() authorizationv1.ResourceAttributes {
	resource, subresource, _ := strings.Cut(p.resource, "/")
	return authorizationv1.ResourceAttributes{Verb: p.verb, Group: p.group, Resource: resource, Subresource: subresource}
}

// use is a permission as a request used it: in a namespace, or in none ("") for a
// request across every namespace or about a cluster-scoped resource.
type use struct {
	permission
	namespace string
}

// requestPermission tells which permission an API request needs, and in which
// namespace, from its method, path and query, as the API server's request info resolver
// does for the requests a client-go client makes. ok is false for requests outside /api
// and /apis (discovery, health).
func requestPermission(req *http.Request) (u use, ok bool) {
	p := &u.permission
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		p.group = parts[1]
		parts = parts[3:]
	default:
		return u, false
	}
	// "namespaces/<name>" is a namespace, "namespaces/<name>/status" or ".../finalize" one
	// of its subresources, anything longer a resource in the namespace.
	if len(parts) >= 3 && parts[0] == "namespaces" && (len(parts) != 3 || (parts[2] != "status" && parts[2] != "finalize")) {
		u.namespace = parts[1]
		parts = parts[2:]
	}
	p.resource = parts[0]
	named := len(parts) >= 2
	if len(parts) >= 3 {
		p.resource += "/" + parts[2]
	}
	switch req.Method {
	case http.MethodGet, http.MethodHead:
		switch w := req.URL.Query().Get("watch"); {
		case w == "true" || w == "1":
			p.verb = "watch"
		case named:
			p.verb = "get"
		default:
			p.verb = "list"
		}
	case http.MethodPost:
		p.verb = "create"
	case http.MethodPut:
		p.verb = "update"
	case http.MethodPatch:
		p.verb = "patch"
	case http.MethodDelete:
		p.verb = "delete"
		if !named {
			p.verb = "deletecollection"
		}
	default:
		return u, false
	}
	return u, true
}

// requestLog records the permissions a client's successful requests needed, with their
// namespace, and the requests the API server refused with 403 Forbidden.
type requestLog struct {
	mu        sync.Mutex
	used      map[use]int
	forbidden []string
}

// wrap is a rest.Config WrapTransport that records into l.
func (l *requestLog) wrap(rt http.RoundTripper) http.RoundTripper {
	return framework.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		u, ok := requestPermission(req)
		l.mu.Lock()
		defer l.mu.Unlock()
		if ok && err == nil && resp.StatusCode < 400 {
			if l.used == nil {
				l.used = map[use]int{}
			}
			l.used[u]++
			if u.verb == "patch" && resp.StatusCode == http.StatusCreated {
				// A server-side apply that created the object: the API server authorized
				// it as create as well.
				l.used[use{permission{"create", u.group, u.resource}, u.namespace}]++
			}
		}
		if err == nil && resp.StatusCode == http.StatusForbidden {
			l.forbidden = append(l.forbidden, fmt.Sprintf("%s %s (%s)", req.Method, req.URL.RequestURI(), u.permission))
		}
		return resp, err
	})
}

// snapshot returns the permissions used with their namespaces, sorted, and the
// forbidden requests.
func (l *requestLog) snapshot() (used []use, forbidden []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for u := range l.used {
		used = append(used, u)
	}
	slices.SortFunc(used, func(a, b use) int {
		if c := strings.Compare(a.String(), b.String()); c != 0 {
			return c
		}
		return strings.Compare(a.namespace, b.namespace)
	})
	return used, slices.Clone(l.forbidden)
}

// startManager runs the whole controller-manager (every controller) in the test process
// with cfg and opts. The returned function stops it and waits until it has returned; it
// is also called when the test ends.
func startManager(t *testing.T, cfg *rest.Config, opts *controllermanager.Options) (stop func()) {
	t.Helper()
	m := framework.StartManager(t, cfg, opts)
	return func() {
		if err := m.Stop(t); err != nil {
			t.Errorf("controller manager: %v", err)
		}
	}
}

// waitEvent waits for an Event about the object that starts with prefix.
func waitEvent(t *testing.T, client kubernetes.Interface, kind, namespace, name, prefix string) {
	t.Helper()
	framework.WaitEvent(t, client, namespace, kind, name, prefix, converge)
}

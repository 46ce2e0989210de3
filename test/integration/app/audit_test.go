package app

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	appctrl "github.com/app-controller/app-controller/pkg/controller/app"
	"github.com/app-controller/app-controller/pkg/controllermanager"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// auditedWrite is one request of the controller that is not a read.
type auditedWrite struct {
	method, path string
	status       int
	// response is the object the API server returned (apply and patch answers).
	response []byte
}

// resource splits a request path into namespace, resource, name and subresource
// ("" where absent): /api/v1/namespaces/NS/RES/NAME[/SUB] or
// /apis/GROUP/VERSION/namespaces/NS/RES/NAME[/SUB].
func (w auditedWrite) resource() (ns, res, name, sub string) {
	parts := strings.Split(strings.Trim(w.path, "/"), "/")
	for i, p := range parts {
		if p == "namespaces" && i+2 < len(parts) {
			ns, res = parts[i+1], parts[i+2]
			if i+3 < len(parts) {
				name = parts[i+3]
			}
			if i+4 < len(parts) {
				sub = parts[i+4]
			}
			return
		}
	}
	if len(parts) > 0 {
		res = parts[len(parts)-1]
	}
	return
}

// auditor records every write of a client.
type auditor struct {
	mu     sync.Mutex
	writes []auditedWrite
}

func (a *auditor) wrap(rt http.RoundTripper) http.RoundTripper {
	return framework.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if req.Method == http.MethodGet || req.Method == http.MethodHead {
			return rt.RoundTrip(req)
		}
		resp, err := rt.RoundTrip(req)
		w := auditedWrite{method: req.Method, path: req.URL.Path}
		if err == nil {
			w.status = resp.StatusCode
			body, readErr := io.ReadAll(resp.Body)
			resp.Body.Close()
			resp.Body = io.NopCloser(bytes.NewReader(body))
			if readErr == nil {
				w.response = body
			}
		}
		a.mu.Lock()
		a.writes = append(a.writes, w)
		a.mu.Unlock()
		return resp, err
	})
}

// TestWritesAudited runs the App controller, with leader election, through a recording
// transport over a scenario of several Apps in two namespaces beside objects made by
// kubectl: create, update, rename (prune), a name held by a foreign Deployment and
// Service, a name contended by a younger App, delete; and a third namespace with
// foreign objects only. Every write must be in an App's namespace (or the Lease's), to
// an App's status, an Event, the leader Lease, or a child whose controller is one of the
// Apps; no write may touch a foreign object, which must be unchanged at the end.
func TestWritesAudited(t *testing.T) {
	c := newClients(t)
	ctx := context.Background()
	ns1, ns2, nsForeign, nsLease := framework.Namespace(t), framework.Namespace(t), framework.Namespace(t), framework.Namespace(t)

	// Foreign objects, made by kubectl before the controller starts.
	kubectl := func(ns string, args ...string) { framework.Kubectl(t, append([]string{"-n", ns}, args...)...) }
	for _, ns := range []string{ns1, nsForeign} {
		kubectl(ns, "create", "deployment", "taken-deploy", "--image=nginx")
		kubectl(ns, "create", "service", "clusterip", "taken-svc", "--tcp=80:80")
		kubectl(ns, "create", "deployment", "bystander", "--image=nginx")
		kubectl(ns, "create", "service", "clusterip", "bystander", "--tcp=80:80")
		kubectl(ns, "create", "configmap", "bystander", "--from-literal=a=b")
	}
	type foreignObj struct{ ns, kind, name, uid, rv string }
	var foreign []foreignObj
	snapshot := func() []foreignObj {
		var out []foreignObj
		for _, ns := range []string{ns1, nsForeign} {
			for _, name := range []string{"taken-deploy", "bystander"} {
				d, err := c.Kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, foreignObj{ns, "Deployment", name, string(d.UID), d.ResourceVersion})
			}
			for _, name := range []string{"taken-svc", "bystander"} {
				s, err := c.Kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, foreignObj{ns, "Service", name, string(s.UID), s.ResourceVersion})
			}
		}
		return out
	}
	// The deployment controller writes the status of the foreign Deployments: wait until
	// they settle, so that a later resourceVersion change means someone else wrote.
	framework.Eventually(t, converge, func() (bool, error) {
		for _, ns := range []string{ns1, nsForeign} {
			for _, name := range []string{"taken-deploy", "bystander"} {
				d, err := c.Kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil || d.Status.ObservedGeneration != d.Generation || d.Status.AvailableReplicas != 1 {
					return false, nil
				}
			}
		}
		return true, nil
	})
	foreign = snapshot()

	// The tests of this package share one control plane: wait until the Apps of earlier
	// tests are gone with their namespaces, so that every write the audited controller
	// makes is one of this scenario's (it would rightly also write the status of an App
	// left by another test, and be refused in a namespace being deleted).
	framework.Eventually(t, time.Minute, func() (bool, error) {
		list, err := c.App.AppcontrollerV1().Apps(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, app := range list.Items {
			if app.Namespace != ns1 && app.Namespace != ns2 {
				return false, nil
			}
		}
		return true, nil
	})

	a := &auditor{}
	cfg := framework.Config(t)
	cfg.Wrap(a.wrap)
	opts := controllermanager.NewOptions()
	opts.Controllers = []string{appctrl.ControllerName}
	opts.ShutdownTimeout = 5 * time.Second
	opts.LeaderElect = true
	opts.LeaderElectNamespace = nsLease
	opts.LeaderElectName = "app-controller-audit"
	framework.StartManager(t, cfg, opts)

	// The scenario.
	appA := newApp(ns1, "a", "nginx", 2)
	taken := newApp(ns1, "taken", "nginx", 1)
	taken.Spec.DeploymentTemplate.Name, taken.Spec.ServiceTemplate.Name = "taken-deploy", "taken-svc"
	appB := newApp(ns2, "b", "nginx", 1)
	for _, app := range []*appv1.App{appA, taken, appB} {
		c.Create(t, app)
	}
	c.WaitReady(t, ns1, "a")
	c.WaitReady(t, ns2, "b")
	c.WaitCondition(t, ns1, "taken", appv1.ConditionNamesAccepted, "False/"+appv1.ReasonNameConflict)
	time.Sleep(time.Second) // App c must be younger than a (creation times have a 1s resolution)
	younger := newApp(ns1, "c", "nginx", 1)
	younger.Spec.DeploymentTemplate.Name = "a-deploy"
	c.Create(t, younger)
	c.WaitCondition(t, ns1, "c", appv1.ConditionNamesAccepted, "False/"+appv1.ReasonNameConflict)

	c.Update(t, ns1, "a", func(app *appv1.App) {
		app.Spec.DeploymentTemplate.Image = "nginx:1.27"
		app.Spec.DeploymentTemplate.Replicas = ptr.To[int32](3)
	})
	c.WaitReady(t, ns1, "a")
	c.Update(t, ns2, "b", func(app *appv1.App) {
		app.Spec.DeploymentTemplate.Name = "b-renamed"
		app.Spec.ServiceTemplate.Port = 9090
	})
	waitGone(t, "Deployment b-deploy", func() error {
		_, err := c.Kube.AppsV1().Deployments(ns2).Get(ctx, "b-deploy", metav1.GetOptions{})
		return err
	})
	c.WaitReady(t, ns2, "b")
	// A (contended) name freed: c takes a-deploy once a lets it go.
	c.Update(t, ns1, "a", func(app *appv1.App) { app.Spec.DeploymentTemplate.Name = "a-deploy-2" })
	c.WaitReady(t, ns1, "a")
	c.WaitReady(t, ns1, "c")
	c.Delete(t, ns2, "b")
	waitGone(t, "App b", func() error {
		_, err := c.App.AppcontrollerV1().Apps(ns2).Get(ctx, "b", metav1.GetOptions{})
		return err
	})
	time.Sleep(2 * time.Second) // let the controller react to the delete

	// The audit.
	apps := map[string]map[string]bool{ns1: {"a": true, "taken": true, "c": true}, ns2: {"b": true}}
	appUIDs := map[types.UID]bool{}
	for _, app := range []*appv1.App{c.GetApp(t, ns1, "a"), c.GetApp(t, ns1, "taken"), c.GetApp(t, ns1, "c")} {
		appUIDs[app.UID] = true
	}
	foreignNames := map[string]bool{}
	foreignUIDs := map[string]bool{}
	for _, f := range foreign {
		foreignNames[f.ns+"/"+strings.ToLower(f.kind)+"s/"+f.name] = true
		foreignUIDs[f.uid] = true
	}
	written := map[string]bool{} // children the controller applied, ns/resource/name
	a.mu.Lock()
	writes := append([]auditedWrite(nil), a.writes...)
	a.mu.Unlock()
	counts := map[string]int{}
	for _, w := range writes {
		ns, res, name, sub := w.resource()
		key := ns + "/" + res + "/" + name
		fail := func(why string) { t.Errorf("%s %s (HTTP %d): %s", w.method, w.path, w.status, why) }
		counts[res+"/"+w.method]++
		if foreignNames[key] {
			fail("a write to a foreign object")
			continue
		}
		switch {
		case ns == nsLease:
			if (res != "leases" || (name != "" && name != opts.LeaderElectName)) && res != "events" {
				fail("a write in the Lease's namespace that is not the Lease or an Event")
			}
		case ns != ns1 && ns != ns2:
			fail("a write outside the Apps' namespaces")
		case res == "events":
			if w.method != http.MethodPost && w.method != http.MethodPatch {
				fail("an Event write that is not a create or patch")
			}
		case res == "apps":
			if !apps[ns][name] || sub != "status" || w.method != http.MethodPatch {
				fail("a write to an App that is not a patch of the status of one of the scenario's Apps")
			}
		case res == "deployments" || res == "services" || res == "poddisruptionbudgets" || res == "controllerrevisions":
			// Children are applied (PATCH); revisions of Apps' specs are created (POST)
			// and renumbered (PATCH).
			switch {
			case w.method == http.MethodPatch || (w.method == http.MethodPost && res == "controllerrevisions"):
				if w.status >= 300 {
					fail("a failed write to a child")
					continue
				}
				// The answer is protobuf or JSON, as the client negotiated.
				decoded, _, err := scheme.Codecs.UniversalDeserializer().Decode(w.response, nil, nil)
				if err != nil {
					fail("unreadable answer: " + err.Error())
					continue
				}
				obj, err := meta.Accessor(decoded)
				if err != nil {
					fail("answer without metadata: " + err.Error())
					continue
				}
				ref := metav1.GetControllerOfNoCopy(obj)
				if foreignUIDs[string(obj.GetUID())] || ref == nil || ref.Kind != "App" || ref.APIVersion != appv1.GroupVersion.String() {
					fail("a write to an object no App controls")
					continue
				}
				// b is gone: its UID is not known any more.
				if !appUIDs[ref.UID] && (ns != ns2 || ref.Name != "b") {
					fail("a write to a child of an App outside the scenario")
				}
				written[ns+"/"+res+"/"+obj.GetName()] = true
			case w.method == http.MethodDelete:
				if !written[key] {
					fail("a delete of an object the controller did not write before")
				}
			default:
				fail("a write to a child that is neither an apply/patch nor a delete")
			}
		default:
			fail("a write to a resource the controller has no business with")
		}
	}
	t.Logf("%d writes audited: %v", len(writes), counts)
	if counts["leases/POST"]+counts["leases/PUT"] == 0 || counts["apps/PATCH"] == 0 || counts["deployments/DELETE"] == 0 {
		t.Errorf("the scenario did not exercise leader election, status writes and prunes: %v", counts)
	}

	// The foreign objects are exactly as they were.
	for i, f := range snapshot() {
		if f != foreign[i] {
			t.Errorf("foreign %s %s/%s changed: %+v, was %+v", f.kind, f.ns, f.name, f, foreign[i])
		}
	}
}

package bench

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller/appfixture"
	appclientset "github.com/app-controller/app-controller/pkg/generated/clientset/versioned"
)

// The users of the audit log: the controller and the floor's loops each have their own
// client certificate, so their writes are told apart; the harness itself (creating
// Apps, changing images, emptying the cluster) uses the admin and is not counted.
const (
	controllerUser = "bench:app-controller"
	floorUser      = "bench:floor"
	// benchGroup gives both users every permission, so that neither is slowed by a
	// different authorization path or API priority level than the other.
	benchGroup = "system:masters"
	// benchNamespaceLabel marks the namespaces the harness creates, deleted between phases.
	benchNamespaceLabel = "app-controller.bench"
	// image is every App's image; kwok runs no container. churnImage replaces it.
	image      = "nginx"
	churnImage = "nginx:churn"
	// servicePort is every App's Service port.
	servicePort = 8080
	// pollInterval is the period of every poll of the harness.
	pollInterval = 100 * time.Millisecond
)

// clients are typed clients for one identity.
type clients struct {
	kube kubernetes.Interface
	app  appclientset.Interface
	// dynamic reads and writes resources the project has no types of (Argo Rollouts').
	dynamic dynamic.Interface
}

// newClients returns clients for cfg without client-side rate limit; built-in types
// are sent as protobuf when protobuf is set (custom resources are JSON only).
func newClients(cfg *rest.Config, protobuf bool) (clients, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0
	kubeCfg := rest.CopyConfig(cfg)
	if protobuf {
		kubeCfg.ContentType = "application/vnd.kubernetes.protobuf"
		kubeCfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	}
	kube, err := kubernetes.NewForConfig(kubeCfg)
	if err != nil {
		return clients{}, fmt.Errorf("making a Kubernetes client: %w", err)
	}
	app, err := appclientset.NewForConfig(cfg)
	if err != nil {
		return clients{}, fmt.Errorf("making an App client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return clients{}, fmt.Errorf("making a dynamic client: %w", err)
	}
	return clients{kube: kube, app: app, dynamic: dyn}, nil
}

// appName is the name of the i-th App of a phase.
func appName(i int) string { return fmt.Sprintf("app-%05d", i) }

// newApp is the App of every phase: a Deployment of replicas pods and a ClusterIP Service.
func newApp(ns, name string, replicas int32) *appv1.App {
	app := appfixture.NewApp(ns, name, image, replicas)
	app.Spec.ServiceTemplate.Port = servicePort
	app.Spec.ServiceTemplate.Type = corev1.ServiceTypeClusterIP
	return app
}

// createApp creates app as the admin and sets generation to the created App's.
func (e *env) createApp(ctx context.Context, app *appv1.App, generation *int64) error {
	created, err := e.admin.app.AppcontrollerV1().Apps(app.Namespace).Create(ctx, app, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating App %s: %w", app.Name, err)
	}
	*generation = created.Generation
	return nil
}

// createNamespace creates a namespace marked as the harness's.
func createNamespace(ctx context.Context, kube kubernetes.Interface, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{benchNamespaceLabel: "true"}}}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating namespace %s: %w", name, err)
	}
	return nil
}

// emptyStall is how long emptyCluster waits while no object of the harness's namespaces
// goes away before it gives up: at N=10000 on a slow machine the namespace controller and
// the garbage collector take more than 10 minutes, but never stand still that long.
const emptyStall = 5 * time.Minute

// emptyCluster deletes every namespace of the harness and waits until they are gone
// (their Apps, Deployments, ReplicaSets, Pods and Services with them), for as long as
// their objects keep going away: it gives up after stall without any.
func emptyCluster(ctx context.Context, kube kubernetes.Interface, stall time.Duration) (time.Duration, error) {
	start := time.Now()
	selector := metav1.ListOptions{LabelSelector: benchNamespaceLabel}
	list, err := kube.CoreV1().Namespaces().List(ctx, selector)
	if err != nil {
		return 0, fmt.Errorf("listing the harness's namespaces: %w", err)
	}
	for _, ns := range list.Items {
		if ns.DeletionTimestamp != nil {
			continue
		}
		if err := kube.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{}); err != nil {
			return 0, fmt.Errorf("deleting namespace %s: %w", ns.Name, err)
		}
		// No new pod can be made in a terminating namespace; deleting the pods at once
		// spares the namespace controller's wait for their graceful termination. Best
		// effort: on a busy apiserver the request may time out (seen at 1000 pods), and
		// the namespace controller deletes them anyway.
		zero := int64(0)
		_ = kube.CoreV1().Pods(ns.Name).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
	}
	left, objects := -1, -1
	moved := time.Now()
	err = wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := kube.CoreV1().Namespaces().List(ctx, selector)
		if err != nil {
			return false, nil
		}
		if len(list.Items) == 0 {
			return true, nil
		}
		// A count that failed (-1) moves nothing: only the namespaces' count is read.
		if n := objectsLeft(ctx, kube, list.Items); len(list.Items) != left || (n >= 0 && n != objects) {
			left, moved = len(list.Items), time.Now()
			if n >= 0 {
				objects = n
			}
		}
		switch {
		case time.Since(moved) <= stall:
			return false, nil
		case objects < 0:
			return false, fmt.Errorf("their pods, ReplicaSets, Deployments and Services not counted (the lists failed), none gone for %s", stall)
		default:
			return false, fmt.Errorf("%d pods, ReplicaSets, Deployments and Services left, none gone for %s", objects, stall)
		}
	})
	if err != nil {
		return 0, fmt.Errorf("waiting for %d namespace(s) of the harness to be deleted: %w", left, err)
	}
	return time.Since(start), nil
}

// objectsLeft counts the pods, ReplicaSets, Deployments and Services of the namespaces,
// from one item and the count of the rest per list; -1 when a list fails.
func objectsLeft(ctx context.Context, kube kubernetes.Interface, namespaces []corev1.Namespace) int {
	total := 0
	for _, ns := range namespaces {
		for _, list := range []func(context.Context) (int, error){
			counted(kube.CoreV1().Pods(ns.Name).List),
			counted(kube.AppsV1().ReplicaSets(ns.Name).List),
			counted(kube.AppsV1().Deployments(ns.Name).List),
			counted(kube.CoreV1().Services(ns.Name).List),
		} {
			n, err := list(ctx)
			if err != nil {
				return -1
			}
			total += n
		}
	}
	return total
}

// counted turns a typed client's List into a count of its objects that reads one item
// and the API server's count of the rest.
func counted[L runtime.Object](list func(context.Context, metav1.ListOptions) (L, error)) func(context.Context) (int, error) {
	return func(ctx context.Context) (int, error) {
		l, err := list(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			return 0, err
		}
		accessor, err := meta.ListAccessor(l)
		if err != nil {
			return 0, err
		}
		n := meta.LenList(l)
		if rest := accessor.GetRemainingItemCount(); rest != nil {
			n += int(*rest)
		}
		return n, nil
	}
}

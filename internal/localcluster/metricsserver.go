package localcluster

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// The real node's resource metrics API (metrics.k8s.io): metrics-server, built by `make
// node-tools` from sigs.k8s.io/metrics-server (hack/tools/metrics-server), run as a
// process beside the control plane, not as a pod:
//
//   - it scrapes the kubelet where the apiserver already reaches it, the node's
//     InternalIP 10.201.N.2:10250 through the veth, and checks the kubelet's serving
//     certificate against the cluster's CA;
//   - it serves on the host end of the veth, 10.201.N.1, an address of this machine
//     that an EndpointSlice may name (EndpointSlices refuse loopback addresses);
//   - the Service kube-system/metrics-server has no selector: its EndpointSlice, written
//     here, names that address, and the APIService v1beta1.metrics.k8s.io names the
//     Service. The apiserver, with --enable-aggregator-routing, dials the endpoint, not
//     the Service's ClusterIP (which this machine's namespace cannot reach, on purpose),
//     with its front-proxy client certificate (certs.go), which metrics-server trusts
//     from the apiserver's extension-apiserver-authentication ConfigMap.
//
// No route from the host to the pod or Service ranges is needed. Pods cannot reach it
// either: the node's FORWARD rule drops what they send to the veth (netns.go).
const (
	metricsServerName = "metrics-server"
	// metricsServerUser is the user of metrics-server's client certificate: it lists
	// pods and nodes, reads the kubelets' resource metrics and delegates authentication
	// and authorization of the requests the apiserver proxies to it (metricsServerRBAC).
	metricsServerUser      = "localcluster:metrics-server"
	metricsServerNamespace = metav1.NamespaceSystem
	// MetricsAPIService is the APIService of the resource metrics API.
	MetricsAPIService = "v1beta1.metrics.k8s.io"
	// metricsResolution is how often metrics-server scrapes the kubelet: its minimum, so
	// that a HorizontalPodAutoscaler sees new load within seconds (its default is 60s).
	metricsResolution = 10 * time.Second
	// metricsAPITimeout bounds the wait until the APIService is Available.
	metricsAPITimeout = 2 * time.Minute
)

var apiServicesGVR = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// metricsServerArgs returns metrics-server's arguments: served on addr:port with the
// serving certificate of dir, scraping the kubelets at their InternalIP every
// metricsResolution.
func metricsServerArgs(dir, kubeconfig, caCert, addr string, port int) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--bind-address=" + addr,
		"--secure-port=" + strconv.Itoa(port),
		"--tls-cert-file=" + filepath.Join(dir, "serving.crt"),
		"--tls-private-key-file=" + filepath.Join(dir, "serving.key"),
		"--kubelet-preferred-address-types=InternalIP",
		"--kubelet-certificate-authority=" + caCert,
		"--metric-resolution=" + metricsResolution.String(),
		// It must be below 90% of the resolution.
		"--kubelet-request-timeout=5s",
		noProfiling,
	}
}

// startMetricsServer starts metrics-server beside the control plane, serving on the host
// end of the node's veth, registers it as the APIService v1beta1.metrics.k8s.io and waits
// until the apiserver reports it Available.
func (c *Cluster) startMetricsServer(ctx context.Context, client kubernetes.Interface, n *realNode) error {
	t := time.Now()
	dir := filepath.Join(c.StateDir, metricsServerName)
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := c.writeMetricsServerFiles(dir, kubeconfig, n.net.hostIP); err != nil {
		return err
	}
	if err := createAll(ctx, client, metricsServerRBAC()...); err != nil {
		return fmt.Errorf("granting metrics-server its rights: %w", err)
	}
	probe, err := newProbeClient(c.certs.caPEM, nil, nil)
	if err != nil {
		return err
	}
	ports, err := c.startComponent(ctx, component{
		name:   metricsServerName,
		nPorts: 1,
		args: func(ports []int) []string {
			return metricsServerArgs(dir, kubeconfig, c.certs.CACert, n.net.hostIP, ports[0])
		},
		// /livez: serving. /readyz waits for two scrapes; the APIService's availability
		// below is what users need.
		ready: func(ctx context.Context, ports []int) error {
			return probeHTTP(ctx, probe, "https://"+net.JoinHostPort(n.net.hostIP, strconv.Itoa(ports[0]))+"/livez")
		},
		timeout: time.Minute,
		address: func(ports []int) string { return net.JoinHostPort(n.net.hostIP, strconv.Itoa(ports[0])) },
	})
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		return fmt.Errorf("making the admin client: %w", err)
	}
	if err := registerMetricsAPI(ctx, client, dyn, n.net.hostIP, int32(ports[0]), c.certs.caPEM); err != nil {
		return err
	}
	if err := waitAPIServiceAvailable(ctx, dyn, MetricsAPIService, metricsAPITimeout); err != nil {
		return c.withLog(metricsServerName, err)
	}
	c.printf("metrics API %s available (%.1fs)\n", MetricsAPIService, time.Since(t).Seconds())
	return nil
}

// writeMetricsServerFiles writes metrics-server's kubeconfig (its own user, to the
// apiserver on loopback) and its serving certificate, valid for addr and for the name
// the apiserver verifies, metrics-server.kube-system.svc.
func (c *Cluster) writeMetricsServerFiles(dir, kubeconfig, addr string) error {
	cfg, err := c.UserConfig(metricsServerUser)
	if err != nil {
		return err
	}
	ca, err := loadKeyPair(c.certs.CACert, c.certs.CAKey)
	if err != nil {
		return err
	}
	serving, err := newServingCert(ca, metricsServerName,
		[]string{metricsServerName + "." + metricsServerNamespace + ".svc"}, []net.IP{net.ParseIP(addr)}, time.Now())
	if err != nil {
		return fmt.Errorf("making metrics-server's serving certificate: %w", err)
	}
	key, err := serving.KeyPEM()
	if err != nil {
		return err
	}
	if err := writeFiles(map[string]string{
		filepath.Join(dir, "serving.crt"): string(serving.CertPEM()),
		filepath.Join(dir, "serving.key"): string(key),
	}); err != nil {
		return err
	}
	return writeKubeconfig(kubeconfig, cfg)
}

// metricsServerRBAC returns the creations that give metricsServerUser what upstream's
// manifests give metrics-server's ServiceAccount: read pods and nodes and the kubelets'
// metrics, check the tokens and rights of the requests the apiserver proxies to it, and
// read the apiserver's extension-apiserver-authentication ConfigMap.
func metricsServerRBAC() []func(context.Context, kubernetes.Interface) error {
	user := []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: metricsServerUser}}
	const role = "localcluster:metrics-server"
	return []func(context.Context, kubernetes.Interface) error{
		func(ctx context.Context, cs kubernetes.Interface) error {
			_, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
				ObjectMeta: metav1.ObjectMeta{Name: role},
				Rules: []rbacv1.PolicyRule{
					{APIGroups: []string{""}, Resources: []string{"nodes/metrics"}, Verbs: []string{"get"}},
					{APIGroups: []string{""}, Resources: []string{"pods", "nodes"}, Verbs: []string{"get", "list", "watch"}},
				},
			}, metav1.CreateOptions{})
			return err
		},
		func(ctx context.Context, cs kubernetes.Interface) error {
			_, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: role},
				RoleRef:    clusterRoleRef(role),
				Subjects:   user,
			}, metav1.CreateOptions{})
			return err
		},
		func(ctx context.Context, cs kubernetes.Interface) error {
			_, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: role + ":auth-delegator"},
				RoleRef:    clusterRoleRef("system:auth-delegator"),
				Subjects:   user,
			}, metav1.CreateOptions{})
			return err
		},
		func(ctx context.Context, cs kubernetes.Interface) error {
			_, err := cs.RbacV1().RoleBindings(metav1.NamespaceSystem).Create(ctx, &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: role + ":auth-reader"},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "extension-apiserver-authentication-reader"},
				Subjects:   user,
			}, metav1.CreateOptions{})
			return err
		},
	}
}

// registerMetricsAPI writes the Service kube-system/metrics-server without a selector,
// its EndpointSlice naming addr:port, and the APIService v1beta1.metrics.k8s.io that
// names the Service and trusts caPEM for metrics-server's serving certificate.
func registerMetricsAPI(ctx context.Context, client kubernetes.Interface, dyn dynamic.Interface, addr string, port int32, caPEM []byte) error {
	const portName = "https"
	service := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: metricsServerName, Namespace: metricsServerNamespace},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{
			Name: portName, Port: 443, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(port),
		}}},
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: metricsServerName, Namespace: metricsServerNamespace,
			Labels: map[string]string{discoveryv1.LabelServiceName: metricsServerName, discoveryv1.LabelManagedBy: "localcluster"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To(portName), Port: ptr.To(port), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	apiService := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1",
		"kind":       "APIService",
		"spec": map[string]any{
			"group":                "metrics.k8s.io",
			"version":              "v1beta1",
			"service":              map[string]any{"namespace": metricsServerNamespace, "name": metricsServerName, "port": int64(443)},
			"caBundle":             base64.StdEncoding.EncodeToString(caPEM),
			"groupPriorityMinimum": int64(100),
			"versionPriority":      int64(100),
		},
	}}
	apiService.SetName(MetricsAPIService)
	err := createAll(ctx, client,
		func(ctx context.Context, cs kubernetes.Interface) error {
			_, err := cs.CoreV1().Services(metricsServerNamespace).Create(ctx, service, metav1.CreateOptions{})
			return err
		},
		func(ctx context.Context, cs kubernetes.Interface) error {
			_, err := cs.DiscoveryV1().EndpointSlices(metricsServerNamespace).Create(ctx, slice, metav1.CreateOptions{})
			return err
		},
		func(ctx context.Context, _ kubernetes.Interface) error {
			_, err := dyn.Resource(apiServicesGVR).Create(ctx, apiService, metav1.CreateOptions{})
			return err
		},
	)
	if err != nil {
		return fmt.Errorf("registering the metrics API: %w", err)
	}
	return nil
}

// createAll runs each creation in order; an object that already exists is no error.
func createAll(ctx context.Context, client kubernetes.Interface, creates ...func(context.Context, kubernetes.Interface) error) error {
	for _, create := range creates {
		if err := create(ctx, client); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

// waitAPIServiceAvailable waits until the APIService name has the condition Available
// True, and returns its last condition otherwise.
func waitAPIServiceAvailable(ctx context.Context, dyn dynamic.Interface, name string, timeout time.Duration) error {
	last := "not found"
	err := wait.PollUntilContextTimeout(ctx, probeInterval, timeout, true, func(ctx context.Context) (bool, error) {
		obj, err := dyn.Resource(apiServicesGVR).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		conditions, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
		for _, c := range conditions {
			m, _ := c.(map[string]any)
			if m["type"] == "Available" {
				last = fmt.Sprintf("Available=%v %v: %v", m["status"], m["reason"], m["message"])
				return m["status"] == "True", nil
			}
		}
		return false, nil
	})
	if err != nil {
		return errors.Join(fmt.Errorf("waiting for the APIService %s to be Available (last: %s)", name, last), err)
	}
	return nil
}

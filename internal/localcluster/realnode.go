package localcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// Node kinds of Options.Node.
const (
	// NodeKwok is the default: kwok nodes whose pods are simulated.
	NodeKwok = "kwok"
	// NodeReal is one node that runs pods for real: containerd, runc and the CNI plugins
	// of the machine, the kubelet and kube-proxy, in network namespaces the cluster makes.
	NodeReal = "real"
)

// RealNodeName is the name of the real node.
const RealNodeName = "real-node-0"

// Images of the real node's registry, built by `make node-tools` (from the k8s.io/kubernetes
// module's test/images, our test/images and Debian's prometheus) into
// BinDir/node-images/<name>, an OCI layout each.
const (
	AgnhostImage = "agnhost:2.66.1"
	// ResourceConsumerImage is test/images/resource-consumer: POST /ConsumeCPU burns the
	// CPU it is asked for, for the HorizontalPodAutoscaler tests.
	ResourceConsumerImage = "resource-consumer:1.15.0"
	// DemoappImage is test/images/demoapp (make node-tools): an HTTP server whose error
	// rate and latency come from its environment, with its own request metrics, and the
	// in-cluster load generator (demoapp load), for the canary analysis's tests.
	DemoappImage = "demoapp:1"
	// PrometheusImage is Debian's Prometheus 2.42 (make prometheus) with the libraries
	// it loads, entrypoint /bin/prometheus.
	PrometheusImage = "prometheus:2.42.0"
	// pauseImage is agnhost too, run as `agnhost pause`: the pods' sandbox.
	pauseImage      = "pause:2.66.1"
	nodeImagesDir   = "node-images"
	registryName    = "registry"
	containerdName  = "containerd"
	kubeletName     = "kubelet"
	kubeProxyName   = "kube-proxy"
	nodeHolderName  = "node-mounts"
	apiserverInNode = ":6443" // the node's forwarder to the apiserver, on every address of the node
)

// nodeImages are the images of the real node's registry: each one's reference and the
// directory of its OCI layout in BinDir/node-images.
var nodeImages = []struct{ ref, dir string }{
	{AgnhostImage, "agnhost"}, {pauseImage, "pause"}, {ResourceConsumerImage, "resource-consumer"},
	{DemoappImage, "demoapp"}, {PrometheusImage, "prometheus"},
}

// nodeBinaries are the files of BinDir a real node needs besides the control plane's.
var nodeBinaries = []string{kubeletName, kubeProxyName, "imagebuild", metricsServerName,
	nodeImagesDir + "/agnhost", nodeImagesDir + "/pause", nodeImagesDir + "/resource-consumer",
	nodeImagesDir + "/demoapp", nodeImagesDir + "/prometheus"}

// nodeHostCommands are the programs of the machine a real node runs.
var nodeHostCommands = []string{"containerd", "containerd-shim-runc-v2", "runc", "iptables", "ip", "nsenter", "unshare", "mount", cniBinDir + "/bridge", cniBinDir + "/host-local", cniBinDir + "/portmap"}

// CanRunRealNode returns an error saying why this machine cannot run a real node at all
// (not root, or no cgroups), nil if it can once the packages and binaries that
// CheckRealNode names are installed (make node-packages node-tools).
func CanRunRealNode() error {
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root (a real node makes network namespaces, cgroups and mounts)")
	}
	if _, _, err := cgroupMounts(); err != nil {
		missing = append(missing, "cgroups: "+err.Error())
	}
	if _, err := os.Stat("/proc/self/ns/net"); err != nil {
		missing = append(missing, "network namespaces")
	}
	if len(missing) > 0 {
		return fmt.Errorf("a real node cannot run here: needs %s", strings.Join(missing, "; "))
	}
	return nil
}

// CheckRealNode returns an error naming what this machine lacks to run a real node: root,
// cgroups, the Debian packages (containerd, runc, containernetworking-plugins, iptables)
// or the binaries of `make node-tools` in binDir. nil means a real node can start.
func CheckRealNode(binDir string) error {
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root (a real node makes network namespaces, cgroups and mounts)")
	}
	if _, _, err := cgroupMounts(); err != nil {
		missing = append(missing, "cgroups: "+err.Error())
	}
	for _, cmd := range nodeHostCommands {
		if _, err := exec.LookPath(cmd); err != nil {
			missing = append(missing, cmd+" (apt-get install containerd runc containernetworking-plugins iptables)")
		}
	}
	for _, f := range nodeBinaries {
		if _, err := os.Stat(filepath.Join(binDir, f)); err != nil {
			missing = append(missing, filepath.Join(binDir, f)+" (make node-tools)")
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("a real node cannot run here: missing %s", strings.Join(missing, "; "))
	}
	return nil
}

// realNode is the running real node: its network, cgroups, forwarders and processes.
type realNode struct {
	dir        string
	net        *nodeNetwork
	cgroups    *cgroupTree
	forwarders []*forwarder
	// Registry is the HOST:PORT of the cluster's registry, the same from the host and from
	// the node.
	registry string
	holder   *process
}

// startRealNode starts the real node of c: its network and cgroups, the registry, the
// node's mount namespace, containerd, the kubelet and kube-proxy, and waits until the node
// is Ready and kube-proxy healthy; then metrics-server (metricsserver.go), until the
// metrics API is available. Processes are recorded in c.procs as they start, so
// that Exited and PIDs see them; on failure the caller stops the node (c.node is set as
// soon as there is something to stop).
func (c *Cluster) startRealNode(ctx context.Context, apiserverPort int) error {
	t := time.Now()
	n := &realNode{dir: filepath.Join(c.StateDir, nodeDir)}
	c.node = n
	if err := os.MkdirAll(n.dir, 0o755); err != nil {
		return fmt.Errorf("creating the node's directory: %w", err)
	}
	var err error
	if n.net, err = setupNodeNetwork(ctx); err != nil {
		return err
	}
	// Recorded first, for a cluster-down after this process died (cleanupLeftoverNode).
	if err := os.WriteFile(filepath.Join(n.dir, nodeNameFile), []byte(n.net.name+"\n"), 0o644); err != nil {
		return errors.Join(fmt.Errorf("recording the node's network: %w", err), n.net.teardown(ctx))
	}
	if n.cgroups, err = newCgroupTree("/"+n.net.name, c.opts.NodeCPUWeight); err != nil {
		return err
	}
	c.printf("node network %s (node %s, host %s) and cgroup %s made (%.1fs)\n", n.net.name, n.net.nodeIP, n.net.hostIP, n.cgroups.name, time.Since(t).Seconds())

	// The registry, on the host's loopback and, through a forwarder, on the node's.
	regPorts, err := c.startComponent(ctx, component{
		name:   registryName,
		path:   filepath.Join(c.opts.BinDir, "imagebuild"),
		nPorts: 1,
		args: func(ports []int) []string {
			args := []string{"registry", "--listen", hostPort(ports[0]), "--dir", filepath.Join(c.StateDir, "registry")}
			for _, image := range nodeImages {
				args = append(args, "--image", image.ref+"="+filepath.Join(c.opts.BinDir, nodeImagesDir, image.dir))
			}
			return args
		},
		ready: func(ctx context.Context, ports []int) error {
			return probeHTTP(ctx, http.DefaultClient, "http://"+hostPort(ports[0])+"/v2/pause/manifests/2.66.1")
		},
		timeout: 2 * time.Minute,
		address: func(ports []int) string { return hostPort(ports[0]) },
	})
	if err != nil {
		return err
	}
	n.registry = hostPort(regPorts[0])
	c.Registry = n.registry
	for _, f := range []struct{ listen, target string }{
		{n.registry, n.registry},
		{apiserverInNode, hostPort(apiserverPort)},
	} {
		fw, err := forward(n.net.nsPath(), f.listen, f.target)
		if err != nil {
			return err
		}
		n.forwarders = append(n.forwarders, fw)
	}

	// The node's mount namespace, held by a process that sleeps in it.
	if err := createMountPoints(n.dir); err != nil {
		return err
	}
	ready := filepath.Join(n.dir, "mounts-ready")
	holderArgs := []string{"unshare", "--mount", "--propagation", "private", "sh", "-c", nodeMountScript(n.dir, differingSysctls(), n.kubeletRoot(), c.opts.NodeFS, ready)}
	if n.holder, err = c.startNodeProcess(nodeHolderName, holderArgs); err != nil {
		return err
	}
	if err := waitFile(ctx, n.holder, ready, 30*time.Second); err != nil {
		return c.withLog(nodeHolderName, err)
	}

	// containerd.
	socket := filepath.Join(n.dir, "containerd", "containerd.sock")
	cniConfDir := filepath.Join(n.dir, "cni", "net.d")
	if err := os.MkdirAll(cniConfDir, 0o755); err != nil {
		return fmt.Errorf("creating the CNI configuration directory: %w", err)
	}
	files := map[string]string{
		filepath.Join(cniConfDir, "10-localcluster.conflist"): cniConfig(filepath.Join(n.dir, "cni", "ipam")),
		filepath.Join(n.dir, "containerd", "config.toml"):     containerdConfig(filepath.Join(n.dir, "containerd"), socket, n.registry+"/"+pauseImage, cniConfDir),
	}
	if err := writeFiles(files); err != nil {
		return err
	}
	t = time.Now()
	containerdReady := func(ctx context.Context) error {
		conn, err := net.Dial("unix", socket)
		if err != nil {
			return err
		}
		if err := conn.Close(); err != nil {
			return err
		}
		return criLoaded(ctx, socket)
	}
	p, err := c.startNodeDaemon(containerdName, c.inNode(containerdName, "--config", filepath.Join(n.dir, "containerd", "config.toml")), containerdReady)
	if err != nil {
		return err
	}
	if err := waitReady(ctx, p, 30*time.Second, containerdReady); err != nil {
		return c.withLog(containerdName, fmt.Errorf("waiting for containerd: %w", err))
	}
	c.printf("containerd ready (%.1fs, pid %d)\n", time.Since(t).Seconds(), p.pid())

	// The kubelet and kube-proxy, with credentials of their own.
	client, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return fmt.Errorf("making the admin client: %w", err)
	}
	if err := c.prepareNodeAPI(ctx, client, n); err != nil {
		return err
	}
	kubeletArgs, err := c.writeKubeletFiles(n, socket)
	if err != nil {
		return err
	}
	t = time.Now()
	healthz := &http.Client{Transport: &http.Transport{DialContext: n.dialInNode}, Timeout: 2 * time.Second}
	kubeletReady := func(ctx context.Context) error {
		return probeHTTP(ctx, healthz, "http://"+kubeletHealthz+"/healthz")
	}
	if _, err := c.startNodeDaemon(kubeletName, c.inNode(filepath.Join(c.opts.BinDir, kubeletName), kubeletArgs...), kubeletReady); err != nil {
		return err
	}
	proxyArgs, err := c.writeKubeProxyFiles(n)
	if err != nil {
		return err
	}
	proxyReady := func(ctx context.Context) error {
		return probeHTTP(ctx, healthz, "http://"+kubeProxyHealthz+"/healthz")
	}
	proxy, err := c.startNodeDaemon(kubeProxyName, c.inNode(filepath.Join(c.opts.BinDir, kubeProxyName), proxyArgs...), proxyReady)
	if err != nil {
		return err
	}
	c.Nodes = []string{RealNodeName}
	if err := WaitNodeReady(ctx, client, RealNodeName, 2*time.Minute); err != nil {
		return c.withLog(kubeletName, err)
	}
	if err := waitReady(ctx, proxy, time.Minute, proxyReady); err != nil {
		return c.withLog(kubeProxyName, fmt.Errorf("waiting for kube-proxy: %w", err))
	}
	c.printf("node %s Ready, kube-proxy healthy (%.1fs); registry %s\n", RealNodeName, time.Since(t).Seconds(), n.registry)
	return c.startMetricsServer(ctx, client, n)
}

// inNode returns the command line that runs bin with args inside the node's mount and
// network namespaces.
func (c *Cluster) inNode(bin string, args ...string) []string {
	n := c.node
	return append([]string{"nsenter", fmt.Sprintf("--mount=/proc/%d/ns/mnt", n.holder.pid()), "--net=" + n.net.nsPath(), "--", bin}, args...)
}

// nodeDaemon is how a daemon of the real node was started, to start it again (Restart).
type nodeDaemon struct {
	argv  []string
	ready func(context.Context) error
}

// criLoaded reports whether the containerd listening on socket loaded its CRI plugin,
// which the kubelet talks to: containerd answers on its socket even when the plugin
// failed, and the kubelet then fails with an error that does not say why.
func criLoaded(ctx context.Context, socket string) error {
	out, err := exec.CommandContext(ctx, "ctr", "--address", socket, "plugins", "ls").CombinedOutput()
	if err != nil {
		return fmt.Errorf("listing containerd's plugins (ctr plugins ls): %w: %s", err, bytes.TrimSpace(out))
	}
	switch status := criPluginStatus(string(out)); status {
	case "ok":
		return nil
	case "":
		return errors.New("containerd has not loaded its CRI plugin (io.containerd.grpc.v1 cri) yet")
	default:
		return fmt.Errorf("containerd's CRI plugin (io.containerd.grpc.v1 cri) is in status %q: it did not load, and the "+
			"kubelet cannot run pods; containerd's log says why (\"too many open files\" there: the host's "+
			"fs.inotify.max_user_instances is used up, by other real nodes for one, and "+
			"sysctl -w fs.inotify.max_user_instances=512 raises it)", status)
	}
}

// criPluginStatus returns the STATUS column of the CRI plugin's line in the output of
// ctr plugins ls ("ok", "error", "skip"), "" when it is not listed.
func criPluginStatus(out string) string {
	for line := range strings.Lines(out) {
		fields := strings.Fields(line)
		if len(fields) == 4 && fields[0] == "io.containerd.grpc.v1" && fields[1] == "cri" {
			return fields[3]
		}
	}
	return ""
}

// startNodeDaemon starts a daemon of the node (containerd, the kubelet, kube-proxy) with
// startNodeProcess and records its command line and readiness probe for Restart.
func (c *Cluster) startNodeDaemon(name string, argv []string, ready func(context.Context) error) (*process, error) {
	p, err := c.startNodeProcess(name, argv)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.daemons == nil {
		c.daemons = map[string]nodeDaemon{}
	}
	c.daemons[name] = nodeDaemon{argv: argv, ready: ready}
	c.mu.Unlock()
	return p, nil
}

// startNodeProcess starts argv as a process of the node: a shell puts itself into the
// node's daemons cgroup and then executes argv, so the process and all it starts (such as
// containerd's shims) live in the node's cgroup tree.
func (c *Cluster) startNodeProcess(name string, argv []string) (*process, error) {
	script := "for f in " + strings.Join(c.node.cgroups.procsFiles(), " ") + `; do echo $$ > "$f"; done; exec "$@"`
	args := append([]string{"-c", script, name}, argv...)
	p, err := startProcess(name, "/bin/sh", args, nil, filepath.Join(c.LogDir, name+".log"))
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.procs[name] = p
	c.mu.Unlock()
	return p, nil
}

// kubernetesService is the name of the Service, in namespace default, of the apiserver.
const kubernetesService = "kubernetes"

// prepareNodeAPI writes what the node needs in the API: the binding that gives the
// group system:nodes the role system:node (this cluster runs no Node authorizer), and the
// EndpointSlice of the Service default/kubernetes, the node's forwarder to the apiserver
// (the apiserver itself listens on loopback only, so it does not reconcile its endpoints;
// kube-proxy reads EndpointSlices, and the v1 Endpoints API is deprecated since 1.33).
func (c *Cluster) prepareNodeAPI(ctx context.Context, client kubernetes.Interface, n *realNode) error {
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "localcluster:nodes"},
		RoleRef:    clusterRoleRef("system:node"),
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "system:nodes"}},
	}
	if _, err := client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("binding system:node to the nodes: %w", err)
	}
	_, portStr, _ := net.SplitHostPort(apiserverInNode)
	port, _ := strconv.Atoi(portStr)
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: kubernetesService, Namespace: metav1.NamespaceDefault,
			Labels: map[string]string{discoveryv1.LabelServiceName: kubernetesService, discoveryv1.LabelManagedBy: "localcluster"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{n.net.nodeIP}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To(int32(port)), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	return wait.PollUntilContextTimeout(ctx, probeInterval, saTimeout, true, func(ctx context.Context) (bool, error) {
		_, err := client.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault).Create(ctx, slice, metav1.CreateOptions{})
		return err == nil || apierrors.IsAlreadyExists(err), nil
	})
}

// clusterRoleRef is a binding's reference to the ClusterRole name.
func clusterRoleRef(name string) rbacv1.RoleRef {
	return rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}
}

// writeKubeletFiles writes the kubelet's client kubeconfig (user system:node:<name>),
// its serving certificate for the node's address and its configuration, and returns its
// arguments.
func (c *Cluster) writeKubeletFiles(n *realNode, socket string) ([]string, error) {
	dir := filepath.Join(n.dir, "kubelet")
	ca, err := loadKeyPair(c.certs.CACert, c.certs.CAKey)
	if err != nil {
		return nil, err
	}
	serving, err := newServingCert(ca, RealNodeName, []string{RealNodeName}, []net.IP{net.ParseIP(n.net.nodeIP)}, time.Now())
	if err != nil {
		return nil, fmt.Errorf("making the kubelet's serving certificate: %w", err)
	}
	servingKey, err := serving.KeyPEM()
	if err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := c.writeNodeKubeconfig(kubeconfig, "system:node:"+RealNodeName, "system:nodes"); err != nil {
		return nil, err
	}
	cfg := nodeConfig{
		nodeIP:           n.net.nodeIP,
		servingCert:      filepath.Join(dir, "serving.crt"),
		servingKey:       filepath.Join(dir, "serving.key"),
		caCert:           c.certs.CACert,
		cgroupRoot:       n.cgroups.name,
		containerdSocket: socket,
		podLogsDir:       filepath.Join(n.dir, "pod-logs"),
		volumePluginDir:  filepath.Join(n.dir, "volume-plugins"),
		nodeFS:           c.opts.NodeFS,
	}
	config := filepath.Join(dir, "config.yaml")
	if err := writeFiles(map[string]string{
		cfg.servingCert: string(serving.CertPEM()),
		cfg.servingKey:  string(servingKey),
		config:          kubeletConfig(cfg),
	}); err != nil {
		return nil, err
	}
	return []string{
		"--config=" + config,
		"--kubeconfig=" + kubeconfig,
		"--root-dir=" + n.kubeletRoot(),
		"--cert-dir=" + filepath.Join(dir, "pki"),
		"--hostname-override=" + RealNodeName,
		"--node-ip=" + n.net.nodeIP,
	}, nil
}

// writeKubeProxyFiles writes kube-proxy's kubeconfig (user system:kube-proxy, which the
// default binding system:node-proxier serves) and configuration, and returns its
// arguments.
func (c *Cluster) writeKubeProxyFiles(n *realNode) ([]string, error) {
	dir := filepath.Join(n.dir, "kube-proxy")
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := c.writeNodeKubeconfig(kubeconfig, "system:kube-proxy"); err != nil {
		return nil, err
	}
	config := filepath.Join(dir, "config.yaml")
	if err := writeFiles(map[string]string{config: kubeProxyConfig(kubeconfig, RealNodeName)}); err != nil {
		return nil, err
	}
	return []string{"--config=" + config}, nil
}

// writeNodeKubeconfig writes a kubeconfig for user that reaches the apiserver through
// the node's forwarder (https://127.0.0.1:6443 inside the node's namespace).
func (c *Cluster) writeNodeKubeconfig(path, user string, groups ...string) error {
	cfg, err := c.UserConfig(user, groups...)
	if err != nil {
		return err
	}
	cfg.Host = "https://127.0.0.1" + apiserverInNode
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", filepath.Dir(path), err)
	}
	return writeKubeconfig(path, cfg)
}

// kubeletRoot is the kubelet's root directory (--root-dir), its nodefs.
func (n *realNode) kubeletRoot() string { return filepath.Join(n.dir, "kubelet", "root") }

// dialInNode opens a TCP connection from inside the node's network namespace.
func (n *realNode) dialInNode(ctx context.Context, network, addr string) (net.Conn, error) {
	var conn net.Conn
	err := inNetns(n.net.nsPath(), func() error {
		var err error
		conn, err = (&net.Dialer{Timeout: 2 * time.Second}).DialContext(ctx, network, addr)
		return err
	})
	return conn, err
}

// stopRealNode stops the node: metrics-server, kube-proxy and the kubelet (SIGTERM, then
// SIGKILL), then every other process of the node's cgroup tree (containerd, its shims,
// the pods' processes, the mount namespace's holder) with SIGKILL, which ends the node's
// mount namespace and its mounts with them. Then the forwarders, the network namespace (with
// its veth, bridge and iptables rules), the host routes and the cgroups go. The registry
// is a component: Stop stops it with the others.
func (c *Cluster) stopRealNode() error {
	n := c.node
	if n == nil {
		return nil
	}
	errs := c.stopProcesses(metricsServerName, kubeProxyName, kubeletName)
	if n.cgroups != nil {
		if err := n.cgroups.kill(30 * time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, c.stopProcesses(containerdName, nodeHolderName)...)
	for _, f := range n.forwarders {
		f.close()
	}
	if n.net != nil {
		if err := n.net.teardown(context.Background()); err != nil {
			errs = append(errs, err)
		}
	}
	if n.cgroups != nil {
		if err := n.cgroups.remove(); err != nil {
			errs = append(errs, err)
		}
	}
	removeMountPoints(n.dir)
	if len(errs) > 0 {
		return fmt.Errorf("stopping the real node: %w", errors.Join(errs...))
	}
	return nil
}

// nodeDir is the real node's directory in the cluster's state directory, and
// nodeNameFile the file in it that names the node's network namespace and cgroup.
const (
	nodeDir      = "node"
	nodeNameFile = "name"
)

// cleanupLeftoverNode removes what a real node left behind when the process that ran it
// died without stopping it: every process of its cgroup tree, its network namespace, host
// routes and cgroups. dir is the node's directory; nothing is done if it names no node.
func cleanupLeftoverNode(out io.Writer, dir string) error {
	data, err := os.ReadFile(filepath.Join(dir, nodeNameFile))
	if err != nil {
		return nil
	}
	name := strings.TrimSpace(string(data))
	if !strings.HasPrefix(name, nodeNetnsPrefix) {
		return fmt.Errorf("%s names no node network (%q)", filepath.Join(dir, nodeNameFile), name)
	}
	fmt.Fprintf(out, "removing the left-over real node %s\n", name)
	var errs []error
	if mounts, _, err := cgroupMounts(); err == nil {
		t := &cgroupTree{name: "/" + name}
		for _, m := range mounts {
			d := filepath.Join(m.dir, name)
			if _, err := os.Stat(d); err == nil {
				t.dirs = append(t.dirs, d)
				if m.memory || t.procsDir == "" {
					t.procsDir = d
				}
			}
		}
		errs = append(errs, t.kill(30*time.Second), t.remove())
	}
	network := &nodeNetwork{name: name, routesAdded: []string{podsRange, serviceClusterIPRange}}
	errs = append(errs, network.teardown(context.Background()))
	removeMountPoints(dir)
	return errors.Join(errs...)
}

// createdMountPoints is the file of the node's directory that lists the hiddenHostDirs
// the node created.
const createdMountPoints = "created-mount-points"

// createMountPoints creates the hiddenHostDirs that do not exist, and records them in
// the node's directory dir first.
func createMountPoints(dir string) error {
	var created []string
	for _, d := range hiddenHostDirs {
		if _, err := os.Stat(d); errors.Is(err, os.ErrNotExist) {
			created = append(created, d)
		}
	}
	if len(created) == 0 {
		return nil
	}
	if err := os.WriteFile(filepath.Join(dir, createdMountPoints), []byte(strings.Join(created, "\n")+"\n"), 0o644); err != nil {
		return fmt.Errorf("recording the node's mount points: %w", err)
	}
	for _, d := range created {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("creating the mount point %s: %w", d, err)
		}
	}
	return nil
}

// removeMountPoints removes the mount points createMountPoints made, unless another
// real node runs (a directory removed here would be unmounted in its mount namespace).
func removeMountPoints(dir string) {
	data, err := os.ReadFile(filepath.Join(dir, createdMountPoints))
	if err != nil || otherNodeNetworks("") {
		return
	}
	for _, d := range strings.Fields(string(data)) {
		if slices.Contains(hiddenHostDirs, d) {
			_ = os.Remove(d)
		}
	}
}

// stopProcesses stops the processes of names that this cluster started, in order.
func (c *Cluster) stopProcesses(names ...string) []error {
	var errs []error
	for _, name := range names {
		c.mu.Lock()
		p := c.procs[name]
		c.mu.Unlock()
		if p == nil {
			continue
		}
		if err := p.stop(stopGrace); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// differingSysctls returns the fakeSysctls whose value on this machine differs from the
// kubelet's.
func differingSysctls() map[string]string {
	differing := map[string]string{}
	for key, want := range fakeSysctls {
		have, err := os.ReadFile(filepath.Join("/proc/sys", key))
		if err != nil || strings.TrimSpace(string(have)) != want {
			differing[key] = want
		}
	}
	return differing
}

// waitFile waits until path exists, failing early if p exits.
func waitFile(ctx context.Context, p *process, path string, timeout time.Duration) error {
	return waitReady(ctx, p, timeout, func(context.Context) error {
		_, err := os.Stat(path)
		return err
	})
}

// writeFiles writes each file (path -> content), creating its directory.
func writeFiles(files map[string]string) error {
	for path, content := range files {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("creating %s: %w", filepath.Dir(path), err)
		}
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
	}
	return nil
}

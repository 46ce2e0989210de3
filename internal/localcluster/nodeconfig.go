package localcluster

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// The configuration files of the real node's daemons. Every path they use lies under the
// node's state directory, except the two the kubelet and libcni hard-code
// (/var/log/containers, /var/lib/cni), which the node's mount namespace covers with
// directories of the state directory (see nodeMountScript).

// containerdConfig is containerd's config.toml (version 2, containerd 1.6).
//   - restrict_oom_score_adj: runc cannot raise a process's oom_score_adj on this kind of
//     VM (no CAP_SYS_RESOURCE in the bounding set); without it every sandbox fails with
//     "can't get final child's PID from pipe: EOF".
//   - netns_mounts_under_state_dir: the pods' network namespaces are bind-mounted under
//     the state directory instead of the host's /run/netns.
//   - the sandbox (pause) image comes from the cluster's registry, as every image does.
func containerdConfig(dir, socket, sandboxImage, cniConfDir string) string {
	return fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = %[3]q

[plugins."io.containerd.internal.v1.opt"]
  path = %[4]q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[5]q
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  disable_apparmor = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[6]q
    conf_dir = %[7]q
    max_conf_num = 1
`, dir+"/root", dir+"/state", socket, dir+"/opt", sandboxImage, cniBinDir, cniConfDir)
}

// cniBinDir is where Debian's containernetworking-plugins installs the plugins.
const cniBinDir = "/usr/lib/cni"

// cniConfig is the pods' network: a bridge with host-local addresses from PodCIDR, the
// bridge as their gateway, no masquerade (the node has no way out anyway).
func cniConfig(ipamDir string) string {
	return fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "localcluster",
  "plugins": [
    {
      "type": "bridge",
      "bridge": %q,
      "isGateway": true,
      "isDefaultGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": %q}]],
        "dataDir": %q
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, bridgeName, PodCIDR, ipamDir)
}

// kubeletConfig is the kubelet's KubeletConfiguration.
//   - failCgroupV1: false: this kind of machine has cgroup v1 controllers (hybrid mounts);
//     cgroupfs driver, under the node's own cgroupRoot.
//   - protectKernelDefaults: the kubelet would otherwise set vm.overcommit_memory,
//     kernel.panic and kernel.panic_on_oops for the whole machine; with it, it only
//     checks them, and the node's mount namespace shows it the values it wants (see
//     nodeMountScript), so the host's settings are left as they are.
//   - resolvConf "": pods get no nameserver (there is no cluster DNS and no way out).
//   - eviction thresholds low and image GC off: a test machine's disk is no reason to
//     evict the pods under test.
func kubeletConfig(c nodeConfig) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %[1]s
port: %[2]d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: %[3]s
tlsPrivateKeyFile: %[4]s
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: %[5]s
authorization:
  mode: Webhook
cgroupDriver: cgroupfs
cgroupRoot: %[6]s
failCgroupV1: false
containerRuntimeEndpoint: unix://%[7]s
imageServiceEndpoint: unix://%[7]s
protectKernelDefaults: true
resolvConf: ""
clusterDomain: cluster.local
podLogsDir: %[8]s
volumePluginDir: %[9]s
failSwapOn: false
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 50Mi
  nodefs.available: %[10]s
  nodefs.inodesFree: 1%%
  imagefs.available: 1%%
  imagefs.inodesFree: 1%%
evictionPressureTransitionPeriod: %[11]s
maxPods: 110
registerNode: true
`, c.nodeIP, kubeletPort, c.servingCert, c.servingKey, c.caCert, c.cgroupRoot, c.containerdSocket, c.podLogsDir, c.volumePluginDir,
		c.nodefsAvailable(), c.pressurePeriod())
}

// With Options.NodeFS the kubelet evicts pods when less than nodeFSEvictAt of its
// tmpfs is free, and ends the pressure nodePressurePeriod after it is over (the
// kubelet's default: 5 minutes).
const (
	nodeFSEvictAt      = "25%"
	nodePressurePeriod = "30s"
)

func (c nodeConfig) nodefsAvailable() string {
	if c.nodeFS > 0 {
		return nodeFSEvictAt
	}
	return "1%"
}

func (c nodeConfig) pressurePeriod() string {
	if c.nodeFS > 0 {
		return nodePressurePeriod
	}
	return "5m"
}

// kubeletPort is the kubelet's API port, on the node's address.
const kubeletPort = 10250

// kubeletHealthz is the kubelet's health address inside the node's namespace
// (healthzBindAddress and healthzPort of kubeletConfig).
const kubeletHealthz = "127.0.0.1:10248"

// kubeProxyHealthz is kube-proxy's health address inside the node's namespace.
const kubeProxyHealthz = "127.0.0.1:10256"

// kubeProxyConfig is kube-proxy's KubeProxyConfiguration: iptables mode in the node's
// namespace. conntrack's limits are left as they are (maxPerCore 0 and no timeouts):
// nf_conntrack_max is a setting of the whole machine.
func kubeProxyConfig(kubeconfig, nodeName string) string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %s
hostnameOverride: %s
mode: iptables
clusterCIDR: %s
healthzBindAddress: %s
metricsBindAddress: 127.0.0.1:10249
iptables:
  localhostNodePorts: false
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, kubeconfig, nodeName, podsRange, kubeProxyHealthz)
}

// nodeConfig holds what the kubelet's configuration refers to.
type nodeConfig struct {
	nodeIP           string
	servingCert      string
	servingKey       string
	caCert           string
	cgroupRoot       string
	containerdSocket string
	podLogsDir       string
	volumePluginDir  string
	// nodeFS is Options.NodeFS.
	nodeFS int64
}

// fakeSysctls are the machine-wide settings the kubelet wants (and would set), with its
// values (pkg/kubelet/cm: setupKernelTunables).
var fakeSysctls = map[string]string{
	"vm/overcommit_memory":      "1",
	"vm/panic_on_oom":           "0",
	"kernel/panic":              "10",
	"kernel/panic_on_oops":      "1",
	"kernel/keys/root_maxkeys":  "1000000",
	"kernel/keys/root_maxbytes": "25000000",
}

// hiddenHostDirs are host directories the kubelet or libcni write to whatever their
// configuration says; the node's mount namespace covers each with one of its own. A
// missing one is created as the mount point, and removed again (if still empty) when
// the node stops (createMountPoints).
var hiddenHostDirs = []string{"/var/log/containers", "/var/lib/cni"}

// nodeMountScript is the shell script of the process that holds the node's mount
// namespace (run under `unshare --mount --propagation private`): it makes the namespace's
// mounts shared (containerd and the kubelet need mount propagation between them), with
// nodeFS (bytes, 0: none) mounts a tmpfs of that size on the kubelet's root directory
// kubeletRoot, covers hiddenHostDirs with directories of dir, shows the kubelet its
// wanted value of each fakeSysctls setting that differs on this machine (files of dir
// bind-mounted over /proc/sys, in this namespace only), writes ready, and sleeps until
// it is killed.
func nodeMountScript(dir string, differing map[string]string, kubeletRoot string, nodeFS int64, ready string) string {
	var b strings.Builder
	b.WriteString("set -e\nmount --make-rshared /\n")
	if nodeFS > 0 {
		fmt.Fprintf(&b, "mkdir -p %s\nmount -t tmpfs -o size=%d tmpfs %s\n", kubeletRoot, nodeFS, kubeletRoot)
	}
	for _, host := range hiddenHostDirs {
		own := dir + "/host" + strings.ReplaceAll(host, "/", "-")
		fmt.Fprintf(&b, "mkdir -p %s\nmount --bind %s %s\n", own, own, host)
	}
	for _, key := range slices.Sorted(maps.Keys(differing)) {
		file := dir + "/sysctl-" + strings.ReplaceAll(key, "/", "-")
		fmt.Fprintf(&b, "printf '%%s\\n' %s > %s\nmount --bind %s /proc/sys/%s\n", differing[key], file, file, key)
	}
	fmt.Fprintf(&b, "touch %s\nexec sleep infinity\n", ready)
	return b.String()
}

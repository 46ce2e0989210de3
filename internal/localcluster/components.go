package localcluster

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Component names. Each is also the name of its binary in BinDir and of its log file.
const (
	etcdName              = "etcd"
	apiserverName         = "kube-apiserver"
	controllerManagerName = "kube-controller-manager"
	schedulerName         = "kube-scheduler"
	kwokName              = "kwok"
)

// componentNames lists the components in start order; Stop goes through it backwards.
// The real node's processes (realnode.go, metricsserver.go) come after them; stopRealNode
// stops all but the registry, which the generic stop does.
var componentNames = []string{etcdName, apiserverName, controllerManagerName, schedulerName, kwokName,
	registryName, nodeHolderName, containerdName, kubeletName, kubeProxyName, metricsServerName}

// requiredBinaries are the files BinDir must hold.
var requiredBinaries = []string{etcdName, apiserverName, controllerManagerName, schedulerName, kwokName}

// controlPlaneBinaries are the files Options.KubeBinDir must hold: the components of one
// Kubernetes release that it replaces.
var controlPlaneBinaries = []string{apiserverName, controllerManagerName, schedulerName}

// Cluster-wide settings passed to the components.
const (
	serviceClusterIPRange = "10.96.0.0/16"
	serviceAccountIssuer  = "https://kubernetes.default.svc.cluster.local"
	// controllers disables the token controller (tokens are projected, and the admin
	// kubeconfig is used for everything) and node lifecycle (kwok nodes would otherwise
	// be tainted and marked NotReady when their heartbeats look stale).
	controllers = "*,-serviceaccount-token,-node-lifecycle-controller"
	// controllersWithNodeLifecycle keeps node lifecycle, for a real node whose pressure
	// a test makes (Options.NodeFS): it taints the node by its conditions
	// (node.kubernetes.io/disk-pressure), so the scheduler stops placing pods there
	// instead of the kubelet rejecting each as it comes, as on a real cluster.
	controllersWithNodeLifecycle = "*,-serviceaccount-token"

	// KwokNodeAnnotation marks the nodes kwok manages; its value is "fake".
	KwokNodeAnnotation = "kwok.x-k8s.io/node"
	kwokNodeSelector   = KwokNodeAnnotation + "=fake"

	// clientQPS and clientBurst are the API client limits of controller-manager and
	// scheduler, high so that they are never the bottleneck of a test or benchmark.
	clientQPS   = "1000"
	clientBurst = "2000"
	// concurrentSyncs is the number of deployment and replicaset workers.
	concurrentSyncs = "20"
	// noProfiling turns off a component's /debug/pprof handlers.
	noProfiling = "--profiling=false"
)

// etcdArgs returns etcd's arguments: a single member on loopback with its data in dataDir.
func etcdArgs(dataDir string, clientPort, peerPort int) []string {
	clientURL := "http://" + hostPort(clientPort)
	peerURL := "http://" + hostPort(peerPort)
	return []string{
		"--name=localcluster",
		"--data-dir=" + dataDir,
		"--listen-client-urls=" + clientURL,
		"--advertise-client-urls=" + clientURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=localcluster=" + peerURL,
		"--initial-cluster-state=new",
		"--unsafe-no-fsync=true",
		"--log-level=warn",
	}
}

// apiserverArgs returns kube-apiserver's arguments.
func apiserverArgs(certs *certFiles, certDir, etcdURL string, securePort int) []string {
	return []string{
		"--advertise-address=" + loopback,
		"--bind-address=" + loopback,
		fmt.Sprintf("--secure-port=%d", securePort),
		"--etcd-servers=" + etcdURL,
		"--cert-dir=" + certDir,
		"--tls-cert-file=" + certs.ServingCert,
		"--tls-private-key-file=" + certs.ServingKey,
		"--client-ca-file=" + certs.CACert,
		"--authorization-mode=RBAC",
		"--service-cluster-ip-range=" + serviceClusterIPRange,
		"--service-account-issuer=" + serviceAccountIssuer,
		"--service-account-key-file=" + certs.ServiceAccountPublicKey,
		"--service-account-signing-key-file=" + certs.ServiceAccountPrivateKey,
		"--allow-privileged=true",
		// The endpoints of the "kubernetes" Service cannot be a loopback address, so the
		// reconciler would log an error every few seconds.
		"--endpoint-reconciler-type=none",
		// The admission plugin taints every new Node not-ready; the node lifecycle
		// controller, which would lift the taint once kwok marks the node Ready, is off.
		"--disable-admission-plugins=TaintNodesByCondition",
		// Off by default: with it, an owner reference with blockOwnerDeletion=true needs
		// permission to update the owner's finalizers, as on most production clusters,
		// so the RBAC tests prove the */finalizers grants instead of assuming them.
		"--enable-admission-plugins=OwnerReferencesPermissionEnforcement",
		noProfiling,
		// The apiserver reaches a real node's kubelet (logs, exec, port-forward) at its
		// InternalIP, with the admin certificate, and checks the kubelet's serving
		// certificate against the cluster's CA.
		"--kubelet-preferred-address-types=InternalIP",
		"--kubelet-client-certificate=" + certs.AdminCert,
		"--kubelet-client-key=" + certs.AdminKey,
		"--kubelet-certificate-authority=" + certs.CACert,
		// The aggregation layer (metrics-server on a real node, metricsserver.go): the
		// apiserver proxies to an extension API server with the front-proxy client
		// certificate and names the user in these headers; it dials the endpoint of the
		// APIService's Service, not its ClusterIP, which is unreachable from this
		// machine's network namespace on purpose (netns.go).
		"--requestheader-client-ca-file=" + certs.FrontProxyCACert,
		"--requestheader-allowed-names=" + frontProxyClient,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + certs.FrontProxyClientCert,
		"--proxy-client-key-file=" + certs.FrontProxyClientKey,
		"--enable-aggregator-routing=true",
		// Namespace deletion deletes each kind of object through a delete-collection,
		// which the apiserver runs with one worker by default: about 100 ms an object on a
		// busy machine, minutes for a namespace holding a thousand Apps.
		"--delete-collection-workers=" + concurrentSyncs,
	}
}

// controllerList returns kube-controller-manager's --controllers: controllers, or
// controllersWithNodeLifecycle with nodeLifecycle, without its HorizontalPodAutoscaler
// controller when noAutoscaler (Options.NoAutoscalerController).
func controllerList(nodeLifecycle, noAutoscaler bool) string {
	list := controllers
	if nodeLifecycle {
		list = controllersWithNodeLifecycle
	}
	if noAutoscaler {
		list += ",-horizontal-pod-autoscaler-controller"
	}
	return list
}

// controllerManagerArgs returns kube-controller-manager's arguments. It serves its health
// port with the apiserver's serving certificate, which is valid for 127.0.0.1. With
// controllers (controllerList) as its --controllers.
func controllerManagerArgs(certs *certFiles, kubeconfig string, securePort int, controllers string) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--bind-address=" + loopback,
		fmt.Sprintf("--secure-port=%d", securePort),
		"--tls-cert-file=" + certs.ServingCert,
		"--tls-private-key-file=" + certs.ServingKey,
		"--controllers=" + controllers,
		"--leader-elect=false",
		"--use-service-account-credentials=false",
		"--service-account-private-key-file=" + certs.ServiceAccountPrivateKey,
		"--root-ca-file=" + certs.CACert,
		"--cluster-signing-cert-file=" + certs.CACert,
		"--cluster-signing-key-file=" + certs.CAKey,
		"--service-cluster-ip-range=" + serviceClusterIPRange,
		"--kube-api-qps=" + clientQPS,
		"--kube-api-burst=" + clientBurst,
		"--concurrent-deployment-syncs=" + concurrentSyncs,
		"--concurrent-replicaset-syncs=" + concurrentSyncs,
		// HorizontalPodAutoscalers act within a second rather than the default 15s.
		"--horizontal-pod-autoscaler-sync-period=1s",
		noProfiling,
	}
}

// schedulerArgs returns kube-scheduler's arguments.
func schedulerArgs(certs *certFiles, kubeconfig string, securePort int) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--bind-address=" + loopback,
		fmt.Sprintf("--secure-port=%d", securePort),
		"--tls-cert-file=" + certs.ServingCert,
		"--tls-private-key-file=" + certs.ServingKey,
		"--leader-elect=false",
		"--kube-api-qps=" + clientQPS,
		"--kube-api-burst=" + clientBurst,
		noProfiling,
	}
}

// kwokArgs returns kwok's arguments: it manages only nodes annotated
// kwok.x-k8s.io/node=fake and serves its health endpoints on serverPort.
func kwokArgs(kubeconfig string, stageFiles []string, serverPort int) []string {
	args := make([]string, 0, 4+len(stageFiles))
	args = append(args,
		"--kubeconfig="+kubeconfig,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector="+kwokNodeSelector,
		"--server-address="+hostPort(serverPort),
	)
	for _, f := range stageFiles {
		args = append(args, "--config="+f)
	}
	return args
}

// kwokEnv returns kwok's extra environment: its work directory is moved into the state
// directory so that a ~/.kwok/kwok.yaml of the user is not loaded.
func kwokEnv(workDir string) []string {
	return []string{"KWOK_WORKDIR=" + workDir}
}

// stageKind matches a YAML document of kind Stage.
var stageKind = regexp.MustCompile(`(?m)^kind:\s*Stage\s*$`)

// kwokStageFiles returns the YAML files in dir that hold kwok Stage objects, sorted.
// Other files (such as the kustomization.yaml copied along with the stages) are skipped.
func kwokStageFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading the kwok stages: %w (run `make tools`)", err)
	}
	var files []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || (!strings.HasSuffix(name, ".yaml") && !strings.HasSuffix(name, ".yml")) {
			continue
		}
		path := filepath.Join(dir, name)
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("reading kwok stage file: %w", err)
		}
		if stageKind.Match(bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n"))) {
			files = append(files, path)
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no kwok Stage files in %s (run `make tools`)", dir)
	}
	sort.Strings(files)
	return files, nil
}

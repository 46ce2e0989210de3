// Package localcluster starts and stops a real Kubernetes control plane on the loopback
// interface: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok (which
// simulates nodes and pods), all from binaries built by `make tools`.
//
// Every component listens on 127.0.0.1 on ports chosen at run time, certificates are made
// at start, and all state (certificates, etcd data, logs, the admin kubeconfig) lives in one
// directory that Stop removes.
//
// It holds:
//   - Start, Options and Cluster (cluster.go): the start sequence, each component started
//     on fresh ports and probed until ready, and Stop in reverse order; the integration
//     tests' framework and the localcluster command both use them. components.go holds
//     the components' flags, certs.go the certificates, kubeconfig.go the admin
//     kubeconfig, health.go the readiness probes, ports.go the free ports, node.go the kwok
//     nodes, crds.go the installation of CustomResourceDefinitions, faults.go the faults
//     of the reliability tests (Pause, Resume, Restart, CompactEtcd).
//   - Capacity and attribution, for benchmarks (the harness of test/bench uses them):
//     Options.PodCapacity makes one kwok node per KwokNodePods (1000) pods, so N Apps of
//     R replicas never leave pods Pending; Options.AuditUsers turns on the apiserver's
//     audit log (audit.go: Metadata level, writes of those users only, in
//     Cluster.AuditLogPath; Options.AuditLog logs every user's writes instead) and
//     Cluster.UserConfig (users.go) mints a client certificate for a user of its own, so
//     that each client's writes are counted apart on the apiserver side. The controller-manager and scheduler run with client QPS 1000,
//     burst 2000 and 20 deployment and replicaset workers (components.go); kwok's
//     client has no rate limit of its own.
//   - BinDirFromEnv, CheckBinDir and RepoRoot (bindir.go): where the binaries are.
//   - Up, Serve and Down (daemon.go): the control plane of `make cluster-up` run in the
//     background by a detached `localcluster serve` process, followed until ready, and
//     stopped again by its pid. state.go lays out their state directory (pid file,
//     component pids, ready file, serve log, kubeconfig copy, the cluster's own state).
//   - The real node (Options.Node NodeReal): realnode.go, netns.go, cgroups.go and
//     nodeconfig.go; metricsserver.go runs metrics-server beside the control plane and
//     registers the metrics API (metrics.k8s.io) on the host end of the node's veth.
//   - Process handling: process.go starts a component as a child process with its own
//     log and holds terminate, the one way a process is stopped (SIGTERM, a grace period,
//     SIGKILL), used for the components and for the serve process alike; pid.go finds
//     processes by pid and checks in /proc that a pid still names our process before
//     signalling it. Processes are only ever signalled by the pid recorded when this
//     package started them, never looked up by name.
package localcluster

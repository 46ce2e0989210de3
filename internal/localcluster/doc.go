// Package localcluster starts and stops a real Kubernetes control plane on the loopback
// interface: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok (which
// simulates nodes and pods), all from binaries built by `make tools`.
//
// Every component listens on 127.0.0.1 on ports chosen at run time, certificates are made
// at start, and all state (certificates, etcd data, logs, the admin kubeconfig) lives in one
// directory that Stop removes.
package localcluster

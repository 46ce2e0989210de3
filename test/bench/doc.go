// Package bench is the App controller's benchmark harness, run by `make bench` (command
// test/bench/cmd/appbench). It starts its own local control plane (internal/localcluster:
// room for N x replicas pods, an audit log, a client certificate per measured client)
// and, in each round, on a cluster emptied before every phase:
//
//   - the floor: raw client-go loops without client-side limit at concurrency 5, 10, 20
//     and 40 (floor.go), each creating per App the App, its Deployment and its Service
//     (plain POSTs of the controller's own DesiredDeployment and DesiredService) and
//     writing each App's status once after its Deployment is available; the fastest is
//     the floor;
//   - the product (product.go): bin/app-controller as a separate process with its
//     default flags (plus --kubeconfig of its own user and --metrics-bind-address, to
//     read its work queue), idle on the empty cluster first (RSS at N=0), then N Apps
//     created by 5 parallel clients until every App is Ready at its generation
//     (converge); then idle (two resync periods and 10 s), restart (kill -9 and start
//     again: until its App queue has taken every App and is drained), churn (a new
//     image for 10% of the Apps) and canary (canary.go: N other Apps with a canary
//     strategy created, each rolled one step, then promoted, each phase measured);
//   - with "peer" among the scenarios (not by default; peer.go): the App controller and
//     Argo Rollouts' controller (built from hack/tools/argo-rollouts), one at a time,
//     each with its defaults then its flags for scale, through the same three phases on
//     N Apps and N Rollouts of the same canary strategy.
//
// Writes are counted on the apiserver side, from its audit log, per user (audit.go).
// Memory and CPU come from /proc (procstat.go), the work queue from the controller's
// /metrics (metrics.go). A round in which an App does not converge prints each stuck
// App's status, children, ReplicaSets, Pods and the controller's log lines naming it
// (diagnose.go). The result is a table and .local/bench-result.json (result.go);
// docs/performance.md explains each figure.
package bench

// Package soak is the App controller's soak test, run by `make soak` (command
// test/soak/cmd/appsoak) and, for two minutes, by the integration test
// test/integration/soak. It runs the controller for a long time under a steady churn of
// Apps and through faults, and checks all along and at the end that nothing leaks,
// nothing is lost and nothing is written twice (docs/soak.md).
//
// A run:
//
//   - the controller in two shards (--app-selector shard=a and shard=b), two instances
//     each with leader election, so that killing a leader is a failover: on a real node
//     (NodeReal) as the chart runs it, the image pushed to the cluster's registry and two
//     Helm releases installed with 2 replicas each (fleet_chart.go); on kwok (NodeKwok) as
//     processes with the chart's flags (fleet_process.go);
//   - the driver (driver.go, mix.go): Apps created and deleted, images and env changed,
//     referenced ConfigMaps changed, routes added, moved and removed, Apps moved between
//     the shards, rollbacks (`kubectl app rollback`), pods that fail and recover (an
//     image that does not exist, then fixed; on a real node a container that exits), the
//     same mix every minute; canaries (canary.go) given healthy versions walked and
//     promoted through the plugin's promote, pause and resume, versions that crash and
//     abort, aborts, fast rollbacks, ConfigMap changes during a rollout; autoscaled Apps
//     whose autoscaling is turned off and on, but the steady one's (steadyAutoscaled),
//     and on a real node a CPU load that rises and falls in their pods (load.go);
//     on a real node, canaries with a background analysis against the fleet's
//     Prometheus (fleet_prometheus.go) given versions that pass it and that fail it
//     (analysis.go);
//   - faults at intervals (faults.go): the leader killed, the API server restarted, etcd
//     paused, every connection to the API server cut, the leader killed while a canary
//     is at a step, at a pause, promoting or aborting (rolloutkill.go), and on a real
//     node the kubelet and containerd restarted, and the Gateway's Traefik
//     (fleet_gateway.go: on a real node half of the canaries split their traffic by an
//     HTTPRoute through it);
//   - the controller's /metrics read every 10 s (sampler.go): resident memory, heap,
//     goroutines, informer caches, the App queue; and with them, from the API server,
//     the objects each informer cache should hold (storecount.go);
//   - the invariants (check.go, writes.go, slope.go): every App converges within a bound
//     after each change and each fault; no App, child or revision lost or duplicated;
//     no write to an object no App controls (the API server's audit log); writes per
//     change as the exact-write tests pin them and not growing; every status.rollout
//     written checked for a step jumped and a weight lowered, an abort that rewrote the
//     stable pods' template, the controller writing a count an autoscaler took
//     (rollouts.go, from the audit log's bodies), the autoscalers scaling an App up and
//     down with its load (load.go); canaries at rest with the children of
//     an App without a strategy; no upward trend of memory, goroutines, queue or the
//     caches' excess over the API over the last two thirds of the run; no panic and no
//     restart of the controller but the injected ones.
//
// The result is a JSON report (report.go) that hack/tools/soakplot draws.
package soak

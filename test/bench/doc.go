// Package bench holds the end-to-end benchmarks of app-controller against a real local
// control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok),
// started once per test binary by framework.Main, and only when a benchmark of this
// package is selected with -bench: `go test` without -bench (make unit) starts nothing.
//
// Every figure is reported next to a floor measured in the same run, and as a ratio to
// it, never as an absolute threshold:
//
//	APP_CONTROLLER_BIN_DIR=$PWD/bin go test -run '^$' -bench . -benchtime 1x -count=1 ./test/bench/ -v
//
// The number of Apps is -bench.apps (after -args) or $APP_CONTROLLER_BENCH_APPS, 100 by
// default; their replicas -bench.replicas or $APP_CONTROLLER_BENCH_REPLICAS, 1 by default;
// the rounds of floor and app phases per iteration -bench.rounds or
// $APP_CONTROLLER_BENCH_ROUNDS, 2 by default (alternating which phase runs first).
package bench

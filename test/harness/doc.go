// Package harness is what the benchmark (test/bench) and the integration tests share to
// run the controller as a process and watch what it does: the process and its log
// (process.go), a free loopback address (port.go), its /metrics (metrics.go) and the
// API server's audit log (audit.go). It does not import the testing package, so the
// benchmark's binary does not link it; the tests wrap it with their *testing.T.
package harness

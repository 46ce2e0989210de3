// Package analysis judges a canary by what its users get: it builds the Prometheus
// queries of an App's checks (the built-in success rate and latency, from the Gateway's
// metrics or the pods' own, absolute or relative to the stable; a PromQL query of the
// user's), makes one measurement of a check (a query, or a webhook call), and keeps a
// check's counts (CheckStatus) from which the rollout's state machine (pkg/rollout)
// decides to wait, go on or abort. It also sends the rollout's notifications.
//
// It holds no cache and no clock of its own: the controller says when (Due) and what
// (Target); the Prometheus client is client_golang's api/prometheus/v1, behind the
// one method of it this package calls (Querier), so that unit tests use a fake.
package analysis

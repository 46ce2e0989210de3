package soak

import (
	"math"
	"math/rand/v2"
)

// Operations of the churn.
const (
	opCreate      = "create"
	opDelete      = "delete"
	opImage       = "image"
	opEnv         = "env"
	opConfigMap   = "configmap"
	opRouteAdd    = "route-add"
	opRouteMove   = "route-move"
	opRouteRemove = "route-remove"
	opShardMove   = "shard-move"
	opRollback    = "rollback"
	// opBreak gives an App a pod that cannot run: an image that does not exist, or on a
	// real node, every other time, a container that exits at once; opFix gives it back
	// a good spec.
	opBreak = "break"
	opFix   = "fix"
	// opRouteMove is recorded as opRouteRemove on the App that gives up the host and
	// opRouteTake on the one that takes it.
	opRouteTake = "route-take"
)

// MixEntry is an operation and how many times a minute the churn makes it at rate 1.
type MixEntry struct {
	Op        string  `json:"op"`
	PerMinute float64 `json:"per_minute"`
}

// DefaultMix is the churn of every minute at rate 1: 37 operations on a real node, 36
// on kwok (no canary analysis there), Apps created and
// deleted at the same pace so that their number stays put. Each operation picks an App
// that has converged since its last change (a user waits for a rollout before the
// next), so that every spec the driver writes is seen by the controller and recorded
// as a revision.
var DefaultMix = []MixEntry{
	{opCreate, 2}, {opDelete, 2},
	{opImage, 6}, {opEnv, 4}, {opConfigMap, 2},
	{opRouteAdd, 1}, {opRouteMove, 1}, {opRouteRemove, 1},
	{opShardMove, 2}, {opRollback, 2},
	{opBreak, 1}, {opFix, 1},
	{opCanary, 3}, {opCanaryCrash, 1}, {opCanaryAbort, 1}, {opCanaryFix, 2}, {opCanaryRollback, 1}, {opCanaryConfig, 1},
	{opAutoscale, 2},
	{opCanaryAnalysisFail, 1}, // a real node's only (analysis.go): dropped on kwok
}

// minutePlan returns the operations of one minute at rate, in a random order: each
// entry's count is its rate times rate, the fractions carried from minute to minute in
// carry so that the mean is exact.
func minutePlan(mix []MixEntry, rate float64, carry map[string]float64, rng *rand.Rand) []string {
	var ops []string
	for _, e := range mix {
		want := e.PerMinute*rate + carry[e.Op]
		n := math.Floor(want)
		carry[e.Op] = want - n
		for range int(n) {
			ops = append(ops, e.Op)
		}
	}
	rng.Shuffle(len(ops), func(i, j int) { ops[i], ops[j] = ops[j], ops[i] })
	return ops
}

package api

import (
	"testing"

	"github.com/app-controller/app-controller/test/integration/framework"
)

// TestAnalysisValidation checks that the API server refuses a bad canary analysis with
// a message that names the field, and accepts the valid shapes (strictly: no field
// dropped).
func TestAnalysisValidation(t *testing.T) {
	ns := framework.Namespace(t)
	dyn := framework.DynamicClient(t)
	step := func(checks string) string {
		return podsSpec + "rollout: {canary: {steps: [{setWeight: 10}, {analysis: {checks: [" + checks + "]}}]}}"
	}
	background := func(analysis string) string {
		return podsSpec + "rollout: {canary: {steps: [{setWeight: 10}, {pause: {}}], analysis: " + analysis + "}}"
	}
	at := "spec.rollout.canary.steps[1].analysis.checks[0]"

	invalid := []refusedSpec{
		{"a check with no kind (CEL)", step("{name: sr}"), []string{at, "each check sets exactly one of successRate, latency, query, templateRef and webhook"}},
		{"a check of two kinds (CEL)", step(`{name: sr, successRate: {min: "99"}, latency: {maxMs: 100}}`), []string{at, "exactly one of"}},
		{"a success rate with no threshold (CEL)", step("{name: sr, successRate: {}}"), []string{at + ".successRate", "sets min, stableMargin or both"}},
		{"a success rate above 100 (CEL)", step(`{name: sr, successRate: {min: "101"}}`), []string{at + ".successRate.min", "is a percent: from 0 to 100"}},
		{"a success rate that is not a number", step(`{name: sr, successRate: {min: "ninety"}}`), []string{at + ".successRate.min", "should match"}},
		{"a stable factor under 1 (CEL)", step(`{name: lat, latency: {stableFactor: "0.5"}}`), []string{at + ".latency.stableFactor", "from 1 to 100"}},
		{"a latency with no threshold (CEL)", step("{name: lat, latency: {percentile: 95}}"), []string{at + ".latency", "sets maxMs, stableFactor or both"}},
		{"a percentile above 99", step("{name: lat, latency: {percentile: 100, maxMs: 100}}"), []string{at + ".latency.percentile", "less than or equal to 99"}},
		{"an interval under the floor (CEL)", step(`{name: sr, successRate: {min: "99"}, interval: 5s}`), []string{at + ".interval", "must be from 10s to 1h"}},
		{"a query with no condition (CEL)", step("{name: q, query: {promql: up}}"), []string{at + ".query", "sets successCondition, failureCondition or both"}},
		{"a range upside down (CEL)", step(`{name: q, query: {promql: up, successCondition: {min: "2", max: "1"}}}`), []string{at + ".query.successCondition", "min must not be above its max"}},
		{"an empty range (CEL)", step("{name: q, query: {promql: up, successCondition: {}}}"), []string{at + ".query.successCondition", "sets min, max or both"}},
		{"a webhook that is not a URL (CEL)", step("{name: gate, webhook: {url: tests}}"), []string{at + ".webhook.url", "must be an http or https URL"}},
		{"minRequests on a webhook (CEL)", step("{name: gate, webhook: {url: 'http://tests'}, minRequests: 5}"), []string{at + ".minRequests", "applies to the built-in checks"}},
		{"source on a query (CEL)", step("{name: q, query: {promql: up, successCondition: {min: '1'}}, source: Pods}"), []string{at + ".source", "applies to the built-in checks"}},
		{"an unknown source", step(`{name: sr, successRate: {min: "99"}, source: Mesh}`), []string{at + ".source", "Unsupported value"}},
		{"two checks of one name", step(`{name: sr, successRate: {min: "99"}}, {name: sr, latency: {maxMs: 100}}`), []string{"spec.rollout.canary.steps[1].analysis.checks[1]", "Duplicate value"}},
		{"no checks", step(""), []string{"spec.rollout.canary.steps[1].analysis.checks", "at least 1 items"}},
		{"a step with a weight and an analysis (CEL)", podsSpec + `rollout: {canary: {steps: [{setWeight: 10, analysis: {checks: [{name: sr, successRate: {min: "99"}}]}}]}}`,
			[]string{"spec.rollout.canary.steps[0]", "each step sets exactly one of setWeight, pause, analysis, setHeaderRoute and setMirrorRoute"}},
		{"a starting step past the last (CEL)", background(`{startingStep: 2, checks: [{name: sr, successRate: {min: "99"}}]}`),
			[]string{"spec.rollout.canary.analysis.startingStep", "must be the index of one of the steps"}},
	}
	assertRefused(t, dyn, ns, "invalid-analysis", invalid)

	valid := []acceptedSpec{
		{"the built-ins, absolute and relative", step(`{name: sr, successRate: {min: "99.5", stableMargin: "1"}, interval: 10s, count: 3, failureLimit: 1, minRequests: 50, source: Pods}, ` +
			`{name: lat, latency: {percentile: 95, maxMs: 500, stableFactor: "1.5"}, interval: 2m30s, source: Gateway}`)},
		{"a query and a webhook", step(`{name: q, query: {promql: 'sum(rate(x{namespace="{{.Namespace}}"}[{{.Interval}}]))', successCondition: {max: "0.5"}, failureCondition: {min: "-1.25", max: "1000"}}}, ` +
			`{name: gate, webhook: {url: 'https://tests.example.com/run', timeoutSeconds: 60, retries: 0}, count: 1}`)},
		{"in the background from the second step", background(`{startingStep: 1, checks: [{name: sr, successRate: {min: "0"}}]}`)},
	}
	assertAccepted(t, dyn, ns, "valid-analysis", valid)
}

package api

import (
	"testing"

	"github.com/app-controller/app-controller/test/integration/framework"
)

// TestRoutingValidation checks that the API server refuses bad setHeaderRoute and
// setMirrorRoute steps with a message that names the field, and accepts the valid
// shapes (strictly: no field dropped).
func TestRoutingValidation(t *testing.T) {
	ns := framework.Namespace(t)
	dyn := framework.DynamicClient(t)
	const ingress = "deploymentTemplate: {name: web, image: nginx, replicas: 4}\nserviceTemplate: {name: web}\nroute: {hosts: [web.example.com]}\n"
	steps := func(s string) string { return gatewaySpec + "rollout: {canary: {steps: [" + s + "]}}" }

	invalid := []refusedSpec{
		{"a header route without an HTTPRoute (CEL)", ingress + "rollout: {canary: {steps: [{setHeaderRoute: {match: [{header: X-Canary, exact: always}]}}, {setWeight: 20}]}}",
			[]string{"spec.rollout.canary.steps", "setHeaderRoute and setMirrorRoute need an HTTPRoute (route.parentRefs)"}},
		{"a mirror without a route (CEL)", "deploymentTemplate: {name: web, image: nginx, replicas: 4}\nrollout: {canary: {steps: [{setMirrorRoute: {percent: 10}}]}}",
			[]string{"spec.rollout.canary.steps", "need an HTTPRoute"}},
		{"a mirror above 100%", steps("{setMirrorRoute: {percent: 101}}"),
			[]string{"spec.rollout.canary.steps[0].setMirrorRoute.percent", "less than or equal to 100"}},
		{"a negative mirror", steps("{setMirrorRoute: {percent: -1}}"),
			[]string{"spec.rollout.canary.steps[0].setMirrorRoute.percent", "greater than or equal to 0"}},
		{"a mirror without its percent", steps("{setMirrorRoute: {}}"),
			[]string{"spec.rollout.canary.steps[0].setMirrorRoute.percent: Required value"}},
		{"a step with a weight and a header route (CEL)", steps("{setWeight: 10, setHeaderRoute: {}}"),
			[]string{"spec.rollout.canary.steps[0]", "exactly one of setWeight, pause, analysis, setHeaderRoute and setMirrorRoute"}},
		{"a match without a value (CEL)", steps("{setHeaderRoute: {match: [{header: X-Canary}]}}"),
			[]string{"spec.rollout.canary.steps[0].setHeaderRoute.match[0]", "exactly one of exact and regex"}},
		{"a match without a name (CEL)", steps("{setHeaderRoute: {match: [{exact: always}]}}"),
			[]string{"spec.rollout.canary.steps[0].setHeaderRoute.match[0]", "exactly one of header and cookie"}},
		{"a match with a header and a cookie (CEL)", steps("{setHeaderRoute: {match: [{header: X-Canary, cookie: canary, exact: always}]}}"),
			[]string{"spec.rollout.canary.steps[0].setHeaderRoute.match[0]", "exactly one of header and cookie"}},
		{"an empty value", steps("{setHeaderRoute: {match: [{header: X-Canary, exact: ''}]}}"),
			[]string{"spec.rollout.canary.steps[0].setHeaderRoute.match[0].exact", "at least 1 chars"}},
		{"a header name that is not a token", steps("{setHeaderRoute: {match: [{header: 'X Canary', exact: always}]}}"),
			[]string{"spec.rollout.canary.steps[0].setHeaderRoute.match[0].header", "should match"}},
		{"the Cookie header by name (CEL)", steps("{setHeaderRoute: {match: [{header: cookie, exact: a=b}]}}"),
			[]string{"spec.rollout.canary.steps[0].setHeaderRoute.match[0].header", "set cookie (its name) instead"}},
		{"two cookies (CEL)", steps("{setHeaderRoute: {match: [{cookie: a, exact: '1'}, {cookie: b, exact: '2'}]}}"),
			[]string{"spec.rollout.canary.steps[0].setHeaderRoute.match", "at most one cookie"}},
		{"a header twice, in two cases (CEL)", steps("{setHeaderRoute: {match: [{header: X-Canary, exact: a}, {header: x-canary, exact: b}]}}"),
			[]string{"spec.rollout.canary.steps[0].setHeaderRoute.match", "each header may be named once"}},
	}
	assertRefused(t, dyn, ns, "invalid-routing", invalid)

	valid := []acceptedSpec{
		{"a header route, weights, a mirror, the header route removed", steps("{setHeaderRoute: {match: [{header: X-Canary, exact: always}, {cookie: canary, regex: 'y.*'}]}}, " +
			"{setWeight: 10}, {setMirrorRoute: {percent: 0}}, {setMirrorRoute: {percent: 100}}, {pause: {}}, {setHeaderRoute: {}}, {setWeight: 50}")},
		{"a header route by regex first", steps("{setHeaderRoute: {match: [{header: User-Agent, regex: '.*Firefox.*'}]}}, {pause: {duration: 5m}}")},
	}
	assertAccepted(t, dyn, ns, "valid-routing", valid)
}

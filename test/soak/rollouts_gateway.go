package soak

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/app-controller/app-controller/test/harness"
)

// The HTTPRoutes of the route-split canaries, from the audit log (their bodies at level
// Request, AuditBodies): the weights the controller gave the split Services, the same
// invariant as the status's canaryWeight but read from what the Gateway is given. While
// a route is split (a backend <svc>-stable and one <svc>-canary), the canary's weight
// never goes down but to 0 (an abort sends everything back to the stable; the steps
// again, or a restart toward a newer template, start from 0); the split ends when the
// route goes back to the App's Service alone, and a new one starts from there.

// groupGateway is the Gateway API's group, resourceHTTPRoutes its HTTPRoutes.
const (
	groupGateway       = "gateway.networking.k8s.io"
	resourceHTTPRoutes = "httproutes"
)

// routeBody tells whether ev is a write of an HTTPRoute that went through, with its body.
func routeBody(ev harness.AuditEvent) bool {
	return ev.Code() < 300 && ev.ObjectRef != nil && ev.Resource() == resourceHTTPRoutes && ev.ObjectRef.APIGroup == groupGateway && len(ev.RequestObject) > 0
}

// routeWrite is one write of an HTTPRoute by the controller, with the weights of its
// backends (of its first rule: the soak's routes have one).
type routeWrite struct {
	at              time.Time
	namespace, name string
	// backends are the first rule's backends: Service name -> weight (1 when unset,
	// as the Gateway API defaults it).
	backends map[string]int32
}

// addRoute reads ev, a write of an HTTPRoute by the controller's user, into b.
func (b *bodies) addRoute(ev harness.AuditEvent, user string) error {
	var body struct {
		Spec struct {
			Rules []struct {
				BackendRefs []struct {
					Name   string `json:"name"`
					Weight *int32 `json:"weight"`
				} `json:"backendRefs"`
			} `json:"rules"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(ev.RequestObject, &body); err != nil {
		return fmt.Errorf("decoding the HTTPRoute written by %s at %s: %w", user, ev.StageTimestamp, err)
	}
	if len(body.Spec.Rules) == 0 { // a write of its metadata alone
		return nil
	}
	rw := routeWrite{at: ev.StageTimestamp, namespace: ev.ObjectRef.Namespace, name: ev.ObjectRef.Name, backends: map[string]int32{}}
	for _, br := range body.Spec.Rules[0].BackendRefs {
		rw.backends[br.Name] = ptrDeref(br.Weight, 1)
	}
	b.routes = append(b.routes, rw)
	return nil
}

// split returns the canary's weight when w splits the traffic between a -stable and a
// -canary Service, or sends it all to the -canary one (at 100 the stable Service is not
// named: the promotion's last stage deletes it).
func (w routeWrite) split() (int32, bool) {
	var canary int32
	var hasCanary, hasStable bool
	for name, weight := range w.backends {
		switch {
		case strings.HasSuffix(name, "-canary"):
			canary, hasCanary = weight, true
		case strings.HasSuffix(name, "-stable"):
			hasStable = true
		}
	}
	return canary, hasCanary && (hasStable || len(w.backends) == 1)
}

// checkRouteWeights checks the HTTPRoute writes of routes (by route, in the order of
// their times): while a route stays split, its canary's weight never goes down to
// another weight than 0. It counts the route writes and the splits (rollouts through a
// route) into c.
func (c *RolloutChecks) checkRouteWeights(routes []routeWrite) {
	byRoute := map[string][]routeWrite{}
	for _, rw := range routes {
		byRoute[key(rw.namespace, rw.name)] = append(byRoute[key(rw.namespace, rw.name)], rw)
	}
	for _, k := range sortedKeys(byRoute) {
		ws := byRoute[k]
		sort.SliceStable(ws, func(i, j int) bool { return ws[i].at.Before(ws[j].at) })
		c.RouteWrites += len(ws)
		var last int32
		split := false
		for _, w := range ws {
			weight, ok := w.split()
			switch {
			case !ok:
				split = false
				continue
			case !split:
				c.RouteSplits++
			case weight < last && weight != 0:
				c.WeightDecreases = append(c.WeightDecreases, fmt.Sprintf("HTTPRoute %s at %s: canary weight %d written after %d (backends %v)",
					k, w.at.UTC().Format("15:04:05.000"), weight, last, w.backends))
			}
			split, last = true, weight
		}
	}
}

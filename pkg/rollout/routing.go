package rollout

import (
	"regexp"
	"slices"
	"strings"

	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// Routing is what the HTTPRoute does for the canary beside the weights: the requests
// that match every one of Header go to the canary alone (a rule before the weighted
// one), and MirrorPercent of the requests are copied to it (the RequestMirror filter of
// the weighted rule). The zero value: neither. It is in the HTTPRoute's terms, so that
// the plan compares it with the live route's.
type Routing struct {
	// Header: the header matches of the canary's rule; empty: none.
	Header []gatewayv1.HTTPHeaderMatch
	// MirrorPercent: the share of the requests mirrored to the canary; 0: none.
	MirrorPercent int32
}

// IsZero reports whether r routes nothing to the canary beside the weights.
func (r Routing) IsZero() bool { return len(r.Header) == 0 && r.MirrorPercent == 0 }

// Equal reports whether r and o are the same routing.
func (r Routing) Equal(o Routing) bool {
	return r.MirrorPercent == o.MirrorPercent && slices.EqualFunc(r.Header, o.Header, func(a, b gatewayv1.HTTPHeaderMatch) bool {
		return strings.EqualFold(string(a.Name), string(b.Name)) && a.Value == b.Value &&
			ptr.Deref(a.Type, gatewayv1.HeaderMatchExact) == ptr.Deref(b.Type, gatewayv1.HeaderMatchExact)
	})
}

// RoutingAt returns the routing of step k of s: the last setHeaderRoute and
// setMirrorRoute at or before it; none past the last step (the promotion).
func RoutingAt(s *appv1.CanaryStrategy, k int32) Routing {
	var r Routing
	if k < 0 || k >= int32(len(s.Steps)) {
		return r
	}
	for _, step := range s.Steps[:k+1] {
		if step.SetHeaderRoute != nil {
			r.Header = HeaderMatches(step.SetHeaderRoute.Match)
		}
		if step.SetMirrorRoute != nil {
			r.MirrorPercent = ptr.Deref(step.SetMirrorRoute.Percent, 0)
		}
	}
	return r
}

// RoutingDescription describes the routing of step k of s as users read it ("header
// route X-Canary: always, mirror 10%"); "" when there is none.
func RoutingDescription(s *appv1.CanaryStrategy, k int32) string {
	var header *appv1.HeaderRoute
	var mirror *appv1.MirrorRoute
	if k >= 0 && k < int32(len(s.Steps)) {
		for _, step := range s.Steps[:k+1] {
			if step.SetHeaderRoute != nil {
				header = step.SetHeaderRoute
			}
			if step.SetMirrorRoute != nil {
				mirror = step.SetMirrorRoute
			}
		}
	}
	var parts []string
	if header != nil && len(header.Match) > 0 {
		parts = append(parts, header.String())
	}
	if mirror != nil && ptr.Deref(mirror.Percent, 0) > 0 {
		parts = append(parts, mirror.String())
	}
	return strings.Join(parts, ", ")
}

// HeaderMatches returns the HTTPRoute header matches of a header route: a header as
// it is (Exact or RegularExpression); a cookie as a regular expression on the Cookie
// header (the Gateway API has no cookie match): the cookie's name and value between the
// start or a "; " and a ";" or the end.
func HeaderMatches(ms []appv1.RouteMatch) []gatewayv1.HTTPHeaderMatch {
	if len(ms) == 0 {
		return nil
	}
	out := make([]gatewayv1.HTTPHeaderMatch, 0, len(ms))
	for _, m := range ms {
		if m.Cookie != "" {
			value := regexp.QuoteMeta(m.Exact)
			if m.Regex != "" {
				value = "(?:" + m.Regex + ")"
			}
			out = append(out, gatewayv1.HTTPHeaderMatch{Type: ptr.To(gatewayv1.HeaderMatchRegularExpression), Name: "Cookie",
				Value: `(^|;\s*)` + regexp.QuoteMeta(m.Cookie) + "=" + value + "(;|$)"})
			continue
		}
		h := gatewayv1.HTTPHeaderMatch{Type: ptr.To(gatewayv1.HeaderMatchExact), Name: gatewayv1.HTTPHeaderName(m.Header), Value: m.Exact}
		if m.Regex != "" {
			h.Type, h.Value = ptr.To(gatewayv1.HeaderMatchRegularExpression), m.Regex
		}
		out = append(out, h)
	}
	return out
}

// routingStep reports whether step sets the header route or the mirror: like a
// setWeight step, it ends once its route is in effect, within the progress deadline.
func routingStep(step appv1.CanaryStep) bool {
	return step.SetHeaderRoute != nil || step.SetMirrorRoute != nil
}

// routedShare is the canary's replicas at weight w of n with routing r: enough for
// the larger of the weight and the mirrored share, and at least one pod while a header
// route sends it requests.
func routedShare(n, w int32, r Routing) int32 {
	c := canaryShare(n, max(w, r.MirrorPercent))
	if len(r.Header) > 0 {
		c = max(c, min(n, 1))
	}
	return c
}

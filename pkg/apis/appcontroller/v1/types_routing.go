package v1

import (
	"fmt"
	"strings"
)

// ReasonMirrorUnsupported: status.rollout.abortReason of a rollout whose
// setMirrorRoute step the App's Gateway cannot do (its GatewayClass does not list
// HTTPRouteRequestMirror, or HTTPRouteRequestPercentageMirror below 100%), or cannot
// be told to (the controller may not read the Gateway or its class).
const ReasonMirrorUnsupported = "MirrorUnsupported"

// HeaderRoute sends the requests that match to the canary, whatever its weight: a
// rule of the App's HTTPRoute, before the weighted one, whose only backend is the
// canary's Service. The other requests keep the weights. It stays from its step on
// until a later setHeaderRoute changes it (one without match removes it), and goes at
// the promotion, at an abort and when the rollout ends otherwise. HTTPRoute only
// (route.parentRefs). Argo Rollouts' setHeaderRoute; Flagger's A/B testing matches.
//
// Example: requests with X-Canary: always go to the canary, then those with the cookie
// canary=yes instead.
//
//	steps:
//	- setHeaderRoute:
//	    match:
//	    - header: X-Canary
//	      exact: always
//	- setHeaderRoute:
//	    match:
//	    - cookie: canary
//	      exact: "yes"
type HeaderRoute struct {
	// Match: a request goes to the canary when it matches every entry (a header, or
	// a cookie, and its value). Empty or unset: no header route from this step on.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:XValidation:rule="self.filter(m, has(m.cookie)).size() <= 1",message="setHeaderRoute.match: at most one cookie (the HTTPRoute matches the one Cookie header)"
	// +kubebuilder:validation:XValidation:rule="self.all(m, !has(m.header) || self.filter(o, has(o.header) && o.header.lowerAscii() == m.header.lowerAscii()).size() == 1)",message="setHeaderRoute.match: each header may be named once (header names are case-insensitive)"
	Match []RouteMatch `json:"match,omitempty"`
}

// RouteMatch is a header or a cookie of a request and its value: exactly one of header
// and cookie, and one of exact and regex.
//
// +kubebuilder:validation:XValidation:rule="has(self.header) != has(self.cookie)",message="setHeaderRoute.match: each match names exactly one of header and cookie"
// +kubebuilder:validation:XValidation:rule="has(self.exact) != has(self.regex)",message="setHeaderRoute.match: each match sets exactly one of exact and regex, the value to match"
type RouteMatch struct {
	// Header is the name of an HTTP header ("X-Canary"); not Cookie (use cookie).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9!#$%&'*+\-.^_\x60|~]+$`
	// +kubebuilder:validation:XValidation:rule="self.lowerAscii() != 'cookie'",message="setHeaderRoute.match.header: to match a cookie, set cookie (its name) instead of the Cookie header"
	Header string `json:"header,omitempty"`

	// Cookie is the name of a cookie: the request's Cookie header has it with the value
	// (a match on the Cookie header, by regular expression).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9!#$%&'*+\-.^_\x60|~]+$`
	Cookie string `json:"cookie,omitempty"`

	// Exact is the value, matched exactly.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Exact string `json:"exact,omitempty"`

	// Regex is a regular expression (RE2) the value matches; the Gateway's support of
	// regular expressions is its own (Gateway API: implementation-specific).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Regex string `json:"regex,omitempty"`
}

// String describes the match as users read it: "X-Canary: always", "cookie canary=yes",
// "X-Canary ~ ^a.*".
func (m RouteMatch) String() string {
	name, sep, value := m.Header, ": ", m.Exact
	if m.Cookie != "" {
		name, sep = "cookie "+m.Cookie, "="
	}
	if m.Regex != "" {
		sep, value = " ~ ", m.Regex
	}
	return name + sep + value
}

// String describes the header route: "header route X-Canary: always", "no header
// route".
func (h HeaderRoute) String() string {
	if len(h.Match) == 0 {
		return "no header route"
	}
	parts := make([]string, len(h.Match))
	for i, m := range h.Match {
		parts[i] = m.String()
	}
	return "header route " + strings.Join(parts, ", ")
}

// MirrorRoute copies a share of the requests the stable pods serve to the canary: the
// HTTPRoute's RequestMirror filter on its weighted rule, whose answers the Gateway
// drops. It stays from its step on until a later setMirrorRoute changes it (percent 0
// stops it), and goes at the promotion, at an abort and when the rollout ends
// otherwise. HTTPRoute only (route.parentRefs), and only through a Gateway that
// supports the filter: a rollout to a Gateway whose GatewayClass does not list
// HTTPRouteRequestMirror in its status.supportedFeatures (Traefik 3.6's, for one), or
// HTTPRouteRequestPercentageMirror below 100%, or whose Gateway or class the controller
// may not read, aborts at this step (reason MirrorUnsupported) without writing it. Argo
// Rollouts' setMirrorRoute.
type MirrorRoute struct {
	// Percent of the requests copied to the canary, from 0 (no mirror) to 100.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	Percent *int32 `json:"percent"`
}

// String describes the mirror: "mirror 10%", "no mirror".
func (m MirrorRoute) String() string {
	if m.Percent == nil || *m.Percent == 0 {
		return "no mirror"
	}
	return fmt.Sprintf("mirror %d%%", *m.Percent)
}

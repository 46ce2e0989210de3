package analysis

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"text/template"
	"time"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// One measurement of a built-in check is one query: the series it needs (the canary's
// requests and errors, or percentile and count, and the stable's for a relative
// threshold) come back as samples of one vector, told apart by the labels "track"
// (canary, stable) and "m" (what the sample is). Prometheus answers in one request what
// would otherwise be two to four.

// Sample names (the "m" label) of a built-in check's query.
const (
	mRequests = "requests" // requests answered over the interval
	mErrors   = "errors"   // of them, answered 5xx
	mLatency  = "latency"  // the percentile, in seconds
)

// Track names (the "track" label).
const (
	trackCanary = "canary"
	trackStable = "stable"
)

// Gateway metrics the built-in checks read: Traefik's, per backend Service. Traefik's
// Gateway API provider names a backend service NAMESPACE-SERVICE-PORTNAME-PORT (the
// port's name when it has one: test/e2e/analysis saw
// "NS-web-canary-http-80@kubernetesgateway" for the App's canary Service) and its
// metrics carry it, with the provider's suffix (@kubernetesgateway), as label "service".
const (
	traefikRequests = "traefik_service_requests_total"
	traefikDuration = "traefik_service_request_duration_seconds"
)

// Pod metrics the built-in checks read: the conventional names of client libraries'
// HTTP middleware, with Prometheus's labels namespace and pod of the scraped pod.
const (
	podRequests = "http_requests_total"
	podDuration = "http_request_duration_seconds"
)

// sourceMetric returns the metric a built-in check reads in source: gateway's for the
// Gateway, pod's for the pods.
func sourceMetric(source appv1.AnalysisSource, pod, gateway string) string {
	if source == appv1.AnalysisSourceGateway {
		return gateway
	}
	return pod
}

// selector returns the label matchers of track's series in source.
func selector(source appv1.AnalysisSource, t Target, track string) string {
	if source == appv1.AnalysisSourceGateway {
		svc := t.StableService
		if track == trackCanary {
			svc = t.CanaryService
		}
		return fmt.Sprintf(`service=~"%s-%s(-[a-z0-9]([-a-z0-9]*[a-z0-9])?)?-[0-9]+(@.+)?"`, regexp.QuoteMeta(t.Namespace), regexp.QuoteMeta(svc))
	}
	deploy := t.StableDeployment
	if track == trackCanary {
		deploy = t.CanaryDeployment
	}
	// A Deployment's pods are named DEPLOYMENT-<pod-template-hash>-<5 characters>: the
	// stable's pattern does not match the canary's pods (one more dash-separated part).
	return fmt.Sprintf(`namespace="%s",pod=~"%s-[a-z0-9]+-[a-z0-9]{5}"`, t.Namespace, regexp.QuoteMeta(deploy))
}

// tag labels the vector of expr with m and track, so that the samples of one query come
// apart.
func tag(expr, m, track string) string {
	return fmt.Sprintf(`label_replace(label_replace(%s, "m", "%s", "", ""), "track", "%s", "", "")`, expr, m, track)
}

// windowIncrease returns the PromQL of the increase of each series of series (a metric
// and its matchers) over window w, counting whole a series that appeared within it.
// increase() reads a counter from its first sample, so it misses the increments that
// sample already holds: a series that exporters make at its first increment, as
// Traefik and most HTTP middleware make their code="500" series at the first error,
// would hide a new canary's first error (a 10%-error canary with a dozen requests in the
// window seen at 100%). A series with no sample w ago started within the window, from
// zero, and counts its current value; one that had a sample then counts its increase
// only (never its whole value: with one sample in the window, as when the scrape
// interval is the window's, it has none, as with increase() alone).
func windowIncrease(series, w string) string {
	return fmt.Sprintf(`(increase(%[1]s[%[2]s]) and %[1]s offset %[2]s or (%[1]s unless %[1]s offset %[2]s))`, series, w)
}

// SuccessRateQuery returns the query of a successRate check of source: the canary's
// requests and 5xx answers over interval, and the stable's when relative.
func SuccessRateQuery(source appv1.AnalysisSource, t Target, interval time.Duration, relative bool) string {
	metric := sourceMetric(source, podRequests, traefikRequests)
	w := promDuration(interval)
	return perTrack(source, t, relative, func(sel, track string) []string {
		return []string{
			tag("sum"+windowIncrease(fmt.Sprintf(`%s{%s}`, metric, sel), w), mRequests, track),
			tag("sum"+windowIncrease(fmt.Sprintf(`%s{%s,code=~"5.."}`, metric, sel), w), mErrors, track),
		}
	})
}

// LatencyQuery returns the query of a latency check of source: the canary's percentile
// (0.99 for 99) of request durations and its request count over interval, and the
// stable's when relative.
func LatencyQuery(source appv1.AnalysisSource, t Target, interval time.Duration, percentile int32, relative bool) string {
	metric := sourceMetric(source, podDuration, traefikDuration)
	w := promDuration(interval)
	return perTrack(source, t, relative, func(sel, track string) []string {
		return []string{
			tag(fmt.Sprintf(`histogram_quantile(%s, sum by (le) %s)`, quantile(percentile), windowIncrease(fmt.Sprintf(`%s_bucket{%s}`, metric, sel), w)), mLatency, track),
			tag("sum"+windowIncrease(fmt.Sprintf(`%s_count{%s}`, metric, sel), w), mRequests, track),
		}
	})
}

// perTrack joins into one query the tagged expressions that exprs makes of the
// canary's selector, and of the stable's when relative.
func perTrack(source appv1.AnalysisSource, t Target, relative bool, exprs func(sel, track string) []string) string {
	tracks := []string{trackCanary}
	if relative {
		tracks = append(tracks, trackStable)
	}
	parts := make([]string, 0, 2*len(tracks))
	for _, track := range tracks {
		parts = append(parts, exprs(selector(source, t, track), track)...)
	}
	return strings.Join(parts, " or ")
}

// quantile writes percentile p as a PromQL quantile ("0.99", "0.5").
func quantile(p int32) string {
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.2f", float64(p)/100), "0"), ".")
}

// CustomQuery returns the PromQL of a query check, its template's variables replaced
// by the App's, and {{.Args.NAME}} by args (the arguments of an AnalysisTemplate's
// query; nil for a check's own query, which has none).
func CustomQuery(q *appv1.QueryCheck, args map[string]string, t Target, interval time.Duration) (string, error) {
	tmpl, err := template.New("promql").Option("missingkey=error").Parse(q.PromQL)
	if err != nil {
		return "", fmt.Errorf("parsing the query's template: %w", err)
	}
	var b bytes.Buffer
	err = tmpl.Execute(&b, queryVars{
		Namespace: t.Namespace, App: t.App,
		CanaryService: t.CanaryService, StableService: t.StableService,
		CanaryDeployment: t.CanaryDeployment, StableDeployment: t.StableDeployment,
		Interval: promDuration(interval), Args: args,
	})
	if err != nil {
		return "", fmt.Errorf("filling in the query's template: %w", err)
	}
	return b.String(), nil
}

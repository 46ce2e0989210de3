// Package monitoring reads the monitoring configuration shipped in config/ (the
// PrometheusRule, the Grafana dashboard, the kube-state-metrics configuration) and
// extracts the metric names their PromQL queries use, so that tests can check them
// against what the binary exports (test/integration/observability) and against the App
// type (this package's tests).
package monitoring

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// Rule is an alerting rule of the PrometheusRule.
type Rule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// prometheusRule is the part of a monitoring.coreos.com/v1 PrometheusRule read here.
type prometheusRule struct {
	Kind string `json:"kind"`
	Spec struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []Rule `json:"rules"`
		} `json:"groups"`
	} `json:"spec"`
}

// Rules returns the rules of the PrometheusRule at path.
func Rules(path string) ([]Rule, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the rules: %w", err)
	}
	var pr prometheusRule
	if err := yaml.Unmarshal(data, &pr); err != nil {
		return nil, fmt.Errorf("parsing the PrometheusRule %s: %w", path, err)
	}
	if pr.Kind != "PrometheusRule" {
		return nil, fmt.Errorf("%s is a %q, not a PrometheusRule", path, pr.Kind)
	}
	var rules []Rule
	for _, g := range pr.Spec.Groups {
		rules = append(rules, g.Rules...)
	}
	return rules, nil
}

// DashboardQuery is a PromQL query of a Grafana dashboard.
type DashboardQuery struct {
	// Panel is the title of the panel, or "variable NAME".
	Panel string
	Expr  string
}

// DashboardQueries returns every PromQL query of the Grafana dashboard at path: each
// target's expr, in nested rows too, and each query variable's query.
func DashboardQueries(path string) ([]DashboardQuery, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the dashboard: %w", err)
	}
	type panel struct {
		Title   string            `json:"title"`
		Targets []json.RawMessage `json:"targets"`
		Panels  []json.RawMessage `json:"panels"`
	}
	var dashboard struct {
		Panels     []json.RawMessage `json:"panels"`
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &dashboard); err != nil {
		return nil, fmt.Errorf("parsing the dashboard %s: %w", path, err)
	}
	var out []DashboardQuery
	var walk func(raw []json.RawMessage) error
	walk = func(raw []json.RawMessage) error {
		for _, r := range raw {
			var p panel
			if err := json.Unmarshal(r, &p); err != nil {
				return fmt.Errorf("parsing a panel of %s: %w", path, err)
			}
			for _, t := range p.Targets {
				var target struct {
					Expr string `json:"expr"`
				}
				if err := json.Unmarshal(t, &target); err != nil {
					return fmt.Errorf("parsing a target of panel %q: %w", p.Title, err)
				}
				if target.Expr == "" {
					return fmt.Errorf("panel %q has a target without expr", p.Title)
				}
				out = append(out, DashboardQuery{Panel: p.Title, Expr: target.Expr})
			}
			if err := walk(p.Panels); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(dashboard.Panels); err != nil {
		return nil, err
	}
	for _, v := range dashboard.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			var s string
			if err := json.Unmarshal(v.Query, &s); err != nil {
				return nil, fmt.Errorf("parsing the query of variable %s: %w", v.Name, err)
			}
			q.Query = s
		}
		out = append(out, DashboardQuery{Panel: "variable " + v.Name, Expr: q.Query})
	}
	return out, nil
}

// labelListKeywords are the PromQL keywords followed by a parenthesized list of label
// names, not of expressions.
var labelListKeywords = []string{"by", "without", "on", "ignoring", "group_left", "group_right"}

// keywords are the PromQL words that are not metric names where they are not followed by
// "(": operators, modifiers, and the aggregations, which may be followed by "by (...)".
var keywords = []string{"by", "without", "on", "ignoring", "group_left", "group_right", "bool",
	"and", "or", "unless", "offset", "inf", "nan", "atan2", "start", "end",
	"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk",
	"topk", "quantile", "limitk", "limit_ratio"}

// labelValues is Grafana's label_values(metric, label) variable query.
var labelValues = regexp.MustCompile(`label_values\(\s*([^,()]+?)\s*,\s*[A-Za-z_][A-Za-z0-9_]*\s*\)`)

// MetricNames returns the metric names a PromQL expression (or a Grafana query variable)
// selects, sorted and without duplicates. It tokenizes the expression: a name is an
// identifier outside label matchers, range selectors, strings and label lists
// (by/without/on/ignoring/group_left/group_right), not followed by "(" (a function or an
// aggregation), and not a keyword; Grafana variables ($x, ${x}) are skipped.
func MetricNames(expr string) ([]string, error) {
	expr = labelValues.ReplaceAllString(expr, "$1")
	var names []string
	s := expr
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			end := strings.IndexByte(s[i+1:], c)
			if end < 0 {
				return nil, fmt.Errorf("unterminated string in %q", expr)
			}
			i += end + 2
		case c == '#':
			end := strings.IndexByte(s[i:], '\n')
			if end < 0 {
				return sortUnique(names), nil
			}
			i += end
		case c == '{' || c == '[':
			j, err := skipGroup(s, i)
			if err != nil {
				return nil, err
			}
			i = j
		case c == '$':
			// A Grafana variable: $x or ${x}.
			i++
			if i < len(s) && s[i] == '{' {
				j, err := skipGroup(s, i)
				if err != nil {
					return nil, err
				}
				i = j
			}
			for i < len(s) && isIdent(s[i]) {
				i++
			}
		case c >= '0' && c <= '9' || c == '.':
			// A number or a duration: 0.99, 1e9, 5m, 1h30m.
			for i < len(s) && (isIdent(s[i]) || s[i] == '.') {
				i++
			}
		case isIdentStart(c):
			name, j, err := identifier(s, i)
			if err != nil {
				return nil, err
			}
			if name != "" {
				names = append(names, name)
			}
			i = j
		default:
			i++
		}
	}
	return sortUnique(names), nil
}

// identifier reads the identifier that starts at s[i] and returns it if it is a metric
// name ("" if it is a function, an aggregation or a keyword), and the index after it
// (after the label list that follows a by, without, on, ignoring, group_left or
// group_right).
func identifier(s string, i int) (string, int, error) {
	j := i
	for j < len(s) && isIdent(s[j]) {
		j++
	}
	word := s[i:j]
	next := j
	for next < len(s) && (s[next] == ' ' || s[next] == '\t' || s[next] == '\n' || s[next] == '\r') {
		next++
	}
	switch {
	case next < len(s) && s[next] == '(' && slices.Contains(labelListKeywords, word):
		end, err := skipGroup(s, next)
		return "", end, err
	case next < len(s) && s[next] == '(':
		return "", j, nil // a function or an aggregation
	case slices.Contains(keywords, strings.ToLower(word)):
		return "", j, nil
	}
	return word, j, nil
}

// groupClose is the byte that closes each group skipGroup skips.
var groupClose = map[byte]byte{'{': '}', '[': ']', '(': ')'}

// skipGroup returns the index after the byte that closes the group opened at s[i] (a
// {, [ or (), skipping the strings inside it.
func skipGroup(s string, i int) (int, error) {
	opening, closing := s[i], groupClose[s[i]]
	depth := 0
	for j := i; j < len(s); j++ {
		switch c := s[j]; c {
		case '"', '\'', '`':
			end := strings.IndexByte(s[j+1:], c)
			if end < 0 {
				return 0, fmt.Errorf("unterminated string in %q", s)
			}
			j += end + 1
		case opening:
			depth++
		case closing:
			depth--
			if depth == 0 {
				return j + 1, nil
			}
		}
	}
	return 0, fmt.Errorf("unbalanced %c%c in %q", opening, closing, s)
}

func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isIdent(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }

func sortUnique(names []string) []string {
	slices.Sort(names)
	return slices.Compact(names)
}

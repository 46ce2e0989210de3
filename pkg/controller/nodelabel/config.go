package nodelabel

import (
	gojson "encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// Config is the node labeler's configuration, read from the --node-label-config file:
//
//	rules:
//	- name: kwok-nodes
//	  match:
//	    providerIDPrefix: "kwok://"
//	  labels:
//	    node.example.com/joined-via: kwok
//
// Build it with LoadConfig or ParseConfig, which validate it; Compile turns it into
// Rules that match nodes.
type Config struct {
	// Rules are applied in order. When two rules that match a node set the same label
	// to different values, the first one wins.
	Rules []Rule `json:"rules"`
}

// Rule gives its labels to the nodes it matches.
type Rule struct {
	// Name identifies the rule in Events and errors; unique and non-empty.
	Name string `json:"name"`
	// Match selects the nodes.
	Match Match `json:"match"`
	// Labels are set on every matching node; at least one. A key must not be in a
	// namespace Kubernetes reserves (ReservedLabelKey): kubernetes.io/, k8s.io/ and
	// their subdomains, such as node-role.kubernetes.io/ or
	// node-restriction.kubernetes.io/.
	Labels map[string]string `json:"labels"`
}

// Match selects nodes. A node matches when it meets every criterion that is set; at
// least one must be set.
type Match struct {
	// ProviderIDPrefix matches nodes whose spec.providerID starts with it.
	ProviderIDPrefix string `json:"providerIDPrefix,omitempty"`
	// NameRegex is an RE2 regular expression the whole node name must match: it is
	// anchored at both ends.
	NameRegex string `json:"nameRegex,omitempty"`
	// LabelSelector matches the node's labels. It must not select on a label that a rule
	// sets, so that the labeler's own writes never change which rules match. An empty
	// selector ({}) matches every node.
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`
}

// LoadConfig reads, parses and validates the node labeler's configuration file.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading node label config: %w", err)
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("node label config %s: %w", path, err)
	}
	return cfg, nil
}

// ParseConfig parses and validates a YAML configuration. Unknown and duplicate fields
// are errors, and field names are case-sensitive. Errors name the rule (index and name)
// and the field.
func ParseConfig(data []byte) (*Config, error) {
	jsonData, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("parsing YAML: %w", err)
	}
	cfg := &Config{}
	strictErrs, err := kjson.UnmarshalStrict(jsonData, cfg)
	var typeErr *gojson.UnmarshalTypeError
	if errors.As(err, &typeErr) && (typeErr.Value == "bool" || typeErr.Value == "number") {
		return nil, fmt.Errorf("decoding: %w (quote values that YAML reads as booleans or numbers, such as \"true\", \"yes\", \"on\" or \"1\")", err)
	}
	if err != nil {
		return nil, fmt.Errorf("decoding: %w", err)
	}
	if len(strictErrs) > 0 {
		msgs := make([]string, 0, len(strictErrs))
		for _, e := range strictErrs {
			msgs = append(msgs, cfg.describeStrictError(e))
		}
		return nil, fmt.Errorf("%s", strings.Join(msgs, "; "))
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// strictPathPattern splits a strict decoding error's field path into the rule index and
// the field inside the rule.
var strictPathPattern = regexp.MustCompile(`^rules\[(\d+)\]\.?(.*)$`)

// describeStrictError rewrites an unknown or duplicate field error in the words of
// Validate: "rules[1] (name "x"): match.foo: unknown field".
func (cfg *Config) describeStrictError(err error) string {
	var fieldErr kjson.FieldError
	if !errors.As(err, &fieldErr) {
		return err.Error()
	}
	what := strings.TrimSuffix(strings.TrimSuffix(fieldErr.Error(), strconv.Quote(fieldErr.FieldPath())), " ")
	m := strictPathPattern.FindStringSubmatch(fieldErr.FieldPath())
	if m == nil {
		return fmt.Sprintf("%s: %s", fieldErr.FieldPath(), what)
	}
	i, _ := strconv.Atoi(m[1])
	return fmt.Sprintf("%s: %s: %s", cfg.ruleRef(i), m[2], what)
}

// ruleRef names rule i in errors: "rules[1] (name "x")", or "rules[1]" when unnamed.
func (cfg *Config) ruleRef(i int) string {
	if i < len(cfg.Rules) && cfg.Rules[i].Name != "" {
		return fmt.Sprintf("rules[%d] (name %q)", i, cfg.Rules[i].Name)
	}
	return fmt.Sprintf("rules[%d]", i)
}

// Validate checks every rule, reporting every problem found, each naming the rule and
// the field. It has no side effect: ParseConfig calls it, and Compile, which builds the
// matchers, calls it first.
func (cfg *Config) Validate() error {
	if cfg.Rules == nil {
		return fmt.Errorf("rules: required (use \"rules: []\" to remove every label the labeler applied)")
	}
	// setBy maps each label key that a rule sets to the first rule that sets it.
	setBy := map[string]string{}
	for _, r := range cfg.Rules {
		for k := range r.Labels {
			if _, found := setBy[k]; !found {
				setBy[k] = r.Name
			}
		}
	}

	var problems []string
	firstWithName := map[string]int{}
	for i := range cfg.Rules {
		r := &cfg.Rules[i]
		report := func(field, format string, args ...any) {
			problems = append(problems, fmt.Sprintf("%s: %s: %s", cfg.ruleRef(i), field, fmt.Sprintf(format, args...)))
		}

		switch first, dup := firstWithName[r.Name]; {
		case r.Name == "":
			report("name", "required")
		case dup:
			report("name", "duplicate of rules[%d]", first)
		default:
			firstWithName[r.Name] = i
		}

		m := r.Match
		if m.ProviderIDPrefix == "" && m.NameRegex == "" && m.LabelSelector == nil {
			report("match", "at least one of providerIDPrefix, nameRegex and labelSelector is required")
		}
		if m.NameRegex != "" {
			// Only checked here: Compile builds the anchored matcher.
			if _, err := regexp.Compile(m.NameRegex); err != nil {
				report("match.nameRegex", "invalid regexp: %v", err)
			}
		}
		if m.LabelSelector != nil {
			if _, err := metav1.LabelSelectorAsSelector(m.LabelSelector); err != nil {
				report("match.labelSelector", "%v", err)
			}
			for _, key := range selectorKeys(m.LabelSelector) {
				if setter, found := setBy[key]; found {
					report("match.labelSelector", "selects on label %q, which rule %q sets; a rule must not depend on labels the labeler sets", key, setter)
				}
			}
		}

		if len(r.Labels) == 0 {
			report("labels", "at least one label is required")
		}
		for _, key := range sortedKeys(r.Labels) {
			if errs := content.IsLabelKey(key); len(errs) > 0 {
				report(fmt.Sprintf("labels[%q]", key), "invalid key: %s", strings.Join(errs, "; "))
			} else if prefix, reserved := ReservedLabelKey(key); reserved {
				report(fmt.Sprintf("labels[%q]", key), "the prefix %q is reserved for Kubernetes (kubernetes.io/, k8s.io/ and their subdomains: the kubelet's, the scheduler's and the NodeRestriction admission plugin's labels); use a prefix of your own, such as node.example.com/", prefix+"/")
			}
			if errs := content.IsLabelValue(r.Labels[key]); len(errs) > 0 {
				report(fmt.Sprintf("labels[%q]", key), "invalid value %q: %s", r.Labels[key], strings.Join(errs, "; "))
			}
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return nil
}

// ReservedLabelKey tells whether the label key is in a namespace Kubernetes reserves,
// which no rule may set, and returns its prefix: kubernetes.io and k8s.io and every
// subdomain of them (node-role.kubernetes.io, node-restriction.kubernetes.io,
// topology.kubernetes.io, node.kubernetes.io, ...). Those labels are the kubelet's
// (kubernetes.io/hostname, kubernetes.io/os), the cloud provider's
// (topology.kubernetes.io/zone), the cluster administrator's (node-role.kubernetes.io/*)
// or reserved by the NodeRestriction admission plugin for labels that a node must not be
// able to give itself (node-restriction.kubernetes.io/*); a labeler that anyone with
// access to its rules file can steer must not write them. There is no exception. The
// admission policy shipped with the controller (config/admission) refuses the same keys.
func ReservedLabelKey(key string) (prefix string, reserved bool) {
	prefix, _, found := strings.Cut(key, "/")
	if !found {
		return "", false
	}
	prefix = strings.ToLower(prefix)
	for _, domain := range reservedLabelDomains {
		if prefix == domain || strings.HasSuffix(prefix, "."+domain) {
			return prefix, true
		}
	}
	return "", false
}

// reservedLabelDomains are the DNS domains of the label namespaces Kubernetes reserves.
var reservedLabelDomains = []string{"kubernetes.io", "k8s.io"}

// selectorKeys returns the label keys a selector looks at, sorted and without
// duplicates.
func selectorKeys(s *metav1.LabelSelector) []string {
	seen := map[string]bool{}
	var keys []string
	add := func(k string) {
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	for _, k := range sortedKeys(s.MatchLabels) {
		add(k)
	}
	for _, e := range s.MatchExpressions {
		add(e.Key)
	}
	sort.Strings(keys)
	return keys
}

// sortedKeys returns the keys of m, sorted.
func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

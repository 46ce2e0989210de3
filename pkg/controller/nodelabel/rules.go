package nodelabel

import (
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Rules are a validated configuration's rules, ready to match nodes, in the
// configuration's order.
type Rules []compiledRule

// compiledRule is a Rule with its matchers built.
type compiledRule struct {
	Rule
	// nameRegex is Match.NameRegex anchored at both ends; nil when unset.
	nameRegex *regexp.Regexp
	// selector is Match.LabelSelector; nil when unset.
	selector labels.Selector
}

// Compile validates cfg and returns its rules ready to match nodes. It never changes
// cfg.
func (cfg *Config) Compile() (Rules, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rules := make(Rules, 0, len(cfg.Rules))
	for i, r := range cfg.Rules {
		cr := compiledRule{Rule: r}
		var err error
		if r.Match.NameRegex != "" {
			if cr.nameRegex, err = regexp.Compile(`^(?:` + r.Match.NameRegex + `)$`); err != nil {
				return nil, fmt.Errorf("%s: match.nameRegex: %w", cfg.ruleRef(i), err)
			}
		}
		if r.Match.LabelSelector != nil {
			if cr.selector, err = metav1.LabelSelectorAsSelector(r.Match.LabelSelector); err != nil {
				return nil, fmt.Errorf("%s: match.labelSelector: %w", cfg.ruleRef(i), err)
			}
		}
		rules = append(rules, cr)
	}
	return rules, nil
}

// matches reports whether node meets every criterion of the rule's match.
func (r *compiledRule) matches(node *corev1.Node) bool {
	if r.Match.ProviderIDPrefix != "" && !strings.HasPrefix(node.Spec.ProviderID, r.Match.ProviderIDPrefix) {
		return false
	}
	if r.nameRegex != nil && !r.nameRegex.MatchString(node.Name) {
		return false
	}
	if r.selector != nil && !r.selector.Matches(labels.Set(node.Labels)) {
		return false
	}
	return true
}

// ruleConflict is two rules that match a node and set one label to different values.
// The earlier rule, the winner, sets the label.
type ruleConflict struct {
	key                     string
	winner, loser           string
	winnerValue, loserValue string
}

// evaluation is what the rules want for one node.
type evaluation struct {
	// labels are the labels the node should carry, from every matching rule.
	labels map[string]string
	// matched names the matching rules, in order.
	matched []string
	// conflicts are the labels that matching rules disagree on.
	conflicts []ruleConflict
}

// evaluate applies the rules to node. Rules are taken in order: when two matching rules
// set a label to different values, the first one wins and the disagreement is reported
// in conflicts.
func (rules Rules) evaluate(node *corev1.Node) evaluation {
	ev := evaluation{labels: map[string]string{}}
	setBy := map[string]string{}
	for i := range rules {
		r := &rules[i]
		if !r.matches(node) {
			continue
		}
		ev.matched = append(ev.matched, r.Name)
		for _, key := range sortedKeys(r.Labels) {
			value := r.Labels[key]
			winner, taken := setBy[key]
			switch {
			case !taken:
				setBy[key] = r.Name
				ev.labels[key] = value
			case ev.labels[key] != value:
				ev.conflicts = append(ev.conflicts, ruleConflict{
					key: key, winner: winner, loser: r.Name, winnerValue: ev.labels[key], loserValue: value,
				})
			}
		}
	}
	return ev
}

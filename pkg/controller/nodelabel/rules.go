package nodelabel

import (
	corev1 "k8s.io/api/core/v1"
)

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
func (cfg *Config) evaluate(node *corev1.Node) evaluation {
	ev := evaluation{labels: map[string]string{}}
	setBy := map[string]string{}
	for i := range cfg.Rules {
		r := &cfg.Rules[i]
		if !r.Matches(node) {
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

package nodelabel

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// mustCompile parses and compiles a config that the test knows to be valid.
func mustCompile(t *testing.T, yaml string) Rules {
	t.Helper()
	rules, err := mustParse(t, yaml).Compile()
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return rules
}

// mustParse parses a config that the test knows to be valid.
func mustParse(t *testing.T, yaml string) *Config {
	t.Helper()
	cfg, err := ParseConfig([]byte(yaml))
	if err != nil {
		t.Fatalf("ParseConfig: %v", err)
	}
	return cfg
}

// newNode returns a node with the given provider ID and labels.
func newNode(name, providerID string, labels map[string]string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), ResourceVersion: "1", Labels: labels},
		Spec:       corev1.NodeSpec{ProviderID: providerID},
	}
}

func TestRuleMatches(t *testing.T) {
	tests := []struct {
		name  string
		match string
		node  *corev1.Node
		want  bool
	}{
		{"provider prefix", `providerIDPrefix: "kwok://"`, newNode("n", "kwok://n", nil), true},
		{"other provider", `providerIDPrefix: "kwok://"`, newNode("n", "aws:///eu/i-1", nil), false},
		{"no provider ID", `providerIDPrefix: "kwok://"`, newNode("n", "", nil), false},
		{"name regex", `nameRegex: "kwok-node-[0-9]+"`, newNode("kwok-node-12", "", nil), true},
		{"name regex is anchored at the start", `nameRegex: "kwok-node-[0-9]+"`, newNode("my-kwok-node-1", "", nil), false},
		{"name regex is anchored at the end", `nameRegex: "kwok-node"`, newNode("kwok-node-1", "", nil), false},
		{"name regex alternation stays anchored", `nameRegex: "a|b"`, newNode("xb", "", nil), false},
		{"label selector", `labelSelector: {matchLabels: {pool: gpu}}`, newNode("n", "", map[string]string{"pool": "gpu"}), true},
		{"label selector mismatch", `labelSelector: {matchLabels: {pool: gpu}}`, newNode("n", "", map[string]string{"pool": "cpu"}), false},
		{"label selector expression", `labelSelector: {matchExpressions: [{key: zone, operator: Exists}]}`, newNode("n", "", map[string]string{"zone": "a"}), true},
		{"empty selector matches every node", `labelSelector: {}`, newNode("n", "", nil), true},
		{"all criteria must match", `providerIDPrefix: "kwok://", nameRegex: "kwok-.*"`, newNode("other", "kwok://other", nil), false},
		{"all criteria match", `providerIDPrefix: "kwok://", nameRegex: "kwok-.*"`, newNode("kwok-1", "kwok://kwok-1", nil), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rules := mustCompile(t, "rules:\n- name: r\n  match: {"+tt.match+"}\n  labels: {node.example.com/x: v}\n")
			if got := rules[0].matches(tt.node); got != tt.want {
				t.Errorf("Matches = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestEvaluate(t *testing.T) {
	rules := mustCompile(t, `
rules:
- name: kwok
  match: {providerIDPrefix: "kwok://"}
  labels: {node.example.com/joined-via: kwok, node.example.com/sim: "true"}
- name: gpu
  match: {labelSelector: {matchLabels: {pool: gpu}}}
  labels: {node.example.com/joined-via: gpu-pool, node.example.com/gpu: "true"}
- name: same-value
  match: {nameRegex: "kwok-.*"}
  labels: {node.example.com/sim: "true"}
`)
	tests := []struct {
		name string
		node *corev1.Node
		want evaluation
	}{
		{
			name: "no rule matches",
			node: newNode("n", "aws://n", nil),
			want: evaluation{labels: map[string]string{}},
		},
		{
			name: "one rule",
			node: newNode("n", "kwok://n", nil),
			want: evaluation{
				labels:  map[string]string{"node.example.com/joined-via": "kwok", "node.example.com/sim": "true"},
				matched: []string{"kwok"},
			},
		},
		{
			name: "first rule wins a conflict; agreeing rules are no conflict",
			node: newNode("kwok-1", "kwok://kwok-1", map[string]string{"pool": "gpu"}),
			want: evaluation{
				labels: map[string]string{
					"node.example.com/joined-via": "kwok",
					"node.example.com/sim":        "true",
					"node.example.com/gpu":        "true",
				},
				matched: []string{"kwok", "gpu", "same-value"},
				conflicts: []ruleConflict{{
					key: "node.example.com/joined-via", winner: "kwok", loser: "gpu", winnerValue: "kwok", loserValue: "gpu-pool",
				}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := rules.evaluate(tt.node); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("evaluate =\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

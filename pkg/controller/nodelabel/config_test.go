package nodelabel

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseConfig(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		// wantErr are substrings of the error; none: the config is valid.
		wantErr []string
		// wantRules is the number of rules of a valid config.
		wantRules int
	}{
		{
			name: "issue example",
			yaml: `
rules:
- name: kwok-nodes
  match:
    providerIDPrefix: "kwok://"
  labels:
    node.example.com/joined-via: kwok
`,
			wantRules: 1,
		},
		{
			name: "every criterion",
			yaml: `
rules:
- name: all
  match:
    providerIDPrefix: "kwok://"
    nameRegex: "kwok-node-[0-9]+"
    labelSelector:
      matchLabels: {type: kwok}
      matchExpressions:
      - {key: zone, operator: In, values: [a, b]}
  labels: {node.example.com/all: "yes", plain: ""}
- name: other
  match: {labelSelector: {}}
  labels: {node.example.com/other: "1"}
`,
			wantRules: 2,
		},
		{name: "explicit empty rules", yaml: "rules: []\n", wantRules: 0},
		{
			name: "reserved prefixes",
			yaml: `
rules:
- name: roles
  match: {providerIDPrefix: "kwok://"}
  labels:
    node-role.kubernetes.io/control-plane: ""
    node-restriction.kubernetes.io/trusted: "true"
    node.example.com/ok: "yes"
- name: kubelet
  match: {nameRegex: "n.*"}
  labels:
    kubernetes.io/hostname: other
    topology.kubernetes.io/zone: a
    sub.k8s.io/y: "2"
`,
			wantErr: []string{
				`rules[0] (name "roles"): labels["node-restriction.kubernetes.io/trusted"]: the prefix "node-restriction.kubernetes.io/" is reserved for Kubernetes`,
				`rules[0] (name "roles"): labels["node-role.kubernetes.io/control-plane"]: the prefix "node-role.kubernetes.io/" is reserved`,
				`rules[1] (name "kubelet"): labels["kubernetes.io/hostname"]: the prefix "kubernetes.io/" is reserved`,
				`rules[1] (name "kubelet"): labels["topology.kubernetes.io/zone"]: the prefix "topology.kubernetes.io/" is reserved`,
				`rules[1] (name "kubelet"): labels["sub.k8s.io/y"]: the prefix "sub.k8s.io/" is reserved`,
			},
		},
		{
			name: "look-alike prefixes are not reserved",
			yaml: `
rules:
- name: fine
  match: {providerIDPrefix: "kwok://"}
  labels:
    notkubernetes.io/a: "1"
    kubernetes.io.example.com/b: "1"
    example.com/kubernetes.io: "1"
`,
			wantRules: 1,
		},
		{name: "empty file", yaml: "", wantErr: []string{"rules: required"}},
		{name: "not YAML", yaml: "rules: [\n", wantErr: []string{"parsing YAML"}},
		{
			name:    "duplicate key",
			yaml:    "rules: []\nrules: []\n",
			wantErr: []string{"parsing YAML", `"rules" already set`},
		},
		{name: "unknown top-level field", yaml: "rules: []\nrule: []\n", wantErr: []string{"rule: unknown field"}},
		{
			name: "unknown field in a rule",
			yaml: `
rules:
- name: a
  match: {providerIDPrefix: "kwok://", nameRegexp: "x"}
  labels: {k: v}
`,
			wantErr: []string{`rules[0] (name "a"): match.nameRegexp: unknown field`},
		},
		{
			name:    "field names are case-sensitive",
			yaml:    "rules:\n- Name: a\n  match: {providerIDPrefix: x}\n  labels: {k: v}\n",
			wantErr: []string{"rules[0]: Name: unknown field"},
		},
		{
			name:    "wrong type",
			yaml:    "rules:\n- name: a\n  match: {providerIDPrefix: x}\n  labels: [k]\n",
			wantErr: []string{"decoding", "cannot unmarshal array"},
		},
		{
			name:    "label value not a string",
			yaml:    "rules:\n- name: a\n  match: {providerIDPrefix: x}\n  labels: {k: true}\n",
			wantErr: []string{"decoding", "cannot unmarshal bool", `quote values that YAML reads as booleans or numbers`},
		},
		{
			name:    "YAML 1.1 boolean",
			yaml:    "rules:\n- name: a\n  match: {providerIDPrefix: x}\n  labels: {k: yes}\n",
			wantErr: []string{"cannot unmarshal bool"},
		},
		{
			name:    "missing name",
			yaml:    "rules:\n- match: {providerIDPrefix: x}\n  labels: {k: v}\n",
			wantErr: []string{"rules[0]: name: required"},
		},
		{
			name: "duplicate name",
			yaml: `
rules:
- {name: a, match: {providerIDPrefix: x}, labels: {k: v}}
- {name: a, match: {providerIDPrefix: z}, labels: {k2: v}}
`,
			wantErr: []string{`rules[1] (name "a"): name: duplicate of rules[0]`},
		},
		{
			name:    "no match criterion",
			yaml:    "rules:\n- {name: a, match: {}, labels: {k: v}}\n",
			wantErr: []string{`rules[0] (name "a"): match: at least one of providerIDPrefix, nameRegex and labelSelector is required`},
		},
		{
			name:    "match missing",
			yaml:    "rules:\n- {name: a, labels: {k: v}}\n",
			wantErr: []string{`rules[0] (name "a"): match: at least one of`},
		},
		{
			name: "invalid regexp",
			yaml: `
rules:
- {name: ok, match: {providerIDPrefix: x}, labels: {k: v}}
- {name: x, match: {nameRegex: "kwok-("}, labels: {k2: v}}
`,
			wantErr: []string{`rules[1] (name "x"): match.nameRegex: invalid regexp: error parsing regexp: missing closing )`},
		},
		{
			name:    "invalid label selector",
			yaml:    "rules:\n- {name: a, match: {labelSelector: {matchExpressions: [{key: zone, operator: In}]}}, labels: {k: v}}\n",
			wantErr: []string{`rules[0] (name "a"): match.labelSelector: `, "values"},
		},
		{
			name:    "invalid label selector operator",
			yaml:    "rules:\n- {name: a, match: {labelSelector: {matchExpressions: [{key: zone, operator: Near, values: [x]}]}}, labels: {k: v}}\n",
			wantErr: []string{`rules[0] (name "a"): match.labelSelector: `, "Near"},
		},
		{
			name: "selector on a label the labeler sets",
			yaml: `
rules:
- {name: setter, match: {providerIDPrefix: x}, labels: {node.example.com/pool: a}}
- {name: reader, match: {labelSelector: {matchLabels: {node.example.com/pool: a}}}, labels: {k: v}}
`,
			wantErr: []string{`rules[1] (name "reader"): match.labelSelector: selects on label "node.example.com/pool", which rule "setter" sets`},
		},
		{
			name:    "selector on its own label",
			yaml:    "rules:\n- {name: a, match: {labelSelector: {matchExpressions: [{key: k, operator: DoesNotExist}]}}, labels: {k: v}}\n",
			wantErr: []string{`rules[0] (name "a"): match.labelSelector: selects on label "k", which rule "a" sets`},
		},
		{
			name:    "no labels",
			yaml:    "rules:\n- {name: a, match: {providerIDPrefix: x}}\n",
			wantErr: []string{`rules[0] (name "a"): labels: at least one label is required`},
		},
		{
			name:    "invalid label key",
			yaml:    "rules:\n- {name: a, match: {providerIDPrefix: x}, labels: {\"bad key\": v}}\n",
			wantErr: []string{`rules[0] (name "a"): labels["bad key"]: invalid key: `},
		},
		{
			name:    "invalid label key prefix",
			yaml:    "rules:\n- {name: a, match: {providerIDPrefix: x}, labels: {\"Example.com/k\": v}}\n",
			wantErr: []string{`rules[0] (name "a"): labels["Example.com/k"]: invalid key: `},
		},
		{
			name:    "invalid label value",
			yaml:    "rules:\n- {name: a, match: {providerIDPrefix: x}, labels: {k: \"not valid\"}}\n",
			wantErr: []string{`rules[0] (name "a"): labels["k"]: invalid value "not valid": `},
		},
		{
			name: "every problem is reported",
			yaml: `
rules:
- {name: a, match: {}, labels: {k: "not valid"}}
- {name: b, match: {nameRegex: "("}}
`,
			wantErr: []string{
				`rules[0] (name "a"): match: at least one of`,
				`rules[0] (name "a"): labels["k"]: invalid value`,
				`rules[1] (name "b"): match.nameRegex: invalid regexp`,
				`rules[1] (name "b"): labels: at least one label is required`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := ParseConfig([]byte(tt.yaml))
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("ParseConfig: %v", err)
				}
				if len(cfg.Rules) != tt.wantRules {
					t.Errorf("got %d rules, want %d", len(cfg.Rules), tt.wantRules)
				}
				return
			}
			if err == nil {
				t.Fatalf("ParseConfig succeeded, want an error containing %q", tt.wantErr)
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
}

func TestLoadConfig(t *testing.T) {
	t.Run("example artifact is valid", func(t *testing.T) {
		cfg, err := LoadConfig(filepath.Join("..", "..", "..", "artifacts", "nodelabel", "rules.yaml"))
		if err != nil {
			t.Fatalf("LoadConfig: %v", err)
		}
		if len(cfg.Rules) != 1 || cfg.Rules[0].Name != "kwok-nodes" ||
			cfg.Rules[0].Labels["node.example.com/joined-via"] != "kwok" {
			t.Errorf("unexpected rules %+v", cfg.Rules)
		}
	})
	t.Run("missing file", func(t *testing.T) {
		_, err := LoadConfig(filepath.Join(t.TempDir(), "absent.yaml"))
		if err == nil || !strings.Contains(err.Error(), "reading node label config") || !strings.Contains(err.Error(), "absent.yaml") {
			t.Errorf("got %v, want a read error naming the file", err)
		}
	})
	t.Run("invalid file names the file, rule and field", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "rules.yaml")
		if err := os.WriteFile(path, []byte("rules:\n- {name: x, match: {nameRegex: \"(\"}, labels: {k: v}}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := LoadConfig(path)
		want := "node label config " + path + `: rules[0] (name "x"): match.nameRegex: invalid regexp`
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("got %v, want an error starting with %q", err, want)
		}
	})
}

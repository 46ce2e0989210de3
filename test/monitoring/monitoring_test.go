package monitoring

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

const (
	rulesPath     = "../../config/prometheus/rules.yaml"
	dashboardPath = "../../config/grafana/app-controller.json"
	ksmPath       = "../../config/prometheus/kube-state-metrics-app.yaml"
	crdPath       = "../../config/crd/bases/appcontroller.k8s.io_apps.yaml"
	operationsDoc = "../../docs/operations.md"
)

func TestMetricNames(t *testing.T) {
	tests := []struct {
		expr string
		want []string
	}{
		{expr: `up`, want: []string{"up"}},
		{expr: `rate(controller_runtime_reconcile_total{job="x", result=~"error|requeue"}[5m])`,
			want: []string{"controller_runtime_reconcile_total"}},
		{expr: `sum by (controller, le) (rate(a_bucket{job=~"$job"}[$__rate_interval])) / ignoring(le) group_left(x) b offset 5m > bool 0.5`,
			want: []string{"a_bucket", "b"}},
		{expr: `histogram_quantile(0.99, sum without (instance) (rate(x_bucket[1h30m]))) and on (name) y{a="}{"} unless z`,
			want: []string{"x_bucket", "y", "z"}},
		{expr: `(sum(leader_election_master_status{job="j"}) or vector(0)) < 1e3`, want: []string{"leader_election_master_status"}},
		{expr: `label_values(controller_runtime_reconcile_total, job)`, want: []string{"controller_runtime_reconcile_total"}},
		{expr: "sum(go_goroutines{pod=\"${pod}\"}) # a comment naming not_a_metric\n", want: []string{"go_goroutines"}},
		{expr: `max by (pod) (x:recorded:rate5m) * on() group_right() Inf`, want: []string{"x:recorded:rate5m"}},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			got, err := MetricNames(tt.expr)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("MetricNames = %q, want %q", got, tt.want)
			}
		})
	}
	for _, bad := range []string{`x{a="b"`, `rate(x[5m)`, `x{a="b}`} {
		if _, err := MetricNames(bad); err == nil {
			t.Errorf("MetricNames(%q): no error", bad)
		}
	}
}

// anchors returns the GitHub anchors of the headings of a Markdown file.
func anchors(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	drop := regexp.MustCompile(`[^a-z0-9 _-]`)
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		heading := strings.TrimSpace(strings.TrimLeft(line, "#"))
		out = append(out, strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(heading), ""), " ", "-"))
	}
	return out
}

// TestRules checks that every alert has an expression selecting metrics, a severity, a
// summary and a runbook_url pointing to a section of docs/operations.md.
func TestRules(t *testing.T) {
	rules, err := Rules(rulesPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) < 6 {
		t.Fatalf("%d rules, want at least 6", len(rules))
	}
	sections := anchors(t, operationsDoc)
	for _, r := range rules {
		t.Run(r.Alert, func(t *testing.T) {
			names, err := MetricNames(r.Expr)
			if err != nil || len(names) == 0 {
				t.Errorf("expr %q: metrics %q, %v", r.Expr, names, err)
			}
			if r.Labels["severity"] == "" || r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("severity, summary and description must be set: %+v", r)
			}
			url := r.Annotations["runbook_url"]
			_, anchor, ok := strings.Cut(url, "docs/operations.md#")
			if !ok || !slices.Contains(sections, anchor) {
				t.Errorf("runbook_url %q names no section of docs/operations.md", url)
			}
		})
	}
}

// TestDashboard checks that the dashboard parses and every query selects metrics.
func TestDashboard(t *testing.T) {
	queries, err := DashboardQueries(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(queries) < 10 {
		t.Fatalf("%d queries, want at least 10", len(queries))
	}
	for _, q := range queries {
		if names, err := MetricNames(q.Expr); err != nil || len(names) == 0 {
			t.Errorf("panel %q: expr %q: metrics %q, %v", q.Panel, q.Expr, names, err)
		}
	}
}

// ksmConfig is the part of a kube-state-metrics CustomResourceStateMetrics read here.
type ksmConfig struct {
	Kind string `json:"kind"`
	Spec struct {
		Resources []struct {
			GroupVersionKind struct {
				Group, Version, Kind string
			} `json:"groupVersionKind"`
			MetricNamePrefix string `json:"metricNamePrefix"`
			Metrics          []struct {
				Name           string              `json:"name"`
				Help           string              `json:"help"`
				LabelsFromPath map[string][]string `json:"labelsFromPath"`
				Each           struct {
					Type string `json:"type"`
					Info *struct {
						Path           []string            `json:"path"`
						LabelsFromPath map[string][]string `json:"labelsFromPath"`
					} `json:"info"`
					Gauge *struct {
						Path           []string            `json:"path"`
						ValueFrom      []string            `json:"valueFrom"`
						LabelsFromPath map[string][]string `json:"labelsFromPath"`
					} `json:"gauge"`
				} `json:"each"`
			} `json:"metrics"`
		} `json:"resources"`
	} `json:"spec"`
}

// TestKubeStateMetricsConfig checks that the kube-state-metrics configuration names the
// App's group, version and kind, and that every path it reads exists in the App's schema
// (the CRD generated from the App type).
func TestKubeStateMetricsConfig(t *testing.T) {
	data, err := os.ReadFile(ksmPath)
	if err != nil {
		t.Fatal(err)
	}
	var cfg ksmConfig
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		t.Fatalf("parsing %s: %v", ksmPath, err)
	}
	crdData, err := os.ReadFile(crdPath)
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(crdData, &crd); err != nil {
		t.Fatal(err)
	}
	if cfg.Kind != "CustomResourceStateMetrics" || len(cfg.Spec.Resources) != 1 {
		t.Fatalf("want one resource of a CustomResourceStateMetrics, got %+v", cfg)
	}
	res := cfg.Spec.Resources[0]
	if res.GroupVersionKind.Group != crd.Spec.Group || res.GroupVersionKind.Kind != crd.Spec.Names.Kind {
		t.Errorf("groupVersionKind %+v is not the App's", res.GroupVersionKind)
	}
	var schema *apiextensionsv1.JSONSchemaProps
	for _, v := range crd.Spec.Versions {
		if v.Name == res.GroupVersionKind.Version {
			schema = v.Schema.OpenAPIV3Schema
		}
	}
	if schema == nil {
		t.Fatalf("version %s is not served by the CRD", res.GroupVersionKind.Version)
	}
	if len(res.Metrics) == 0 {
		t.Fatal("no metrics")
	}
	for _, m := range res.Metrics {
		t.Run(m.Name, func(t *testing.T) {
			paths := map[string][]string{}
			for label, p := range m.LabelsFromPath {
				paths["label "+label] = p
			}
			switch {
			case m.Each.Info != nil:
				for label, p := range m.Each.Info.LabelsFromPath {
					paths["label "+label] = append(slices.Clone(m.Each.Info.Path), p...)
				}
			case m.Each.Gauge != nil:
				paths["gauge value"] = append(slices.Clone(m.Each.Gauge.Path), m.Each.Gauge.ValueFrom...)
				for label, p := range m.Each.Gauge.LabelsFromPath {
					paths["label "+label] = append(slices.Clone(m.Each.Gauge.Path), p...)
				}
			default:
				t.Fatalf("metric %s: type %q has no info or gauge", m.Name, m.Each.Type)
			}
			for what, p := range paths {
				if err := schemaPath(schema, p); err != nil {
					t.Errorf("%s: path %q: %v", what, p, err)
				}
			}
		})
	}
	// A path that is not in the App fails.
	if err := schemaPath(schema, []string{"status", "conditions", "[type=Ready]", "nope"}); err == nil {
		t.Error("schemaPath accepted a field the App does not have")
	}
}

// filter is a kube-state-metrics path element selecting array items, [field=value].
var filter = regexp.MustCompile(`^\[([A-Za-z0-9_]+)=[^\]]*\]$`)

// schemaPath checks that path, in kube-state-metrics' syntax, exists in schema.
func schemaPath(schema *apiextensionsv1.JSONSchemaProps, path []string) error {
	cur := schema
	for _, elem := range path {
		if m := filter.FindStringSubmatch(elem); m != nil {
			if cur.Type != "array" || cur.Items == nil || cur.Items.Schema == nil {
				return fmt.Errorf("%s filters a field that is not an array", elem)
			}
			cur = cur.Items.Schema
			if _, ok := cur.Properties[m[1]]; !ok {
				return fmt.Errorf("the items have no field %s", m[1])
			}
			continue
		}
		if elem == "metadata" && cur == schema {
			// The CRD schema leaves metadata to the API server: its fields are ObjectMeta's.
			return metadataPath(path[1:])
		}
		next, ok := cur.Properties[elem]
		if !ok {
			return fmt.Errorf("no field %s", elem)
		}
		cur = &next
	}
	return nil
}

// metadataPath checks a path under metadata against the ObjectMeta fields read here.
func metadataPath(path []string) error {
	known := []string{"name", "namespace", "generation", "uid", "creationTimestamp", "deletionTimestamp", "resourceVersion"}
	if len(path) != 1 || !slices.Contains(known, path[0]) {
		return fmt.Errorf("metadata path %q is not an ObjectMeta scalar", path)
	}
	return nil
}

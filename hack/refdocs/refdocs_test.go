package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/component-base/metrics"
)

func TestParseDesc(t *testing.T) {
	vec := metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "x", Name: "things_total", Help: `Things, "quoted"`, StabilityLevel: metrics.ALPHA,
	}, []string{"kind", "result"})
	metrics.NewKubeRegistry().MustRegister(vec)
	descs := make(chan *prometheus.Desc, 1)
	vec.Describe(descs)
	typ, err := metricType(vec)
	if err != nil {
		t.Fatal(err)
	}
	got, err := parseDesc((<-descs).String(), typ)
	if err != nil {
		t.Fatal(err)
	}
	want := metricDoc{name: "x_things_total", typ: "counter", stability: "alpha", help: `Things, "quoted"`, labels: []string{"kind", "result"}}
	if got.name != want.name || got.typ != want.typ || got.stability != want.stability || got.help != want.help ||
		strings.Join(got.labels, ",") != strings.Join(want.labels, ",") {
		t.Errorf("parseDesc = %+v, want %+v", got, want)
	}
	if _, err := parseDesc("something else", "gauge"); err == nil {
		t.Error("parseDesc of an unknown format: no error")
	}
}

// TestRenderValues renders the values of a small chart: a row per leaf with its type
// from the schema, its default and the comment above it; a key the schema does not
// know is an error.
func TestRenderValues(t *testing.T) {
	schema := `{
  "definitions": {"duration": {"type": "string", "description": "A Go duration."}},
  "type": "object", "additionalProperties": false,
  "properties": {
    "image": {"type": "object", "additionalProperties": false, "properties": {
      "pullPolicy": {"type": "string", "enum": ["Always", "Never"]},
      "tag": {"type": "string", "description": "The tag."}}},
    "period": {"$ref": "#/definitions/duration"},
    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
    "names": {"type": "array", "items": {"type": "string"}}
  }
}`
	values := `# The chart's values.

image:
  # How | the kubelet pulls <it>.
  pullPolicy: Always
  tag: ""
# How often.
period: 30s
labels:
  team: web
names: ["*"]
`
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("values.schema.json", schema)
	write("values.yaml", values)
	var buf bytes.Buffer
	if err := renderValues(&buf, dir); err != nil {
		t.Fatal(err)
	}
	for _, row := range []string{
		"| `image.pullPolicy` | one of Always, Never | `Always` | How \\| the kubelet pulls &lt;it>. |\n",
		"| `image.tag` | string | `\"\"` | The tag. |\n",
		"| `period` | duration | `30s` | How often. |\n",
		"| `labels.team` | string | `web` |  |\n",
		"| `names` | array of string | `[\"*\"]` |  |\n",
	} {
		if !strings.Contains(buf.String(), row) {
			t.Errorf("no row %q in:\n%s", row, buf.String())
		}
	}
	write("values.yaml", values+"unknown: 1\n")
	if err := renderValues(&buf, dir); err == nil || !strings.Contains(err.Error(), "unknown: not in values.schema.json") {
		t.Errorf("a key the schema does not know: error %v", err)
	}
}

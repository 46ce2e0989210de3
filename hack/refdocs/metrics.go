package main

import (
	"bytes"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/component-base/metrics"

	"github.com/app-controller/app-controller/pkg/controller"
	"github.com/app-controller/app-controller/pkg/controller/app"
	"github.com/app-controller/app-controller/pkg/controller/nodelabel"
	"github.com/app-controller/app-controller/pkg/controllermanager"
)

// metricDoc is a row of metrics.md.
type metricDoc struct {
	name, typ, stability, help string
	labels                     []string
}

// descPattern reads what a prometheus.Desc prints: its name, help and variable labels (client_golang v1.24 added a unit, empty for ours).
var descPattern = regexp.MustCompile(`^Desc\{fqName: "([^"]*)", help: "((?:[^"\\]|\\.)*)", (?:unit: "[^"]*", )?constLabels: \{[^}]*\}, variableLabels: \{([^}]*)\}\}$`)

// stabilityPattern is the stability level component-base puts before a metric's help.
var stabilityPattern = regexp.MustCompile(`^\[([A-Z]+)\] `)

// renderMetrics writes metrics.md: every metric the controller's packages register on
// /metrics, from their definitions.
func renderMetrics(w *bytes.Buffer) error {
	registerables := controller.Metrics()
	appMetrics, collectors := app.Metrics()
	registerables = append(registerables, appMetrics...)
	registerables = append(registerables, nodelabel.Metrics()...)
	managerMetrics, managerCollectors := controllermanager.Metrics()
	registerables = append(registerables, managerMetrics...)
	collectors = append(collectors, managerCollectors...)

	// Registering creates the metrics, as on /metrics (their help with its stability).
	registry := metrics.NewKubeRegistry()
	registry.MustRegister(registerables...)
	registry.CustomMustRegister(collectors...)

	var docs []metricDoc
	for _, r := range registerables {
		typ, err := metricType(r)
		if err != nil {
			return err
		}
		descs := make(chan *prometheus.Desc, 8)
		r.Describe(descs)
		close(descs)
		for d := range descs {
			doc, err := parseDesc(d.String(), typ)
			if err != nil {
				return err
			}
			docs = append(docs, doc)
		}
	}
	for _, c := range collectors {
		descs := make(chan *metrics.Desc, 8)
		c.DescribeWithStability(descs)
		close(descs)
		for d := range descs {
			// Collectors compute gauges at scrape time (app.Metrics says so; its tests
			// check the types they emit).
			doc, err := parseDesc(d.String(), "gauge")
			if err != nil {
				return err
			}
			docs = append(docs, doc)
		}
	}
	sort.Slice(docs, func(i, j int) bool { return docs[i].name < docs[j].name })

	w.WriteString("# app-controller metrics\n\n")
	w.WriteString(generated("the metrics registered by pkg/controller, pkg/controller/app, pkg/controller/nodelabel and pkg/controllermanager"))
	w.WriteString(`
` + "`--metrics-bind-address`" + ` (e.g. ` + "`:8080`" + `; off by default, on in the chart) serves them on ` + "`/metrics`" + `,
with the help text below. The ` + "`controller_runtime_*`" + ` metrics have controller-runtime's names, labels
and buckets, so that dashboards and alerts written for controller-runtime operators work
unchanged. What each means for operations, the alerts and the dashboard:
[operations.md](../operations.md#metrics).

| metric | type | labels | stability | help |
|---|---|---|---|---|
`)
	for _, d := range docs {
		labels := make([]string, len(d.labels))
		for i, l := range d.labels {
			labels[i] = code(l)
		}
		fmt.Fprintf(w, "| `%s` | %s | %s | %s | %s |\n", d.name, d.typ, strings.Join(labels, ", "), d.stability, cell(d.help))
	}
	w.WriteString(`
Also served, from the libraries the controller is built on: the work queues'
(` + "`workqueue_*`" + `, label ` + "`name`" + `), client-go's requests (` + "`rest_client_*`" + `), leader election
(` + "`leader_election_master_status`" + `, with ` + "`--leader-elect`" + `), and the Go runtime and process collectors
(` + "`go_*`" + `, ` + "`process_*`" + `).
`)
	return nil
}

// metricType is the Prometheus type of a metric, from its Go type.
func metricType(r metrics.Registerable) (string, error) {
	switch r.(type) {
	case *metrics.Counter, *metrics.CounterVec:
		return "counter", nil
	case *metrics.Gauge, *metrics.GaugeVec:
		return "gauge", nil
	case *metrics.Histogram, *metrics.HistogramVec:
		return "histogram", nil
	}
	// No summary: component-base deprecates Summary and SummaryVec (the metrics overhaul
	// KEP), and the controllers register none.
	return "", fmt.Errorf("metric %s: no Prometheus type known for its Go type %T", r.FQName(), r)
}

// parseDesc reads a metric's name, help and labels from what its descriptor prints.
func parseDesc(desc, typ string) (metricDoc, error) {
	m := descPattern.FindStringSubmatch(desc)
	if m == nil {
		return metricDoc{}, fmt.Errorf("cannot read the metric descriptor %s", desc)
	}
	help := strings.ReplaceAll(m[2], `\"`, `"`)
	stability := ""
	if s := stabilityPattern.FindStringSubmatch(help); s != nil {
		stability, help = strings.ToLower(s[1]), strings.TrimPrefix(help, s[0])
	}
	var labels []string
	if m[3] != "" {
		labels = strings.Split(m[3], ",")
	}
	return metricDoc{name: m[1], typ: typ, stability: stability, help: help, labels: labels}, nil
}

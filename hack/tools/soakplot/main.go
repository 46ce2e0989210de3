// Command soakplot draws the report of a soak (test/soak, make soak) as a PNG: the
// resident memory, goroutines and App queue of each shard's leader and the
// controller's writes per second over the run, the faults marked. It is a module of its
// own, so that the plotting library (gonum.org/v1/plot) stays out of the root go.mod.
//
//	soakplot -in .local/soak/report.json -out .local/soak/report.png
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"image/color"
	"os"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// report is the part of test/soak's Report the picture needs.
type report struct {
	Passed   bool `json:"passed"`
	Settings struct {
		DurationS float64 `json:"duration_s"`
		Node      string  `json:"node"`
		Apps      int     `json:"apps"`
	} `json:"settings"`
	OpsPerMinute float64 `json:"ops_per_minute"`
	Samples      []struct {
		T          float64 `json:"t"`
		Shard      string  `json:"shard"`
		Leader     bool    `json:"leader"`
		RSSMiB     float64 `json:"rss_mib"`
		Goroutines float64 `json:"goroutines"`
		Queue      float64 `json:"queue"`
	} `json:"samples"`
	WriteRate []struct {
		T float64 `json:"t"`
		V float64 `json:"writes_per_s"`
	} `json:"write_rate"`
	Faults []struct {
		Kind   string  `json:"kind"`
		StartS float64 `json:"start_s"`
		EndS   float64 `json:"end_s"`
	} `json:"faults"`
}

func main() {
	in := flag.String("in", ".local/soak/report.json", "the soak's JSON report")
	out := flag.String("out", ".local/soak/report.png", "the PNG to write")
	flag.Parse()
	if err := run(*in, *out); err != nil {
		fmt.Fprintf(os.Stderr, "soakplot: %v\n", err)
		os.Exit(1)
	}
}

func run(in, out string) error {
	data, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	var r report
	if err := json.Unmarshal(data, &r); err != nil {
		return fmt.Errorf("reading %s: %w", in, err)
	}
	panels := []struct {
		title, unit string
		value       func(i int) float64
	}{
		{"Resident memory of each shard's leader", "MiB", func(i int) float64 { return r.Samples[i].RSSMiB }},
		{"Goroutines of each shard's leader", "goroutines", func(i int) float64 { return r.Samples[i].Goroutines }},
		{"App work queue of each shard's leader", "keys", func(i int) float64 { return r.Samples[i].Queue }},
	}
	minutes := r.Settings.DurationS / 60
	var plots [][]*plot.Plot
	for n, panel := range panels {
		p := newPlot(panel.title, panel.unit, minutes)
		top := 0.0
		for s, shard := range []string{"a", "b"} {
			var xys plotter.XYs
			for i, x := range r.Samples {
				if x.Shard == shard && x.Leader {
					v := panel.value(i)
					xys = append(xys, plotter.XY{X: x.T / 60, Y: v})
					top = max(top, v)
				}
			}
			if len(xys) == 0 {
				continue
			}
			line, err := plotter.NewLine(xys)
			if err != nil {
				return err
			}
			line.Color = shardColors[s]
			line.Width = vg.Points(1.2)
			p.Add(line)
			p.Legend.Add("shard "+shard, line)
		}
		if err := markFaults(p, &r, top, n == 0); err != nil {
			return err
		}
		plots = append(plots, []*plot.Plot{p})
	}
	p := newPlot("Controller writes per second (audit log, 10 s bins)", "writes/s", minutes)
	var xys plotter.XYs
	top := 0.0
	for _, b := range r.WriteRate {
		xys = append(xys, plotter.XY{X: b.T / 60, Y: b.V})
		top = max(top, b.V)
	}
	if len(xys) > 0 {
		line, err := plotter.NewLine(xys)
		if err != nil {
			return err
		}
		line.Color = color.RGBA{R: 90, G: 90, B: 90, A: 255}
		p.Add(line)
	}
	if err := markFaults(p, &r, top, false); err != nil {
		return err
	}
	p.X.Label.Text = "minutes since the churn started"
	plots = append(plots, []*plot.Plot{p})

	verdict := "passed"
	if !r.Passed {
		verdict = "FAILED"
	}
	plots[0][0].Title.Text = fmt.Sprintf("soak %s: %.0f min on %s, %d Apps, %.1f operations/min; %s\n%s",
		verdict, r.Settings.DurationS/60, r.Settings.Node, r.Settings.Apps, r.OpsPerMinute, panels[0].title, faultList(&r))

	img := vgimg.New(10*vg.Inch, 11*vg.Inch)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(plots), Cols: 1, PadTop: vg.Points(6), PadBottom: vg.Points(6), PadLeft: vg.Points(6), PadRight: vg.Points(10), PadY: vg.Points(10)}
	canvases := plot.Align(plots, tiles, dc)
	for i := range plots {
		plots[i][0].Draw(canvases[i][0])
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

var shardColors = []color.Color{color.RGBA{R: 31, G: 119, B: 180, A: 255}, color.RGBA{R: 214, G: 39, B: 40, A: 255}}

// faultColor shades the faults' spans.
var faultColor = color.NRGBA{R: 255, G: 140, B: 0, A: 90}

func newPlot(title, unit string, minutes float64) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = unit
	p.Y.Min = 0
	p.X.Min, p.X.Max = 0, minutes
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	return p
}

// markFaults shades each fault's span (at least 6 s wide) and, with labels, numbers it
// at the top of the panel; a dashed line marks where the trends' window starts.
func markFaults(p *plot.Plot, r *report, top float64, labels bool) error {
	if top <= 0 {
		top = 1
	}
	var points plotter.XYs
	var texts []string
	for i, f := range r.Faults {
		from, to := f.StartS/60, max(f.EndS, f.StartS+6)/60
		poly, err := plotter.NewPolygon(plotter.XYs{{X: from, Y: 0}, {X: to, Y: 0}, {X: to, Y: top * 1.05}, {X: from, Y: top * 1.05}})
		if err != nil {
			return err
		}
		poly.Color = faultColor
		poly.Width = 0
		poly.LineStyle.Color = color.Transparent
		p.Add(poly)
		points = append(points, plotter.XY{X: from, Y: top * 1.05})
		texts = append(texts, fmt.Sprint(i+1))
	}
	if labels && len(points) > 0 {
		l, err := plotter.NewLabels(plotter.XYLabels{XYs: points, Labels: texts})
		if err != nil {
			return err
		}
		p.Add(l)
	}
	// The trends are fitted from a third of the run on.
	window, err := plotter.NewLine(plotter.XYs{{X: r.Settings.DurationS / 180, Y: 0}, {X: r.Settings.DurationS / 180, Y: top * 1.05}})
	if err != nil {
		return err
	}
	window.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	window.Color = color.Gray{Y: 110}
	p.Add(window)
	if labels {
		p.Legend.Add("trend window from here", window)
	}
	p.Y.Max = top * 1.12
	return nil
}

// faultList names the numbered faults.
func faultList(r *report) string {
	parts := make([]string, 0, len(r.Faults))
	for i, f := range r.Faults {
		parts = append(parts, fmt.Sprintf("%d %s", i+1, f.Kind))
	}
	if len(parts) == 0 {
		return "no fault"
	}
	return "faults (shaded): " + strings.Join(parts, ", ")
}

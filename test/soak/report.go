package soak

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Report is the result of a run: its settings, what happened and every invariant as a
// number. hack/tools/soakplot draws Samples, WriteRate and Faults.
type Report struct {
	Passed   bool      `json:"passed"`
	Started  time.Time `json:"started"`
	Ended    time.Time `json:"ended"`
	Settings Settings  `json:"settings"`
	// Load is the machine's load average during the run (a shared machine), with
	// `uptime` at the start and the end.
	Load Load `json:"load"`
	// Ops are the driver's operations by kind; OpsPerMinute those done per minute.
	Ops          map[string]*OpStats `json:"ops"`
	OpsPerMinute float64             `json:"ops_per_minute"`
	Faults       []FaultRecord       `json:"faults"`
	Convergence  Convergence         `json:"convergence"`
	State        *StateCheck         `json:"state"`
	Writes       Writes              `json:"writes"`
	// Rollouts are the canaries' and the autoscalers' checks (audit log).
	Rollouts *RolloutChecks `json:"rollouts"`
	// Scaling is what the autoscalers did with the autoscaled Apps' CPU load (load.go).
	Scaling *ScalingCheck `json:"scaling,omitempty"`
	// Floor are the canaries' serving pods sampled during their rollouts; floorBreaches
	// its episodes below the floor outside the node's faults.
	Floor         *FloorChecks `json:"serving_floor"`
	floorBreaches []string
	// FaultWindows are the checks of the metrics-server and helm-upgrade faults.
	FaultWindows *FaultWindowChecks `json:"fault_windows"`
	Trends       []Trend            `json:"trends"`
	// TrendsNotJudged says why the trends are not judged ("": they are).
	TrendsNotJudged string      `json:"trends_not_judged,omitempty"`
	Restarts        []Restart   `json:"restarts"`
	Panics          []string    `json:"panics"`
	Invariants      []Invariant `json:"invariants"`
	// Samples are every instance's /metrics samples; WriteRate the controller's writes
	// per second in 10 s bins.
	Samples     []Sample  `json:"samples"`
	WriteRate   []rateBin `json:"write_rate"`
	ScrapeFails int       `json:"scrape_failures"`
	// CountFails are the API's counts of the stores that failed (their samples' excess
	// left out), CountFailure the first one's error.
	CountFails   int    `json:"count_failures"`
	CountFailure string `json:"count_failure,omitempty"`
}

// Settings are the run's configuration.
type Settings struct {
	DurationS       float64    `json:"duration_s"`
	Node            string     `json:"node"`
	Apps            int        `json:"apps"`
	Namespaces      int        `json:"namespaces"`
	Rate            float64    `json:"rate"`
	Mix             []MixEntry `json:"mix_per_minute"`
	HistoryLimit    int        `json:"revision_history_limit"`
	Faults          []string   `json:"faults"`
	FaultIntervalS  float64    `json:"fault_interval_s"`
	FirstFaultS     float64    `json:"first_fault_s"`
	ConvergeBoundS  float64    `json:"converge_bound_s"`
	SampleIntervalS float64    `json:"sample_interval_s"`
	WarmupS         float64    `json:"warmup_s"`
	TrendWindowS    float64    `json:"trend_window_from_s"`
	BoundRelative   float64    `json:"trend_bound_relative_per_hour"`
	Seed            int64      `json:"seed"`
	Controller      string     `json:"controller"`
	// UpgradeFrom is the revision and release the fleet was installed from, upgraded
	// mid-run by the helm-upgrade fault ("" : none).
	UpgradeFrom string `json:"upgrade_from,omitempty"`
}

// Load summarizes the load average samples.
type Load struct {
	UptimeStart string       `json:"uptime_start"`
	UptimeEnd   string       `json:"uptime_end"`
	Min         float64      `json:"load1_min"`
	Mean        float64      `json:"load1_mean"`
	Max         float64      `json:"load1_max"`
	Samples     []LoadSample `json:"samples"`
}

// Writes are the controller's writes over the run (the audit log).
type Writes struct {
	Total   int            `json:"total"`
	ByKind  map[string]int `json:"by_kind"`
	Foreign []string       `json:"foreign"`
	// AfterDelete are the writes that went through to an App's objects after the App
	// was deleted (the audit log's time of its deletion).
	AfterDelete []string `json:"after_delete"`
	// Changes are the writes per change, by kind of change.
	Changes []ChangeWrites `json:"per_change"`
}

// Invariant is one checked property, as a number and its bound.
type Invariant struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	// Want says what passes ("= 0", "<= 120").
	Want   string `json:"want"`
	Pass   bool   `json:"pass"`
	Detail string `json:"detail,omitempty"`
}

// invariants computes the report's invariants and whether the run passed.
func (r *Report) invariants() {
	var inv []Invariant
	zero := func(name string, items []string) {
		detail := ""
		if len(items) > 0 {
			detail = strings.Join(items[:min(len(items), 5)], "; ")
		}
		inv = append(inv, Invariant{Name: name, Value: float64(len(items)), Want: "= 0", Pass: len(items) == 0, Detail: detail})
	}
	bound := r.Settings.ConvergeBoundS
	var notConverged []string
	worst := 0.0
	for _, f := range r.Faults {
		worst = max(worst, f.ConvergedAfterS)
		for _, a := range f.NotConverged {
			notConverged = append(notConverged, f.Kind+": "+a)
		}
	}
	inv = append(inv, Invariant{Name: "slowest convergence after a fault ended (s)", Value: worst, Want: fmt.Sprintf("<= %.0f", bound), Pass: worst <= bound})
	zero("Apps not converged within the bound after a fault", notConverged)
	zero("spec changes not converged within the bound", r.Convergence.OverBound)
	if s := r.State; s != nil {
		zero("Apps not converged at the end", s.NotConverged)
		zero("Apps lost", s.AppsLost)
		zero("Apps unexpected (deleted or never made)", s.AppsUnexpected)
		zero("children missing", s.ChildrenMissing)
		zero("children duplicated", s.ChildrenDuplicated)
		zero("children or revisions orphaned", s.Orphans)
		zero("revisions missing", s.RevisionsMissing)
		zero("revisions unexpected", s.RevisionsUnexpected)
		zero("revisions duplicated", s.RevisionsDuplicated)
		zero("Apps over their revision history limit", s.RevisionsOverLimit)
		zero("Apps whose pods were not rolled for their ConfigMap", s.ConfigNotRolled)
		zero("foreign objects with the controller's field manager", s.DecoysWritten)
		zero("canary Apps at rest whose children are not an App's without a strategy", s.NotAtRest)
	}
	zero("writes to objects no App controls (audit log)", r.Writes.Foreign)
	zero("writes to the objects of an App after its deletion (audit log)", r.Writes.AfterDelete)
	if c := r.Rollouts; c != nil {
		zero("rollout steps written without a request or a transition of the state machine (audit log)", c.Jumps)
		zero("canary weights written below the one before within a rollout (audit log)", c.WeightDecreases)
		zero("aborted rollouts whose stable pod template was written (audit log)", c.AbortsRestartedStable)
		zero("Deployments whose replicas the controller wrote after an autoscaler did (audit log)", c.ReplicaFights)
	}
	if c := r.Scaling; c != nil {
		if i, ok := c.invariant(); ok {
			inv = append(inv, i)
		}
	}
	if w := r.FaultWindows; w != nil && w.MetricsGone > 0 {
		zero("autoscaled Deployments whose replicas the controller wrote while metrics-server was gone (audit log)", w.MetricsGoneReplicaWrites)
	}
	if w := r.FaultWindows; w != nil && w.Upgrades > 0 {
		zero("children of Apps at rest written across the helm upgrade (audit log)", w.UpgradeChildWrites)
	}
	if r.Floor != nil {
		zero("canaries whose serving pods fell below their floor in a step or a promotion (sampled)", r.floorBreaches)
	}
	var badChanges []string
	for _, c := range r.Writes.Changes {
		if !c.OK {
			badChanges = append(badChanges, fmt.Sprintf("%s: median %.1f (expected %.0f-%.0f, median beyond %.1f), first third %.2f, last third %.2f",
				c.Kind, c.Median, c.ExpectedMin, c.ExpectedMax, c.MedianBeyond, c.FirstThird, c.LastThird))
		}
	}
	zero("kinds of change whose writes differ from the exact-write tests or grow", badChanges)
	var growing []string
	for _, t := range r.Trends {
		if t.Growing {
			growing = append(growing, fmt.Sprintf("shard %s %s: %+.1f/h [%+.1f, %+.1f], bound %.1f/h, mean %.1f%s", t.Shard, t.Series, t.SlopePerHour, t.CILow, t.CIHigh, t.BoundPerHour, t.Mean, t.storeMean()))
		}
	}
	if r.TrendsNotJudged == "" {
		zero("series growing beyond their bound (last two thirds)", growing)
	}
	zero("panics in the controller's logs", r.Panics)
	var unexpected []string
	for _, x := range r.Restarts {
		if x.Cause == causeUnexpected {
			unexpected = append(unexpected, fmt.Sprintf("%s at %s: %s (%s)", x.Instance, x.At.Format(time.TimeOnly), x.How, x.LastLine))
		}
	}
	zero("restarts of the controller other than the injected ones", unexpected)
	var failedFaults []string
	for _, f := range r.Faults {
		if f.Error != "" {
			failedFaults = append(failedFaults, f.Kind+": "+f.Error)
		}
	}
	zero("faults that could not be injected", failedFaults)
	r.Invariants = inv
	r.Passed = true
	for _, i := range inv {
		r.Passed = r.Passed && i.Pass
	}
}

// WriteJSON writes the report to path (its directory made).
func (r *Report) WriteJSON(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// printTrends writes the trends of the series that grow or are not a cache's, and how
// many caches did not grow.
func (r *Report) printTrends(out io.Writer) {
	for _, t := range r.Trends {
		if isStoreSeries(t.Series) && !t.Growing {
			continue
		}
		fmt.Fprintf(out, "  trend shard %s %-14s mean %8.1f%s slope %+8.2f/h [%+.2f, %+.2f] bound %.1f/h (%d samples, %d leaders)%s\n",
			t.Shard, t.Series, t.Mean, t.storeMean(), t.SlopePerHour, t.CILow, t.CIHigh, t.BoundPerHour, t.N, t.Segments, map[bool]string{true: " GROWING"}[t.Growing])
	}
	if r.TrendsNotJudged != "" {
		fmt.Fprintf(out, "  trends not judged: %s\n", r.TrendsNotJudged)
	}
	stores, excess := 0, 0
	for _, t := range r.Trends {
		if isStoreSeries(t.Series) && !t.Growing {
			stores++
			if strings.HasPrefix(t.Series, seriesStoreExcess) {
				excess++
			}
		}
	}
	fmt.Fprintf(out, "  and %d informer caches (%d judged on their excess over the API's count), none growing beyond its bound\n", stores, excess)
	if r.CountFails > 0 {
		fmt.Fprintf(out, "  %d counts of the caches' objects in the API failed (their samples left out of the excess), the first: %s\n", r.CountFails, r.CountFailure)
	}
}

// Print writes the report's figures for people.
func (r *Report) Print(out io.Writer) {
	s := r.Settings
	fmt.Fprintf(out, "\nsoak: %s on %s, %d Apps in %d namespaces, %.1f operations a minute done, faults every %s from %s\n",
		time.Duration(s.DurationS*float64(time.Second)), s.Node, s.Apps, s.Namespaces, r.OpsPerMinute,
		time.Duration(s.FaultIntervalS*float64(time.Second)), time.Duration(s.FirstFaultS*float64(time.Second)))
	fmt.Fprintf(out, "load average (1 min) %.2f-%.2f, mean %.2f; uptime at the start: %s; at the end: %s\n", r.Load.Min, r.Load.Max, r.Load.Mean, r.Load.UptimeStart, r.Load.UptimeEnd)
	fmt.Fprintf(out, "operations:")
	for _, k := range sortedKeys(r.Ops) {
		o := r.Ops[k]
		fmt.Fprintf(out, " %s %d/%d", k, o.Done, o.Planned)
		if o.Skipped+o.Failed > 0 {
			fmt.Fprintf(out, " (%d skipped, %d failed)", o.Skipped, o.Failed)
		}
	}
	fmt.Fprintln(out)
	for _, k := range sortedKeys(r.Ops) {
		for _, e := range r.Ops[k].Errors {
			fmt.Fprintf(out, "  %s failed: %s\n", k, e)
		}
	}
	for _, f := range r.Faults {
		status := fmt.Sprintf("all Apps converged %.1fs after", f.ConvergedAfterS)
		if len(f.NotConverged) > 0 {
			status = fmt.Sprintf("%d Apps not converged within the bound", len(f.NotConverged))
		}
		if f.Error != "" {
			status = "FAILED: " + f.Error
		}
		fmt.Fprintf(out, "fault %-18s at %6.0fs-%6.0fs: %s; %s\n", f.Kind, f.StartS, f.EndS, f.Detail, status)
	}
	c := r.Convergence
	fmt.Fprintf(out, "spec changes: %d converged, p50 %.1fs, p99 %.1fs, max %.1fs (%s); bound %.0fs\n", c.Changes, c.P50S, c.P99S, c.MaxS, c.MaxApp, c.BoundS)
	if st := r.State; st != nil {
		fmt.Fprintf(out, "at the end: %d Apps live, %d deleted, %d revisions\n", st.Apps, st.Deleted, st.Revisions)
	}
	if c := r.Rollouts; c != nil {
		fmt.Fprintf(out, "rollouts (audit log, %d status writes, %d of canaries): %d started, %d promoted, %d aborted, %d ended at once (fast rollback), %d requests handled\n",
			c.StatusWrites, c.RolloutWrites, c.Started, c.Promoted, c.Aborted, c.RolledBack, c.Requests)
		r.printRouteSplit(out, c)
		fmt.Fprintf(out, "autoscaling: %d Apps autoscaled, %d writes of a scale by an autoscaler, %d writes of replicas by the controller\n",
			c.AutoscaledApps, c.ScaleWrites, c.ReplicaWrites)
	}
	r.printAnalysisAndLoad(out)
	if w := r.FaultWindows; w != nil && w.MetricsGone > 0 {
		fmt.Fprintf(out, "metrics-server gone (%d times): %d Apps autoscaled through its windows, %d writes of their replicas by the controller\n",
			w.MetricsGone, w.MetricsGoneApps, len(w.MetricsGoneReplicaWrites))
	}
	if w := r.FaultWindows; w != nil && w.Upgrades > 0 {
		fmt.Fprintf(out, "helm upgrade: %d Apps at rest through its window (from %s before it to %s after), %d writes of their children by the controller; %d rollouts under way when it started\n",
			w.UpgradeApps, faultWindowMargin, faultWindowMargin, len(w.UpgradeChildWrites), w.UpgradeRollouts)
	}
	if f := r.Floor; f != nil {
		fmt.Fprintf(out, "serving floor (pods Ready behind a canary's Service, sampled): %d samples of %d canaries at a step or promoting (%d promoting), lowest margin over the floor %d, %d samples below it explained by an abort or a rollback\n",
			f.Samples, f.Apps, f.Promoting, f.MinMargin, f.Discarded)
	}
	fmt.Fprintf(out, "controller writes: %d\n", r.Writes.Total)
	for _, cw := range r.Writes.Changes {
		exp := "-"
		if cw.Pinned != "" {
			exp = fmt.Sprintf("%.0f-%.0f", cw.ExpectedMin, cw.ExpectedMax)
		}
		fmt.Fprintf(out, "  writes per %-13s %4d changes: mean %5.2f median %4.1f (expected %s, median beyond %.1f); first third %5.2f, last third %5.2f\n",
			cw.Kind, cw.Changes, cw.Mean, cw.Median, exp, cw.MedianBeyond, cw.FirstThird, cw.LastThird)
		for _, o := range cw.Outliers {
			fmt.Fprintf(out, "    out of range: %s\n", o)
		}
	}
	r.printTrends(out)
	for _, x := range r.Restarts {
		fmt.Fprintf(out, "restart %s at %s: %s, %s\n", x.Instance, x.At.Format(time.TimeOnly), x.How, x.Cause)
	}
	fmt.Fprintln(out, "invariants:")
	for _, i := range r.Invariants {
		mark := "ok  "
		if !i.Pass {
			mark = "FAIL"
		}
		fmt.Fprintf(out, "  %s %-72s %8.2f (want %s)", mark, i.Name, i.Value, i.Want)
		if i.Detail != "" {
			fmt.Fprintf(out, ": %s", i.Detail)
		}
		fmt.Fprintln(out)
	}
	verdict := "PASSED"
	if !r.Passed {
		verdict = "FAILED"
	}
	fmt.Fprintf(out, "soak %s\n", verdict)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// printRouteSplit prints the route-split canaries' line when the run had some.
func (r *Report) printRouteSplit(out io.Writer, c *RolloutChecks) {
	canaries := 0
	if r.State != nil {
		canaries = r.State.RouteSplitCanaries
	}
	if c.RouteWrites == 0 && canaries == 0 {
		return
	}
	fmt.Fprintf(out, "route-split canaries (HTTPRoute through the Gateway): %d at the end, %d writes of their HTTPRoutes (audit log), %d rollouts split by a route\n",
		canaries, c.RouteWrites, c.RouteSplits)
}

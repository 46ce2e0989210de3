package bench

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// Result is what a run measured, written as JSON (.local/bench-result.json). Its
// Figures are those of the round with the median ratio; Rounds holds every round's.
type Result struct {
	Apps     int `json:"apps"`
	Replicas int `json:"replicas"`
	Figures
	// AllConverged is true when every App converged in every round and scenario.
	AllConverged bool `json:"all_converged"`
	// RoundCount is the number of rounds; Figures are the median round's (by ratio).
	RoundCount int `json:"rounds_run"`
	// Scenarios are the scenarios run after converge; the figures of the others are 0.
	Scenarios []string `json:"scenarios"`
	// Cores is the number of CPUs of the machine, shared by every process.
	Cores    int      `json:"cores"`
	Versions Versions `json:"versions"`
	// ControllerFlags are the flags added to the controller's defaults (none in a
	// default run).
	ControllerFlags []string `json:"controller_flags"`
	// ControllerMemoryLimitBytes is the memory limit the controller ran under (0: none).
	ControllerMemoryLimitBytes int64 `json:"controller_memory_limit_bytes,omitempty"`
	// WriteCounting says how writes are counted.
	WriteCounting string        `json:"write_counting"`
	Rounds        []RoundResult `json:"rounds"`
}

// Versions of the run.
type Versions struct {
	Go         string `json:"go"`
	Kube       string `json:"kube"`
	Controller string `json:"controller"`
}

// RoundResult is one round's figures.
type RoundResult struct {
	Round int `json:"round"`
	Figures
	// Autoscaled is the autoscaled scenario's figures (nil: not run).
	Autoscaled *AutoscaledFigures `json:"autoscaled,omitempty"`
	// Peer is the peer scenario's figures, Argo Rollouts side by side (nil: not run).
	Peer *PeerFigures `json:"peer,omitempty"`

	floorSeconds       float64
	floorWrites        writeCounts
	floorFrom, floorTo time.Time
	floorProfile       string
}

// Figures are the measurements of one round; seconds are wall-clock times on a shared
// machine.
type Figures struct {
	// ConvergeSeconds: from the first App create until every App is Ready at its
	// generation. CreatesSeconds: until the harness's last create returned.
	ConvergeSeconds float64 `json:"converge_seconds"`
	CreatesSeconds  float64 `json:"creates_seconds"`
	// FloorSeconds is the fastest floor loop of either kind, FloorLoop its kind
	// ("interleaved": status writes between creates, runFloor; "batched": every create,
	// then every Deployment available, then every status write, runBatchedFloor) and
	// FloorConcurrency its concurrency. FloorByConcurrency has every interleaved loop's
	// time, BatchedFloorByConcurrency every batched loop's; InterleavedFloorSeconds and
	// BatchedFloorSeconds are the fastest of each kind (0: none ran).
	FloorSeconds              float64            `json:"floor_seconds"`
	FloorLoop                 string             `json:"floor_loop"`
	FloorConcurrency          int                `json:"floor_concurrency"`
	FloorByConcurrency        map[string]float64 `json:"floor_seconds_by_concurrency"`
	BatchedFloorByConcurrency map[string]float64 `json:"batched_floor_seconds_by_concurrency"`
	InterleavedFloorSeconds   float64            `json:"interleaved_floor_seconds"`
	BatchedFloorSeconds       float64            `json:"batched_floor_seconds"`
	// Ratio is ConvergeSeconds / FloorSeconds.
	Ratio float64 `json:"ratio"`
	// WritesPerApp is the controller's writes per App from the first create until 5 s
	// after the last App is Ready, Events included; WritesBreakdown splits them.
	WritesPerApp    float64        `json:"writes_per_app"`
	WritesBreakdown WriteBreakdown `json:"writes_per_app_breakdown"`
	// FloorWritesPerApp are the fastest floor loop's writes per App.
	FloorWritesPerApp WriteBreakdown `json:"floor_writes_per_app"`
	// IdleWrites: the controller's writes during 2 resync periods + 10 s with no change.
	IdleWrites       int            `json:"idle_writes"`
	IdleWritesByKind map[string]int `json:"idle_writes_by_kind,omitempty"`
	// RestartSeconds: from the start of the controller after a kill -9 until its App
	// queue has taken every App and is drained; RestartWrites: its writes until 5 s later.
	RestartSeconds      float64        `json:"restart_seconds"`
	RestartWrites       int            `json:"restart_writes"`
	RestartWritesByKind map[string]int `json:"restart_writes_by_kind,omitempty"`
	// ChurnSeconds: from the first of the image changes of 10% of the Apps until every
	// App is Ready at its new generation; ChurnWritesPerApp: writes per changed App.
	ChurnSeconds      float64 `json:"churn_seconds"`
	ChurnWritesPerApp float64 `json:"churn_writes_per_changed_app"`
	// ChurnWritesPerAppByKind: the same by resource (deployments, apps/status, events,
	// controllerrevisions).
	ChurnWritesPerAppByKind map[string]float64 `json:"churn_writes_per_changed_app_by_kind,omitempty"`
	// Canary: the canary scenario, N Apps with a canary strategy each rolled one step
	// (canary.go); nil when it did not run.
	Canary *CanaryFigures `json:"canary,omitempty"`
	// P50ReadySeconds and P99ReadySeconds: per App, from its create to its first Ready.
	P50ReadySeconds float64 `json:"p50_ready_seconds"`
	P99ReadySeconds float64 `json:"p99_ready_seconds"`
	// ControllerPeakRSSMB: the highest VmHWM of the controller processes (MiB).
	ControllerPeakRSSMB float64 `json:"controller_peak_rss_mb"`
	// ControllerCgroupPeakMB and ControllerOOMKills, with a memory limit
	// (Config.ControllerMemoryLimit): the most the controller's memory cgroup was
	// charged (MiB; its page cache too) and how many times the kernel killed it for memory.
	ControllerCgroupPeakMB float64 `json:"controller_cgroup_peak_mb,omitempty"`
	ControllerOOMKills     int     `json:"controller_oom_kills,omitempty"`
	// RSSMBPer1000Apps: (VmRSS at convergence - VmRSS idle on the empty cluster) per
	// 1000 Apps; RSSBaselineMB and RSSAtNMB are the two samples.
	RSSMBPer1000Apps float64 `json:"rss_mb_per_1000_apps"`
	RSSBaselineMB    float64 `json:"rss_baseline_mb"`
	RSSAtNMB         float64 `json:"rss_at_n_mb"`
	// AnonMBPer1000Apps: the same of RssAnon, the resident set without the executable's
	// pages (which the controller's code paths touch the first time they run, whatever N).
	AnonMBPer1000Apps float64 `json:"anon_rss_mb_per_1000_apps"`
	// SettledRSSMBPer1000Apps and SettledAnonMBPer1000Apps: the same at the end of the
	// idle scenario, when the Go runtime has had time to return to the system what the
	// convergence's burst left free (0: the idle scenario did not run).
	SettledRSSMBPer1000Apps  float64 `json:"settled_rss_mb_per_1000_apps,omitempty"`
	SettledAnonMBPer1000Apps float64 `json:"settled_anon_rss_mb_per_1000_apps,omitempty"`
	// PodCacheMiBPer1000Pods: what the App controller's pod cache holds per 1000 pods,
	// the converged Apps' pods trimmed as its informer keeps them (podhealth.TrimPod), in
	// an indexer in the harness (Go heap after GC); PodCacheWholeMiBPer1000Pods: the same
	// pods whole (managedFields dropped), for comparison; Pods: how many were measured.
	PodCacheMiBPer1000Pods      float64 `json:"pod_cache_mib_per_1000_pods"`
	PodCacheWholeMiBPer1000Pods float64 `json:"pod_cache_whole_mib_per_1000_pods"`
	Pods                        int     `json:"pods"`
	// CacheMiBPer1000Apps: what the controller's caches of the Apps, their Deployments
	// and their Services hold per 1000 Apps, by resource, each kept as its informer keeps
	// it, in an indexer in the harness (Go heap after GC).
	CacheMiBPer1000Apps map[string]float64 `json:"cache_mib_per_1000_apps"`
	// ControllerCPUSeconds: the controller's utime+stime from the first create until
	// convergence; ControllerCPUSecondsTotal: of its processes over the whole round.
	ControllerCPUSeconds      float64 `json:"controller_cpu_seconds"`
	ControllerCPUSecondsTotal float64 `json:"controller_cpu_seconds_total"`
	// FloorCPU and ProductCPU: the CPU that the fastest floor loop and the product's
	// convergence took, per process per App, and how busy the machine was (cpu.go).
	FloorCPU   CPUUse `json:"floor_cpu"`
	ProductCPU CPUUse `json:"product_cpu"`
	// SameWorkCPURatio: the CPU per App of the scheduler and kwok, whose work per App is
	// the same in both windows, in the product's convergence over the fastest floor loop
	// (sameWorkCPURatio): the machine's change of speed between the two, which the Ratio
	// includes.
	SameWorkCPURatio float64 `json:"same_work_cpu_ratio"`
	// Converged is true when every App converged in every scenario of the round.
	Converged bool `json:"converged"`
	// Breakdown is who writes what, and the product's timeline (Config.Breakdown).
	Breakdown *Breakdown `json:"breakdown,omitempty"`
}

// The kinds of floor loop.
const (
	floorInterleaved = "interleaved"
	floorBatched     = "batched"
)

// WriteBreakdown are writes per App: the total, Events apart, and by "verb resource".
type WriteBreakdown struct {
	Total           float64            `json:"total"`
	ExcludingEvents float64            `json:"excluding_events"`
	Events          float64            `json:"events"`
	ByVerbResource  map[string]float64 `json:"by_verb_resource"`
}

// summarize sets the top-level figures from the round with the median ratio.
func (r *Result) summarize() {
	r.RoundCount = len(r.Rounds)
	if len(r.Rounds) == 0 {
		return
	}
	rounds := make([]RoundResult, len(r.Rounds))
	copy(rounds, r.Rounds)
	sort.SliceStable(rounds, func(i, j int) bool { return rounds[i].Ratio < rounds[j].Ratio })
	r.Figures = rounds[(len(rounds)-1)/2].Figures
	r.AllConverged = true
	for _, round := range r.Rounds {
		r.AllConverged = r.AllConverged && round.Converged
	}
}

// WriteJSON writes the result to path, indented, creating its directory.
func (r *Result) WriteJSON(path string) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the result: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("creating the results directory: %w", err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing the result: %w", err)
	}
	return nil
}

// table renders one round's figures for humans.
func (r RoundResult) table(apps, replicas int, scenarios, controllerFlags []string) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "Round %d: %d Apps x %d replica(s)\n", r.Round, apps, replicas)
	row := func(name, value string) { fmt.Fprintf(&sb, "  %-40s %s\n", name, value) }
	var floors []string
	for _, loop := range []struct {
		kind  string
		times map[string]float64
	}{{floorInterleaved, r.FloorByConcurrency}, {floorBatched, r.BatchedFloorByConcurrency}} {
		var times []string
		for _, c := range sortedKeys(loop.times) {
			times = append(times, fmt.Sprintf("c%s %.2fs", c, loop.times[c]))
		}
		if len(times) > 0 {
			floors = append(floors, loop.kind+": "+strings.Join(times, ", "))
		}
	}
	row("floor (fastest loop)", fmt.Sprintf("%.2fs, %s at concurrency %d  [%s]", r.FloorSeconds, r.FloorLoop, r.FloorConcurrency, strings.Join(floors, "; ")))
	flags := "default flags"
	if len(controllerFlags) > 0 {
		flags = strings.Join(controllerFlags, " ")
	}
	row("converge ("+flags+")", fmt.Sprintf("%.2fs (creates done at %.2fs)", r.ConvergeSeconds, r.CreatesSeconds))
	row("ratio converge/floor", fmt.Sprintf("%.2f", r.Ratio))
	row("ready per App p50 / p99", fmt.Sprintf("%.2fs / %.2fs", r.P50ReadySeconds, r.P99ReadySeconds))
	row("controller writes per App", breakdown(r.WritesBreakdown))
	row("floor writes per App", breakdown(r.FloorWritesPerApp))
	scenario := func(name, label, value string) {
		if !slices.Contains(scenarios, name) {
			value = "not run"
		}
		row(label, value)
	}
	scenario("idle", "idle writes", fmt.Sprintf("%d %s", r.IdleWrites, kinds(r.IdleWritesByKind)))
	scenario("restart", "restart: drained / writes", fmt.Sprintf("%.2fs / %d %s", r.RestartSeconds, r.RestartWrites, kinds(r.RestartWritesByKind)))
	churnKinds := make([]string, 0, len(r.ChurnWritesPerAppByKind))
	for _, k := range sortedKeys(r.ChurnWritesPerAppByKind) {
		churnKinds = append(churnKinds, fmt.Sprintf("%s %.2f", k, r.ChurnWritesPerAppByKind[k]))
	}
	scenario("churn", "churn (10% new image)", fmt.Sprintf("%.2fs, %.2f writes per changed App [%s]", r.ChurnSeconds, r.ChurnWritesPerApp, strings.Join(churnKinds, ", ")))
	if c := r.Canary; c != nil {
		row("canary strategy", c.Steps)
		for _, p := range []struct {
			label string
			phase CanaryPhase
		}{{"canary: created, Ready", c.Create}, {"canary: new image, first step, paused", c.Change}, {"canary: promote, promoted", c.Promote}} {
			row(p.label, fmt.Sprintf("%.2fs, writes per App %s; of the status writes, %.2f for progress only", p.phase.Seconds,
				breakdown(p.phase.WritesPerApp), p.phase.ProgressStatusWritesPerApp))
		}
	} else {
		row("canary", "not run")
	}
	if r.Peer != nil {
		sb.WriteString(r.Peer.table())
	}
	row("controller peak RSS (VmHWM)", fmt.Sprintf("%.1f MiB", r.ControllerPeakRSSMB))
	if r.ControllerCgroupPeakMB > 0 {
		row("controller cgroup peak / OOM kills", fmt.Sprintf("%.1f MiB / %d", r.ControllerCgroupPeakMB, r.ControllerOOMKills))
	}
	row("RSS per 1000 Apps", fmt.Sprintf("%.1f MiB (%.1f idle at N=0, %.1f at N); anonymous %.1f MiB", r.RSSMBPer1000Apps, r.RSSBaselineMB, r.RSSAtNMB, r.AnonMBPer1000Apps))
	scenario("idle", "RSS per 1000 Apps after the idle period", fmt.Sprintf("%.1f MiB; anonymous %.1f MiB", r.SettledRSSMBPer1000Apps, r.SettledAnonMBPer1000Apps))
	row("pod cache per 1000 pods", fmt.Sprintf("%.2f MiB trimmed (%.2f whole), %d pods", r.PodCacheMiBPer1000Pods, r.PodCacheWholeMiBPer1000Pods, r.Pods))
	caches := make([]string, 0, len(r.CacheMiBPer1000Apps))
	for _, k := range sortedKeys(r.CacheMiBPer1000Apps) {
		caches = append(caches, fmt.Sprintf("%s %.2f", k, r.CacheMiBPer1000Apps[k]))
	}
	row("caches per 1000 Apps (MiB)", strings.Join(caches, ", "))
	row("controller CPU converging / round", fmt.Sprintf("%.2fs / %.2fs", r.ControllerCPUSeconds, r.ControllerCPUSecondsTotal))
	row("CPU, fastest floor loop", r.FloorCPU.String())
	row("CPU, product converging", r.ProductCPU.String())
	if r.SameWorkCPURatio > 0 {
		note := "the same cost in both windows"
		if r.SameWorkCPURatio > 1.1 || r.SameWorkCPURatio < 0.9 {
			note = "the same work cost more or less CPU in one window: the machine ran at another speed, and the ratio carries that too"
		}
		row("same-work CPU, product / floor", fmt.Sprintf("%.2f (%s per App: %s)", r.SameWorkCPURatio, strings.Join(sameWorkProcesses, " + "), note))
	}
	row("every App converged", fmt.Sprint(r.Converged))
	if r.Breakdown != nil {
		sb.WriteString(r.Breakdown.table())
	}
	return sb.String()
}

func breakdown(w WriteBreakdown) string {
	parts := make([]string, 0, len(w.ByVerbResource))
	for _, k := range sortedKeys(w.ByVerbResource) {
		parts = append(parts, fmt.Sprintf("%s %.2f", k, w.ByVerbResource[k]))
	}
	return fmt.Sprintf("%.2f (%.2f without Events) [%s]", w.Total, w.ExcludingEvents, strings.Join(parts, ", "))
}

func kinds(m map[string]int) string {
	if len(m) == 0 {
		return ""
	}
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if len(keys[i]) != len(keys[j]) {
			return len(keys[i]) < len(keys[j]) // "5" before "10"
		}
		return keys[i] < keys[j]
	})
	return keys
}

// round2 rounds to hundredths.
func round2(v float64) float64 { return math.Round(v*100) / 100 }

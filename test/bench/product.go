package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	appctrl "github.com/app-controller/app-controller/pkg/controller/app"
	"github.com/app-controller/app-controller/test/harness"
)

const (
	// defaultBaselineWait is Config.BaselineWait's default.
	defaultBaselineWait = 10 * time.Second
	// defaultSettle is Config.Settle's default: late Events or a last status write still
	// count as the scenario's, before the next one.
	defaultSettle = 5 * time.Second
)

// product runs the controller and its scenarios: converge, then those of cfg.Scenarios
// (the canary scenario last, with a controller of its own: canary.go).
//
//nolint:gocyclo // one round's steps in the order docs/performance.md tells them, each checking its error; split, they would pass a dozen shared values around
func (e *env) product(ctx context.Context, r *RoundResult) error {
	ns := fmt.Sprintf("bench-app-%d", r.Round)
	if err := createNamespace(ctx, e.admin.kube, ns); err != nil {
		return err
	}
	logPath := filepath.Join(e.logDir, fmt.Sprintf("app-controller-round%d.log", r.Round))
	flags := e.cfg.ControllerFlags
	if e.cfg.Breakdown {
		flags = append(slices.Clone(flags), "--profiling") // the heap profile at convergence
	}
	proc, err := startController(e.cfg.Controller, e.controllerKubeconfig, logPath, flags, e.cfg.ControllerEnv, e.cfg.ControllerMemoryLimit)
	if err != nil {
		return err
	}
	procs := []*controllerProc{proc}
	defer func() {
		for _, p := range procs {
			_ = p.kill(syscall.SIGKILL)
		}
	}()
	if err := proc.waitServing(ctx, time.Minute); err != nil {
		return err
	}
	watch, err := watchApps(ctx, e.admin, ns)
	if err != nil {
		return err
	}
	defer watch.stop()

	// RSS at N=0: the controller idle on the empty cluster.
	time.Sleep(e.cfg.BaselineWait)
	base, err := proc.stats()
	if err != nil {
		return err
	}

	// converge: N Apps created by CreateClients parallel clients.
	e.printf("round %d: product, %d Apps created by %d clients\n", r.Round, e.cfg.Apps, e.cfg.CreateClients)
	n := e.cfg.Apps
	createdAt := make([]time.Time, n)
	want := make(map[string]int64, n)
	generations := make([]int64, n)
	// converged waits until every App is Ready at its generation in generations and
	// returns when the last became so; otherwise it diagnoses the Apps still waited for
	// and fails, saying what (converge, churn) was waited for.
	converged := func(what string) (time.Time, error) {
		for i, g := range generations {
			want[appName(i)] = g
		}
		last, stuck, err := watch.waitReady(ctx, want, e.convergeTimeout())
		if err != nil {
			e.diagnose(ctx, ns, stuck, procs)
			return time.Time{}, fmt.Errorf("%s: %w", what, err)
		}
		return last, nil
	}
	var apiBefore map[string][2]float64
	if e.cfg.Breakdown {
		if apiBefore, err = apiserverDurations(ctx, e.admin.kube); err != nil {
			return err
		}
	}
	cpuBefore, err := sampleCPU(e.processes(proc.Pid()))
	if err != nil {
		return err
	}
	profile := func() string { return "" }
	ctrlProfile := make(chan error, 1)
	ctrlProfilePath := filepath.Join(e.logDir, fmt.Sprintf("app-controller-round%d-cpu.pb.gz", r.Round))
	if e.cfg.Breakdown {
		profile = e.profileAPIServer(ctx, filepath.Join(e.logDir, fmt.Sprintf("bench-app-%d-apiserver-cpu.pb.gz", r.Round)))
		go func() {
			ctrlProfile <- proc.saveProfile(ctx, fmt.Sprintf("profile?seconds=%d", apiserverProfileSeconds), ctrlProfilePath)
		}()
	}
	start := time.Now()
	var depths *depthSampler
	if e.cfg.Breakdown {
		depths = sampleDepth(ctx, proc, appctrl.ControllerName, start)
		defer depths.stop()
	}
	err = harness.Parallel(ctx, n, e.cfg.CreateClients, func(ctx context.Context, i int) error {
		createdAt[i] = time.Now()
		return e.createApp(ctx, newApp(ns, appName(i), e.cfg.Replicas), &generations[i])
	})
	if err != nil {
		return err
	}
	createdIn := time.Since(start)
	last, err := converged("converge")
	if err != nil {
		return err
	}
	cpuAfter, err := sampleCPU(e.processes(proc.Pid()))
	if err != nil {
		return err
	}
	r.ProductCPU = cpuUse(cpuBefore, cpuAfter, n)
	r.SameWorkCPURatio = sameWorkCPURatio(r.FloorCPU, r.ProductCPU)
	r.ConvergeSeconds = round2(last.Sub(start).Seconds())
	r.CreatesSeconds = round2(createdIn.Seconds())
	if r.FloorSeconds > 0 {
		r.Ratio = round2(r.ConvergeSeconds / r.FloorSeconds)
	}
	readyAfter := make([]float64, n)
	for i := range n {
		t := watch.readyTime(appName(i), generations[i])
		readyAfter[i] = t.Sub(createdAt[i]).Seconds()
	}
	sort.Float64s(readyAfter)
	r.P50ReadySeconds = round2(percentile(readyAfter, 50))
	r.P99ReadySeconds = round2(percentile(readyAfter, 99))
	atConverge, err := proc.stats()
	if err != nil {
		return err
	}
	var ctrlMetrics *ControllerMetrics
	if e.cfg.Breakdown {
		families, err := proc.scrape(ctx)
		if err != nil {
			return err
		}
		ctrlMetrics = controllerMetrics(families, appctrl.ControllerName)
		apiAfter, err := apiserverDurations(ctx, e.admin.kube)
		if err != nil {
			return err
		}
		ctrlMetrics.APIServer = apiserverLatency(apiBefore, apiAfter, float64(n)/2)
		ctrlMetrics.HeapProfile = filepath.Join(e.logDir, fmt.Sprintf("app-controller-round%d-heap.pb.gz", r.Round))
		if err := proc.saveProfile(ctx, "heap?gc=1", ctrlMetrics.HeapProfile); err != nil {
			return err
		}
		if err := <-ctrlProfile; err != nil {
			return err
		}
		ctrlMetrics.CPUProfile = ctrlProfilePath
	}
	r.ControllerCPUSeconds = round2(atConverge.cpuSeconds - base.cpuSeconds)
	r.RSSBaselineMB = round2(base.rssMB)
	r.RSSAtNMB = round2(atConverge.rssMB)
	r.RSSMBPer1000Apps = round2((atConverge.rssMB - base.rssMB) * 1000 / float64(n))
	r.AnonMBPer1000Apps = round2((atConverge.anonMB - base.anonMB) * 1000 / float64(n))
	if r.Pods, r.PodCacheMiBPer1000Pods, r.PodCacheWholeMiBPer1000Pods, err = podCacheSize(ctx, e.admin.kube, ns); err != nil {
		return err
	}
	if r.CacheMiBPer1000Apps, err = cacheSizes(ctx, e.admin, ns, n); err != nil {
		return err
	}
	settled := last.Add(e.cfg.Settle)
	time.Sleep(time.Until(settled))
	writes, err := e.audit.count(controllerUser, start, settled)
	if err != nil {
		return err
	}
	r.WritesBreakdown = perApp(writes, n)
	r.WritesPerApp = r.WritesBreakdown.Total
	if e.cfg.Breakdown {
		all, err := e.audit.all(settled)
		if err != nil {
			return err
		}
		ready := make([]time.Time, n)
		for i := range n {
			ready[i] = watch.readyTime(appName(i), generations[i])
		}
		r.Breakdown = &Breakdown{
			ProductWritesPerApp:  writesByWriter(all, start, settled, n),
			FloorWritesPerApp:    writesByWriter(all, r.floorFrom, r.floorTo, n),
			Timeline:             timeline(all, ready, start, settled),
			Controller:           ctrlMetrics,
			APIServerCPUProfiles: map[string]string{partFloor: r.floorProfile, partProduct: profile()},
		}
		for sec, depth := range depths.finish() {
			if sec < len(r.Breakdown.Timeline) {
				r.Breakdown.Timeline[sec].QueueDepth = depth
			}
			ctrlMetrics.MaxQueueDepth = max(ctrlMetrics.MaxQueueDepth, depth)
		}
	}
	e.printf("round %d: converged in %.2fs (creates %.2fs), %.2f writes per App\n", r.Round, r.ConvergeSeconds, r.CreatesSeconds, r.WritesPerApp)

	if slices.Contains(e.cfg.Scenarios, "idle") {
		e.printf("round %d: idle for %s\n", r.Round, idlePeriod)
		from := time.Now()
		time.Sleep(idlePeriod)
		idle, err := e.audit.count(controllerUser, from, time.Now())
		if err != nil {
			return err
		}
		r.IdleWrites = idle.total()
		r.IdleWritesByKind = idle
		settled, err := proc.stats()
		if err != nil {
			return err
		}
		r.SettledRSSMBPer1000Apps = round2((settled.rssMB - base.rssMB) * 1000 / float64(n))
		r.SettledAnonMBPer1000Apps = round2((settled.anonMB - base.anonMB) * 1000 / float64(n))
	}

	if slices.Contains(e.cfg.Scenarios, "restart") {
		e.printf("round %d: restart (kill -9)\n", r.Round)
		if err := proc.kill(syscall.SIGKILL); err != nil {
			return err
		}
		from := time.Now()
		if proc, err = startController(e.cfg.Controller, e.controllerKubeconfig, logPath, e.cfg.ControllerFlags, e.cfg.ControllerEnv, e.cfg.ControllerMemoryLimit); err != nil {
			return err
		}
		procs = append(procs, proc)
		drained, err := e.waitDrained(ctx, proc, n, e.convergeTimeout())
		if err != nil {
			return fmt.Errorf("restart: %w", err)
		}
		r.RestartSeconds = round2(drained.Sub(from).Seconds())
		quiet := drained.Add(e.cfg.Settle)
		time.Sleep(time.Until(quiet))
		restart, err := e.audit.count(controllerUser, from, quiet)
		if err != nil {
			return err
		}
		r.RestartWrites = restart.total()
		r.RestartWritesByKind = restart
		if _, stuck, err := watch.waitReady(ctx, want, 0); err != nil {
			e.diagnose(ctx, ns, stuck, procs)
			return fmt.Errorf("after the restart: %w", err)
		}
	}

	if slices.Contains(e.cfg.Scenarios, "churn") {
		churned := max(1, n/10)
		e.printf("round %d: churn: new image for %d Apps\n", r.Round, churned)
		start := time.Now()
		if err := e.churnImages(ctx, ns, n, churned, r.Round, generations); err != nil {
			return err
		}
		last, err := converged("churn")
		if err != nil {
			return err
		}
		r.ChurnSeconds = round2(last.Sub(start).Seconds())
		churnWrites, err := e.audit.count(controllerUser, start, last.Add(e.cfg.Settle))
		if err != nil {
			return err
		}
		r.ChurnWritesPerApp = round2(float64(churnWrites.total()) / float64(churned))
		r.ChurnWritesPerAppByKind = map[string]float64{}
		for kind, n := range churnWrites {
			r.ChurnWritesPerAppByKind[kind] = round2(float64(n) / float64(churned))
		}
	}

	r.Converged = true
	for _, p := range procs {
		if err := p.kill(syscall.SIGTERM); err != nil {
			return err
		}
		r.ControllerPeakRSSMB = max(r.ControllerPeakRSSMB, round2(p.last.peakMB))
		r.ControllerCgroupPeakMB = max(r.ControllerCgroupPeakMB, round2(p.cgroupPeakMB))
		r.ControllerOOMKills += p.oomKills
		r.ControllerCPUSecondsTotal = round2(r.ControllerCPUSecondsTotal + p.last.cpuSeconds)
	}
	if slices.Contains(e.cfg.Scenarios, "canary") {
		if r.Canary, err = e.canary(ctx, r.Round); err != nil {
			r.Converged = false
			return err
		}
	}
	return nil
}

// waitDrained waits until the restarted controller has queued every one of the n Apps
// and its App queue is empty with no work in progress; it returns when.
func (e *env) waitDrained(ctx context.Context, p *controllerProc, n int, timeout time.Duration) (time.Time, error) {
	labels := map[string]string{queueLabel: appctrl.ControllerName}
	deadline := time.Now().Add(timeout)
	var status string
	for {
		if err := p.Exited(); err != nil {
			return time.Time{}, err
		}
		now := time.Now()
		if families, err := p.scrape(ctx); err == nil {
			adds, _ := harness.Value(families, "workqueue_adds_total", labels)
			depth, depthSeries := harness.Value(families, "workqueue_depth", labels)
			unfinished, _ := harness.Value(families, "workqueue_unfinished_work_seconds", labels)
			status = fmt.Sprintf("adds %.0f, depth %.0f, unfinished work %.3fs", adds, depth, unfinished)
			if depthSeries > 0 && adds >= float64(n) && depth == 0 && unfinished == 0 {
				return now, nil
			}
		} else {
			status = err.Error()
		}
		if now.After(deadline) {
			return time.Time{}, fmt.Errorf("the App queue of the restarted controller is not drained after %s (%s)", timeout, status)
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(pollInterval):
		}
	}
}

// percentile returns the p-th percentile (nearest rank) of sorted values.
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(p/100*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

// churnImages gives churned of the n Apps of ns, spread evenly, the churn's image of
// round, and records each one's new generation in generations.
func (e *env) churnImages(ctx context.Context, ns string, n, churned, round int, generations []int64) error {
	patch := []byte(fmt.Sprintf(`{"spec":{"deploymentTemplate":{"image":%q}}}`, fmt.Sprintf("%s-%d", churnImage, round)))
	return harness.Parallel(ctx, churned, e.cfg.CreateClients, func(ctx context.Context, j int) error {
		i := j * n / churned
		app, err := e.admin.app.AppcontrollerV1().Apps(ns).Patch(ctx, appName(i), types.MergePatchType, patch, metav1.PatchOptions{})
		if err != nil {
			return fmt.Errorf("changing the image of App %s: %w", appName(i), err)
		}
		generations[i] = app.Generation
		return nil
	})
}

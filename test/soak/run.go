package soak

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	gatewayclientset "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/app-controller/app-controller/internal/localcluster"
	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	appclientset "github.com/app-controller/app-controller/pkg/generated/clientset/versioned"
	appinformers "github.com/app-controller/app-controller/pkg/generated/informers/externalversions"
	"github.com/app-controller/app-controller/test/harness"
)

// Run runs a soak as cfg says and returns its report, also written to cfg.ReportPath.
// An error means the soak could not run (the cluster did not start, the controller
// could not be installed); a run whose invariants do not hold returns a report that
// did not pass.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.complete(); err != nil {
		return nil, err
	}
	logDir := filepath.Join(cfg.WorkDir, "logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the work directory: %w", err)
	}
	r := &run{cfg: &cfg, out: cfg.Out}
	r.printf("soak: %s on %s, %d Apps, faults %s every %s; work directory %s\n", cfg.Duration, cfg.Node, cfg.Apps, strings.Join(cfg.Faults, ","), cfg.FaultInterval, cfg.WorkDir)
	cluster := cfg.Cluster
	if cluster == nil {
		crds := cfg.CRDDir
		if cfg.Node == localcluster.NodeReal {
			crds = "" // the chart installs the CRD
		}
		var err error
		cluster, err = localcluster.Start(ctx, localcluster.Options{
			BinDir: cfg.BinDir, StateDir: filepath.Join(cfg.WorkDir, "cluster"), CRDDir: crds, Node: cfg.Node, NodeFS: cfg.nodeFS(),
			// The driver's own writes (the admin's) too: when each App was deleted.
			// The admin's also for the HorizontalPodAutoscaler controller's writes of a
			// scale (kube-controller-manager runs as the admin).
			PodCapacity: 2*cfg.Apps + 100, AuditUsers: append(controllerUsers(cfg.Node), localcluster.AdminUser), KeepState: true,
			AuditBodies: AuditBodies(),
			// The Gateway API's CRDs for the Gateway (Traefik) of a real node's fleet,
			// before the controller starts: it discovers HTTPRoutes once.
			GatewayAPI: cfg.gateway(),
			// Events kept soakEventTTL: the controller's Event caches (the probe
			// Events') reach their steady size early in the run, so that their trend
			// tells a leak from the apiserver's retention (with the default hour, a
			// 60-minute run saw them grow by +10 and +15 an hour: every Event since
			// the start was still there).
			EventTTL: soakEventTTL,
			Out:      harness.PrefixWriter{W: cfg.Out, Prefix: "  cluster: "},
		})
		if err != nil {
			return nil, err
		}
		defer func() {
			if err := cluster.Stop(); err != nil {
				r.printf("%v\n", err)
			}
		}()
	}
	if cluster.AuditLogPath == "" {
		return nil, errors.New("soak: the cluster writes no audit log")
	}
	r.cluster = cluster
	return r.run(ctx, logDir)
}

// controllerUsers are the controller's users in the audit log: the processes' own
// certificates, or the chart's ServiceAccounts.
func controllerUsers(node string) []string {
	if node == localcluster.NodeReal {
		return (&chartFleet{}).users()
	}
	return newProcessFleet(nil, nil, nil, "").users() // the slots' names alone
}

// run is one soak under way.
type run struct {
	cfg     *Config
	out     io.Writer
	cluster *localcluster.Cluster
	kube    kubernetes.Interface
	apps    appclientset.Interface
	fleet   fleet
	world   *world
	driver  *driver
	sampler *sampler
	// gateway reads the Gateway API when the fleet has a Gateway (fleet_gateway.go).
	gateway gatewayclientset.Interface
}

func (r *run) printf(format string, args ...any) {
	fmt.Fprintf(r.out, "%s "+format, append([]any{time.Now().UTC().Format(time.TimeOnly)}, args...)...)
}

func (r *run) run(ctx context.Context, logDir string) (*Report, error) {
	cfg := r.cfg
	admin := rest.CopyConfig(r.cluster.Config)
	admin.QPS, admin.Burst = -1, 0
	var err error
	if r.kube, err = kubernetes.NewForConfig(admin); err != nil {
		return nil, err
	}
	if r.apps, err = appclientset.NewForConfig(admin); err != nil {
		return nil, err
	}
	imgs := images{good: []string{"soak/web:1", "soak/web:2", "soak/web:3"}, bad: "soak/does-not-exist:1", kwok: true}
	report := &Report{Started: time.Now(), Settings: r.settings(), Ops: map[string]*OpStats{}}
	if cfg.Node == localcluster.NodeReal {
		chart := newChartFleet(cfg, r.cluster, r.kube, logDir)
		r.fleet = chart
		if imgs, err = r.pushAppImages(ctx); err != nil {
			return nil, err
		}
		if r.gateway, err = gatewayclientset.NewForConfig(admin); err != nil {
			return nil, err
		}
		r.printf("installing Traefik, Gateway %s/%s\n", gatewayNamespace, gatewayName)
		if err := installGateway(ctx, cfg.BinDir, r.cluster, r.kube, r.gateway); err != nil {
			return nil, err
		}
		if cfg.UpgradeFrom != "" {
			if chart.previous, err = r.makePrevious(ctx, &report.Settings); err != nil {
				return nil, err
			}
		}
	} else {
		r.fleet = newProcessFleet(cfg, r.cluster, r.kube, logDir)
	}
	report.Load.UptimeStart = uptime()
	r.printf("starting the controller: two shards of two instances\n")
	if err := r.fleet.start(ctx); err != nil {
		return nil, err
	}
	defer r.fleet.stop()
	if err := r.waitAppAPI(ctx); err != nil {
		return nil, err
	}
	r.world = newWorld()
	stopTracker, err := r.track(ctx)
	if err != nil {
		return nil, err
	}
	defer stopTracker()
	r.driver = newDriver(cfg, r.world, r.kube, r.apps, imgs)
	r.printf("creating %d Apps in %d namespaces\n", cfg.Apps, cfg.Namespaces)
	if err := r.driver.setup(ctx); err != nil {
		return nil, err
	}
	setupBound := 3*time.Minute + time.Duration(cfg.Apps)*500*time.Millisecond
	if stuck := r.waitConverged(ctx, setupBound); len(stuck) > 0 {
		return nil, fmt.Errorf("%d of the first Apps did not converge: %s", len(stuck), strings.Join(stuck[:min(len(stuck), 10)], "; "))
	}
	r.printf("changing every App once: each holds %d revisions from the start\n", historyLimit)
	if err := r.driver.fillHistories(ctx); err != nil {
		return nil, err
	}
	if stuck := r.waitConverged(ctx, setupBound); len(stuck) > 0 {
		return nil, fmt.Errorf("%d of the first Apps did not converge after their first change: %s", len(stuck), strings.Join(stuck[:min(len(stuck), 10)], "; "))
	}

	start := time.Now()
	r.printf("churn and faults for %s\n", cfg.Duration)
	counter, err := newAPICounter(admin, r.kube)
	if err != nil {
		return nil, err
	}
	r.sampler = &sampler{fleet: r.fleet, counter: counter, start: start}
	sampleCtx, stopSampling := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { r.sampler.run(sampleCtx, cfg.SampleInterval) })
	floor, err := startFloorSampler(sampleCtx, r.kube, r.world)
	if err != nil {
		stopSampling()
		return nil, err
	}
	churnCtx, stopChurn := context.WithTimeout(ctx, cfg.Duration)
	defer stopChurn()
	inj := &injector{cluster: r.cluster, kube: r.kube, fleet: r.fleet, world: r.world, start: start, gateway: r.gateway}
	var faults []FaultRecord
	wg.Go(func() {
		faults = inj.schedule(churnCtx, ctx, cfg.Faults, cfg.FirstFault, cfg.FaultInterval, cfg.Duration-cfg.ConvergeBound, func(f FaultRecord) {
			status := "done"
			if f.Error != "" {
				status = "FAILED: " + f.Error
			}
			r.printf("fault %s (%.1fs): %s; %s\n", f.Kind, f.End.Sub(f.Start).Seconds(), f.Detail, status)
		})
	})
	wg.Go(func() { r.progress(churnCtx, start) })
	r.driver.run(churnCtx)
	churnEnded := time.Now()
	r.printf("churn over; waiting up to %s for every App to converge\n", cfg.ConvergeBound)
	stuck := r.waitConverged(ctx, cfg.ConvergeBound)
	if len(stuck) > 0 {
		r.printf("%d Apps not converged: %s\n", len(stuck), strings.Join(stuck[:min(len(stuck), 5)], "; "))
	}
	r.waitCanariesSettled(ctx, cfg.ConvergeBound)
	stopSampling()
	wg.Wait()
	end := time.Now()

	report.Faults = faults
	report.Convergence = r.world.convergence(report.Faults, cfg.ConvergeBound, start, end)
	if report.State, err = checkState(ctx, r.world, r.kube, r.apps, r.driver.namespaces); err != nil {
		return nil, err
	}
	if r.gateway != nil {
		if err := report.State.checkRoutes(ctx, r.gateway, r.world, r.driver.namespaces); err != nil {
			return nil, err
		}
	}
	r.driver.mu.Lock()
	done := 0
	for k, s := range r.driver.stats {
		report.Ops[k] = s
		done += s.Done
	}
	r.driver.mu.Unlock()
	report.OpsPerMinute = round2(float64(done) / churnEnded.Sub(start).Minutes())
	writes, deleted, b, err := readWrites(r.cluster.AuditLogPath, r.fleet.users())
	if err != nil {
		return nil, fmt.Errorf("reading the audit log: %w", err)
	}
	r.world.classify(writes, r.driver.namespaces, deleted)
	report.Rollouts = r.world.checkRollouts(b)
	report.Scaling = checkScaling(b.deployments, int64(*autoscaling().MinReplicas), r.world.lockedOwnerOf, cfg.Node == localcluster.NodeReal, cfg.Duration)
	report.Floor = floor.result()
	report.FaultWindows = r.world.checkFaultWindows(writes, b, faults)
	report.floorBreaches = floorBreaches(report.Floor, faults, cfg.ConvergeBound)
	report.Writes = Writes{Total: len(writes), ByKind: writeKinds(writes), Foreign: writesClassified(writes, writeForeign),
		AfterDelete: writesClassified(writes, writeAfterDelete),
		Changes:     r.world.changeWrites(writes, faults, cfg.ConvergeBound, start, churnEnded)}
	report.WriteRate = writeRate(writes, start, end, cfg.SampleInterval)
	report.Samples = r.sampler.samples
	report.ScrapeFails = r.sampler.errors
	report.CountFails, report.CountFailure = r.sampler.countFails, r.sampler.countFailure
	report.Trends = trends(report.Samples, cfg.Duration/3, cfg.Duration, cfg.Warmup)
	report.TrendsNotJudged = trendsNotJudged(cfg.Duration)
	report.Panics = r.fleet.panics()
	report.Restarts = classifyRestarts(r.fleet.restarts(), faults)
	report.Load.UptimeEnd = uptime()
	report.Load.Samples = r.sampler.load
	summarizeLoad(&report.Load)
	report.Ended = time.Now()
	report.invariants()
	if err := report.WriteJSON(cfg.ReportPath); err != nil {
		return nil, err
	}
	report.Print(r.out)
	r.printf("report: %s\n", cfg.ReportPath)
	return report, nil
}

// settings records cfg in the report.
func (r *run) settings() Settings {
	cfg := r.cfg
	controller := cfg.Controller
	if cfg.Node == localcluster.NodeReal {
		controller = "chart " + cfg.Chart + ", image " + cfg.ImageLayout
	}
	if out, err := exec.Command(cfg.Controller, "--version").Output(); err == nil && cfg.Controller != "" {
		controller += " (" + strings.TrimSpace(string(out)) + ")"
	}
	mix := DefaultMix
	if r.driver != nil {
		mix = r.driver.mix()
	}
	return Settings{DurationS: cfg.Duration.Seconds(), Node: cfg.Node, Apps: cfg.Apps, Namespaces: cfg.Namespaces, Rate: cfg.Rate,
		Mix: mix, HistoryLimit: historyLimit, Faults: cfg.Faults, FaultIntervalS: cfg.FaultInterval.Seconds(),
		FirstFaultS: cfg.FirstFault.Seconds(), ConvergeBoundS: cfg.ConvergeBound.Seconds(), SampleIntervalS: cfg.SampleInterval.Seconds(),
		WarmupS: cfg.Warmup.Seconds(), TrendWindowS: (cfg.Duration / 3).Seconds(), BoundRelative: boundRelative, Seed: cfg.Seed, Controller: controller}
}

// previousVersion is the version the previous release is made as.
const previousVersion = "v0.0.1-soak.previous"

// makePrevious makes the release of cfg.UpgradeFrom as test/e2e/install makes its
// releases (harness.MakeRelease: `make release`, the host's platform), from a checkout
// of that revision (a git worktree, removed after), its image and chart pushed to the
// cluster's registry.
func (r *run) makePrevious(ctx context.Context, settings *Settings) (*harness.Release, error) {
	cfg := r.cfg
	t := time.Now()
	src := filepath.Join(cfg.WorkDir, "previous-src")
	commit, err := harness.CheckoutCommit(ctx, cfg.Repo, cfg.UpgradeFrom, src, cfg.BinDir)
	defer func() {
		if err := harness.RemoveCheckout(cfg.Repo, src); err != nil {
			r.printf("%v\n", err)
		}
	}()
	if err != nil {
		return nil, fmt.Errorf("checking out %s: %w", cfg.UpgradeFrom, err)
	}
	r.printf("making the release of %s (%s) as %s: make release in a checkout of it\n", cfg.UpgradeFrom, commit, previousVersion)
	changelog := filepath.Join(cfg.WorkDir, "previous-CHANGELOG.md")
	notes := fmt.Sprintf("# Changelog\n\n## [%s] - %s\n\n### Changed\n\n- The soak's previous release: %s.\n",
		strings.TrimPrefix(previousVersion, "v"), time.Now().UTC().Format(time.DateOnly), commit)
	if err := os.WriteFile(changelog, []byte(notes), 0o644); err != nil {
		return nil, err
	}
	rel, err := harness.MakeRelease(ctx, harness.ReleaseOptions{Dir: src, Version: previousVersion, Dist: filepath.Join(cfg.WorkDir, "previous-release"),
		Registry: r.cluster.Registry, Changelog: changelog})
	if err != nil {
		return nil, err
	}
	r.printf("release %s of %s made and pushed (%.0fs): image %s@%s\n", rel.Version, commit, time.Since(t).Seconds(), rel.Repository, rel.Digest)
	settings.UpgradeFrom = cfg.UpgradeFrom + " (" + commit + "), release " + rel.Version + " " + rel.Repository + "@" + rel.Digest
	return &rel, nil
}

// pushAppImages pushes agnhost under the tags the Apps cycle through to the real
// node's registry, and returns the Apps' images: agnhost paused, the image of a
// missing tag, agnhost with a subcommand that does not exist (it exits 1), and the
// autoscaled Apps' demoapp with its CPU load and the analyzed canaries' demoapp (the
// registry serves it: localcluster's node images).
func (r *run) pushAppImages(ctx context.Context) (images, error) {
	repo := r.cluster.Registry + "/agnhost"
	imgs := images{args: []string{"pause"}, bad: r.cluster.Registry + "/soak/does-not-exist:1", crashArgs: []string{"soak-exit-at-once"},
		load: newCPULoad(r.cluster.Registry + "/" + localcluster.DemoappImage), analysis: &analysisImage{image: r.cluster.Registry + "/" + localcluster.DemoappImage}}
	layout := filepath.Join(r.cfg.BinDir, "node-images", "agnhost")
	for _, tag := range []string{"soak-1", "soak-2", "soak-3"} {
		out, err := exec.CommandContext(ctx, filepath.Join(r.cfg.BinDir, "imagebuild"), "push", "--layout", layout, repo+":"+tag).CombinedOutput()
		if err != nil {
			return imgs, fmt.Errorf("pushing %s:%s: %w\n%s", repo, tag, err, out)
		}
		imgs.good = append(imgs.good, repo+":"+tag)
	}
	return imgs, nil
}

// waitAppAPI waits until the App API is served (the chart installs the CRD).
func (r *run) waitAppAPI(ctx context.Context) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		_, err := r.apps.AppcontrollerV1().Apps("default").List(ctx, metav1.ListOptions{Limit: 1})
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the App API is not served: %w", err)
		}
		time.Sleep(time.Second)
	}
}

// track starts the informer that records every App of the run.
func (r *run) track(ctx context.Context) (func(), error) {
	ctx, cancel := context.WithCancel(ctx)
	factory := appinformers.NewSharedInformerFactoryWithOptions(r.apps, 0,
		appinformers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = runLabel }))
	informer := factory.Appcontroller().V1().Apps().Informer()
	observe := func(obj any) {
		if a, ok := obj.(*appv1.App); ok {
			r.world.observe(a, time.Now())
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: observe, UpdateFunc: func(_, obj any) { observe(obj) }}); err != nil {
		cancel()
		return nil, err
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		cancel()
		return nil, errors.New("the App informer did not sync")
	}
	return func() { cancel(); factory.Shutdown() }, nil
}

// waitConverged waits up to timeout until every live App reports what the driver
// expects, and returns those that do not.
func (r *run) waitConverged(ctx context.Context, timeout time.Duration) []string {
	deadline := time.Now().Add(timeout)
	for {
		var stuck []string
		r.world.mu.Lock()
		for _, a := range r.world.live() {
			if !a.convergedNow() {
				stuck = append(stuck, a.key()+" "+describeState(a))
			}
		}
		r.world.mu.Unlock()
		if len(stuck) == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			return stuck
		}
		time.Sleep(time.Second)
	}
}

// resyncPeriod is the controller's --resync-period (the chart's): every App is synced
// again at most this long after its last sync.
const resyncPeriod = 30 * time.Second

// waitCanariesSettled waits, at most timeout, until every live canary is at rest: the
// scale-down delay of its last rollout over (its canary Deployment deleted), and, if
// its rollout ended lately, a resync period since (the revision the rollout kept beyond
// revisionHistoryLimit goes at the App's next sync after the rollout ended: the sync that
// ends it still reads the rollout that needs it), 3 s more each for the controller.
func (r *run) waitCanariesSettled(ctx context.Context, timeout time.Duration) {
	var last time.Time
	r.world.mu.Lock()
	for _, a := range r.world.live() {
		ro, _ := rolloutOf(a)
		if !a.isCanary() || ro == nil {
			continue
		}
		if ro.CanaryScaleDownAt != nil && ro.CanaryScaleDownAt.After(last) {
			last = ro.CanaryScaleDownAt.Time
		}
		if n := len(a.states); n > 0 && a.states[n-1].at.Add(resyncPeriod).After(last) {
			last = a.states[n-1].at.Add(resyncPeriod)
		}
	}
	r.world.mu.Unlock()
	wait := min(timeout, time.Until(last.Add(3*time.Second)))
	if wait <= 0 {
		return
	}
	r.printf("waiting %s for the canaries to be at rest (their scale-down delays, the resync after their last rollout)\n", wait.Round(time.Second))
	select {
	case <-ctx.Done():
	case <-time.After(wait):
	}
}

// progress prints a line a minute: operations, Apps converged, the leaders' figures.
func (r *run) progress(ctx context.Context, start time.Time) {
	harness.Every(ctx, time.Minute, func() {
		r.driver.mu.Lock()
		var done, skipped, failed int
		for _, s := range r.driver.stats {
			done, skipped, failed = done+s.Done, skipped+s.Skipped, failed+s.Failed
		}
		r.driver.mu.Unlock()
		r.world.mu.Lock()
		live, converged := 0, 0
		for _, a := range r.world.live() {
			live++
			if a.convergedNow() {
				converged++
			}
		}
		r.world.mu.Unlock()
		line := fmt.Sprintf("minute %d: %d operations done (%d skipped, %d failed), %d/%d Apps converged", int(time.Since(start).Minutes()), done, skipped, failed, converged, live)
		r.sampler.mu.Lock()
		for _, shard := range []string{shardA, shardB} {
			for i := len(r.sampler.samples) - 1; i >= 0; i-- {
				if s := r.sampler.samples[i]; s.Shard == shard && s.Leader {
					line += fmt.Sprintf("; shard %s %s: RSS %.1f MiB, heap %.1f MiB, %.0f goroutines, queue %.0f", shard, s.Process, s.RSSMiB, s.HeapLiveMiB, s.Goroutines, s.Queue)
					break
				}
			}
		}
		if n := len(r.sampler.load); n > 0 {
			line += fmt.Sprintf("; load %.2f", r.sampler.load[n-1].Load1)
		}
		r.sampler.mu.Unlock()
		r.printf("%s\n", line)
	})
}

// classifyRestarts keeps the causes of the restarts, except that a leader that lost
// its lease outside an injected fault (and a minute after it), or a pod evicted outside
// the node-pressure fault, is unexpected.
func classifyRestarts(restarts []Restart, faults []FaultRecord) []Restart {
	for i, x := range restarts {
		if x.Cause != causeLeaseLost && x.Cause != causeEvicted {
			continue
		}
		during := false
		for _, f := range faults {
			if (x.Cause == causeLeaseLost || f.Kind == FaultNodePressure) && !x.At.Before(f.Start) && x.At.Before(f.End.Add(time.Minute)) {
				during = true
			}
		}
		if !during {
			restarts[i].Cause = causeUnexpected
		}
	}
	return restarts
}

// summarizeLoad computes the load's minimum, mean and maximum.
func summarizeLoad(l *Load) {
	if len(l.Samples) == 0 {
		return
	}
	l.Min = l.Samples[0].Load1
	sum := 0.0
	for _, s := range l.Samples {
		l.Min, l.Max = min(l.Min, s.Load1), max(l.Max, s.Load1)
		sum += s.Load1
	}
	l.Mean = round2(sum / float64(len(l.Samples)))
}

// uptime is the output of uptime(1).
func uptime() string {
	out, err := exec.Command("uptime").Output()
	if err != nil {
		return err.Error()
	}
	return strings.TrimSpace(string(out))
}

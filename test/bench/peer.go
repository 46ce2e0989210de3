package bench

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/utils/ptr"

	"github.com/app-controller/app-controller/internal/localcluster"
	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/test/harness"
)

// The peer scenario (Config.Scenarios "peer", not by default): the App controller side by
// side with Argo Rollouts' controller (Config.PeerController, built by the Makefile from
// hack/tools/argo-rollouts), on the same control plane, one controller at a time, each on
// an emptied cluster: N objects with the same canary strategy, [setWeight 25, pause {}]
// without traffic routing (the canary's share is a share of the replicas), Apps for the
// App controller and Rollouts for Argo Rollouts, each Rollout's pod template the App's
// Deployment's (the controller's own builder). Three phases, as the canary scenario's:
// created until every object is Ready (App: Ready at its generation; Rollout: phase
// Healthy at its generation); a new image until every object stands at its pause
// (App: phase Paused at step 2 of 2; Rollout: phase Paused, currentStepIndex 1, a pause
// condition); promoted until every object is promoted and its canary gone (App: kubectl
// app promote's annotation, then Healthy, Ready and no canary Deployment left; Rollout:
// what `kubectl argo rollouts promote` writes to a Rollout paused at a canary step, a
// merge patch of its status {"status":{"pauseConditions":null}}, then phase Healthy at
// its generation with the new ReplicaSet stable and no other pod). Each controller runs
// with its default flags, then with its flags for scale (peerRuns). Writes are counted
// from the audit log for each controller's own user, the same way for both; CPU and
// memory from /proc of the process the harness started.

// scenarioPeer names the peer scenario.
const scenarioPeer = "peer"

// peerUser is Argo Rollouts' controller's user (its writes are counted apart).
const peerUser = "bench:argo-rollouts"

// peerWeight is the weight of the strategy's setWeight step.
const peerWeight = 25

// The two controllers of the peer scenario.
const (
	peerOurs = "app-controller"
	peerArgo = "argo-rollouts"
)

// ourScaleFlags are the App controller's flags for scale: twice the default workers
// (docs/performance.md, "Workers": the best converge of the study) and five times the
// client's default rate limits.
var ourScaleFlags = []string{"--workers=40", "--kube-api-qps=1000", "--kube-api-burst=2000"}

// argoScaleFlags are Argo Rollouts' flags for scale, those its --help documents for it:
// four times its default worker threads of the Rollout controller (10) and 25 times its
// client's default rate limits (QPS 40, burst 80), the same limits as ourScaleFlags.
var argoScaleFlags = []string{"--rollout-threads=40", "--qps=1000", "--burst=2000"}

// argoBaseFlags are given to Argo Rollouts in every run: its own user's kubeconfig, its
// metrics and health ports (free ports: other runs may share the machine) and no leader
// election, as the App controller's default (one instance each).
func argoBaseFlags(kubeconfig string) ([]string, string, error) {
	var ports []string
	for range 2 {
		addr, err := harness.FreeAddr()
		if err != nil {
			return nil, "", err
		}
		_, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, "", fmt.Errorf("parsing %s: %w", addr, err)
		}
		ports = append(ports, port)
	}
	flags := []string{"--kubeconfig=" + kubeconfig, "--metricsPort=" + ports[0], "--healthzPort=" + ports[1], "--leader-elect=false"}
	return flags, "http://127.0.0.1:" + ports[0] + "/metrics", nil
}

// rolloutsGVR is Argo Rollouts' Rollout resource.
var rolloutsGVR = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "rollouts"}

// PeerFigures are the peer scenario's figures: one run per controller and set of flags.
type PeerFigures struct {
	// Steps is the strategy of every object.
	Steps string `json:"steps"`
	// ArgoVersion is Argo Rollouts' controller's version (its --version).
	ArgoVersion string    `json:"argo_rollouts_version"`
	Runs        []PeerRun `json:"runs"`
}

// PeerRun is one controller's run of the peer scenario.
type PeerRun struct {
	// Controller is "app-controller" or "argo-rollouts"; Flags those added to its
	// defaults (none: its defaults).
	Controller string   `json:"controller"`
	Flags      []string `json:"flags"`
	// Set is "defaults" or "scale" (Config.PeerFlagSets).
	Set string `json:"set"`
	// Create, Change and Promote are the three phases, each from its first request until
	// every object reached the phase's state; writes per object until Settle later.
	Create  PeerPhase `json:"create"`
	Change  PeerPhase `json:"change"`
	Promote PeerPhase `json:"promote"`
	// CPUSeconds is the controller's utime+stime over the three phases; PeakRSSMB its
	// VmHWM at the end; RSSMBPer1000 (VmRSS after the create phase - VmRSS idle on the
	// empty cluster) per 1000 objects.
	CPUSeconds   float64 `json:"cpu_seconds"`
	PeakRSSMB    float64 `json:"peak_rss_mb"`
	RSSMBPer1000 float64 `json:"rss_mb_per_1000"`
}

// PeerPhase is one phase of a peer run.
type PeerPhase struct {
	Seconds float64 `json:"seconds"`
	// CPUSeconds is the controller's utime+stime during the phase.
	CPUSeconds      float64        `json:"cpu_seconds"`
	WritesPerObject WriteBreakdown `json:"writes_per_object"`
}

// peerSide is one controller's objects in the peer scenario.
type peerSide interface {
	// create, change and promote act on the i-th object.
	create(ctx context.Context, i int) error
	change(ctx context.Context, i int) error
	promote(ctx context.Context, i int) error
	// expect sets the state waitReached waits for.
	expect(goal peerGoal)
	waitReached(ctx context.Context, names []string, what string, timeout time.Duration) (time.Time, []string, error)
	// promoted returns when the promotion's aftermath is over (the App's canary
	// Deployments gone); zero if nothing is left to wait for.
	promoted(ctx context.Context) (time.Time, error)
	stop()
}

// peerGoal is the state a phase waits for.
type peerGoal int

const (
	goalReady peerGoal = iota
	goalPaused
	goalPromoted
)

// peerRuns are the runs of the peer scenario, in order: for each of sets ("defaults",
// "scale"), the App controller, then Argo Rollouts; extra are the App controller's flags
// of every run (Config.ControllerFlags).
func peerRuns(sets, extra []string) ([]PeerRun, error) {
	var runs []PeerRun
	for _, set := range sets {
		switch set {
		case peerDefaults:
			runs = append(runs, PeerRun{Controller: peerOurs, Flags: extra, Set: set}, PeerRun{Controller: peerArgo, Set: set})
		case peerScale:
			runs = append(runs, PeerRun{Controller: peerOurs, Flags: append(append([]string{}, extra...), ourScaleFlags...), Set: set},
				PeerRun{Controller: peerArgo, Flags: argoScaleFlags, Set: set})
		default:
			return nil, fmt.Errorf("the peer scenario has no set of flags %q (%s or %s)", set, peerDefaults, peerScale)
		}
	}
	return runs, nil
}

// The sets of flags of the peer scenario's runs (Config.PeerFlagSets).
const (
	peerDefaults = "defaults"
	peerScale    = "scale"
)

// DefaultPeerFlagSets are the peer scenario's sets of flags: both.
var DefaultPeerFlagSets = []string{peerDefaults, peerScale}

// peer runs the peer scenario of round.
func (e *env) peer(ctx context.Context, round int) (*PeerFigures, error) {
	version, err := exec.CommandContext(ctx, e.cfg.PeerController, "--version").Output()
	if err != nil {
		return nil, fmt.Errorf("running %s --version: %w", e.cfg.PeerController, err)
	}
	f := &PeerFigures{Steps: fmt.Sprintf("setWeight %d, pause until promoted; no traffic routing (App: scaleDownDelaySeconds 0, as Argo Rollouts scales the old ReplicaSet down at once without traffic routing)", peerWeight),
		ArgoVersion: strings.TrimSpace(string(version))}
	if _, err := e.addNodes(ctx, e.cfg.Apps*canaryPodsPerApp(int(e.cfg.Replicas))+100); err != nil {
		return nil, err
	}
	sets := e.cfg.PeerFlagSets
	if len(sets) == 0 {
		sets = DefaultPeerFlagSets
	}
	runs, err := peerRuns(sets, e.cfg.ControllerFlags)
	if err != nil {
		return nil, err
	}
	for i, run := range runs {
		if err := e.empty(ctx); err != nil {
			return nil, err
		}
		if err := e.peerRun(ctx, round, i, &run); err != nil {
			return nil, fmt.Errorf("peer, %s %s: %w", run.Controller, strings.Join(run.Flags, " "), err)
		}
		f.Runs = append(f.Runs, run)
	}
	return f, nil
}

// peerRun runs one controller through the three phases and fills run's figures.
func (e *env) peerRun(ctx context.Context, round, index int, run *PeerRun) error {
	n := e.cfg.Apps
	ns := fmt.Sprintf("bench-peer-%d-%d", round, index)
	if err := createNamespace(ctx, e.admin.kube, ns); err != nil {
		return err
	}
	logPath := filepath.Join(e.logDir, fmt.Sprintf("peer-round%d-%d-%s.log", round, index, run.Controller))
	var proc *controllerProc
	var side peerSide
	var user string
	var err error
	switch run.Controller {
	case peerOurs:
		user = controllerUser
		proc, err = startController(e.cfg.Controller, e.controllerKubeconfig, logPath, run.Flags, nil, 0)
		if err != nil {
			return err
		}
		defer func() { _ = proc.kill(syscall.SIGKILL) }()
		if err := proc.waitServing(ctx, time.Minute); err != nil {
			return err
		}
		if side, err = e.newAppSide(ctx, ns); err != nil {
			return err
		}
	case peerArgo:
		user = peerUser
		flags, metricsURL, err := argoBaseFlags(e.peerKubeconfig)
		if err != nil {
			return err
		}
		p, err := harness.Start(e.cfg.PeerController, append(flags, run.Flags...), logPath)
		if err != nil {
			return err
		}
		proc = &controllerProc{Process: p, metricsURL: metricsURL, start: time.Now()}
		defer func() { _ = proc.kill(syscall.SIGKILL) }()
		// It serves its metrics once every informer of its controllers (Rollouts,
		// ReplicaSets, Services, Ingresses, analysis, experiments...) has synced.
		if err := proc.waitServing(ctx, 2*time.Minute); err != nil {
			return err
		}
		if side, err = e.newRolloutSide(ctx, ns); err != nil {
			return err
		}
	default:
		return fmt.Errorf("no controller %q", run.Controller)
	}
	defer side.stop()
	flags := strings.Join(run.Flags, " ")
	if flags == "" {
		flags = "no flag added"
	}
	e.printf("round %d: peer: %s (%s: %s), %d objects\n", round, run.Controller, run.Set, flags, n)
	time.Sleep(min(e.cfg.BaselineWait, 5*time.Second))
	base, err := proc.stats()
	if err != nil {
		return err
	}

	names := make([]string, n)
	for i := range names {
		names[i] = appName(i)
	}
	phase := func(what string, goal peerGoal, act func(context.Context, int) error, done func(context.Context) (time.Time, error)) (PeerPhase, error) {
		side.expect(goal)
		before, err := proc.stats()
		if err != nil {
			return PeerPhase{}, err
		}
		start := time.Now()
		if err := harness.Parallel(ctx, n, e.cfg.CreateClients, act); err != nil {
			return PeerPhase{}, err
		}
		last, stuck, err := side.waitReached(ctx, names, what, 2*e.convergeTimeout())
		if err != nil {
			if len(stuck) > 5 {
				stuck = stuck[:5]
			}
			return PeerPhase{}, fmt.Errorf("%s (first stuck: %v; the controller's log: %s): %w", what, stuck, logPath, err)
		}
		if done != nil {
			at, err := done(ctx)
			if err != nil {
				return PeerPhase{}, fmt.Errorf("%s: %w", what, err)
			}
			last = latest(last, at)
		}
		after, err := proc.stats()
		if err != nil {
			return PeerPhase{}, err
		}
		writes, err := e.audit.count(user, start, last.Add(e.cfg.Settle))
		if err != nil {
			return PeerPhase{}, err
		}
		p := PeerPhase{Seconds: round2(last.Sub(start).Seconds()), CPUSeconds: round2(after.cpuSeconds - before.cpuSeconds), WritesPerObject: perApp(writes, n)}
		e.printf("round %d: peer: %s: %s in %.2fs, %.2f writes per object, %.2f CPU s\n", round, run.Controller, what, p.Seconds, p.WritesPerObject.Total, p.CPUSeconds)
		return p, nil
	}
	if run.Create, err = phase("created (Ready)", goalReady, side.create, nil); err != nil {
		return err
	}
	created, err := proc.stats()
	if err != nil {
		return err
	}
	run.RSSMBPer1000 = round2((created.rssMB - base.rssMB) * 1000 / float64(n))
	if run.Change, err = phase("a new image, paused at the first step", goalPaused, side.change, nil); err != nil {
		return err
	}
	if run.Promote, err = phase("promoted", goalPromoted, side.promote, side.promoted); err != nil {
		return err
	}
	if err := proc.kill(syscall.SIGTERM); err != nil {
		return err
	}
	run.CPUSeconds = round2(run.Create.CPUSeconds + run.Change.CPUSeconds + run.Promote.CPUSeconds)
	run.PeakRSSMB = round2(proc.last.peakMB)
	return nil
}

// peerImage is the image of the peer scenario's change phase.
const peerImage = churnImage + "-peer"

// appSide is the App controller's side: Apps with the strategy.
type appSide struct {
	e     *env
	ns    string
	watch *appWatch
	image []byte
}

func (e *env) newAppSide(ctx context.Context, ns string) (*appSide, error) {
	watch, err := watchApps(ctx, e.admin, ns)
	if err != nil {
		return nil, err
	}
	return &appSide{e: e, ns: ns, watch: watch,
		image: []byte(fmt.Sprintf(`{"spec":{"deploymentTemplate":{"image":%q}}}`, peerImage))}, nil
}

// newPeerApp is newApp with the peer scenario's strategy.
func newPeerApp(ns, name string, replicas int32) *appv1.App {
	app := newApp(ns, name, replicas)
	app.Spec.Rollout = &appv1.Rollout{Canary: &appv1.CanaryStrategy{
		Steps:                 []appv1.CanaryStep{{SetWeight: ptr.To[int32](peerWeight)}, {Pause: &appv1.CanaryPause{}}},
		ScaleDownDelaySeconds: ptr.To[int32](0),
	}}
	return app
}

func (s *appSide) create(ctx context.Context, i int) error {
	_, err := s.e.admin.app.AppcontrollerV1().Apps(s.ns).Create(ctx, newPeerApp(s.ns, appName(i), s.e.cfg.Replicas), metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating App %s: %w", appName(i), err)
	}
	return nil
}

func (s *appSide) change(ctx context.Context, i int) error {
	if _, err := s.e.admin.app.AppcontrollerV1().Apps(s.ns).Patch(ctx, appName(i), types.MergePatchType, s.image, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("changing the image of App %s: %w", appName(i), err)
	}
	return nil
}

func (s *appSide) promote(ctx context.Context, i int) error {
	return s.e.promote(ctx, s.ns, s.watch.app(appName(i)))
}

func (s *appSide) expect(goal peerGoal) {
	s.watch.expect(map[peerGoal]func(*appv1.App) bool{goalReady: appReady, goalPaused: canaryPaused, goalPromoted: canaryPromoted}[goal])
}

func (s *appSide) waitReached(ctx context.Context, names []string, what string, timeout time.Duration) (time.Time, []string, error) {
	return s.watch.waitReached(ctx, names, what, timeout)
}

func (s *appSide) promoted(ctx context.Context) (time.Time, error) {
	return s.e.canariesGone(ctx, s.ns, s.e.convergeTimeout())
}

func (s *appSide) stop() { s.watch.stop() }

// rolloutSide is Argo Rollouts' side: Rollouts with the strategy, watched through a
// dynamic informer.
type rolloutSide struct {
	e      *env
	ns     string
	client dynamic.ResourceInterface
	cancel context.CancelFunc

	mu    sync.Mutex
	goals goalTracker[*unstructured.Unstructured]
}

func (e *env) newRolloutSide(ctx context.Context, ns string) (*rolloutSide, error) {
	s := &rolloutSide{e: e, ns: ns, client: e.admin.dynamic.Resource(rolloutsGVR).Namespace(ns), goals: newGoalTracker[*unstructured.Unstructured]()}
	ctx, s.cancel = context.WithCancel(ctx)
	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(e.admin.dynamic, 0, ns, nil)
	informer := factory.ForResource(rolloutsGVR).Informer()
	if err := observeInformer(ctx, factory, informer, s.observe, "Rollout", ns); err != nil {
		s.cancel()
		return nil, err
	}
	return s, nil
}

// observe records what the informer delivered of a Rollout.
func (s *rolloutSide) observe(u *unstructured.Unstructured) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.goals.observe(u.GetName(), u, now)
}

// newRollout returns the i-th Rollout: the App's Deployment's selector, replicas and pod
// template (the App controller's own builder), the peer scenario's strategy.
func newRollout(ns, name string, replicas int32) (*unstructured.Unstructured, error) {
	deployment, _, err := children(newApp(ns, name, replicas))
	if err != nil {
		return nil, err
	}
	selector, err := runtime.DefaultUnstructuredConverter.ToUnstructured(deployment.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("converting the selector of %s: %w", name, err)
	}
	template, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&deployment.Spec.Template)
	if err != nil {
		return nil, fmt.Errorf("converting the pod template of %s: %w", name, err)
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1",
		"kind":       "Rollout",
		"metadata":   map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{
			"replicas": int64(replicas),
			"selector": selector,
			"template": template,
			"strategy": map[string]any{"canary": map[string]any{"steps": []any{
				map[string]any{"setWeight": int64(peerWeight)},
				map[string]any{"pause": map[string]any{}},
			}}},
		},
	}}, nil
}

func (s *rolloutSide) create(ctx context.Context, i int) error {
	r, err := newRollout(s.ns, appName(i), s.e.cfg.Replicas)
	if err != nil {
		return err
	}
	if _, err := s.client.Create(ctx, r, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating Rollout %s: %w", appName(i), err)
	}
	return nil
}

// change sets the image of the Rollout's one container, as `kubectl argo rollouts set
// image` does with a JSON patch: one request.
func (s *rolloutSide) change(ctx context.Context, i int) error {
	patch := []byte(fmt.Sprintf(`[{"op":"replace","path":"/spec/template/spec/containers/0/image","value":%q}]`, peerImage))
	if _, err := s.client.Patch(ctx, appName(i), types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("changing the image of Rollout %s: %w", appName(i), err)
	}
	return nil
}

// promote writes what `kubectl argo rollouts promote` writes to a Rollout paused at a
// canary pause step, not paused by its spec: a merge patch of its status that clears
// its pause conditions.
func (s *rolloutSide) promote(ctx context.Context, i int) error {
	if _, err := s.client.Patch(ctx, appName(i), types.MergePatchType, []byte(`{"status":{"pauseConditions":null}}`), metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("promoting Rollout %s: %w", appName(i), err)
	}
	return nil
}

func (s *rolloutSide) expect(goal peerGoal) {
	f := map[peerGoal]func(*unstructured.Unstructured) bool{goalReady: rolloutReady, goalPaused: rolloutPaused, goalPromoted: rolloutPromoted}[goal]
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.goals.setGoal(f, now)
}

func (s *rolloutSide) waitReached(ctx context.Context, names []string, what string, timeout time.Duration) (time.Time, []string, error) {
	deadline := time.Now().Add(timeout)
	for {
		s.mu.Lock()
		last, stuck := s.goals.reached(names)
		s.mu.Unlock()
		if len(stuck) == 0 {
			return last, nil, nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, stuck, fmt.Errorf("%d of %d Rollouts not %s after %s", len(stuck), len(names), what, timeout)
		}
		select {
		case <-ctx.Done():
			return time.Time{}, stuck, ctx.Err()
		case <-time.After(pollInterval):
		}
	}
}

func (s *rolloutSide) promoted(context.Context) (time.Time, error) { return time.Time{}, nil }

func (s *rolloutSide) stop() { s.cancel() }

// rolloutAt tells whether the Rollout's status is at its generation (Argo Rollouts
// writes status.observedGeneration as a string) and in phase.
func rolloutAt(u *unstructured.Unstructured, phase string) bool {
	observed, _, _ := unstructured.NestedString(u.Object, "status", "observedGeneration")
	got, _, _ := unstructured.NestedString(u.Object, "status", "phase")
	return observed == strconv.FormatInt(u.GetGeneration(), 10) && got == phase
}

// rolloutReady tells whether the Rollout is Healthy at its generation.
func rolloutReady(u *unstructured.Unstructured) bool { return rolloutAt(u, "Healthy") }

// rolloutPaused tells whether the Rollout, at its generation, is paused at the
// strategy's pause step (index 1) with a pause condition.
func rolloutPaused(u *unstructured.Unstructured) bool {
	step, _, _ := unstructured.NestedInt64(u.Object, "status", "currentStepIndex")
	conditions, _, _ := unstructured.NestedSlice(u.Object, "status", "pauseConditions")
	return rolloutAt(u, "Paused") && step == 1 && len(conditions) > 0
}

// rolloutPromoted tells whether the Rollout is Healthy at its generation, its new
// ReplicaSet stable and its pods only the desired ones (the old ReplicaSet scaled down).
func rolloutPromoted(u *unstructured.Unstructured) bool {
	stable, _, _ := unstructured.NestedString(u.Object, "status", "stableRS")
	current, _, _ := unstructured.NestedString(u.Object, "status", "currentPodHash")
	step, _, _ := unstructured.NestedInt64(u.Object, "status", "currentStepIndex")
	replicas, _, _ := unstructured.NestedInt64(u.Object, "status", "replicas")
	desired, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
	return rolloutReady(u) && stable != "" && stable == current && step == 2 && replicas == desired
}

// writePeerKubeconfig writes the kubeconfig of Argo Rollouts' user and returns its path.
func (e *env) writePeerKubeconfig() error {
	cfg, err := e.cluster.UserConfig(peerUser, benchGroup)
	if err != nil {
		return err
	}
	e.peerKubeconfig = filepath.Join(e.cfg.WorkDir, "argo-rollouts.kubeconfig")
	return localcluster.WriteKubeconfig(e.peerKubeconfig, cfg)
}

// setUpPeer prepares the peer scenario: Argo Rollouts' user and its CRDs (the
// *-crd.yaml files of PeerCRDDir: Rollout, AnalysisRun, AnalysisTemplate,
// ClusterAnalysisTemplate, Experiment; its controller waits for every informer).
func (e *env) setUpPeer(ctx context.Context) error {
	if e.cfg.PeerController == "" || e.cfg.PeerCRDDir == "" {
		return fmt.Errorf("the peer scenario needs Argo Rollouts' controller and CRDs (Config.PeerController, PeerCRDDir: make bench builds them)")
	}
	if err := e.writePeerKubeconfig(); err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(e.cfg.PeerCRDDir, "*-crd.yaml"))
	if err != nil {
		return fmt.Errorf("listing Argo Rollouts' CRDs: %w", err)
	}
	if err := localcluster.InstallCRDFiles(ctx, e.cluster.Config, files); err != nil {
		return fmt.Errorf("installing Argo Rollouts' CRDs of %s: %w", e.cfg.PeerCRDDir, err)
	}
	e.printf("installed Argo Rollouts' %d CRDs\n", len(files))
	return nil
}

// table renders the peer scenario's figures: one line per run, the ratios ours/theirs
// per phase for each set of flags, then each run's writes per object by kind.
func (f *PeerFigures) table() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "  peer: %s; Argo Rollouts %s\n", f.Steps, f.ArgoVersion)
	fmt.Fprintf(&sb, "    %-15s %-52s %9s %9s %9s %7s %9s %9s %s\n", "controller", "flags", "create s", "pause s", "promote s", "CPU s", "peak MiB", "MiB/1000", "writes per object create / change / promote")
	for _, r := range f.Runs {
		flags := "defaults"
		if len(r.Flags) > 0 {
			flags = strings.Join(r.Flags, " ")
		}
		fmt.Fprintf(&sb, "    %-15s %-52s %9.2f %9.2f %9.2f %7.2f %9.1f %9.1f %.2f / %.2f / %.2f\n", r.Controller, flags, r.Create.Seconds, r.Change.Seconds,
			r.Promote.Seconds, r.CPUSeconds, r.PeakRSSMB, r.RSSMBPer1000, r.Create.WritesPerObject.Total, r.Change.WritesPerObject.Total, r.Promote.WritesPerObject.Total)
	}
	for i := 0; i+1 < len(f.Runs); i += 2 {
		ours, theirs := f.Runs[i], f.Runs[i+1]
		label := theirs.Set
		fmt.Fprintf(&sb, "    ours/theirs, %-11s create %s, pause %s, promote %s, CPU %s, peak RSS %s, RSS per 1000 %s\n", label+":",
			ratio(ours.Create.Seconds, theirs.Create.Seconds), ratio(ours.Change.Seconds, theirs.Change.Seconds), ratio(ours.Promote.Seconds, theirs.Promote.Seconds),
			ratio(ours.CPUSeconds, theirs.CPUSeconds), ratio(ours.PeakRSSMB, theirs.PeakRSSMB), ratio(ours.RSSMBPer1000, theirs.RSSMBPer1000))
	}
	for _, r := range f.Runs {
		flags := r.Set
		for _, p := range []struct {
			name  string
			phase PeerPhase
		}{{"create", r.Create}, {"change", r.Change}, {"promote", r.Promote}} {
			fmt.Fprintf(&sb, "    %s (%s), %s: %s\n", r.Controller, flags, p.name, breakdown(p.phase.WritesPerObject))
		}
	}
	return sb.String()
}

// ratio formats a/b, "-" when b is not positive.
func ratio(a, b float64) string {
	if b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", a/b)
}

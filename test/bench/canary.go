package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/app-controller/app-controller/internal/localcluster"
	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/test/harness"
)

// The canary scenario (Config.Scenarios "canary"): N Apps whose strategy is one
// setWeight step and a pause until promoted (canarySteps) each roll one step, in three
// phases, each measured on its own: the Apps created; a new image for every App (the
// rollout starts and makes its first step: the canary at its share of the replicas, the
// stable scaled down to its own, then the pause); kubectl app promote's request on every
// App (the promotion: the stable Deployment gets the new template, the canary goes).
// It runs last in a round, with a controller process of its own, on a namespace of its
// own (the product's emptied first) and on kwok nodes added for the canary pods: the
// product's figures (peak RSS, CPU of the round) stay those of the Apps without a
// strategy.

// canaryWeight is the weight of the strategy's one setWeight step: the canary takes half
// of the replicas (rounded up: 1 of 1, 2 of 3), the stable keeps the other half (1 of 1,
// 2 of 3).
const canaryWeight = 50

// canarySteps describes the strategy of the canary scenario's Apps.
var canarySteps = fmt.Sprintf("setWeight %d, pause until promoted; scaleDownDelaySeconds 0", canaryWeight)

// CanaryFigures are the canary scenario's figures, one phase each.
type CanaryFigures struct {
	// Steps is the Apps' strategy.
	Steps string `json:"steps"`
	// Create: N Apps with the strategy created by CreateClients parallel clients, until
	// every App is Ready at its generation.
	Create CanaryPhase `json:"create"`
	// Change: a new image for every App, until every App's rollout is paused after its
	// first step (status.rollout at the App's generation, phase Paused, step 2 of 2).
	Change CanaryPhase `json:"change"`
	// Promote: kubectl app promote's request (the annotation) on every App, until every
	// App is promoted (phase Healthy, Ready at its generation) and no canary Deployment
	// is left.
	Promote CanaryPhase `json:"promote"`
}

// CanaryPhase is one phase of the canary scenario: from its first request until the
// last App reached the phase's state; the controller's writes per App, until Settle
// (5 s) later.
type CanaryPhase struct {
	Seconds      float64        `json:"seconds"`
	WritesPerApp WriteBreakdown `json:"writes_per_app"`
	// ProgressStatusWritesPerApp is how many of the status writes per App only showed a
	// rollout's progress (app_controller_status_writes_total{cause="progress"}: replica
	// counts while a step or the promotion waits on the deployment controller, at most
	// one per StatusProgressWindow): they grow with the wait, not with the steps.
	ProgressStatusWritesPerApp float64 `json:"progress_status_writes_per_app"`
}

// progressStatusWrites reads app_controller_status_writes_total{cause="progress"} of the
// controller proc.
func progressStatusWrites(ctx context.Context, proc *controllerProc) (float64, error) {
	families, err := proc.scrape(ctx)
	if err != nil {
		return 0, err
	}
	v, _ := harness.Value(families, "app_controller_status_writes_total", map[string]string{"cause": "progress"})
	return v, nil
}

// newCanaryApp is newApp with the canary scenario's strategy.
func newCanaryApp(ns, name string, replicas int32) *appv1.App {
	app := newApp(ns, name, replicas)
	app.Spec.Rollout = &appv1.Rollout{Canary: &appv1.CanaryStrategy{
		Steps:                 []appv1.CanaryStep{{SetWeight: ptr.To[int32](canaryWeight)}, {Pause: &appv1.CanaryPause{}}},
		ScaleDownDelaySeconds: ptr.To[int32](0),
	}}
	return app
}

// canaryPaused tells whether a's rollout, at a's generation, is paused after the
// strategy's setWeight step.
func canaryPaused(a *appv1.App) bool {
	r := a.Status.Rollout
	return a.Status.ObservedGeneration == a.Generation && r != nil && r.Canary != nil &&
		r.Phase == appv1.RolloutPaused && r.CurrentStepIndex == 1
}

// canaryPromoted tells whether a is Ready at its generation with no rollout running.
func canaryPromoted(a *appv1.App) bool {
	r := a.Status.Rollout
	return appReady(a) && r != nil && r.Canary == nil && r.Phase == appv1.RolloutHealthy
}

// canaryPodsPerApp is the most pods an App of the scenario runs at once: during the step
// the stable's replicas and the canary's half; during the promotion the stable's
// replicas, its rolling update's surge (25%, rounded up) and the canary's half.
func canaryPodsPerApp(replicas int) int {
	half, surge := (replicas+1)/2, (replicas+3)/4
	return replicas + surge + half
}

// canary runs the canary scenario of round and returns its figures.
func (e *env) canary(ctx context.Context, round int) (*CanaryFigures, error) {
	n := e.cfg.Apps
	if err := e.empty(ctx); err != nil {
		return nil, err
	}
	added, err := e.addNodes(ctx, n*canaryPodsPerApp(int(e.cfg.Replicas))+100)
	if err != nil {
		return nil, err
	}
	ns := fmt.Sprintf("bench-canary-%d", round)
	if err := createNamespace(ctx, e.admin.kube, ns); err != nil {
		return nil, err
	}
	proc, watch, stop, err := e.scenarioController(ctx, round, "canary", ns)
	if err != nil {
		return nil, err
	}
	defer stop()

	names := make([]string, n)
	for i := range names {
		names[i] = appName(i)
	}
	f := &CanaryFigures{Steps: canarySteps}
	// phase acts on every App with CreateClients parallel clients, waits until every App
	// is in the state goal asks for (and until done, if set), then counts the writes.
	phase := func(what string, goal func(*appv1.App) bool, act func(ctx context.Context, i int) error, done func(context.Context) (time.Time, error)) (CanaryPhase, error) {
		e.printf("round %d: canary: %s, %d Apps\n", round, what, n)
		watch.expect(goal)
		progressBefore, err := progressStatusWrites(ctx, proc)
		if err != nil {
			return CanaryPhase{}, err
		}
		start := time.Now()
		if err := harness.Parallel(ctx, n, e.cfg.CreateClients, act); err != nil {
			return CanaryPhase{}, err
		}
		last, stuck, err := watch.waitReached(ctx, names, what, 2*e.convergeTimeout())
		if err != nil {
			e.diagnose(ctx, ns, stuck, []*controllerProc{proc})
			return CanaryPhase{}, fmt.Errorf("canary: %s: %w", what, err)
		}
		if done != nil {
			at, err := done(ctx)
			if err != nil {
				return CanaryPhase{}, fmt.Errorf("canary: %s: %w", what, err)
			}
			last = latest(last, at)
		}
		settled := last.Add(e.cfg.Settle)
		writes, err := e.audit.count(controllerUser, start, settled)
		if err != nil {
			return CanaryPhase{}, err
		}
		progressAfter, err := progressStatusWrites(ctx, proc)
		if err != nil {
			return CanaryPhase{}, err
		}
		p := CanaryPhase{Seconds: round2(last.Sub(start).Seconds()), WritesPerApp: perApp(writes, n),
			ProgressStatusWritesPerApp: round2((progressAfter - progressBefore) / float64(n))}
		e.printf("round %d: canary: %s in %.2fs, %.2f writes per App (%.2f status writes for progress)\n", round, what, p.Seconds,
			p.WritesPerApp.Total, p.ProgressStatusWritesPerApp)
		return p, nil
	}

	apps := e.admin.app.AppcontrollerV1().Apps(ns)
	if f.Create, err = phase("created (Ready)", appReady, func(ctx context.Context, i int) error {
		if _, err := apps.Create(ctx, newCanaryApp(ns, appName(i), e.cfg.Replicas), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating App %s: %w", appName(i), err)
		}
		return nil
	}, nil); err != nil {
		return nil, err
	}

	newImage := []byte(fmt.Sprintf(`{"spec":{"deploymentTemplate":{"image":%q}}}`, fmt.Sprintf("%s-canary-%d", churnImage, round)))
	if f.Change, err = phase("a new image, the first step (paused)", canaryPaused, func(ctx context.Context, i int) error {
		if _, err := apps.Patch(ctx, appName(i), types.MergePatchType, newImage, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("changing the image of App %s: %w", appName(i), err)
		}
		return nil
	}, nil); err != nil {
		return nil, err
	}

	if f.Promote, err = phase("kubectl app promote, the promotion", canaryPromoted, func(ctx context.Context, i int) error {
		return e.promote(ctx, ns, watch.app(appName(i)))
	}, func(ctx context.Context) (time.Time, error) {
		return e.canariesGone(ctx, ns, e.convergeTimeout())
	}); err != nil {
		return nil, err
	}

	if err := proc.kill(syscall.SIGTERM); err != nil {
		return nil, err
	}
	if round < e.cfg.Rounds {
		// The next round's floor and product run on the nodes they had.
		if err := e.empty(ctx); err != nil {
			return nil, err
		}
		for _, name := range added {
			if err := e.admin.kube.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("deleting node %s: %w", name, err)
			}
		}
	}
	return f, nil
}

// promote writes on app the request `kubectl app promote` writes: end the current step
// of its rollout.
func (e *env) promote(ctx context.Context, ns string, app *appv1.App) error {
	if app == nil || app.Status.Rollout == nil || app.Status.Rollout.Canary == nil {
		return errors.New("promote: an App without a rollout running")
	}
	r := app.Status.Rollout
	req := appv1.RolloutRequest{Action: appv1.RolloutActionPromote, Canary: r.Canary.PodTemplateHash, Step: r.CurrentStepIndex,
		ID: time.Now().UTC().Format(time.RFC3339Nano)}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{appv1.RolloutRequestAnnotation: req.String()}}})
	if err != nil {
		return fmt.Errorf("encoding the promote request of App %s: %w", app.Name, err)
	}
	if _, err := e.admin.app.AppcontrollerV1().Apps(ns).Patch(ctx, app.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("promoting App %s: %w", app.Name, err)
	}
	return nil
}

// canariesGone waits until no canary Deployment is left in ns and returns when.
func (e *env) canariesGone(ctx context.Context, ns string, timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	selector := metav1.ListOptions{LabelSelector: appv1.TrackLabel + "=" + appv1.TrackCanary}
	for {
		list, err := e.admin.kube.AppsV1().Deployments(ns).List(ctx, selector)
		if err == nil && len(list.Items) == 0 {
			return time.Now(), nil
		}
		left := "?"
		if err == nil {
			left = fmt.Sprint(len(list.Items))
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("%s canary Deployment(s) left after %s", left, timeout)
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// addNodes adds kwok nodes until the cluster has room for pods pods and returns the names
// of those it added.
func (e *env) addNodes(ctx context.Context, pods int) ([]string, error) {
	var added []string
	names := localcluster.NodeNames(pods)
	for _, name := range names[min(len(e.cluster.Nodes), len(names)):] {
		if err := localcluster.CreateKwokNode(ctx, e.admin.kube, name); err != nil && !apierrors.IsAlreadyExists(err) {
			return added, err
		}
		added = append(added, name)
	}
	for _, name := range added {
		if err := localcluster.WaitNodeReady(ctx, e.admin.kube, name, 2*time.Minute); err != nil {
			return added, err
		}
	}
	if len(added) > 0 {
		e.printf("added %d kwok node(s) for the canary pods: room for %d pods\n", len(added), (len(e.cluster.Nodes)+len(added))*localcluster.KwokNodePods)
	}
	return added, nil
}

// latest returns the later of a and b.
func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

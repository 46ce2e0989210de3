package soak

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// The serving floor of the canaries (issue 50): during a step or a promotion, the pods
// behind a canary's Service never fall below its replicas less what its Deployment's
// strategy may take away (docs/progressive-delivery.md: a step scales the canary up and
// waits for its pods before it scales the stable down, so capacity never drops within a
// step; a promotion rolls the stable Deployment with its own strategy, maxSurge and
// maxUnavailable, the canary's pods serving beside it). Read from the API, never by
// traffic: a pod informer of the App's children (its pods carry its selector labels),
// a pod serving when it is Ready and not terminating, counted at each pod event and
// every floorTick for every canary whose status (as the App informer last delivered it,
// at its generation) is at a step (Progressing, Paused) of a rollout. A canary whose
// traffic an HTTPRoute splits keeps its stable Deployment at the App's replicas through
// the steps: there the stable pods alone (those without the canary's track label) must
// hold the floor at a step; while promoting, every pod of the App.
//
// An abort and a fast rollback lower the count on purpose (the canary scaled to 0 at once,
// the stable back to N from its share, docs/progressive-delivery.md "Abort"), and the
// controller writes the App's status after its children: the pods can show an abort
// before the App informer does. A sample below the floor therefore counts once
// floorConfirm later the App is still in the same rollout and not aborted, or has
// promoted it (the stable is that canary); otherwise it is set aside (Discarded), as is a
// sample at a rollout's first step within floorAbortRecovery of an abort.

const (
	// floorTick is how often every canary in a rollout is sampled, beside the pod events.
	floorTick = 500 * time.Millisecond
	// floorConfirm is how long after a sample below the floor the App's state confirms
	// that it was not an abort or a rollback seen early.
	floorConfirm = 2 * time.Second
	// floorAbortRecovery: a sample at the first step of a rollout that started within
	// this of an abort is the abort's (its stable scaled back up, its new pods still
	// starting), not the step's, which scales nothing down before the canary's pods are
	// Ready. Seen on the 60-minute run of session 24: a crashing canary aborted, a new
	// version 0.7 s later, a sample 0.8 s after that with the stable's second pod, made
	// by the abort, not Ready for 4 s more.
	floorAbortRecovery = 30 * time.Second
	// defaultMaxUnavailable is a Deployment's default maxUnavailable (its RollingUpdate).
	defaultMaxUnavailable = "25%"
	// podsByApp indexes the pods by namespace/App (their instance label).
	podsByApp = "app"
)

// FloorChecks are the samples of the canaries' serving pods during their rollouts.
type FloorChecks struct {
	// Samples counts the samples of a canary at a step or promoting; Apps the canaries
	// sampled; Promoting the samples while promoting.
	Samples   int `json:"samples"`
	Apps      int `json:"apps"`
	Promoting int `json:"promoting"`
	// MinMargin is the lowest serving pods less the floor seen (confirmed or not).
	MinMargin int `json:"min_margin"`
	// Below are the episodes below the floor, confirmed (one per App, rollout and step);
	// Discarded the samples below it that an abort or a rollback explained.
	Below     []FloorBreach `json:"below"`
	Discarded int           `json:"discarded"`
}

// FloorBreach is one episode of a canary's serving pods below its floor.
type FloorBreach struct {
	At     time.Time `json:"at"`
	App    string    `json:"app"`
	Detail string    `json:"detail"`
}

// floorSample is one sample of a canary below its floor, awaiting confirmation.
type floorSample struct {
	at            time.Time
	app, hash     string
	step          int32
	serving, want int
	detail        string
}

// floorSampler samples the canaries' serving pods.
type floorSampler struct {
	world *world
	pods  cache.Indexer

	mu      sync.Mutex
	checks  FloorChecks
	sampled map[string]bool
	pending []floorSample
	// reported are the episodes already counted (app, canary hash, step).
	reported map[string]bool
}

// startFloorSampler starts the pod informer and the sampling until ctx ends.
func startFloorSampler(ctx context.Context, kube kubernetes.Interface, w *world) (*floorSampler, error) {
	factory := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = appv1.ManagedByLabel + "=" + appv1.ManagedByValue
	}))
	informer := factory.Core().V1().Pods().Informer()
	if err := informer.AddIndexers(cache.Indexers{podsByApp: func(obj any) ([]string, error) {
		p, ok := obj.(*corev1.Pod)
		if !ok || p.Labels[appv1.InstanceLabel] == "" {
			return nil, nil
		}
		return []string{key(p.Namespace, p.Labels[appv1.InstanceLabel])}, nil
	}}); err != nil {
		return nil, err
	}
	s := &floorSampler{world: w, pods: informer.GetIndexer(), sampled: map[string]bool{}, reported: map[string]bool{}}
	s.checks.MinMargin = 1 << 30
	onPod := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if p, ok := obj.(*corev1.Pod); ok {
			s.sampleApp(key(p.Namespace, p.Labels[appv1.InstanceLabel]), time.Now())
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: onPod, UpdateFunc: func(_, obj any) { onPod(obj) }, DeleteFunc: onPod}); err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		return nil, errors.New("the pod informer of the serving floor did not sync")
	}
	go func() {
		tick := time.NewTicker(floorTick)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				factory.Shutdown()
				return
			case now := <-tick.C:
				s.sampleAll(now)
				s.confirm(now, false)
			}
		}
	}()
	return s, nil
}

// sampleAll samples every live canary.
func (s *floorSampler) sampleAll(now time.Time) {
	s.world.mu.Lock()
	var keys []string
	for _, r := range s.world.live() {
		if r.isCanary() {
			keys = append(keys, r.key())
		}
	}
	s.world.mu.Unlock()
	for _, k := range keys {
		s.sampleApp(k, now)
	}
}

// sampleApp samples the App app if it is a canary at a step or promoting.
func (s *floorSampler) sampleApp(app string, now time.Time) {
	s.world.mu.Lock()
	r := s.world.apps[app]
	var a *appv1.App
	if r != nil && r.isCanary() && r.deleted.IsZero() {
		a = r.latest
	}
	s.world.mu.Unlock()
	if a == nil {
		return
	}
	ro := a.Status.Rollout
	if ro == nil || ro.Canary == nil || a.Status.ObservedGeneration != a.Generation ||
		ro.Phase != appv1.RolloutProgressing && ro.Phase != appv1.RolloutPaused || a.Spec.Autoscaling != nil {
		return
	}
	floor, n, maxUnavailable := servingFloor(&a.Spec)
	serving, stable := 0, 0
	objs, _ := s.pods.ByIndex(podsByApp, app)
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok && podServing(p) {
			serving++
			if p.Labels[appv1.TrackLabel] != appv1.TrackCanary {
				stable++
			}
		}
	}
	steps := int32(0)
	if a.Spec.Rollout != nil && a.Spec.Rollout.Canary != nil {
		steps = int32(len(a.Spec.Rollout.Canary.Steps))
	}
	promoting := steps > 0 && ro.CurrentStepIndex >= steps
	side := ""
	if routeSplit(&a.Spec) && !promoting {
		// An HTTPRoute splits the traffic: the stable keeps the App's replicas through
		// the steps (never scaled down), its pods alone must hold the floor.
		serving, side = stable, " stable"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checks.Samples++
	if promoting {
		s.checks.Promoting++
	}
	s.sampled[app] = true
	s.checks.MinMargin = min(s.checks.MinMargin, serving-floor)
	if serving >= floor {
		return
	}
	where := fmt.Sprintf("step %d of %d", ro.CurrentStepIndex, steps)
	if promoting {
		where = "promoting"
	}
	s.pending = append(s.pending, floorSample{at: now, app: app, hash: ro.Canary.PodTemplateHash, step: ro.CurrentStepIndex, serving: serving, want: floor,
		detail: fmt.Sprintf("%d%s pods serving, floor %d (%d replicas, maxUnavailable %d), %s %s weight %d, canary %s",
			serving, side, floor, n, maxUnavailable, ro.Phase, where, ro.CanaryWeight, ro.Canary.PodTemplateHash)})
}

// confirm counts the samples below the floor taken floorConfirm ago (all of them with
// final) whose App is still in that rollout, not aborted, or promoted it.
func (s *floorSampler) confirm(now time.Time, final bool) {
	s.mu.Lock()
	var due, keep []floorSample
	for _, p := range s.pending {
		if final || now.Sub(p.at) >= floorConfirm {
			due = append(due, p)
		} else {
			keep = append(keep, p)
		}
	}
	s.pending = keep
	s.mu.Unlock()
	for _, p := range due {
		s.world.mu.Lock()
		var ro *appv1.RolloutStatus
		recovering := false
		if r := s.world.apps[p.app]; r != nil && r.latest != nil {
			ro = r.latest.Status.Rollout
			recovering = p.step == 0 && r.abortedWithin(p.at.Add(-floorAbortRecovery), p.at)
		}
		s.world.mu.Unlock()
		same := ro != nil && ro.Canary != nil && ro.Canary.PodTemplateHash == p.hash && ro.Phase != appv1.RolloutAborted && !recovering
		promoted := ro != nil && ro.Canary == nil && ro.Stable != nil && ro.Stable.PodTemplateHash == p.hash
		s.mu.Lock()
		episode := fmt.Sprintf("%s %s %d", p.app, p.hash, p.step)
		switch {
		case !same && !promoted:
			s.checks.Discarded++
		case !s.reported[episode]:
			s.reported[episode] = true
			s.checks.Below = append(s.checks.Below, FloorBreach{At: p.at, App: p.app, Detail: p.detail})
		}
		s.mu.Unlock()
	}
}

// result is what the sampler found, its pending samples confirmed.
func (s *floorSampler) result() *FloorChecks {
	s.confirm(time.Now(), true)
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.checks
	c.Apps = len(s.sampled)
	if c.Samples == 0 {
		c.MinMargin = 0
	}
	c.Below = append([]FloorBreach(nil), s.checks.Below...)
	sort.Slice(c.Below, func(i, j int) bool { return c.Below[i].At.Before(c.Below[j].At) })
	return &c
}

// servingFloor is the fewest pods that must serve an App of spec during a step or a
// promotion: its replicas less its Deployment's maxUnavailable (rounded down, as the
// Deployment controller does; 25% when the App names no strategy).
func servingFloor(spec *appv1.AppSpec) (floor, replicas, maxUnavailable int) {
	replicas = 1
	unavailable := intstr.FromString(defaultMaxUnavailable)
	if t := spec.DeploymentTemplate; t != nil {
		replicas = int(ptr.Deref(t.Replicas, 1))
		if t.Strategy != nil && t.Strategy.RollingUpdate != nil && t.Strategy.RollingUpdate.MaxUnavailable != nil {
			unavailable = *t.Strategy.RollingUpdate.MaxUnavailable
		}
	}
	maxUnavailable, err := intstr.GetScaledValueFromIntOrPercent(&unavailable, replicas, false)
	if err != nil {
		maxUnavailable = 0
	}
	return replicas - maxUnavailable, replicas, maxUnavailable
}

// podServing tells whether p is behind its Service: Ready and not terminating.
func podServing(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// floorBreaches returns the episodes of c outside the node's faults (a kubelet or
// containerd restarted, pods evicted: pods not ready for reasons of the node), from a
// fault's start until bound after its end.
func floorBreaches(c *FloorChecks, faults []FaultRecord, bound time.Duration) []string {
	var out []string
	for _, b := range c.Below {
		byNode := false
		for _, f := range faults {
			if nodeFault(f.Kind) && !b.At.Before(f.Start) && b.At.Before(f.End.Add(bound)) {
				byNode = true
			}
		}
		if !byNode {
			out = append(out, fmt.Sprintf("%s at %s: %s", b.App, b.At.Format(stampMilli), b.Detail))
		}
	}
	return out
}

// nodeFault tells whether a fault of kind makes pods not ready by itself.
func nodeFault(kind string) bool {
	return kind == FaultKubelet || kind == FaultContainerd || kind == FaultNodePressure
}

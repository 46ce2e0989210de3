package soak

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclientset "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/app-controller/app-controller/internal/localcluster"
	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/test/harness"
)

// The Gateway of the real-node fleet (issue 50): Traefik as the Gateway API
// implementation (GatewayClass traefik, Gateway gatewayName in gatewayNamespace, as
// test/e2e/realnode installs it for the traffic tier), so that part of the canaries
// split their traffic by an HTTPRoute (route.parentRefs: the controller writes the
// HTTPRoute, weighted between the split Services <svc>-stable and <svc>-canary) rather
// than by replicas. No request goes through it: what the soak judges is what the
// controller writes (the weights, the at-rest route, the stable pods kept at the App's
// replicas) and that Traefik, restarted, accepts the routes again (gateway-restart).

const (
	// gatewayNamespace holds Traefik and the Gateway.
	gatewayNamespace = "soak-gateway"
	// gatewayName is the Gateway the route-split canaries attach to.
	gatewayName = "public"
	// traefikPod is Traefik's pod.
	traefikPod = "traefik"
	// gatewayReady bounds the wait for Traefik's pod and the Gateway at the setup.
	gatewayReady = 3 * time.Minute
	// FaultGatewayRestart: Traefik's container killed (SIGKILL through containerd) and
	// restarted by the kubelet; over when its pod is Ready again, and every route-split
	// canary's route accepted again within the bound.
	FaultGatewayRestart = "gateway-restart"
	// criticalPriority is the priority class of the fleet's Traefik and Prometheus: a
	// pod at system-cluster-critical's priority or above is never evicted by the kubelet
	// (the Priority admission gives it in any namespace).
	criticalPriority = "system-cluster-critical"
	// routesAcceptedBound is how long after Traefik is back every route-split canary must
	// say RouteAccepted=True at its generation.
	routesAcceptedBound = 2 * time.Minute
)

// traefikManifest runs Traefik in gatewayNamespace as the Gateway controller of
// GatewayClass traefik, with Gateway "public" (listener web, port 8000, routes of every
// namespace); image is its image. A bare pod: the kubelet restarts its container when
// the gateway-restart fault kills it; a critical one (criticalPriority), which the
// kubelet never evicts: the node-pressure fault is for the Apps' pods (on session 23's
// 60-minute run it evicted Traefik, which nothing made again, and every route-split
// canary after it waited on RoutePending).
func traefikManifest(image string) string {
	return harness.TraefikManifest(harness.TraefikOptions{Namespace: gatewayNamespace, Image: image,
		CreateNamespace: true, PriorityClass: criticalPriority})
}

// gatewayParent is the parentRefs of a route-split canary's route.
func gatewayParent() []appv1.GatewayRef {
	return []appv1.GatewayRef{{Name: gatewayName, Namespace: gatewayNamespace}}
}

// routeSplit tells whether an App of spec splits its canary's traffic by an HTTPRoute.
func routeSplit(spec *appv1.AppSpec) bool {
	return spec.Rollout != nil && spec.Route != nil && len(spec.Route.ParentRefs) > 0
}

// installGateway pushes Traefik's image (the OCI layout bin/traffic-images/traefik) to
// the cluster's registry, applies traefikManifest and waits until Traefik's pod is Ready
// and the Gateway Programmed.
func installGateway(ctx context.Context, binDir string, cluster *localcluster.Cluster, kube kubernetes.Interface, gw gatewayclientset.Interface) error {
	image := cluster.Registry + "/" + harness.TraefikTag
	layout := filepath.Join(binDir, "traffic-images", "traefik")
	if out, err := exec.CommandContext(ctx, filepath.Join(binDir, "imagebuild"), "push", "--layout", layout, image).CombinedOutput(); err != nil {
		return fmt.Errorf("pushing Traefik's image %s: %w\n%s", image, err, out)
	}
	apply := exec.CommandContext(ctx, filepath.Join(binDir, "kubectl"), "--kubeconfig", cluster.Kubeconfig, "apply", "-f", "-")
	apply.Stdin = strings.NewReader(traefikManifest(image))
	if out, err := apply.CombinedOutput(); err != nil {
		return fmt.Errorf("applying Traefik's manifest: %w\n%s", err, out)
	}
	var state string
	err := poll(ctx, gatewayReady, func() (bool, error) {
		var ok bool
		ok, state = gatewayUp(ctx, kube, gw, -1)
		return ok, nil
	})
	if err != nil {
		return fmt.Errorf("traefik and Gateway %s/%s not ready within %s (%s): %w", gatewayNamespace, gatewayName, gatewayReady, state, err)
	}
	return nil
}

// gatewayUp tells whether Traefik's pod is Ready with more restarts than after (-1: any)
// and the Gateway Programmed, and says what is not.
func gatewayUp(ctx context.Context, kube kubernetes.Interface, gw gatewayclientset.Interface, after int32) (bool, string) {
	p, err := kube.CoreV1().Pods(gatewayNamespace).Get(ctx, traefikPod, metav1.GetOptions{})
	if err != nil {
		return false, err.Error()
	}
	if n := traefikRestarts(p); n <= after {
		return false, fmt.Sprintf("pod %s not restarted yet (%d restarts)", traefikPod, n)
	}
	if !podServing(p) {
		return false, fmt.Sprintf("pod %s not Ready", traefikPod)
	}
	g, err := gw.GatewayV1().Gateways(gatewayNamespace).Get(ctx, gatewayName, metav1.GetOptions{})
	if err != nil {
		return false, err.Error()
	}
	if !meta.IsStatusConditionTrue(g.Status.Conditions, string(gatewayv1.GatewayConditionProgrammed)) {
		return false, "the Gateway not Programmed"
	}
	return true, ""
}

// traefikRestarts is the restart count of Traefik's container.
func traefikRestarts(p *corev1.Pod) int32 {
	for _, c := range p.Status.ContainerStatuses {
		if c.Name == traefikPod {
			return c.RestartCount
		}
	}
	return 0
}

// gatewayRestart kills Traefik's container with SIGKILL through the node's containerd
// (the kubelet restarts it, as the leader kills do the controller's), once a route-split
// canary is in a rollout (or after rolloutPhaseWait without one). The fault ends when
// its pod is Ready again and the Gateway Programmed (rec.End); it then waits until every
// live route-split canary says RouteAccepted=True at its generation, and fails when one
// does not within routesAcceptedBound. Its rollouts carry on: the step invariant reads
// every status written across it.
func (j *injector) gatewayRestart(ctx context.Context, rec *FaultRecord) error {
	if j.gateway == nil {
		return fmt.Errorf("fault %s: the fleet has no Gateway", FaultGatewayRestart)
	}
	// A route-split canary in a rollout at the kill, if one comes within
	// rolloutPhaseWait (the churn starts one every few seconds): its route is rewritten
	// across the restart, and its rollout must carry on.
	rolling := j.world.routeSplitCanaries(true)
	_ = poll(ctx, rolloutPhaseWait, func() (bool, error) {
		rolling = j.world.routeSplitCanaries(true)
		return len(rolling) > 0, nil
	})
	p, err := j.kube.CoreV1().Pods(gatewayNamespace).Get(ctx, traefikPod, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading Traefik's pod: %w", err)
	}
	before := traefikRestarts(p)
	var id string
	for _, c := range p.Status.ContainerStatuses {
		if c.Name == traefikPod {
			id = c.ContainerID
		}
	}
	if id == "" {
		return fmt.Errorf("traefik's pod has no container running")
	}
	rec.Start = time.Now()
	if err := j.cluster.KillContainer(ctx, id); err != nil {
		return err
	}
	var state string
	if err := poll(ctx, routesAcceptedBound, func() (bool, error) {
		var ok bool
		ok, state = gatewayUp(ctx, j.kube, j.gateway, before)
		return ok, nil
	}); err != nil {
		return fmt.Errorf("traefik not back within %s: %s", routesAcceptedBound, state)
	}
	rec.End = time.Now()
	var pending []string
	err = poll(ctx, routesAcceptedBound, func() (bool, error) {
		pending = j.world.routesNotAccepted()
		return len(pending) == 0, nil
	})
	apps := j.world.routeSplitCanaries(false)
	rec.Detail = fmt.Sprintf("Traefik's container killed (SIGKILL, ctr tasks kill) and restarted by the kubelet, back after %.1fs; %d route-split canaries, %d of them in a rollout at the kill (%s)",
		rec.End.Sub(rec.Start).Seconds(), len(apps), len(rolling), strings.Join(rolling[:min(len(rolling), 3)], ", "))
	if err != nil {
		return fmt.Errorf("%d route-split canaries not RouteAccepted=True %s after Traefik was back: %s", len(pending), routesAcceptedBound,
			strings.Join(pending[:min(len(pending), 5)], "; "))
	}
	rec.Detail += fmt.Sprintf("; every route accepted again %.1fs after", time.Since(rec.End).Seconds())
	return nil
}

// routeSplitCanaries returns the live route-split canaries (only those in a rollout with
// rolling), by key.
func (w *world) routeSplitCanaries(rolling bool) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, r := range w.liveRouteSplits() {
		ro := r.latest.Status.Rollout
		if rolling && (ro == nil || ro.Phase != appv1.RolloutProgressing && ro.Phase != appv1.RolloutPaused) {
			continue
		}
		out = append(out, r.key())
	}
	sort.Strings(out)
	return out
}

// routesNotAccepted returns the live route-split canaries whose App does not say
// RouteAccepted=True at its generation, with the condition they show.
func (w *world) routesNotAccepted() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, r := range w.liveRouteSplits() {
		if ok, why := routeAccepted(r.latest); !ok {
			out = append(out, r.key()+": "+why)
		}
	}
	sort.Strings(out)
	return out
}

// liveRouteSplits returns the live Apps whose last spec splits its canary's traffic
// through an HTTPRoute, by key; w.mu must be held.
func (w *world) liveRouteSplits() []*appRecord {
	var out []*appRecord
	for _, r := range w.live() {
		if r.latest != nil && routeSplit(&r.latest.Spec) {
			out = append(out, r)
		}
	}
	return out
}

// routeAccepted tells whether a says RouteAccepted=True at its generation.
func routeAccepted(a *appv1.App) (bool, string) {
	c := meta.FindStatusCondition(a.Status.Conditions, appv1.ConditionRouteAccepted)
	switch {
	case c == nil:
		return false, "no RouteAccepted"
	case c.ObservedGeneration != a.Generation:
		return false, fmt.Sprintf("RouteAccepted of generation %d, the App's is %d", c.ObservedGeneration, a.Generation)
	case c.Status != metav1.ConditionTrue:
		return false, fmt.Sprintf("RouteAccepted=%s %s", c.Status, c.Reason)
	}
	return true, ""
}

// checkRoutes lists the HTTPRoutes of namespaces and checks them against the live Apps:
// every route-split canary has exactly one, named as the App and controlled by it, and
// at rest it routes to the App's Service alone (one backend per rule: the rollout's
// weighted split gone, docs/progressive-delivery.md); no other App controls one, and
// none is controlled by an App that is gone.
func (s *StateCheck) checkRoutes(ctx context.Context, gw gatewayclientset.Interface, w *world, namespaces []string) error {
	w.mu.Lock()
	live := map[string]*appRecord{} // UID -> record
	specs := map[string]*appv1.AppSpec{}
	rollouts := map[string]*appv1.RolloutStatus{}
	for _, r := range w.live() {
		if r.latest == nil {
			continue
		}
		live[string(r.uid)] = r
		specs[string(r.uid)] = r.latest.Spec.DeepCopy()
		rollouts[string(r.uid)] = r.latest.Status.Rollout.DeepCopy()
	}
	w.mu.Unlock()
	found := map[string][]*gatewayv1.HTTPRoute{} // App UID -> its HTTPRoutes
	for _, ns := range namespaces {
		list, err := gw.GatewayV1().HTTPRoutes(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("listing the HTTPRoutes of %s: %w", ns, err)
		}
		for i := range list.Items {
			hr := &list.Items[i]
			ref := metav1.GetControllerOfNoCopy(hr)
			if ref == nil || ref.Kind != "App" {
				continue
			}
			if live[string(ref.UID)] == nil {
				s.Orphans = append(s.Orphans, fmt.Sprintf("HTTPRoute %s/%s of App %s (%s)", ns, hr.Name, ref.Name, ref.UID))
				continue
			}
			found[string(ref.UID)] = append(found[string(ref.UID)], hr)
		}
	}
	for uid, r := range live {
		spec, routes := specs[uid], found[uid]
		wantRoute := spec.Route != nil && len(spec.Route.ParentRefs) > 0
		switch {
		case !wantRoute && len(routes) > 0:
			s.ChildrenDuplicated = append(s.ChildrenDuplicated, fmt.Sprintf("%s: HTTPRoute %s, none wanted", r.key(), routes[0].Name))
			continue
		case !wantRoute:
			continue
		case len(routes) == 0:
			s.ChildrenMissing = append(s.ChildrenMissing, fmt.Sprintf("%s: no HTTPRoute %s", r.key(), r.name))
			continue
		case len(routes) > 1 || routes[0].Name != r.name:
			s.ChildrenDuplicated = append(s.ChildrenDuplicated, fmt.Sprintf("%s: %d HTTPRoutes, want one named %s", r.key(), len(routes), r.name))
			continue
		}
		if spec.Rollout == nil {
			continue
		}
		s.RouteSplitCanaries++
		if ro := rollouts[uid]; ro != nil && (ro.Phase == appv1.RolloutHealthy || ro.Phase == appv1.RolloutAborted) && spec.ServiceTemplate != nil {
			if why := routeAtRest(routes[0], spec.ServiceTemplate.Name, ro.Phase == appv1.RolloutAborted); why != "" {
				s.NotAtRest = append(s.NotAtRest, fmt.Sprintf("%s: HTTPRoute %s %s, rollout %s", r.key(), r.name, why, describeRollout(ro)))
			}
		}
	}
	sort.Strings(s.NotAtRest)
	sort.Strings(s.ChildrenMissing)
	sort.Strings(s.ChildrenDuplicated)
	sort.Strings(s.Orphans)
	return nil
}

// routeAtRest says what is wrong with HTTPRoute hr of a canary at rest whose App's
// Service is service ("" when nothing): each rule sends everything to the App's Service
// alone. An aborted rollout (its canary kept at 0 until the rollout ends, documented)
// may keep its split at stable 100, canary 0 instead.
func routeAtRest(hr *gatewayv1.HTTPRoute, service string, aborted bool) string {
	if len(hr.Spec.Rules) == 0 {
		return "has no rule"
	}
	for i, rule := range hr.Spec.Rules {
		var names []string
		weights := map[string]int32{}
		for _, b := range rule.BackendRefs {
			names = append(names, string(b.Name))
			weights[string(b.Name)] = ptrDeref(b.Weight, 1)
		}
		switch {
		case len(names) == 1 && names[0] == service:
		case aborted && len(names) == 2 && slices.Contains(names, service+appv1.StableSuffix) && slices.Contains(names, service+appv1.CanarySuffix) &&
			weights[service+appv1.CanarySuffix] == 0:
		default:
			return fmt.Sprintf("rule %d routes to %v (weights %v), want %s alone", i, names, weights, service)
		}
	}
	return ""
}

func ptrDeref(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}

// splitByRoute gives half of the canaries of each kind made when the fleet has a Gateway
// (a real node) a route to it: their traffic is split by an HTTPRoute. Their aborted
// canaries stay canaryScaleDown seconds (not the default 30), as their promoted ones do.
func (d *driver) splitByRoute(app *appv1.App, kind string) {
	if !d.cfg.gateway() || kind != kindGate && kind != kindTimed || d.turn("route-split "+kind)%2 != 0 {
		return
	}
	app.Spec.Route = &appv1.Route{Hosts: []appv1.Hostname{hostOf(app)}, ParentRefs: gatewayParent()}
	app.Spec.Rollout.Canary.AbortScaleDownDelaySeconds = ptr.To[int32](canaryScaleDown)
}

// gateway tells whether the fleet has a Gateway (Traefik): on a real node.
func (cfg *Config) gateway() bool { return cfg.Node == localcluster.NodeReal }

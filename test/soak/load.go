package soak

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// The autoscaled Apps' CPU load on a real node: their pods run demoapp
// (test/images/demoapp) with BURN_MILLICORES, which burns that much CPU for
// BURN_SECONDS and idles for IDLE_SECONDS, over and over, in step with the clock (every
// pod of an App at once). No traffic is sent: the load comes from the pods' environment.
// At loadMillicores against the CPU request of 10m and the target of 50%, the
// HorizontalPodAutoscaler scales an App from 2 to 3 pods while they burn and back to 2
// while they idle (its scale-down stabilization window is autoscalingScaleDownWindow). On
// kwok no container runs and no metric exists: the Apps keep agnhost's image.
const (
	loadMillicores = 15
	loadBurn       = 2 * time.Minute
	loadIdle       = 2 * time.Minute
	// minScalingRun is the shortest run on a real node that must see an autoscaled App
	// scaled up and down: a whole burn and a whole idle from any start, with the
	// metrics' and the autoscaler's delays.
	minScalingRun = 6 * time.Minute
)

// cpuLoad is the image and the environment of an autoscaled App's pods on a real node.
type cpuLoad struct {
	image string
	env   []corev1.EnvVar
}

// newCPULoad is demoapp of registry with the load's cycle.
func newCPULoad(image string) *cpuLoad {
	return &cpuLoad{image: image, env: []corev1.EnvVar{
		{Name: "BURN_MILLICORES", Value: strconv.Itoa(loadMillicores)},
		{Name: "BURN_SECONDS", Value: strconv.Itoa(int(loadBurn.Seconds()))},
		{Name: "IDLE_SECONDS", Value: strconv.Itoa(int(loadIdle.Seconds()))},
	}}
}

// apply gives an autoscaled App the load: its image (serving on servicePort, demoapp's
// default, no arguments) and the load's environment beside the churn's env var.
func (l *cpuLoad) apply(t *appv1.DeploymentTemplate) {
	t.Image = l.image
	t.Args = nil
	t.Env = append(t.Env, l.env...)
}

// ScalingCheck is what the autoscalers did with the load, from the audit log: each write
// of a Deployment's scale by an autoscaler compared with the count written before it
// (by the controller or an autoscaler).
type ScalingCheck struct {
	// Ups: a scale write that raised the count from minReplicas or more (the load; a
	// raise from below, when autoscaling is turned on over one replica, is the range
	// kept, not counted); Downs: one that lowered it.
	Ups   int `json:"ups"`
	Downs int `json:"downs"`
	// UpAndDown are the autoscaled Apps scaled up and down at least once each;
	// ByApp the ups and downs of each App scaled.
	UpAndDown []string          `json:"up_and_down"`
	ByApp     map[string][2]int `json:"by_app"`
	// Judged: the run is on a real node and lasts minScalingRun or more, so that the load
	// must have scaled an App up and down; else NotJudged says why.
	Judged    bool   `json:"judged"`
	NotJudged string `json:"not_judged,omitempty"`
}

// checkScaling counts the autoscalers' ups and downs in deployments, by owner App
// (ownerOf); minReplicas is the autoscaled Apps'. The run is judged when it is on a real
// node and lasts minScalingRun or more.
func checkScaling(deployments []deploymentWrite, minReplicas int64, ownerOf func(ns, name string) string, realNode bool, duration time.Duration) *ScalingCheck {
	c := &ScalingCheck{ByApp: map[string][2]int{}, Judged: realNode && duration >= minScalingRun}
	switch {
	case !realNode:
		c.NotJudged = "no CPU metric on kwok"
	case !c.Judged:
		c.NotJudged = fmt.Sprintf("a run shorter than %s", minScalingRun)
	}
	ordered := append([]deploymentWrite(nil), deployments...)
	sort.SliceStable(ordered, func(i, j int) bool { return ordered[i].at.Before(ordered[j].at) })
	last := map[string]int64{}
	for _, dw := range ordered {
		if !dw.replicas {
			continue
		}
		k := key(dw.namespace, dw.name)
		prev, known := last[k]
		last[k] = dw.count
		if !dw.scale || !known {
			continue
		}
		owner := ownerOf(dw.namespace, dw.name)
		n := c.ByApp[owner]
		switch {
		case dw.count > prev && prev >= minReplicas:
			c.Ups++
			n[0]++
		case dw.count < prev:
			c.Downs++
			n[1]++
		default:
			continue
		}
		c.ByApp[owner] = n
	}
	for _, app := range sortedKeys(c.ByApp) {
		if n := c.ByApp[app]; n[0] > 0 && n[1] > 0 {
			c.UpAndDown = append(c.UpAndDown, app)
		}
	}
	return c
}

// invariant is the check's line: at least one App scaled up and down, when judged.
func (c *ScalingCheck) invariant() (Invariant, bool) {
	if !c.Judged {
		return Invariant{}, false
	}
	return Invariant{Name: "autoscaled Apps scaled both up and down by their CPU load (audit log)", Value: float64(len(c.UpAndDown)), Want: ">= 1",
		Pass: len(c.UpAndDown) > 0, Detail: fmt.Sprintf("%d ups, %d downs", c.Ups, c.Downs)}, true
}

// lockedOwnerOf is ownerOf under w.mu.
func (w *world) lockedOwnerOf(namespace, name string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ownerOf(namespace, name)
}

// scalingLine is the report's line of the load: the ups and downs, the Apps scaled both
// ways, and whether the run judged them.
func (c *ScalingCheck) scalingLine(judgedByMetricsGone []string) string {
	s := fmt.Sprintf("CPU load (%dm of 10m for %s, idle %s): autoscalers scaled up %d times and down %d times; %d of %d Apps scaled both ways %v",
		loadMillicores, loadBurn, loadIdle, c.Ups, c.Downs, len(c.UpAndDown), len(c.ByApp), c.UpAndDown)
	if !c.Judged {
		s += "; not judged: " + c.NotJudged
	}
	if len(judgedByMetricsGone) > 0 {
		n := 0
		for _, app := range judgedByMetricsGone {
			if v := c.ByApp[app]; v[0]+v[1] > 0 {
				n++
			}
		}
		s += fmt.Sprintf("; of the %d distinct Apps the metrics-server faults judged, %d scaled in the run", len(judgedByMetricsGone), n)
	}
	return s
}

// printAnalysisAndLoad prints the lines of the canary analysis and the CPU load.
func (r *Report) printAnalysisAndLoad(out io.Writer) {
	if c := r.Rollouts; c != nil && c.AnalyzedPromoted+c.AnalysisAborts > 0 {
		fmt.Fprintf(out, "canary analysis: %d rollouts of canaries with an analysis promoted (%d after a measurement passed), %d aborted by their analysis (AnalysisFailed)\n",
			c.AnalyzedPromoted, c.AnalysisPassedPromoted, c.AnalysisAborts)
	}
	if c := r.Scaling; c != nil {
		var judged []string
		if r.FaultWindows != nil {
			judged = r.FaultWindows.MetricsGoneJudged
		}
		fmt.Fprintln(out, c.scalingLine(judged))
	}
}

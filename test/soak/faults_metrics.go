package soak

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/app-controller/app-controller/internal/localcluster"
	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// The metrics-server fault (real node): the resource metrics API gone for a minute. The
// autoscaled Apps' HorizontalPodAutoscalers lose their metrics (ScalingActive False) and
// cannot act; the controller must not take their count back meanwhile (it owns
// spec.replicas only while the autoscaler has not taken it: countsTaken, windows.go), and
// every HPA must be active again once metrics-server is back.

const (
	// metricsServerDown is how long the fault stops metrics-server.
	metricsServerDown = time.Minute
	// hpaResumeBound is how long after metrics-server is back every HPA must be active.
	hpaResumeBound = 3 * time.Minute
	// hpaPollInterval is how often the HPAs' conditions are read during the fault.
	hpaPollInterval = 5 * time.Second
)

// metricsServerGone stops the real node's metrics-server for metricsServerDown and
// starts it again; the fault ends when it is back (rec.End). It then waits until every
// autoscaled App's HPA is active again, and says how many lost their metrics.
func (j *injector) metricsServerGone(ctx context.Context, rec *FaultRecord) error {
	done := make(chan error, 1)
	go func() { done <- j.cluster.StopFor(ctx, localcluster.MetricsServer, metricsServerDown) }()
	lost := map[string]string{} // HPA -> the reason it said
	total := 0
	tick := time.NewTicker(hpaPollInterval)
	defer tick.Stop()
	var err error
wait:
	for {
		select {
		case err = <-done:
			break wait
		case <-tick.C:
			hpas, inactive, lerr := j.inactiveHPAs(ctx)
			if lerr != nil {
				continue
			}
			total = max(total, hpas)
			maps.Copy(lost, inactive)
		}
	}
	rec.End = time.Now()
	if err != nil {
		return err
	}
	var still map[string]string
	resumed := poll(ctx, hpaResumeBound, func() (bool, error) {
		var hpas int
		var lerr error
		hpas, still, lerr = j.inactiveHPAs(ctx)
		total = max(total, hpas)
		return lerr == nil && len(still) == 0, nil
	})
	after := time.Since(rec.End)
	examples := make([]string, 0, 3)
	for k, v := range lost {
		if len(examples) < 3 {
			examples = append(examples, k+" "+v)
		}
	}
	rec.Detail = fmt.Sprintf("metrics-server stopped for %s: %d of %d HorizontalPodAutoscalers lost their metrics (ScalingActive False: %s)",
		metricsServerDown, len(lost), total, strings.Join(examples, "; "))
	switch {
	case resumed != nil:
		return fmt.Errorf("%d HorizontalPodAutoscalers still inactive %s after metrics-server was back: %v", len(still), hpaResumeBound, still)
	case total > 0 && len(lost) == 0:
		return fmt.Errorf("no HorizontalPodAutoscaler of the %d lost its metrics while metrics-server was gone", total)
	}
	rec.Detail += fmt.Sprintf("; every one active again %.1fs after it was back", after.Seconds())
	return nil
}

// inactiveHPAs lists the Apps' HorizontalPodAutoscalers: how many, and those whose
// ScalingActive is not True (with its reason).
func (j *injector) inactiveHPAs(ctx context.Context) (int, map[string]string, error) {
	list, err := j.kube.AutoscalingV2().HorizontalPodAutoscalers("").List(ctx, metav1.ListOptions{LabelSelector: appv1.ManagedByLabel + "=" + appv1.ManagedByValue})
	if err != nil {
		return 0, nil, err
	}
	inactive := map[string]string{}
	for _, h := range list.Items {
		for _, c := range h.Status.Conditions {
			if c.Type == autoscalingv2.ScalingActive && c.Status != corev1.ConditionTrue {
				inactive[key(h.Namespace, h.Name)] = c.Reason
			}
		}
	}
	return len(list.Items), inactive, nil
}

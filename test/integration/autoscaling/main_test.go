// Package autoscaling tests spec.autoscaling against a real control plane (kube-apiserver
// and etcd, kube-controller-manager with its HorizontalPodAutoscaler controller,
// kube-scheduler and kwok): the App's HorizontalPodAutoscaler, and the Deployment's
// replica count handed over without a fight (docs/autoscaling.md). kwok's cluster has no
// metrics API, so the autoscaler changes no count by itself: `kubectl scale deployment`
// writes the count as the autoscaler does, through the scale subresource. The
// controller runs under a user of its own, whose writes the API server's audit log
// records.
package autoscaling

import (
	"testing"

	"github.com/app-controller/app-controller/internal/localcluster"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// controllerUser is the user the controller runs as: the audit log records its writes.
const controllerUser = "autoscaling-test-controller"

func TestMain(m *testing.M) {
	framework.MainWithOptions(m, func(o *localcluster.Options) {
		o.AuditUsers = []string{controllerUser}
		o.GatewayAPI = true // a canary behind an HTTPRoute (canary_test.go)
	})
}

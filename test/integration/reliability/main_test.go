// Package reliability runs the App controller through faults against a real control
// plane (issue 10, "Faults"): the controller SIGKILLed while it converges or between an
// App's two children, etcd frozen and kube-apiserver restarted, watches expired by a
// compaction, a leader killed or partitioned, conflicting writers on the App, pods
// refused by admission, a namespace deleted under the controller.
//
// Each test ends with the same check (converged): every App Ready at its generation,
// exactly one Deployment and one Service per App, controlled by it, no orphan, and the
// foreign objects of the namespace unchanged. Writes are counted on the server side,
// from kube-apiserver's audit log; each controller instance runs under its own
// impersonated user, so the log tells which instance wrote what. Each test logs the time
// to converge after its fault and the writes made.
package reliability

import (
	"testing"

	"github.com/app-controller/app-controller/internal/localcluster"
	"github.com/app-controller/app-controller/test/integration/framework"
)

func TestMain(m *testing.M) {
	framework.MainWithOptions(m, func(o *localcluster.Options) { o.AuditLog = true })
}

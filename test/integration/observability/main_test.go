// Package observability tests what app-controller shows to monitoring and GitOps tools
// against a real control plane: the /metrics series (and that the shipped dashboard and
// alerts use only exported metrics), and the App's health as kstatus and the Argo CD
// health check read it in each state the controller puts it in.
package observability

import (
	"testing"

	"github.com/app-controller/app-controller/test/integration/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

// Package cluster tests the Helm chart and dist/install.yaml against a local control
// plane: server-side dry runs of every rendering, a real helm install whose RBAC the
// controller binary runs under, and helm uninstall.
package cluster

import (
	"testing"

	"github.com/app-controller/app-controller/test/integration/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

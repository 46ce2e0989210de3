package app

import (
	"encoding/json"
	"testing"
	"time"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// FuzzSyncApp feeds arbitrary App specs (as JSON, so any shape the API could hold,
// including what the schema would reject) through a full sync against fake clientsets:
// the controller must never panic, whatever the input. `go test` runs the seeds;
// `go test -fuzz FuzzSyncApp ./pkg/controller/app/` explores.
func FuzzSyncApp(f *testing.F) {
	for _, seed := range []string{
		`{"deploymentTemplate":{"name":"app-deploy","image":"nginx","replicas":2},"serviceTemplate":{"name":"app-service"}}`,
		`{}`,
		`{"deploymentTemplate":{"name":"","image":""}}`,
		`{"deploymentTemplate":{"name":"x","image":"y","replicas":-5,"containerPort":0}}`,
		`{"serviceTemplate":{"name":"s","port":0,"targetPort":-1,"type":"ExternalName"}}`,
		`{"deploymentTemplate":{"name":"d","image":"i","env":[{"name":"A","valueFrom":{}}],"resources":{"limits":{"cpu":"1"},"requests":{"cpu":"2"}}}}`,
		`{"deploymentTemplate":{"name":"same","image":"i"},"serviceTemplate":{"name":"same"}}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		app := newApp("fuzz", time.Now())
		app.Spec = appv1.AppSpec{}
		if err := json.Unmarshal([]byte(spec), &app.Spec); err != nil {
			t.Skip()
		}
		fx := newFixture(t)
		fx.addApps(app)
		_ = fx.sync(app.Namespace, app.Name) // errors are fine; panics are not
		_ = fx.sync(app.Namespace, app.Name)
	})
}

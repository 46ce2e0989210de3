package gitops

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

const script = "../../config/argocd/health.lua"

// TestHealthOfCapturedApps runs kstatus and the Argo CD health check on Apps captured
// from the real controller in each state (testdata, written by
// APP_CONTROLLER_UPDATE_GOLDEN=1 go test ./test/integration/observability -run TestHealth,
// and notready-*.json by test/e2e/notready on the real node)
// and checks that both give the expected verdict.
func TestHealthOfCapturedApps(t *testing.T) {
	tests := []struct {
		file        string
		wantKstatus status.Status
		wantArgo    string
	}{
		{"created.json", status.InProgressStatus, Progressing},
		{"progressing.json", status.InProgressStatus, Progressing},
		{"ready.json", status.CurrentStatus, Healthy},
		{"name-conflict.json", status.FailedStatus, Degraded},
		{"retries-exhausted.json", status.FailedStatus, Degraded},
		{"deleting.json", status.TerminatingStatus, Progressing},
		// Apps whose pods cannot become ready, captured on the real node by
		// APP_CONTROLLER_UPDATE_GOLDEN=1 make e2e (test/e2e/notready): when Ready first
		// names the problem, and once it passed its threshold of Stalled.
		{"notready-missing-image.json", status.InProgressStatus, Progressing},
		{"notready-missing-image-stalled.json", status.FailedStatus, Degraded},
		{"notready-exits.json", status.InProgressStatus, Progressing},
		{"notready-exits-stalled.json", status.FailedStatus, Degraded},
		{"notready-oom.json", status.InProgressStatus, Progressing},
		{"notready-oom-stalled.json", status.FailedStatus, Degraded},
		{"notready-readiness.json", status.InProgressStatus, Progressing},
		{"notready-too-much-cpu.json", status.InProgressStatus, Progressing},
		// Canary rollouts, captured by APP_CONTROLLER_UPDATE_GOLDEN=1 go test
		// ./test/integration/app -run 'TestRolloutSteps|TestRolloutAbortAndGitOps': paused
		// until promoted (kstatus has no word for it; Argo CD's Suspended says it waits
		// for a person), and aborted.
		{"rollout-paused.json", status.InProgressStatus, Suspended},
		{"rollout-aborted.json", status.FailedStatus, Degraded},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			var obj map[string]any
			if err := json.Unmarshal(data, &obj); err != nil {
				t.Fatal(err)
			}
			assertHealth(t, obj, tt.wantKstatus, tt.wantArgo)
		})
	}
}

func assertHealth(t *testing.T, obj map[string]any, wantKstatus status.Status, wantArgo string) {
	t.Helper()
	got, err := Kstatus(obj)
	if err != nil {
		t.Fatal(err)
	}
	if got != wantKstatus {
		t.Errorf("kstatus %s, want %s", got, wantKstatus)
	}
	argo, err := RunArgoHealth(script, obj)
	if err != nil {
		t.Fatal(err)
	}
	if argo.Status != wantArgo || argo.Message == "" {
		t.Errorf("Argo CD health %q (%q), want %s with a message", argo.Status, argo.Message, wantArgo)
	}
	if wantKstatus != "" && !Agree(got, argo.Status) {
		t.Errorf("Argo CD health %s disagrees with kstatus %s", argo.Status, got)
	}
}

// TestHealthEdgeCases covers states the controller does not produce but a cluster may
// hold: an App created before the CRD had its status default, and an App whose spec
// changed since the controller's last status.
func TestHealthEdgeCases(t *testing.T) {
	app := func(generation int64, appStatus map[string]any) map[string]any {
		obj := map[string]any{
			"apiVersion": "appcontroller.k8s.io/v1", "kind": "App",
			"metadata": map[string]any{"name": "a", "namespace": "ns", "generation": float64(generation)},
		}
		if appStatus != nil {
			obj["status"] = appStatus
		}
		return obj
	}
	ready := []any{map[string]any{"type": "Ready", "status": "True", "reason": "Available", "message": "ok", "observedGeneration": float64(1)}}
	tests := []struct {
		name        string
		obj         map[string]any
		wantKstatus status.Status // "": kstatus differs on purpose (see the case)
		wantArgo    string
	}{
		// No status at all: kstatus reads Current (the reason for the schema default);
		// the health check waits for the controller.
		{name: "no status", obj: app(1, nil), wantArgo: Progressing},
		{name: "spec changed since the last status", obj: app(2, map[string]any{"observedGeneration": float64(1), "conditions": ready}),
			wantKstatus: status.InProgressStatus, wantArgo: Progressing},
		{name: "Ready at the current generation", obj: app(1, map[string]any{"observedGeneration": float64(1), "conditions": ready}),
			wantKstatus: status.CurrentStatus, wantArgo: Healthy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.wantKstatus == "" {
				argo, err := RunArgoHealth(script, tt.obj)
				if err != nil {
					t.Fatal(err)
				}
				if argo.Status != tt.wantArgo {
					t.Errorf("Argo CD health %s, want %s", argo.Status, tt.wantArgo)
				}
				return
			}
			assertHealth(t, tt.obj, tt.wantKstatus, tt.wantArgo)
		})
	}
}

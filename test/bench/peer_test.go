package bench

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// rollout returns a Rollout of generation 2 and 1 replica with status.
func rollout(status map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"replicas": int64(1)}, "status": status}}
	u.SetGeneration(2)
	return u
}

func TestRolloutStates(t *testing.T) {
	paused := map[string]any{"observedGeneration": "2", "phase": "Paused", "currentStepIndex": int64(1),
		"pauseConditions": []any{map[string]any{"reason": "CanaryPauseStep"}}}
	promoted := map[string]any{"observedGeneration": "2", "phase": "Healthy", "currentStepIndex": int64(2),
		"stableRS": "abc", "currentPodHash": "abc", "replicas": int64(1)}
	with := func(base map[string]any, key string, v any) map[string]any {
		m := map[string]any{}
		for k, x := range base {
			m[k] = x
		}
		if v == nil {
			delete(m, key)
		} else {
			m[key] = v
		}
		return m
	}
	tests := []struct {
		name                    string
		status                  map[string]any
		ready, paused, promoted bool
	}{
		{"new, no status", map[string]any{}, false, false, false},
		{"Healthy at an older generation", with(promoted, "observedGeneration", "1"), false, false, false},
		{"paused at the pause step", paused, false, true, false},
		{"paused, pause conditions cleared by promote", with(paused, "pauseConditions", nil), false, false, false},
		{"paused at the setWeight step", with(paused, "currentStepIndex", int64(0)), false, false, false},
		{"promoted", promoted, true, false, true},
		{"Healthy, the old ReplicaSet's pod still counted", with(promoted, "replicas", int64(2)), true, false, false},
		{"Healthy, the new ReplicaSet not yet stable", with(promoted, "stableRS", "old"), true, false, false},
		{"Healthy after creation (steps skipped: index 2)", promoted, true, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := rollout(tt.status)
			if got := rolloutReady(u); got != tt.ready {
				t.Errorf("rolloutReady = %v, want %v", got, tt.ready)
			}
			if got := rolloutPaused(u); got != tt.paused {
				t.Errorf("rolloutPaused = %v, want %v", got, tt.paused)
			}
			if got := rolloutPromoted(u); got != tt.promoted {
				t.Errorf("rolloutPromoted = %v, want %v", got, tt.promoted)
			}
		})
	}
}

func TestNewRollout(t *testing.T) {
	u, err := newRollout("ns", "app-00001", 3)
	if err != nil {
		t.Fatal(err)
	}
	if u.GetKind() != "Rollout" || u.GetAPIVersion() != "argoproj.io/v1alpha1" || u.GetName() != "app-00001" || u.GetNamespace() != "ns" {
		t.Errorf("object %s %s %s/%s", u.GetAPIVersion(), u.GetKind(), u.GetNamespace(), u.GetName())
	}
	if r, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas"); r != 3 {
		t.Errorf("replicas %d, want 3", r)
	}
	// The App's Deployment's pod template: its container, by name, with the image.
	containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
	if len(containers) != 1 || containers[0].(map[string]any)["name"] != appv1.ContainerName || containers[0].(map[string]any)["image"] != image {
		t.Errorf("containers %v, want one %s of image %s", containers, appv1.ContainerName, image)
	}
	// The selector selects the template's labels.
	selector, _, _ := unstructured.NestedStringMap(u.Object, "spec", "selector", "matchLabels")
	labels, _, _ := unstructured.NestedStringMap(u.Object, "spec", "template", "metadata", "labels")
	if len(selector) == 0 {
		t.Fatal("no selector")
	}
	for k, v := range selector {
		if labels[k] != v {
			t.Errorf("selector %s=%s not among the template's labels %v", k, v, labels)
		}
	}
	steps, _, _ := unstructured.NestedSlice(u.Object, "spec", "strategy", "canary", "steps")
	if len(steps) != 2 || steps[0].(map[string]any)["setWeight"] != int64(peerWeight) || steps[1].(map[string]any)["pause"] == nil {
		t.Errorf("steps %v, want [setWeight %d, pause {}]", steps, peerWeight)
	}
}

func TestPeerRuns(t *testing.T) {
	runs, err := peerRuns([]string{"defaults", "scale"}, []string{"--x"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range runs {
		got = append(got, r.Set+" "+r.Controller)
	}
	want := []string{"defaults app-controller", "defaults argo-rollouts", "scale app-controller", "scale argo-rollouts"}
	if !slices.Equal(got, want) {
		t.Errorf("runs %v, want %v", got, want)
	}
	if !slices.Equal(runs[0].Flags, []string{"--x"}) || len(runs[1].Flags) != 0 ||
		!slices.Equal(runs[2].Flags, append([]string{"--x"}, ourScaleFlags...)) || !slices.Equal(runs[3].Flags, argoScaleFlags) {
		t.Errorf("flags %v %v %v %v", runs[0].Flags, runs[1].Flags, runs[2].Flags, runs[3].Flags)
	}
	if _, err := peerRuns([]string{"fast"}, nil); err == nil {
		t.Error("peerRuns accepted a set of flags it does not know")
	}
}

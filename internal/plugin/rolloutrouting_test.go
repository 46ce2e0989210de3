package plugin

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// TestPrintStatusRouting: kubectl app status shows the current step's header route and
// mirror, and whether the App's HTTPRoute has them yet.
func TestPrintStatusRouting(t *testing.T) {
	route := func(app *unstructured.Unstructured, mirror bool) *unstructured.Unstructured {
		u := newObject("gateway.networking.k8s.io/v1", "HTTPRoute", "web", "uid-route", controlledBy(app))
		weighted := map[string]any{"backendRefs": []any{
			map[string]any{"name": "web-stable", "port": int64(8080), "weight": int64(75)},
			map[string]any{"name": "web-canary", "port": int64(8080), "weight": int64(25)},
		}}
		if mirror {
			weighted["filters"] = []any{map[string]any{"type": "RequestMirror", "requestMirror": map[string]any{
				"backendRef": map[string]any{"name": "web-canary", "port": int64(8080)}, "percent": int64(10)}}}
		}
		set(u, []any{weighted, map[string]any{
			"matches":     []any{map[string]any{"headers": []any{map[string]any{"name": "X-Canary", "value": "always"}}}},
			"backendRefs": []any{map[string]any{"name": "web-canary", "port": int64(8080)}},
		}}, "spec", "rules")
		return u
	}
	steps := func(a *appv1.App) {
		a.Status.Route = "web"
		a.Spec.Rollout.Canary.Steps = []appv1.CanaryStep{
			{SetHeaderRoute: &appv1.HeaderRoute{Match: []appv1.RouteMatch{{Header: "X-Canary", Exact: "always"}}}},
			{SetWeight: ptr.To[int32](25)},
			{SetMirrorRoute: &appv1.MirrorRoute{Percent: ptr.To[int32](10)}},
			{Pause: &appv1.CanaryPause{}},
		}
	}
	tests := []struct {
		name   string
		step   int32
		mirror bool
		want   string
	}{
		{"the mirror's step, not written yet", 2, false,
			"Routing:      requests matching X-Canary: always to the canary (in effect); 10% mirrored to the canary, its answers dropped (not on the HTTPRoute yet)"},
		{"the pause: both in effect", 3, true,
			"Routing:      requests matching X-Canary: always to the canary (in effect); 10% mirrored to the canary, its answers dropped (in effect)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objects := rolloutObjects(t, func(a *appv1.App) {
				steps(a)
				a.Status.Rollout.Phase, a.Status.Rollout.CurrentStepIndex = appv1.RolloutProgressing, tt.step
			})
			objects = append(objects, route(objects[0], tt.mirror))
			f := newFakes(t, objects)
			st, err := GetStatus(context.Background(), f.clients(), testNamespace, "web")
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := PrintStatus(&out, st, testNow); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), tt.want+"\n") {
				t.Errorf("status:\n%s\nwant the line\n%s", out.String(), tt.want)
			}
			if !strings.Contains(out.String(), "1 setHeaderRoute: header route X-Canary: always (done), 2 setWeight 25 (done), 3 setMirrorRoute: mirror 10%") {
				t.Errorf("steps:\n%s", out.String())
			}
		})
	}
}

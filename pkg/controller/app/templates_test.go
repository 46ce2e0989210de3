package app

import (
	"slices"
	"testing"

	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// TestIndexByTemplate: an App is indexed by the templates of its checks (an analysis
// step's and the background's) only while its rollout runs.
func TestIndexByTemplate(t *testing.T) {
	withChecks := func(phase appv1.RolloutPhase, canary bool) *appv1.App {
		app := &appv1.App{}
		app.Namespace, app.Name = "shop", "web"
		app.Spec.Rollout = &appv1.Rollout{Canary: &appv1.CanaryStrategy{
			Steps: []appv1.CanaryStep{
				{SetWeight: ptr.To[int32](10)},
				{Analysis: &appv1.AnalysisStep{Checks: []appv1.AnalysisCheck{
					{Name: "a", TemplateRef: &appv1.AnalysisTemplateRef{Name: "error-ratio"}},
					{Name: "b", SuccessRate: &appv1.SuccessRateCheck{Min: ptr.To("99")}},
				}}},
			},
			Analysis: &appv1.BackgroundAnalysis{Checks: []appv1.AnalysisCheck{
				{Name: "c", TemplateRef: &appv1.AnalysisTemplateRef{Kind: appv1.AnalysisTemplateKindCluster, Name: "p95"}},
			}},
		}}
		app.Status.Rollout = &appv1.RolloutStatus{Phase: phase}
		if canary {
			app.Status.Rollout.Canary = &appv1.RolloutVersion{Revision: "web-2"}
		}
		return app
	}
	tests := []struct {
		name string
		app  *appv1.App
		want []string
	}{
		{"in a rollout", withChecks(appv1.RolloutProgressing, true), []string{"AnalysisTemplate/shop/error-ratio", "ClusterAnalysisTemplate//p95"}},
		{"paused", withChecks(appv1.RolloutPaused, true), []string{"AnalysisTemplate/shop/error-ratio", "ClusterAnalysisTemplate//p95"}},
		{"at rest", withChecks(appv1.RolloutHealthy, false), nil},
		{"aborted", withChecks(appv1.RolloutAborted, true), nil},
		{"no rollout", &appv1.App{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := indexByTemplate(tt.app)
			if err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("indexByTemplate = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
	if got := templateKey(appv1.AnalysisTemplateKindCluster, "shop", "p95"); got != "ClusterAnalysisTemplate//p95" {
		t.Errorf("templateKey of a ClusterAnalysisTemplate = %q", got)
	}
}

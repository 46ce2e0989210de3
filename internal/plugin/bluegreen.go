package plugin

import (
	"fmt"
	"io"
	"slices"
	"strings"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// A blue-green rollout (spec.rollout.blueGreen) in `kubectl app status` and in the
// requests of `kubectl app promote|abort|pause|resume`: its stages (the controller's
// pkg/rollout/bluegreen.go runs them as four fixed steps), the active and the preview
// versions with their Deployments.

// blueGreenStages names the stages of a blue-green rollout, by status.rollout's
// currentStepIndex.
var blueGreenStages = []string{"preview", "switch", "switched", "scale-down delay"}

// blueGreenStage names stage k; "promotion" past the last.
func blueGreenStage(k int32) string {
	if k >= 0 && int(k) < len(blueGreenStages) {
		return blueGreenStages[k]
	}
	return "promotion"
}

// switched reports whether the traffic of blue-green rollout r is on the preview: past
// the switch and not aborted.
func switched(r *appv1.RolloutStatus) bool {
	return r.Canary != nil && r.Phase != appv1.RolloutAborted && r.CurrentStepIndex >= 2
}

// printBlueGreen writes the rollout lines of `kubectl app status` for a blue-green
// rollout: the phase and stage with status.rollout's message, the stages, which version
// is active (the App's Service selects its pods) and which is the preview.
func printBlueGreen(w io.Writer, app *appv1.App, v *RolloutView) {
	r := app.Status.Rollout
	line := string(r.Phase)
	if r.Canary != nil {
		line += ", blue-green stage " + blueGreenStage(r.CurrentStepIndex)
	}
	if r.PausedByRequest {
		line += " (kubectl app pause)"
	}
	if r.Message != "" && r.Phase != appv1.RolloutAborted {
		line += ": " + r.Message
	}
	fmt.Fprintf(w, "Rollout:\t%s\n", oneLine(line))
	if r.Phase == appv1.RolloutAborted && r.AbortMessage != "" {
		fmt.Fprintf(w, "Aborted:\t%s\n", oneLine(r.AbortReason+": "+r.AbortMessage))
	}
	if r.Canary != nil {
		fmt.Fprintf(w, "Stages:\t%s\n", progressLine(blueGreenStages, r))
	}
	for _, c := range r.Analysis {
		// The checks of prePromotionAnalysis, at the switch's stage.
		fmt.Fprintf(w, "Check:\t%s\n", oneLine(checkLineAt(c, "before the switch")))
	}
	service := app.Spec.ServiceTemplate
	preview := versionLine(r.Canary, v.Canary, v.CanaryNote)
	active := versionLine(r.Stable, v.Stable, v.StableNote)
	if switched(r) {
		active, preview = preview, active
		fmt.Fprintf(w, "Active:\t%s (the App's Service selects its pods)\n", active)
		fmt.Fprintf(w, "Previous:\t%s (kept for kubectl app abort until the scale-down delay ends)\n", preview)
		return
	}
	fmt.Fprintf(w, "Active:\t%s\n", active)
	if r.Canary != nil || v.Canary != nil {
		where := ""
		if service != nil && r.Canary != nil {
			where = previewWhere(app, r)
		}
		fmt.Fprintf(w, "Preview:\t%s%s\n", preview, where)
	}
}

// previewWhere says where the preview of app's blue-green rollout r is reached: its
// Service and, with rollout.blueGreen.previewHosts on an HTTPRoute, its hosts through the
// Gateway (not once aborted: the preview's route goes with its pods).
func previewWhere(app *appv1.App, r *appv1.RolloutStatus) string {
	where := " (Service " + app.Spec.ServiceTemplate.Name + appv1.PreviewSuffix
	if bg := previewStrategy(app); bg != nil && len(bg.PreviewHosts) > 0 && app.Spec.Route != nil && r.Phase != appv1.RolloutAborted {
		hosts := make([]string, 0, len(bg.PreviewHosts))
		for _, h := range bg.PreviewHosts {
			hosts = append(hosts, string(h))
		}
		where += ", hosts " + strings.Join(hosts, ", ")
	}
	return where + ")"
}

// blueGreenEffect says what action will do to app's blue-green rollout r, or why it
// cannot.
func blueGreenEffect(app *appv1.App, r *appv1.RolloutStatus, action appv1.RolloutAction) (string, error) {
	id := app.Namespace + "/" + app.Name
	k := r.CurrentStepIndex
	promoting := k >= int32(len(blueGreenStages))
	aborted := r.Phase == appv1.RolloutAborted
	at := "stage " + blueGreenStage(k)
	switch action {
	case appv1.RolloutActionPromote, appv1.RolloutActionPromoteFull:
		switch {
		case promoting:
			return "", fmt.Errorf("the rollout of App %s is already being promoted", id)
		case aborted:
			return "the aborted blue-green rollout starts again: its preview scales up", nil
		case k < 2 && action == appv1.RolloutActionPromoteFull:
			return "the traffic switches to the preview once it is available", nil
		case k == 1 && len(checksBeforeSwitch(app, r)) > 0 && action == appv1.RolloutActionPromote:
			return "", fmt.Errorf("the switch of App %s waits for the checks of prePromotionAnalysis (%s): promote again once they passed, or kubectl app promote --full %s switches without them",
				id, strings.Join(checksBeforeSwitch(app, r), ", "), app.Name)
		case k == 1:
			return "the traffic switches to the preview", nil
		case k == 0 && previewStrategy(app).PrePromotionAnalysis != nil:
			return "the preview stage ends: the checks before the switch run, then the switch follows (kubectl app promote again once they passed)", nil
		case k == 0:
			return "the preview stage ends: the switch follows (at once with kubectl app promote again)", nil
		}
		return "the old pods are not kept any longer: the App's Deployment rolls to the new version", nil
	case appv1.RolloutActionAbort:
		switch {
		case aborted:
			return "", fmt.Errorf("the rollout of App %s is already aborted: %s", id, r.AbortMessage)
		case promoting:
			return "", fmt.Errorf("the rollout of App %s is being promoted: its Deployment already rolls to the new version; go back with kubectl app rollback %s", id, app.Name)
		case k >= 2:
			return "the traffic switches back to the old pods, which still run", nil
		}
		return "the preview goes; the traffic never left the stable pods", nil
	case appv1.RolloutActionPause:
		switch {
		case aborted, promoting:
			return "", fmt.Errorf("the rollout of App %s is %s: nothing to pause", id, map[bool]string{true: "aborted", false: "being promoted"}[aborted])
		case r.PausedByRequest:
			return "", fmt.Errorf("the rollout of App %s is already paused (kubectl app resume %s goes on)", id, app.Name)
		}
		return "the rollout holds at " + at, nil
	case appv1.RolloutActionResume:
		if !r.PausedByRequest {
			return "", fmt.Errorf("the rollout of App %s is not paused by kubectl app pause", id)
		}
		return "the rollout goes on from " + at, nil
	}
	return "", fmt.Errorf("unknown action %q", action)
}

// previewStrategy returns app's blue-green strategy; nil without.
func previewStrategy(app *appv1.App) *appv1.BlueGreenStrategy {
	if app.Spec.Rollout == nil {
		return nil
	}
	return app.Spec.Rollout.BlueGreen
}

// checksBeforeSwitch names the checks of app's prePromotionAnalysis that have not passed
// their count at blue-green rollout r's switch stage, as status.rollout.analysis says:
// a promote is refused until none is left.
func checksBeforeSwitch(app *appv1.App, r *appv1.RolloutStatus) []string {
	bg := previewStrategy(app)
	if bg == nil || bg.PrePromotionAnalysis == nil {
		return nil
	}
	var out []string
	for _, c := range bg.PrePromotionAnalysis.Checks {
		count := int32(1)
		if c.Count != nil {
			count = *c.Count
		}
		i := slices.IndexFunc(r.Analysis, func(s appv1.CheckStatus) bool { return s.Name == c.Name })
		if i < 0 || r.Analysis[i].Passed < count {
			out = append(out, c.Name)
		}
	}
	return out
}

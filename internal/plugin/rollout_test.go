package plugin

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// rolloutApp returns the App web with the steps setWeight 25, pause until promoted,
// setWeight 100, at generation 1, observed, its rollout paused at the second step
// (canary at 25%), changed by mutate.
func rolloutApp(mutate func(*appv1.App)) *appv1.App {
	app := &appv1.App{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "web", UID: "uid-web", Generation: 1, ResourceVersion: "7"},
		Spec: appv1.AppSpec{
			DeploymentTemplate: &appv1.DeploymentTemplate{Name: "web", Image: "nginx:2", Replicas: ptr.To[int32](4)},
			ServiceTemplate:    &appv1.ServiceTemplate{Name: "web"},
			Rollout: &appv1.Rollout{Canary: &appv1.CanaryStrategy{Steps: []appv1.CanaryStep{
				{SetWeight: ptr.To[int32](25)}, {Pause: &appv1.CanaryPause{}}, {SetWeight: ptr.To[int32](100)},
			}}},
		},
		Status: appv1.AppStatus{
			ObservedGeneration: 1,
			Rollout: &appv1.RolloutStatus{
				Phase: appv1.RolloutPaused, CurrentStepIndex: 1, CanaryWeight: 25,
				Message: "waiting for kubectl app promote",
				Stable:  &appv1.RolloutVersion{Revision: "web-1111111111", PodTemplateHash: "aaaaaaaaaa"},
				Canary:  &appv1.RolloutVersion{Revision: "web-2222222222", PodTemplateHash: "bbbbbbbbbb"},
			},
		},
	}
	if mutate != nil {
		mutate(app)
	}
	return app
}

// TestRolloutRequests runs promote, abort, pause and resume against an App in each
// state: what they print, the request they write (or that they write none), and why
// they refuse.
func TestRolloutRequests(t *testing.T) {
	aborted := func(a *appv1.App) {
		a.Status.Rollout.Phase, a.Status.Rollout.CurrentStepIndex = appv1.RolloutAborted, 0
		a.Status.Rollout.AbortReason, a.Status.Rollout.AbortMessage = appv1.ReasonCrashLoopBackOff, `Pod "web-canary-x" container "app-deploy-container" keeps exiting`
	}
	promoting := func(a *appv1.App) {
		a.Status.Rollout.Phase, a.Status.Rollout.CurrentStepIndex = appv1.RolloutProgressing, 3
	}
	atLastStep := func(a *appv1.App) {
		a.Status.Rollout.Phase, a.Status.Rollout.CurrentStepIndex = appv1.RolloutProgressing, 2
	}
	pausedByRequest := func(a *appv1.App) {
		a.Status.Rollout.Phase, a.Status.Rollout.CurrentStepIndex, a.Status.Rollout.PausedByRequest = appv1.RolloutPaused, 0, true
	}
	tests := []struct {
		name   string
		mutate func(*appv1.App)
		args   []string
		// want is stdout; wantRequest the request written; wantErr in stderr (then
		// nothing is written).
		want        string
		wantRequest appv1.RolloutRequest
		wantErr     string
	}{
		{name: "promote at a pause", args: []string{"promote", "web"},
			want:        "app.appcontroller.k8s.io/web promote requested: step 2 of 3 (pause until promoted) ends\n",
			wantRequest: appv1.RolloutRequest{Action: appv1.RolloutActionPromote, Canary: "bbbbbbbbbb", Step: 1}},
		{name: "promote at the last step", mutate: atLastStep, args: []string{"promote", "web"},
			want:        "app.appcontroller.k8s.io/web promote requested: step 3 of 3 (setWeight 100) ends: the rollout is promoted\n",
			wantRequest: appv1.RolloutRequest{Action: appv1.RolloutActionPromote, Canary: "bbbbbbbbbb", Step: 2}},
		{name: "promote --full", args: []string{"promote", "web", "--full"},
			want:        "app.appcontroller.k8s.io/web promoteFull requested: the remaining steps are skipped: the rollout is promoted\n",
			wantRequest: appv1.RolloutRequest{Action: appv1.RolloutActionPromoteFull, Canary: "bbbbbbbbbb", Step: 1}},
		{name: "promote retries an aborted rollout", mutate: aborted, args: []string{"promote", "web"},
			want:        "app.appcontroller.k8s.io/web promote requested: the aborted rollout starts again at step 1 of 3\n",
			wantRequest: appv1.RolloutRequest{Action: appv1.RolloutActionPromote, Canary: "bbbbbbbbbb", Step: 0}},
		{name: "abort", args: []string{"abort", "web"},
			want:        "app.appcontroller.k8s.io/web abort requested: all traffic goes back to the stable pods at step 2 of 3 (pause until promoted)\n",
			wantRequest: appv1.RolloutRequest{Action: appv1.RolloutActionAbort, Canary: "bbbbbbbbbb", Step: 1}},
		{name: "pause", mutate: atLastStep, args: []string{"pause", "web"},
			want:        "app.appcontroller.k8s.io/web pause requested: the rollout holds at step 3 of 3 (setWeight 100)\n",
			wantRequest: appv1.RolloutRequest{Action: appv1.RolloutActionPause, Canary: "bbbbbbbbbb", Step: 2}},
		{name: "resume", mutate: pausedByRequest, args: []string{"resume", "web"},
			want:        "app.appcontroller.k8s.io/web resume requested: the rollout goes on from step 1 of 3 (setWeight 25)\n",
			wantRequest: appv1.RolloutRequest{Action: appv1.RolloutActionResume, Canary: "bbbbbbbbbb", Step: 0}},

		{name: "no strategy", mutate: func(a *appv1.App) { a.Spec.Rollout = nil }, args: []string{"promote", "web"},
			wantErr: "App ns/web has no rollout strategy (spec.rollout): its changes roll out at once"},
		{name: "not reported yet", mutate: func(a *appv1.App) { a.Status.Rollout = nil }, args: []string{"abort", "web"},
			wantErr: "the controller has not reported the rollout of App ns/web yet (status.rollout)"},
		{name: "a change the controller has not observed", mutate: func(a *appv1.App) { a.Generation = 2 }, args: []string{"promote", "web"},
			wantErr: "the controller has not observed the latest change of App ns/web yet (generation 2, observed 1): try again in a moment"},
		{name: "no rollout in progress", mutate: func(a *appv1.App) { a.Status.Rollout.Phase, a.Status.Rollout.Canary = appv1.RolloutHealthy, nil },
			args: []string{"promote", "web"}, wantErr: "App ns/web has no rollout in progress (phase Healthy): nothing to promote"},
		{name: "promote while promoting", mutate: promoting, args: []string{"promote", "web", "--full"},
			wantErr: "the rollout of App ns/web is already being promoted"},
		{name: "abort while promoting", mutate: promoting, args: []string{"abort", "web"},
			wantErr: "is being promoted: its stable Deployment already rolls to the new version; go back with kubectl app rollback web"},
		{name: "abort an aborted rollout", mutate: aborted, args: []string{"abort", "web"},
			wantErr: `the rollout of App ns/web is already aborted: Pod "web-canary-x" container "app-deploy-container" keeps exiting`},
		{name: "pause a paused rollout", mutate: pausedByRequest, args: []string{"pause", "web"},
			wantErr: "the rollout of App ns/web is already paused (kubectl app resume web goes on)"},
		{name: "resume at a pause step", args: []string{"resume", "web"},
			wantErr: "the rollout of App ns/web is not paused by kubectl app pause (it waits at step 2 of 3 (pause until promoted): kubectl app promote web ends it)"},
		{name: "an App that does not exist", args: []string{"promote", "nope"}, wantErr: `App "nope" not found`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakes(t, nil)
			ctx := context.Background()
			if _, err := f.apps.AppcontrollerV1().Apps(testNamespace).Create(ctx, rolloutApp(tt.mutate), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			f.apps.ClearActions()
			r := runWith(t, f, append(tt.args, "-n", testNamespace)...)
			var patches []clienttesting.PatchActionImpl
			for _, a := range f.apps.Actions() {
				if p, ok := a.(clienttesting.PatchActionImpl); ok {
					patches = append(patches, p)
				}
			}
			if tt.wantErr != "" {
				if r.code != ExitError || !strings.Contains(r.stderr, tt.wantErr) || len(patches) != 0 {
					t.Errorf("code %d, %d patches, stderr %q; want code %d, no patch, %q", r.code, len(patches), r.stderr, ExitError, tt.wantErr)
				}
				return
			}
			if r.code != ExitOK || r.stdout != tt.want {
				t.Errorf("code %d\n%s%s\nwant\n%s", r.code, r.stdout, r.stderr, tt.want)
			}
			if len(patches) != 1 || patches[0].PatchType != types.MergePatchType || patches[0].PatchOptions.FieldManager != FieldManager ||
				!strings.Contains(string(patches[0].Patch), `"resourceVersion":"7"`) {
				t.Fatalf("patches %+v; want one merge patch guarded by resourceVersion 7, field manager %s", patches, FieldManager)
			}
			app, err := f.apps.AppcontrollerV1().Apps(testNamespace).Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got, err := appv1.ParseRolloutRequest(app.Annotations[appv1.RolloutRequestAnnotation])
			if err != nil {
				t.Fatal(err)
			}
			want := tt.wantRequest
			want.ID = testNow.Format(time.RFC3339Nano)
			if got != want {
				t.Errorf("request %+v, want %+v", got, want)
			}
		})
	}
}

// TestParseRolloutRequest checks the annotation's codec and that it refuses a request
// the controller could not act on.
func TestParseRolloutRequest(t *testing.T) {
	r := appv1.RolloutRequest{Action: appv1.RolloutActionAbort, Canary: "abc", Step: 2, ID: "2026-01-01T00:00:00Z"}
	if got, err := appv1.ParseRolloutRequest(r.String()); err != nil || got != r {
		t.Errorf("round trip: %+v, %v", got, err)
	}
	for value, want := range map[string]string{
		`not json`: "decoding the appcontroller.k8s.io/rollout-request annotation",
		`{"action":"rewind","canary":"abc","id":"1"}`: `asks for "rewind": not one of promote, promoteFull, abort, pause, resume`,
		`{"action":"abort","canary":"abc"}`:           "names no id or no canary",
	} {
		if _, err := appv1.ParseRolloutRequest(value); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseRolloutRequest(%s) = %v, want an error containing %q", value, err, want)
		}
	}
}

// TestRestartWithRollout: an App with a rollout strategy is restarted through it, by
// the App's own restartedAt annotation; its Deployment is left alone.
func TestRestartWithRollout(t *testing.T) {
	f := lifecycleFakes(t)
	ctx := context.Background()
	apps := f.apps.AppcontrollerV1().Apps(testNamespace)
	app, err := apps.Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	app.Spec.Rollout = rolloutApp(nil).Spec.Rollout
	if _, err := apps.Update(ctx, app, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r := runWith(t, f, "restart", "web", "-n", testNamespace)
	if r.code != 0 || r.stdout != "app.appcontroller.k8s.io/web restarted (a canary rollout rolls its pods: kubectl app status web --watch)\n" {
		t.Errorf("restart: code %d %s%s", r.code, r.stdout, r.stderr)
	}
	if app, err = apps.Get(ctx, "web", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := app.Annotations[appv1.RestartedAtAnnotation]; got != testNow.Format(time.RFC3339) {
		t.Errorf("the App's restartedAt = %q, want %q", got, testNow.Format(time.RFC3339))
	}
	d, err := f.kube.AppsV1().Deployments(testNamespace).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, found := d.Spec.Template.Annotations[appv1.RestartedAtAnnotation]; found {
		t.Errorf("the Deployment was restarted directly (restartedAt %q): that would bypass the steps", got)
	}
}

// rolloutObjects returns the App web of rolloutApp(mutate) as the dynamic client
// serves it, its stable Deployment web (3 ready of 3, nginx:1) and canary Deployment
// web-canary (1 ready of 1, nginx:2), one pod of each and its Service.
func rolloutObjects(t *testing.T, mutate func(*appv1.App)) []*unstructured.Unstructured {
	t.Helper()
	typed := rolloutApp(mutate)
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(typed)
	if err != nil {
		t.Fatal(err)
	}
	app := &unstructured.Unstructured{Object: obj}
	app.SetAPIVersion("appcontroller.k8s.io/v1")
	app.SetKind("App")
	deployment := func(name, image string, replicas int64) *unstructured.Unstructured {
		d := readyDeployment(name, controlledBy(app))
		set(d, replicas, "spec", "replicas")
		set(d, []any{map[string]any{"name": appv1.ContainerName, "image": image}}, "spec", "template", "spec", "containers")
		set(d, replicas, "status", "updatedReplicas")
		set(d, replicas, "status", "readyReplicas")
		return d
	}
	canaryPod := appPod("web-canary-7d4b-ccccc", readyContainer())
	canaryPod.SetLabels(map[string]string{appv1.NameLabel: "web", appv1.InstanceLabel: "web", appv1.TrackLabel: appv1.TrackCanary})
	return []*unstructured.Unstructured{
		app, deployment("web", "nginx:1", 3), deployment("web-canary", "nginx:2", 1),
		appPod("web-5c9f-aaaaa", readyContainer()), canaryPod,
		service("web", controlledBy(app)),
	}
}

// TestPrintStatusRollout shows a rollout split by replicas and one split by the weights
// of the App's HTTPRoute, and an aborted one.
func TestPrintStatusRollout(t *testing.T) {
	route := func(app *unstructured.Unstructured) *unstructured.Unstructured {
		u := newObject("gateway.networking.k8s.io/v1", "HTTPRoute", "web", "uid-route", controlledBy(app))
		set(u, []any{map[string]any{"backendRefs": []any{
			map[string]any{"name": "web-stable", "port": int64(8080), "weight": int64(75)},
			map[string]any{"name": "web-canary", "port": int64(8080), "weight": int64(25)},
		}}}, "spec", "rules")
		return u
	}
	tests := []struct {
		name      string
		mutate    func(*appv1.App)
		httpRoute bool
		// want are the lines of the summary, before the conditions.
		want string
	}{
		{name: "paused, split by replicas", want: `
App:          ns/web
Ready:        Unknown: the controller has not reported a Ready condition yet
Deployment:   web (image nginx:2): 4 desired, no status reported
Service:      web: ClusterIP 10.0.0.10, ports http 8080/TCP -> 8080
Rollout:      Paused at step 2 of 3: waiting for kubectl app promote
Steps:        1 setWeight 25 (done), 2 pause until promoted (current), 3 setWeight 100
Traffic:      canary 25% by ready pods behind the App's Service: 1 canary, 3 stable (the step asks for 25%)
Stable:       revision web-1111111111: Deployment web (image nginx:1): 3 desired, 3 updated, 3 ready
Canary:       revision web-2222222222: Deployment web-canary (image nginx:2): 1 desired, 1 updated, 1 ready
`},
		{name: "progressing, split by an HTTPRoute", httpRoute: true,
			mutate: func(a *appv1.App) {
				a.Status.Route = "web"
				a.Status.Rollout.Phase, a.Status.Rollout.CurrentStepIndex, a.Status.Rollout.Message = appv1.RolloutProgressing, 0, ""
			},
			want: `
App:          ns/web
Ready:        Unknown: the controller has not reported a Ready condition yet
Deployment:   web (image nginx:2): 4 desired, no status reported
Service:      web: ClusterIP 10.0.0.10, ports http 8080/TCP -> 8080
Rollout:      Progressing at step 1 of 3
Steps:        1 setWeight 25 (current), 2 pause until promoted, 3 setWeight 100
Traffic:      canary 25% by the weights of HTTPRoute web: web-stable 75, web-canary 25 (the step asks for 25%)
Stable:       revision web-1111111111: Deployment web (image nginx:1): 3 desired, 3 updated, 3 ready
Canary:       revision web-2222222222: Deployment web-canary (image nginx:2): 1 desired, 1 updated, 1 ready
`},
		{name: "aborted, paused by request before",
			mutate: func(a *appv1.App) {
				r := a.Status.Rollout
				r.Phase, r.CurrentStepIndex, r.Message, r.CanaryWeight = appv1.RolloutAborted, 0, "all traffic on the stable pods", 0
				r.AbortReason, r.AbortMessage = appv1.ReasonImagePullFailed, `Pod "web-canary-7d4b-ccccc" container "app-deploy-container" cannot pull its image: not found`
			},
			want: `
App:          ns/web
Ready:        Unknown: the controller has not reported a Ready condition yet
Deployment:   web (image nginx:2): 4 desired, no status reported
Service:      web: ClusterIP 10.0.0.10, ports http 8080/TCP -> 8080
Rollout:      Aborted at step 1 of 3
Aborted:      ImagePullFailed: Pod "web-canary-7d4b-ccccc" container "app-deploy-container" cannot pull its image: not found
Steps:        1 setWeight 25 (current), 2 pause until promoted, 3 setWeight 100
Traffic:      canary 25% by ready pods behind the App's Service: 1 canary, 3 stable (the step asks for 0%)
Stable:       revision web-1111111111: Deployment web (image nginx:1): 3 desired, 3 updated, 3 ready
Canary:       revision web-2222222222: Deployment web-canary (image nginx:2): 1 desired, 1 updated, 1 ready
`},
		{name: "aborted by its analysis",
			mutate: func(a *appv1.App) {
				r := a.Status.Rollout
				r.Phase, r.CurrentStepIndex, r.CanaryWeight = appv1.RolloutAborted, 1, 0
				r.AbortReason, r.AbortMessage = appv1.ReasonAnalysisFailed, `check "success-rate" failed: 89.6%, threshold >= 99%: success rate 89.6% < 99% over 1m (canary web-canary)`
				at := metav1.NewTime(time.Date(2026, 11, 28, 2, 0, 0, 0, time.UTC))
				r.Analysis = []appv1.CheckStatus{
					{Name: "success-rate", Step: 1, Phase: appv1.AnalysisFailed, Value: "89.6%", Threshold: ">= 99%", MeasuredAt: &at, Failed: 1, Inconclusive: 1,
						Message: "success rate 89.6% < 99% over 1m (canary web-canary)"},
					{Name: "latency", Step: -1},
				}
			},
			want: `
App:          ns/web
Ready:        Unknown: the controller has not reported a Ready condition yet
Deployment:   web (image nginx:2): 4 desired, no status reported
Service:      web: ClusterIP 10.0.0.10, ports http 8080/TCP -> 8080
Rollout:      Aborted at step 2 of 3
Aborted:      AnalysisFailed: check "success-rate" failed: 89.6%, threshold >= 99%: success rate 89.6% < 99% over 1m (canary web-canary)
Steps:        1 setWeight 25 (done), 2 pause until promoted (current), 3 setWeight 100
Check:        success-rate (step 2): Failed 89.6% (threshold >= 99%) at 2026-11-28T02:00:00Z; 0 passed, 1 failed, 1 inconclusive: success rate 89.6% < 99% over 1m (canary web-canary)
Check:        latency (background): not measured yet
Traffic:      canary 25% by ready pods behind the App's Service: 1 canary, 3 stable (the step asks for 0%)
Stable:       revision web-1111111111: Deployment web (image nginx:1): 3 desired, 3 updated, 3 ready
Canary:       revision web-2222222222: Deployment web-canary (image nginx:2): 1 desired, 1 updated, 1 ready
`},
		{name: "checks of templates, one missing",
			mutate: func(a *appv1.App) {
				r := a.Status.Rollout
				r.CurrentStepIndex = 1
				r.Message = `Rollout to revision web-2222222222, step 2 of 3 (pause until promoted), canary at 25%: waiting for its checks: "errors" inconclusive`
				at := metav1.NewTime(time.Date(2026, 11, 28, 2, 0, 0, 0, time.UTC))
				r.Analysis = []appv1.CheckStatus{
					{Name: "errors", Step: -1, Template: "AnalysisTemplate/error-ratio", Phase: appv1.AnalysisError, Reason: appv1.ReasonAnalysisTemplateNotFound,
						Message: "check errors: AnalysisTemplate error-ratio not found in namespace ns: the check waits for it until progressDeadlineSeconds"},
					{Name: "p95", Step: 1, Template: "ClusterAnalysisTemplate/p95", Phase: appv1.AnalysisPassed, Value: "0.12", Threshold: "[0, 0.3]", MeasuredAt: &at, Passed: 2},
				}
			},
			want: `
App:          ns/web
Ready:        Unknown: the controller has not reported a Ready condition yet
Deployment:   web (image nginx:2): 4 desired, no status reported
Service:      web: ClusterIP 10.0.0.10, ports http 8080/TCP -> 8080
Rollout:      Paused at step 2 of 3: Rollout to revision web-2222222222, step 2 of 3 (pause until promoted), canary at 25%: waiting for its checks: "errors" inconclusive
Steps:        1 setWeight 25 (done), 2 pause until promoted (current), 3 setWeight 100
Check:        errors (background, AnalysisTemplate/error-ratio): not measured now: AnalysisTemplate error-ratio not found in namespace ns: the check waits for it until progressDeadlineSeconds
Check:        p95 (step 2, ClusterAnalysisTemplate/p95): Passed 0.12 (threshold [0, 0.3]) at 2026-11-28T02:00:00Z; 2 passed, 0 failed, 0 inconclusive
Traffic:      canary 25% by ready pods behind the App's Service: 1 canary, 3 stable (the step asks for 25%)
Stable:       revision web-1111111111: Deployment web (image nginx:1): 3 desired, 3 updated, 3 ready
Canary:       revision web-2222222222: Deployment web-canary (image nginx:2): 1 desired, 1 updated, 1 ready
`},
		{name: "healthy: no canary",
			mutate: func(a *appv1.App) {
				a.Status.Rollout.Phase, a.Status.Rollout.Canary, a.Status.Rollout.Message = appv1.RolloutHealthy, nil, "web-1111111111 serves"
			},
			want: `
App:          ns/web
Ready:        Unknown: the controller has not reported a Ready condition yet
Deployment:   web (image nginx:2): 4 desired, no status reported
Service:      web: ClusterIP 10.0.0.10, ports http 8080/TCP -> 8080
Rollout:      Healthy: web-1111111111 serves
Steps:        1 setWeight 25, 2 pause until promoted, 3 setWeight 100
Stable:       revision web-1111111111: Deployment web (image nginx:1): 3 desired, 3 updated, 3 ready
Canary:       <none>: Deployment web-canary (image nginx:2): 1 desired, 1 updated, 1 ready
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objects := rolloutObjects(t, tt.mutate)
			if tt.httpRoute {
				objects = append(objects, route(objects[0]))
			}
			f := newFakes(t, objects)
			st, err := GetStatus(context.Background(), f.clients(), testNamespace, "web")
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := PrintStatus(&out, st, testNow); err != nil {
				t.Fatal(err)
			}
			summary, rest, _ := strings.Cut(out.String(), "\n\n")
			if want := strings.TrimPrefix(tt.want, "\n"); summary+"\n" != want {
				t.Errorf("summary:\n%s\nwant:\n%s", summary, want)
			}
			wantPods := `Pods:
  TRACK    NAME                    PHASE     READY   RESTARTS   AGE   PROBLEM
  stable   web-5c9f-aaaaa          Running   1/1     0          60s   <none>
  canary   web-canary-7d4b-ccccc   Running   1/1     0          60s   <none>
`
			if !strings.Contains(rest, wantPods) {
				t.Errorf("pods:\n%s\nwant:\n%s", rest, wantPods)
			}
		})
	}
}

// TestStatusWatch: --watch prints the status, then again when the App changes, and
// stops once the rollout is over and the App Ready (exit code 0).
func TestStatusWatch(t *testing.T) {
	objects := rolloutObjects(t, nil)
	f := newFakes(t, objects)
	watcher := watch.NewFake()
	opened := make(chan clienttesting.WatchActionImpl, 1)
	f.dynamic.PrependWatchReactor("apps", func(a clienttesting.Action) (bool, watch.Interface, error) {
		opened <- a.(clienttesting.WatchActionImpl)
		return true, watcher, nil
	})
	done := make(chan runResult)
	go func() { done <- runWith(t, f, "status", "web", "-n", testNamespace, "--watch") }()

	// The first status is printed before the watch opens, from its resourceVersion.
	action := <-opened
	if rv, fs := action.WatchRestrictions.ResourceVersion, action.WatchRestrictions.Fields.String(); rv != "7" || fs != "metadata.name=web" {
		t.Errorf("watch from resourceVersion %q with field selector %q, want 7 and metadata.name=web", rv, fs)
	}
	promoted := objects[0].DeepCopy()
	set(promoted, map[string]any{"phase": "Healthy", "message": "web-2222222222 serves",
		"stable": map[string]any{"revision": "web-2222222222", "podTemplateHash": "bbbbbbbbbb"}}, "status", "rollout")
	set(promoted, []any{cond("Ready", "True", "Available", "all good", 1)}, "status", "conditions")
	if _, err := f.dynamic.Resource(appsGVRForTest).Namespace(testNamespace).Update(context.Background(), promoted, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	watcher.Modify(promoted)
	r := <-done
	first, second, found := strings.Cut(r.stdout, "---\n")
	if r.code != ExitOK || !found || !strings.Contains(first, "Rollout:      Paused at step 2 of 3") ||
		!strings.Contains(second, "Rollout:      Healthy: web-2222222222 serves") || !strings.Contains(second, "Ready:        True, Available") {
		t.Errorf("code %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := runWith(t, f, "status", "web", "-n", testNamespace, "--watch", "-o", "yaml"); r.code != ExitError || !strings.Contains(r.stderr, "--watch prints the summary") {
		t.Errorf("--watch with -o: code %d %s", r.code, r.stderr)
	}
}

// appsGVRForTest is the resource of Apps the fake dynamic client serves.
var appsGVRForTest = schema.GroupVersion(appv1.GroupVersion).WithResource("apps")

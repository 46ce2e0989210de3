package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	appctrl "github.com/app-controller/app-controller/pkg/controller/app"
	"github.com/app-controller/app-controller/pkg/controller/appfixture"
	"github.com/app-controller/app-controller/pkg/controllermanager"
	appclientset "github.com/app-controller/app-controller/pkg/generated/clientset/versioned"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// converge bounds how long the controller and the cluster may take to converge.
const converge = 90 * time.Second

// startController runs the App controller in the test process until the test ends,
// resyncing every second as the rollout tests do (a timed step ends on a resync).
func startController(t *testing.T) {
	t.Helper()
	opts := controllermanager.NewOptions()
	opts.Controllers = []string{appctrl.ControllerName}
	opts.ResyncPeriod = time.Second
	opts.ShutdownTimeout = 5 * time.Second
	framework.StartManager(t, framework.Config(t), opts)
}

// canaryApp returns an App of 4 replicas whose rollout sets the canary's weight to 25%,
// waits to be promoted, sets 50% and waits again.
func canaryApp(ns, name string) *appv1.App {
	app := appfixture.NewApp(ns, name, "nginx:1.27", 4)
	pause := appv1.CanaryStep{Pause: &appv1.CanaryPause{}}
	app.Spec.Rollout = &appv1.Rollout{Canary: &appv1.CanaryStrategy{
		Steps:                 []appv1.CanaryStep{{SetWeight: ptr.To[int32](25)}, pause, {SetWeight: ptr.To[int32](50)}, pause},
		ScaleDownDelaySeconds: ptr.To[int32](0),
	}}
	return app
}

// createApp creates app.
func createApp(t *testing.T, apps appclientset.Interface, app *appv1.App) {
	t.Helper()
	if _, err := apps.AppcontrollerV1().Apps(app.Namespace).Create(context.Background(), app, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating App %s: %v", app.Name, err)
	}
}

// setImage changes the image of the App ns/name, as a user's update does.
func setImage(t *testing.T, apps appclientset.Interface, ns, name, image string) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		app, err := apps.AppcontrollerV1().Apps(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		app.Spec.DeploymentTemplate.Image = image
		_, err = apps.AppcontrollerV1().Apps(ns).Update(context.Background(), app, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("setting the image of App %s to %s: %v", name, image, err)
	}
}

// waitApp waits until the App ns/name passes check.
func waitApp(t *testing.T, apps appclientset.Interface, ns, name string, check func(*appv1.App) bool) *appv1.App {
	t.Helper()
	return framework.WaitFor(t, converge, apps.AppcontrollerV1().Apps(ns).Get, name, check)
}

// ready: the App's Ready condition is True at its generation.
func ready(app *appv1.App) bool {
	return app.Status.ObservedGeneration == app.Generation && framework.AppCondition(app, appv1.ConditionReady) == "True/Available"
}

// at returns a check that the App's rollout is in phase at step (0-based).
func at(phase appv1.RolloutPhase, step int32) func(*appv1.App) bool {
	return func(app *appv1.App) bool {
		r := app.Status.Rollout
		return app.Status.ObservedGeneration == app.Generation && r != nil && r.Phase == phase && r.CurrentStepIndex == step
	}
}

// TestDashboard opens the list, follows the App web through a canary rollout on the
// page (the step and the weight change without a reload), promotes it with the button,
// aborts the rollout of the App api, sees the API server refuse a promote to a user who
// may read Apps but not patch them (the dashboard run with --as), and rolls web back to
// its first revision.
func TestDashboard(t *testing.T) {
	startController(t)
	apps := framework.AppClient(t)
	ns := framework.Namespace(t)
	createApp(t, apps, canaryApp(ns, "web"))
	createApp(t, apps, canaryApp(ns, "api"))
	createApp(t, apps, appfixture.NewApp(ns, "shop", "nginx:1.27", 2))
	for _, name := range []string{"web", "api", "shop"} {
		waitApp(t, apps, ns, name, ready)
	}
	d := startDashboard(t, "-n", ns)
	checkGuards(t, d)

	ctx := newBrowser(t)
	web := `tr[data-key="` + ns + `/web"]`
	run(t, ctx, "opening the list", chromedp.Navigate(d.url), chromedp.WaitVisible(chromedp.CSS(web)))
	waitJS(t, ctx, "three Apps", textOf("#count", "3 Apps"))
	waitJS(t, ctx, "web Ready", textOf(web, "Ready"))
	// A page that reloads loses this mark.
	eval[bool](t, ctx, `window.notReloaded = true`)

	setImage(t, apps, ns, "web", "nginx:1.28")
	waitJS(t, ctx, "web at step 2 of 4, weight 25% on the list", textOf(web, "step 2/4")+" && "+textOf(web, "weight 25%"))
	waitApp(t, apps, ns, "web", at(appv1.RolloutPaused, 1))
	if !eval[bool](t, ctx, `window.notReloaded === true`) {
		t.Fatal("the list reloaded to show the rollout's step")
	}
	screenshot(t, ctx, "dashboard-list.png")

	// The App's page follows the rollout too; promote ends the pause.
	eval[bool](t, ctx, fmt.Sprintf(`(document.querySelector(%s).click(), true)`, strconv.Quote(web+" a")))
	run(t, ctx, "opening web's page", chromedp.WaitVisible(chromedp.CSS("#rollout-title")))
	waitJS(t, ctx, "the current step marked", textOf(`.steplist li[aria-current="step"]`, "pause until promoted"))
	waitJS(t, ctx, "the tree", textOf("#tree", "Deployment/web-deploy-canary"))
	waitJS(t, ctx, "canary pods", textOf("#pods", "canary"))
	screenshot(t, ctx, "dashboard-app-rollout.png")
	eval[bool](t, ctx, `window.notReloaded = true`)
	result := confirm(t, ctx, "#action-promote")
	if !strings.Contains(result, "web promote requested: step 2 of 4 (pause until promoted) ends") {
		t.Errorf("promote: the page says %q", result)
	}
	waitApp(t, apps, ns, "web", at(appv1.RolloutPaused, 3))
	waitJS(t, ctx, "web at step 4 of 4, weight 50% on its page", textOf(".progress", "step 4/4")+" && "+textOf(".progress", "weight 50%"))
	if !eval[bool](t, ctx, `window.notReloaded === true`) {
		t.Fatal("the App's page reloaded to show the promotion")
	}

	// Abort on another App.
	setImage(t, apps, ns, "api", "nginx:1.28")
	waitApp(t, apps, ns, "api", at(appv1.RolloutPaused, 1))
	run(t, ctx, "opening api's page", chromedp.Navigate(d.base+"/apps/"+ns+"/api"), chromedp.WaitVisible(chromedp.CSS("#rollout-title")))
	if result := confirm(t, ctx, "#action-abort"); !strings.Contains(result, "api abort requested: all traffic goes back to the stable pods") {
		t.Errorf("abort: the page says %q", result)
	}
	waitApp(t, apps, ns, "api", func(app *appv1.App) bool {
		return app.Status.Rollout != nil && app.Status.Rollout.Phase == appv1.RolloutAborted
	})
	waitJS(t, ctx, "api aborted on its page", textOf("#rollout-abort", "Aborted"))

	// A user who may read but not patch Apps: the API server's refusal on the page.
	grantReadOnly(t, ns, "dashboard-viewer")
	viewer := startDashboard(t, "-n", ns, "--as", "dashboard-viewer")
	viewerCtx, cancel := chromedp.NewContext(ctx)
	defer cancel()
	run(t, viewerCtx, "opening web's page as the viewer", chromedp.Navigate(viewer.url),
		chromedp.Navigate(viewer.base+"/apps/"+ns+"/web"), chromedp.WaitVisible(chromedp.CSS("#rollout-title")))
	if result := confirm(t, viewerCtx, "#action-promote"); !strings.Contains(result, "Error from server (Forbidden)") ||
		!strings.Contains(result, `User "dashboard-viewer" cannot patch resource "apps"`) {
		t.Errorf("promote as the viewer: the page says %q, want the API server's Forbidden", result)
	}
	waitApp(t, apps, ns, "web", at(appv1.RolloutPaused, 3))

	// Roll web back to its first revision.
	run(t, ctx, "opening web's page", chromedp.Navigate(d.base+"/apps/"+ns+"/web"), chromedp.WaitVisible(chromedp.CSS("#revisions")))
	if result := confirm(t, ctx, "#rollback-1"); !strings.Contains(result, "web rolled back to revision 1") {
		t.Errorf("rollback: the page says %q", result)
	}
	app := waitApp(t, apps, ns, "web", func(app *appv1.App) bool { return app.Spec.DeploymentTemplate.Image == "nginx:1.27" })
	t.Logf("web after the rollback: generation %d, image %s", app.Generation, app.Spec.DeploymentTemplate.Image)
	waitJS(t, ctx, "web's page with the image of revision 1", textOf(".summary dd.image", "nginx:1.27"))
}

// grantReadOnly lets user get, list and watch in ns what the dashboard shows, and
// nothing else.
func grantReadOnly(t *testing.T, ns, user string) {
	t.Helper()
	kube := framework.Client(t)
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: user, Namespace: ns},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{appv1.GroupName}, Resources: []string{"apps"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"apps"}, Resources: []string{"deployments", "replicasets", "controllerrevisions"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{""}, Resources: []string{"pods", "events", "services"}, Verbs: []string{"get", "list", "watch"}},
		},
	}
	if _, err := kube.RbacV1().Roles(ns).Create(context.Background(), role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user, Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: user}},
	}
	if _, err := kube.RbacV1().RoleBindings(ns).Create(context.Background(), binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// checkGuards checks the server's answers to requests without the token, with a wrong
// Host or a foreign Origin, and the cookie and headers of one with the token.
func checkGuards(t *testing.T, d dashboard) {
	t.Helper()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	// get returns the code, headers and cookies of the answer to a GET of url.
	get := func(url string, header http.Header, host string) answer {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if header != nil {
			req.Header = header
		}
		if host != "" {
			req.Host = host
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return answer{StatusCode: resp.StatusCode, Status: resp.Status, Header: resp.Header, cookies: resp.Cookies()}
	}
	if r := get(d.base+"/", nil, ""); r.StatusCode != http.StatusUnauthorized {
		t.Errorf("without the token: %s, want 401", r.Status)
	}
	if r := get(d.base+"/?token=0123", nil, ""); r.StatusCode != http.StatusForbidden {
		t.Errorf("with a wrong token: %s, want 403", r.Status)
	}
	if r := get(d.url, nil, "attacker.example:80"); r.StatusCode != http.StatusForbidden {
		t.Errorf("with Host attacker.example: %s, want 403", r.Status)
	}
	if r := get(d.url, http.Header{"Origin": {"http://attacker.example"}}, ""); r.StatusCode != http.StatusForbidden {
		t.Errorf("with Origin attacker.example: %s, want 403", r.Status)
	}
	r := get(d.url, nil, "")
	if r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != "/" {
		t.Errorf("with the token: %s to %q, want 303 to /", r.Status, r.Header.Get("Location"))
	}
	cookies := r.cookies
	if len(cookies) != 1 || !cookies[0].HttpOnly || cookies[0].SameSite != http.SameSiteStrictMode {
		t.Errorf("with the token: cookies %v, want one HttpOnly SameSite=Strict", cookies)
	}
	if csp := r.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
	if acao := r.Header.Get("Access-Control-Allow-Origin"); acao != "" {
		t.Errorf("Access-Control-Allow-Origin %q, want none", acao)
	}
	if len(cookies) == 1 {
		page := get(d.base+"/", http.Header{"Cookie": {cookies[0].String()}}, "")
		if page.StatusCode != http.StatusOK {
			t.Errorf("with the cookie: %s, want 200", page.Status)
		}
		req, _ := http.NewRequest(http.MethodPost, d.base+"/apps/x/y/actions", strings.NewReader("action=abort"))
		req.Header.Set("Cookie", cookies[0].String())
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("a form post without X-Requested-By: %s, want 403", resp.Status)
		}
	}
}

// answer is what checkGuards reads of a response.
type answer struct {
	StatusCode int
	Status     string
	Header     http.Header
	cookies    []*http.Cookie
}

package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller/appfixture"
	appclientset "github.com/app-controller/app-controller/pkg/generated/clientset/versioned"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// Scale of TestListScale: scaleNamespaces namespaces of scaleApps Apps each.
const (
	scaleNamespaces = 10
	scaleApps       = 100
)

// TestListScale opens the list of 1000 Apps in 10 namespaces and filters it,
// and reports how long the browser took for each (the figures of docs/performance.md,
// not asserted: they depend on the machine) and the plugin's memory before and after
// its informers hold the Apps. The Apps' statuses are written by the test (no
// controller runs): most Ready, some not, one in five in the middle of a rollout.
func TestListScale(t *testing.T) {
	// gctrace: the Go runtime writes the live heap after each collection to stderr.
	d := startDashboardWithEnv(t, []string{"GODEBUG=gctrace=1"}, "-A")
	ctx := newBrowser(t)
	run(t, ctx, "opening the empty list", chromedp.Navigate(d.url), chromedp.WaitVisible(chromedp.CSS("#count")))
	idle, _ := rss(t, d.pid)
	idleHeap := liveHeap(d.stderr())

	apps := framework.AppClient(t)
	var namespaces []string
	for range scaleNamespaces {
		namespaces = append(namespaces, framework.Namespace(t))
	}
	start := time.Now()
	var jsonBytes int64
	var mu sync.Mutex
	work := make(chan [2]int)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			for job := range work {
				n, err := createScaleApp(apps, namespaces[job[0]], job[1])
				if err != nil {
					select {
					case errs <- err:
					default:
					}
					continue
				}
				mu.Lock()
				jsonBytes += int64(n)
				mu.Unlock()
			}
		})
	}
	for ns := range scaleNamespaces {
		for i := range scaleApps {
			work <- [2]int{ns, i}
		}
	}
	close(work)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	total := scaleNamespaces * scaleApps
	t.Logf("created and reported %d Apps in %d namespaces in %s (%.1f MiB as JSON)", total, scaleNamespaces,
		time.Since(start).Round(time.Millisecond), float64(jsonBytes)/(1<<20))
	// The open list follows them live.
	waitJS(t, ctx, "the 1000 Apps on the open list", fmt.Sprintf(`document.getElementById('rows').rows.length >= %d`, total))

	// A fresh page: from the navigation to the last row laid out.
	run(t, ctx, "opening the list", chromedp.Navigate(d.base+"/"))
	waitJS(t, ctx, "the list rendered", `performance.getEntriesByName('app-list-rendered').length > 0`)
	rendered := eval[float64](t, ctx, `performance.getEntriesByName('app-list-rendered')[0].startTime`)
	rows := eval[int](t, ctx, `document.getElementById('rows').rows.length`)
	if rows < total {
		t.Fatalf("the list has %d rows, want at least %d", rows, total)
	}
	// A search typed into the box: the filter over every row and the layout after it.
	filtered := eval[float64](t, ctx, `(function(){
		const s = document.getElementById('search');
		const t0 = performance.now();
		s.value = 'app-0042';
		s.dispatchEvent(new Event('input'));
		void document.body.offsetHeight;
		return performance.now() - t0;
	})()`)
	waitJS(t, ctx, "10 Apps found", textOf("#count", fmt.Sprintf("10 of %d Apps", rows)))
	byState := eval[float64](t, ctx, `(function(){
		const s = document.getElementById('search'), st = document.getElementById('state');
		s.value = '';
		const t0 = performance.now();
		st.value = 'rolling';
		st.dispatchEvent(new Event('change'));
		void document.body.offsetHeight;
		return performance.now() - t0;
	})()`)
	// Counted among this test's Apps (named app-NNNN): the package's other tests leave
	// Apps of their own in the cluster, one of which may still be rolling.
	eval[bool](t, ctx, `(function(){
		const s = document.getElementById('search');
		s.value = 'app-';
		s.dispatchEvent(new Event('input'));
		return true;
	})()`)
	waitJS(t, ctx, "the rolling Apps", textOf("#count", fmt.Sprintf("%d of %d Apps", total/5, rows)))
	time.Sleep(2 * time.Second) // let the Go runtime settle after the list's rendering
	current, peak := rss(t, d.pid)
	t.Logf("list of %d Apps: rendered %.0f ms after the navigation started; search filtered in %.1f ms, the state filter in %.1f ms",
		rows, rendered, filtered, byState)
	t.Logf("kubectl app dashboard memory: RSS %.1f MiB with no App, %.1f MiB with %d Apps (peak %.1f MiB); live heap after the last collection %s MB with no App, %s MB with the Apps",
		idle, current, rows, peak, idleHeap, liveHeap(d.stderr()))
}

// createScaleApp creates the App app-NNNN of ns and writes a status as the controller
// would: Ready, except one in seven; one in five with a rollout at its second step. It
// returns the size of the App as JSON.
func createScaleApp(apps appclientset.Interface, ns string, i int) (int, error) {
	ctx := context.Background()
	app := appfixture.NewApp(ns, fmt.Sprintf("app-%04d", i), fmt.Sprintf("registry.example.com/team-%d/app-%04d:v1.%d", i%7, i, i%13), 3)
	rolling := i%5 == 0
	if rolling {
		app.Spec.Rollout = &appv1.Rollout{Canary: &appv1.CanaryStrategy{Steps: []appv1.CanaryStep{
			{SetWeight: ptr.To[int32](25)}, {Pause: &appv1.CanaryPause{}}, {SetWeight: ptr.To[int32](50)}, {Pause: &appv1.CanaryPause{}},
		}}}
	}
	created, err := apps.AppcontrollerV1().Apps(ns).Create(ctx, app, metav1.CreateOptions{})
	if err != nil {
		return 0, fmt.Errorf("creating App %s/%s: %w", ns, app.Name, err)
	}
	now := metav1.Now()
	ready := metav1.Condition{Type: appv1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Available",
		Message: "the Deployment is available", ObservedGeneration: created.Generation, LastTransitionTime: now}
	if i%7 == 3 {
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, "PodsNotReady", "1 of 3 pods is not ready: ImagePullBackOff"
	}
	created.Status = appv1.AppStatus{
		ObservedGeneration: created.Generation,
		Conditions:         []metav1.Condition{ready},
		DeploymentStatus:   &appsv1.DeploymentStatus{Replicas: 3, ReadyReplicas: 3, AvailableReplicas: 3, UpdatedReplicas: 3},
	}
	if rolling {
		created.Status.Rollout = &appv1.RolloutStatus{
			Phase: appv1.RolloutPaused, CurrentStepIndex: 1, CanaryWeight: 25, StepStartedAt: &now,
			Message: "waiting to be promoted (kubectl app promote)",
			Stable:  &appv1.RolloutVersion{Revision: "1", PodTemplateHash: "5d4f8b7c9"},
			Canary:  &appv1.RolloutVersion{Revision: "2", PodTemplateHash: "7f6c5d8b4"},
		}
	}
	updated, err := apps.AppcontrollerV1().Apps(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		return 0, fmt.Errorf("writing the status of App %s/%s: %w", ns, app.Name, err)
	}
	data, err := json.Marshal(updated)
	return len(data), err
}

// gcLine matches a line of GODEBUG=gctrace=1: "gc N @...: ... A->B->C MB, ..."; C is the
// live heap the collection left.
var gcLine = regexp.MustCompile(`(?m)^gc \d+ @.*?(\d+)->(\d+)->(\d+) MB`)

// liveHeap returns the live heap, in MB, after the last collection that stderr reports.
func liveHeap(stderr string) string {
	m := gcLine.FindAllStringSubmatch(stderr, -1)
	if len(m) == 0 {
		return "?"
	}
	return m[len(m)-1][3]
}

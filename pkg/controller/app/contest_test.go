package app

import (
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	core "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// contestFixture is a fixture whose App's Deployment another writer ("hpa-like") scales.
type contestFixture struct {
	*fixture
	app   *appv1.App
	clock *clocktesting.FakePassiveClock
	rv    int
	// managedFields are the entries a get of the Deployment returns.
	managedFields []metav1.ManagedFieldsEntry
}

func newContestFixture(t *testing.T, replicas *int32) *contestFixture {
	t.Helper()
	app := newApp("test-app", testNow)
	app.Spec.DeploymentTemplate.Replicas = replicas
	app = syncedApp(t, app) // ObservedGeneration == Generation: drift is someone else's
	cf := &contestFixture{fixture: newFixture(t), app: app, rv: 100}
	// syncedApp's own fixture gave the App a resourceVersion from the same counter: the
	// status writes of this one must come after it, or the controller's own-writes cache
	// rightly ignores them as older than what its informer holds.
	if rv, err := strconv.Atoi(app.ResourceVersion); err == nil && cf.statusRV <= rv {
		cf.statusRV = rv + 1000
	}
	cf.clock = cf.c.clock.(*clocktesting.FakePassiveClock)
	// The fake API server keeps no managedFields of its own: a get answers with the
	// entries of the last scale.
	cf.kubeClient.PrependReactor("get", "deployments", func(action core.Action) (bool, runtime.Object, error) {
		obj, err := cf.kubeClient.Tracker().Get(action.GetResource(), action.GetNamespace(), action.(core.GetAction).GetName())
		if err != nil {
			return true, nil, err
		}
		d := obj.(*appsv1.Deployment).DeepCopy()
		d.ManagedFields = cf.managedFields
		return true, d, nil
	})
	cf.addApps(app)
	cf.addDeployments(liveDeployment(t, app))
	cf.addServices(liveService(t, app))
	return cf
}

// scale makes the other writer set the Deployment's replicas, as the API server and the
// cache then show it.
func (cf *contestFixture) scale(replicas int32) {
	cf.t.Helper()
	gvr := appsv1.SchemeGroupVersion.WithResource("deployments")
	obj, err := cf.kubeClient.Tracker().Get(gvr, "tcs", "test-app-deploy")
	if err != nil {
		cf.t.Fatal(err)
	}
	d := obj.(*appsv1.Deployment).DeepCopy()
	d.Spec.Replicas = ptr.To(replicas)
	cf.rv++
	d.ResourceVersion = strconv.Itoa(cf.rv)
	now := metav1.NewTime(cf.clock.Now())
	cf.managedFields = []metav1.ManagedFieldsEntry{
		{Manager: appv1.FieldManager, Operation: metav1.ManagedFieldsOperationApply, Time: &now},
		{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status", Time: &now},
		{Manager: "hpa-like", Operation: metav1.ManagedFieldsOperationUpdate, Time: &now},
	}
	if err := cf.kubeClient.Tracker().Update(gvr, d, "tcs"); err != nil {
		cf.t.Fatal(err)
	}
	cached := d.DeepCopy()
	cached.ManagedFields = nil
	if err := cf.inf.Deployments.Informer().GetIndexer().Update(cached); err != nil {
		cf.t.Fatal(err)
	}
}

// syncAt runs a sync at testNow+at and returns the number of writes to Deployments.
func (cf *contestFixture) syncAt(at time.Duration) int {
	cf.t.Helper()
	cf.clock.SetTime(testNow.Add(at))
	cf.requeues = nil
	if err := cf.sync("tcs", "test-app"); err != nil {
		cf.t.Fatal(err)
	}
	n := 0
	for _, w := range cf.writes() {
		if w.GetResource().Resource == "deployments" {
			n++
		}
	}
	// The informers catch up with the writes.
	if app, _, _ := cf.c.getApp(nameOf(cf.app)); app != nil {
		cf.app = app
		cf.addApps(app)
	}
	obj, err := cf.kubeClient.Tracker().Get(appsv1.SchemeGroupVersion.WithResource("deployments"), "tcs", "test-app-deploy")
	if err != nil {
		cf.t.Fatal(err)
	}
	d := obj.(*appsv1.Deployment).DeepCopy()
	d.ManagedFields = nil
	cf.rv++
	d.ResourceVersion = strconv.Itoa(cf.rv)
	if err := cf.inf.Deployments.Informer().GetIndexer().Update(d); err != nil {
		cf.t.Fatal(err)
	}
	return n
}

// TestContestedDeployment scales an App's Deployment behind its back again and again:
// each change is repaired with exactly one write until the third repair in a row, which
// makes the App Contested with a Warning naming the other writer; from then on repairs
// wait 5s, 10s, ... after the previous one (the App is queued again for that time), and
// the condition goes once the Deployment stayed as the App wants for the window.
func TestContestedDeployment(t *testing.T) {
	cf := newContestFixture(t, ptr.To[int32](2))
	steps := []struct {
		name          string
		at            time.Duration
		scale         bool
		wantWrites    int
		wantContested bool
		wantRequeue   time.Duration // 0: any
		wantEvent     string
	}{
		{name: "first change repaired", at: 0, scale: true, wantWrites: 1},
		{name: "second change repaired", at: time.Second, scale: true, wantWrites: 1},
		{name: "third repair makes it contested", at: 2 * time.Second, scale: true, wantWrites: 1, wantContested: true,
			wantEvent: `Warning Contested Deployment "test-app-deploy" was changed by field manager "hpa-like" and restored 3 times in a row; repairs now wait 5s`},
		{name: "nothing to do after the repair", at: 2500 * time.Millisecond, wantContested: true},
		{name: "change within the backoff waits", at: 3 * time.Second, scale: true, wantContested: true, wantRequeue: 4 * time.Second},
		{name: "still waiting", at: 6 * time.Second, wantContested: true, wantRequeue: time.Second},
		{name: "backoff over: one repair", at: 7 * time.Second, wantWrites: 1, wantContested: true},
		{name: "next change waits 10s", at: 8 * time.Second, scale: true, wantContested: true, wantRequeue: 9 * time.Second},
		{name: "repaired after 10s", at: 17 * time.Second, wantWrites: 1, wantContested: true},
		{name: "quiet for the window: cleared", at: 17*time.Second + DefaultContestWindow + 2*time.Second},
		{name: "a new change starts a new streak", at: 5 * time.Minute, scale: true, wantWrites: 1},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			cf.t = t
			if s.scale {
				cf.clock.SetTime(testNow.Add(s.at))
				cf.scale(7)
			}
			if got := cf.syncAt(s.at); got != s.wantWrites {
				t.Errorf("writes to the Deployment = %d, want %d", got, s.wantWrites)
			}
			c := meta.FindStatusCondition(cf.app.Status.Conditions, appv1.ConditionContested)
			if got := c != nil && c.Status == metav1.ConditionTrue; got != s.wantContested {
				t.Errorf("Contested = %+v, want present: %v", c, s.wantContested)
			}
			if c != nil && (c.Reason != appv1.ReasonCompetingWriter || !strings.Contains(c.Message, `"hpa-like"`)) {
				t.Errorf("Contested = %+v, want reason %s naming hpa-like", c, appv1.ReasonCompetingWriter)
			}
			if s.wantRequeue > 0 && (len(cf.requeues) != 1 || cf.requeues[0] != s.wantRequeue) {
				t.Errorf("requeued after %v, want once after %v", cf.requeues, s.wantRequeue)
			}
			var warnings []string
			for _, e := range cf.events() {
				if strings.HasPrefix(e, "Warning") {
					warnings = append(warnings, e)
				}
			}
			switch {
			case s.wantEvent == "" && len(warnings) > 0:
				t.Errorf("Warning Events = %q, want none", warnings)
			case s.wantEvent != "" && (len(warnings) != 1 || !strings.HasPrefix(warnings[0], s.wantEvent)):
				t.Errorf("Warning Events = %q, want one starting %q", warnings, s.wantEvent)
			}
		})
	}
}

// TestNoContestWithoutReplicas checks that an App without replicas never fights the
// writer that scales its Deployment: no write, no condition, however often it scales.
func TestNoContestWithoutReplicas(t *testing.T) {
	cf := newContestFixture(t, nil)
	for i := range 6 {
		at := time.Duration(i) * time.Second
		cf.clock.SetTime(testNow.Add(at))
		cf.scale(int32(3 + i))
		if got := cf.syncAt(at); got != 0 {
			t.Errorf("scale %d: %d writes to the Deployment, want 0", i, got)
		}
	}
	if c := meta.FindStatusCondition(cf.app.Status.Conditions, appv1.ConditionContested); c != nil {
		t.Errorf("Contested = %+v, want none", c)
	}
}

// TestContestBackoff checks the delays between repairs once contested.
func TestContestBackoff(t *testing.T) {
	tr := newContestTracker(ContestPolicy{Threshold: 3, InitialBackoff: time.Second, MaxBackoff: 5 * time.Second}, nil)
	for _, tc := range []struct {
		repairs int
		want    time.Duration
	}{
		{0, 0}, {2, 0}, {3, time.Second}, {4, 2 * time.Second}, {5, 4 * time.Second}, {6, 5 * time.Second}, {60, 5 * time.Second},
	} {
		t.Run(strconv.Itoa(tc.repairs), func(t *testing.T) {
			if got := tr.backoff(&contestState{repairs: tc.repairs}); got != tc.want {
				t.Errorf("backoff after %d repairs = %v, want %v", tc.repairs, got, tc.want)
			}
		})
	}
}

// TestOtherManager checks which field manager a Contested Warning names.
func TestOtherManager(t *testing.T) {
	at := func(s int) *metav1.Time { v := metav1.NewTime(testNow.Add(time.Duration(s) * time.Second)); return &v }
	for _, tc := range []struct {
		name    string
		entries []metav1.ManagedFieldsEntry
		want    string
	}{
		{"none", nil, ""},
		{"only ours", []metav1.ManagedFieldsEntry{{Manager: appv1.FieldManager, Time: at(1)}}, ""},
		{"status writers ignored", []metav1.ManagedFieldsEntry{
			{Manager: "kubectl", Subresource: "scale", Time: at(1)},
			{Manager: "kube-controller-manager", Subresource: "status", Time: at(9)},
		}, "kubectl"},
		{"newest wins", []metav1.ManagedFieldsEntry{
			{Manager: "old-tool", Time: at(1)}, {Manager: "hpa-like", Time: at(5)}, {Manager: appv1.FieldManager, Time: at(9)},
		}, "hpa-like"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{ManagedFields: tc.entries}}
			if got := otherManager(d); got != tc.want {
				t.Errorf("otherManager = %q, want %q", got, tc.want)
			}
		})
	}
}

package reliability

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/app-controller/app-controller/test/harness"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// auditEvent is an audit event of the API server (harness.AuditEvent) as these tests
// read it: by the identity of the controller instance that made the request.
type auditEvent struct{ harness.AuditEvent }

// who is the impersonated user of the request, "" if none.
func (ev auditEvent) who() identity { return identity(ev.Impersonated()) }

func (ev auditEvent) String() string {
	ref := ev.ObjectRef
	if ref == nil {
		return fmt.Sprintf("%s %s %s (%d)", ev.who(), ev.Verb, ev.RequestURI, ev.Code())
	}
	return fmt.Sprintf("%s %s %s %s/%s (%d)", ev.who(), ev.Verb, ev.Resource(), ref.Namespace, ref.Name, ev.Code())
}

// audit returns the audit events of requests made by ids (any identity if none given)
// received at or after since.
func audit(t *testing.T, since time.Time, ids ...identity) []auditEvent {
	t.Helper()
	return auditWhere(t, func(_ int, ev auditEvent) bool { return !ev.RequestReceived.Before(since) }, ids...)
}

// auditMark returns the number of events in the audit log now, for auditFrom.
func auditMark(t *testing.T) int {
	t.Helper()
	n := 0
	auditWhere(t, func(i int, _ auditEvent) bool { n = i + 1; return false })
	return n
}

// auditFrom returns the audit events of requests made by ids (any identity if none
// given) written after the first mark events of the log (auditMark): by their place in
// the log, not by their time, which a step of the wall clock would mislead.
func auditFrom(t *testing.T, mark int, ids ...identity) []auditEvent {
	t.Helper()
	return auditWhere(t, func(i int, _ auditEvent) bool { return i >= mark }, ids...)
}

// auditWhere returns the audit events of requests made by ids (any identity if none
// given) that keep, given their index in the log, accepts; writes only once complete.
func auditWhere(t *testing.T, keep func(int, auditEvent) bool, ids ...identity) []auditEvent {
	t.Helper()
	var out []auditEvent
	i := -1
	err := harness.NewAuditLog(framework.Cluster().AuditLogPath).Read(func(e harness.AuditEvent) error {
		i++
		ev := auditEvent{e}
		if !keep(i, ev) || ev.IsWrite() && ev.Stage != "ResponseComplete" {
			return nil
		}
		if len(ids) > 0 && !slices.Contains(ids, ev.who()) {
			return nil
		}
		out = append(out, ev)
		return nil
	})
	if err != nil {
		t.Fatalf("reading the audit log: %v", err)
	}
	return out
}

// writes summarises the write requests of events: the total, and counts by
// "verb resource" (failed ones apart).
func writes(events []auditEvent) (int, map[string]int) {
	n := 0
	by := map[string]int{}
	for _, ev := range events {
		if !ev.IsWrite() {
			continue
		}
		n++
		key := ev.Verb + " " + ev.Resource()
		if ev.Code() >= 300 {
			key += fmt.Sprintf(" (%d)", ev.Code())
		}
		by[key]++
	}
	return n, by
}

// onlyOwnWrites fails the test if a write of events is not one the App controller may
// make in namespace ns: its Apps' status, their children (NAME-deploy, NAME-svc, a
// PodDisruptionBudget NAME-deploy), the revisions of their specs (NAME-HASH),
// Events, and the Leases of leader election in leaseNS ("" if none). The namespaces of
// earlier tests, being deleted, may still hold Apps the controller syncs: writes of the
// same kinds there are allowed too.
func onlyOwnWrites(t *testing.T, events []auditEvent, ns, leaseNS string) {
	t.Helper()
	client := framework.Client(t)
	ours := func(other string) bool {
		if other == ns {
			return true
		}
		n, err := client.CoreV1().Namespaces().Get(context.Background(), other, metav1.GetOptions{})
		return err != nil && strings.Contains(err.Error(), "not found") || err == nil && n.Status.Phase == corev1.NamespaceTerminating
	}
	for _, ev := range events {
		if !ev.IsWrite() || ev.ObjectRef == nil {
			continue
		}
		ref := ev.ObjectRef
		ok := false
		switch ev.Resource() {
		case "apps/status":
			ok = ours(ref.Namespace)
		case "deployments":
			ok = ours(ref.Namespace) && strings.HasPrefix(ref.Name, "app-") && strings.HasSuffix(ref.Name, "-deploy")
		case "services":
			ok = ours(ref.Namespace) && strings.HasPrefix(ref.Name, "app-") && strings.HasSuffix(ref.Name, "-svc")
		case "controllerrevisions":
			// The revisions of the Apps' specs, NAME-HASH.
			ok = ours(ref.Namespace) && strings.HasPrefix(ref.Name, "app-")
		case "poddisruptionbudgets":
			ok = ours(ref.Namespace) && strings.HasPrefix(ref.Name, "app-") && strings.HasSuffix(ref.Name, "-deploy")
		case "events":
			ok = ours(ref.Namespace)
		case "leases":
			ok = leaseNS != "" && ref.Namespace == leaseNS
		}
		if !ok {
			t.Errorf("a write the controller must not make: %s", ev)
		}
	}
}

// logWrites logs the writes of events in namespace ns, and returns their number.
func logWrites(t *testing.T, what, ns string, events []auditEvent) int {
	t.Helper()
	var in []auditEvent
	for _, ev := range events {
		if ev.ObjectRef != nil && ev.ObjectRef.Namespace == ns {
			in = append(in, ev)
		}
	}
	n, by := writes(in)
	t.Logf("%s: %d writes %v", what, n, by)
	failed := 0
	for _, ev := range in {
		if ev.IsWrite() && ev.Code() >= 400 && failed < 5 {
			failed++
			t.Logf("failed write: %s: %s", ev, ev.ResponseStatus.Message)
		}
	}
	return n
}

// containsInitialEvents: a watch request that starts with the current state (a watch
// list, client-go's replacement of the initial list).
func containsInitialEvents(uri string) bool {
	return strings.Contains(uri, "sendInitialEvents=true")
}

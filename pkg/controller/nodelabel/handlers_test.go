package nodelabel

import (
	"errors"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/app-controller/app-controller/pkg/controller"
)

func TestUpdateNode(t *testing.T) {
	base := func() *corev1.Node {
		n := newNode("n1", "kwok://n1", map[string]string{"type": "kwok"})
		n.Annotations = map[string]string{controller.AppliedConfigHashAnnotation: "h1"}
		return n
	}
	tests := []struct {
		name   string
		change func(*corev1.Node)
		want   []string
	}{
		{name: "resync (same resourceVersion)", change: func(n *corev1.Node) {}, want: nil},
		{name: "status only (heartbeat)", change: func(n *corev1.Node) {
			n.ResourceVersion = "2"
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		}, want: nil},
		{name: "other annotation", change: func(n *corev1.Node) {
			n.ResourceVersion = "2"
			n.Annotations = map[string]string{controller.AppliedConfigHashAnnotation: "h1", "other": "x"}
		}, want: nil},
		{name: "label added", change: func(n *corev1.Node) {
			n.ResourceVersion = "2"
			n.Labels = map[string]string{"type": "kwok", "pool": "gpu"}
		}, want: []string{"n1"}},
		{name: "label removed", change: func(n *corev1.Node) {
			n.ResourceVersion = "2"
			n.Labels = nil
		}, want: []string{"n1"}},
		{name: "provider ID", change: func(n *corev1.Node) {
			n.ResourceVersion = "2"
			n.Spec.ProviderID = "aws://n1"
		}, want: []string{"n1"}},
		{name: "hash annotation", change: func(n *corev1.Node) {
			n.ResourceVersion = "2"
			n.Annotations = nil
		}, want: []string{"n1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, kwokRules)
			logger, _ := ktesting.NewTestContext(t)
			old, cur := base(), base()
			tt.change(cur)
			f.c.nodeHandlers(logger).OnUpdate(old, cur)
			if got := f.queued(); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("queued %v, want %v", got, tt.want)
			}
		})
	}
}

func TestAddAndDeleteNode(t *testing.T) {
	node := newNode("n1", "kwok://n1", nil)
	tests := []struct {
		name   string
		handle func(c *Controller, logger klog.Logger)
		want   []string
	}{
		{"add", func(c *Controller, l klog.Logger) { c.nodeHandlers(l).OnAdd(node, false) }, []string{"n1"}},
		{"add of something else", func(c *Controller, l klog.Logger) { c.nodeHandlers(l).OnAdd(&corev1.Pod{}, false) }, nil},
		{"delete", func(c *Controller, l klog.Logger) { c.nodeHandlers(l).OnDelete(node) }, []string{"n1"}},
		{"delete tombstone", func(c *Controller, l klog.Logger) {
			c.nodeHandlers(l).OnDelete(cache.DeletedFinalStateUnknown{Key: "n1", Obj: node})
		}, []string{"n1"}},
		{"delete tombstone of something else", func(c *Controller, l klog.Logger) {
			c.nodeHandlers(l).OnDelete(cache.DeletedFinalStateUnknown{Key: "x", Obj: "garbage"})
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, kwokRules)
			logger, _ := ktesting.NewTestContext(t)
			tt.handle(f.c, logger)
			if got := f.queued(); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("queued %v, want %v", got, tt.want)
			}
		})
	}
}

func TestRateLimiterCapsAtSeedDelay(t *testing.T) {
	rl := newRateLimiter()
	key := cache.ObjectName{Name: "n1"}
	if d := rl.When(key); d != BaseRetryDelay {
		t.Errorf("first delay %s, want %s", d, BaseRetryDelay)
	}
	if d := rl.When(key); d != 2*BaseRetryDelay {
		t.Errorf("second delay %s, want %s", d, 2*BaseRetryDelay)
	}
	var last time.Duration
	for range 20 {
		last = rl.When(key)
		if last > MaxRetryDelay {
			t.Fatalf("delay %s above the cap %s", last, MaxRetryDelay)
		}
	}
	if last != MaxRetryDelay {
		t.Errorf("delay after many failures %s, want the cap %s", last, MaxRetryDelay)
	}
	if MaxRetryDelay != 30*time.Second {
		t.Errorf("MaxRetryDelay = %s, want the seed's 30s", MaxRetryDelay)
	}
}

func TestHandleErrRetriesForever(t *testing.T) {
	f := newFixture(t, kwokRules)
	_, ctx := ktesting.NewTestContext(t)
	f.createNode(kwokNode("n1", nil), "kwok")
	key := cache.ObjectName{Name: "n1"}
	for i := range 15 {
		f.c.loop.HandleErr(ctx, key, errTest)
		if got := f.c.loop.Queue().NumRequeues(key); got != i+1 {
			t.Fatalf("after %d failures NumRequeues = %d", i+1, got)
		}
	}
	if got := eventReasons(f.events()); !reflect.DeepEqual(got, []string{controller.ReasonSyncFailed}) {
		t.Errorf("events = %v, want one %s for the streak", got, controller.ReasonSyncFailed)
	}
	f.c.loop.HandleErr(ctx, key, nil)
	if got := f.c.loop.Queue().NumRequeues(key); got != 0 {
		t.Errorf("success did not reset the backoff: NumRequeues = %d", got)
	}
}

// errTest is a sync error.
var errTest = errors.New("test failure")

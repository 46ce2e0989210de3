package controllermanager

import (
	"context"
	"errors"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2/ktesting"
)

// TestDiscoverHTTPRoutes checks the Gateway API discovery at start: served or not, and
// an API server that cannot answer yet is asked again instead of failing the start (a
// process that exits on it would crash-loop while the API server is away).
func TestDiscoverHTTPRoutes(t *testing.T) {
	served := &metav1.APIResourceList{APIResources: []metav1.APIResource{{Name: "gateways"}, {Name: "httproutes"}}}
	withoutRoutes := &metav1.APIResourceList{APIResources: []metav1.APIResource{{Name: "gateways"}}}
	notFound := apierrors.NewNotFound(schema.GroupResource{Group: "gateway.networking.k8s.io"}, "v1")
	unreachable := errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")
	for _, tc := range []struct {
		name    string
		answers []error // the errors of the first calls; then the list
		list    *metav1.APIResourceList
		want    bool
		calls   int
	}{
		{name: "served", list: served, want: true, calls: 1},
		{name: "no HTTPRoutes in the group", list: withoutRoutes, calls: 1},
		{name: "no such group", answers: []error{notFound}, calls: 1},
		{name: "away twice, then served", answers: []error{unreachable, unreachable}, list: served, want: true, calls: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			calls := 0
			got, err := discoverHTTPRoutes(ctx, func(gv string) (*metav1.APIResourceList, error) {
				calls++
				if gv != "gateway.networking.k8s.io/v1" {
					t.Errorf("asked for %q", gv)
				}
				if calls <= len(tc.answers) {
					return nil, tc.answers[calls-1]
				}
				return tc.list, nil
			}, time.Millisecond)
			if err != nil || got != tc.want || calls != tc.calls {
				t.Errorf("got %v, %v after %d calls; want %v after %d", got, err, calls, tc.want, tc.calls)
			}
		})
	}

	t.Run("away until the context ends", func(t *testing.T) {
		_, ctx := ktesting.NewTestContext(t)
		ctx, cancel := context.WithCancel(ctx)
		calls := 0
		_, err := discoverHTTPRoutes(ctx, func(string) (*metav1.APIResourceList, error) {
			if calls++; calls == 3 {
				cancel()
			}
			return nil, unreachable
		}, time.Millisecond)
		if err == nil || !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want the context's end", err)
		}
	})
}

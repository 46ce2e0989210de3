package app

import (
	"strings"
	"testing"

	"github.com/app-controller/app-controller/pkg/controllermanager"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// TestAppSelectorShards runs two instances with disjoint --app-selector: each reconciles
// the Apps its selector picks, and writes nothing for the other's.
func TestAppSelectorShards(t *testing.T) {
	c := newClients(t)
	ns := framework.Namespace(t)
	shard := func(sel string) *manager {
		opts := controllermanager.NewOptions()
		opts.AppSelector = sel
		return startManagerWith(t, opts)
	}
	a, b := shard("shard=a"), shard("shard=b")
	for _, name := range []string{"a", "b"} {
		app := newApp(ns, "app-"+name, "nginx", 1)
		app.Labels = map[string]string{"shard": name}
		c.create(t, app)
	}
	c.waitReady(t, ns, "app-a")
	c.waitReady(t, ns, "app-b")
	for _, tc := range []struct {
		m          *manager
		own, other string
	}{{a, "app-a", "app-b"}, {b, "app-b", "app-a"}} {
		var own, other int
		for _, w := range tc.m.writesIn(ns) {
			switch {
			case strings.Contains(w, "/"+tc.own):
				own++
			case strings.Contains(w, "/"+tc.other):
				other++
			}
		}
		if own == 0 || other != 0 {
			t.Errorf("the instance of %s wrote %d times for it and %d times for %s; want some and none", tc.own, own, other, tc.other)
		}
	}
}

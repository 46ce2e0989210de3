package app

import (
	"testing"
	"time"
)

// TestReadyToReport: an App is urgent in the queue when its Deployment rolled out and is
// available and the App does not say Ready at its generation yet; the controller's queue
// hands such an App out before new Apps queued earlier.
func TestReadyToReport(t *testing.T) {
	created := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	fresh := newApp("fresh", created)                     // no Deployment yet
	rolling := newApp("rolling", created)                 // Deployment not available
	available := newApp("available", created)             // Deployment available, App not Ready
	reported := syncedApp(t, newApp("reported", created)) // Ready at its generation
	changed := syncedApp(t, newApp("changed", created))   // Ready at an older generation
	changed.Generation = 2

	f := newFixture(t)
	f.addApps(fresh, rolling, available, reported, changed)
	notAvailable := liveDeployment(t, rolling)
	notAvailable.Status.AvailableReplicas, notAvailable.Status.UpdatedReplicas = 0, 0
	changedDeployment := liveDeployment(t, changed)
	f.addDeployments(notAvailable, liveDeployment(t, available), liveDeployment(t, reported), changedDeployment)

	for app, want := range map[string]bool{"fresh": false, "rolling": false, "available": true, "reported": false, "changed": true, "gone": false} {
		if got := f.c.readyToReport(nameOf(newApp(app, created))); got != want {
			t.Errorf("readyToReport(%s) = %v, want %v", app, got, want)
		}
	}

	// Through the controller's own queue: the available App, queued last, comes first.
	q := f.c.loop.Queue()
	for _, name := range []string{"fresh", "rolling", "reported", "available"} {
		q.Add(nameOf(newApp(name, created)))
	}
	var order []string
	for q.Len() > 0 {
		key, _ := q.Get()
		order = append(order, key.Name)
		q.Done(key)
	}
	if want := []string{"available", "fresh", "rolling", "reported"}; !equalStrings(order, want) {
		t.Errorf("queue order %v, want %v", order, want)
	}
}

package controllermanager

import (
	"context"

	"k8s.io/client-go/tools/record"
)

// eventCacheSize is how many recent Events the Event broadcaster's correlator remembers,
// in each of its three caches (client-go's default: 4096). The correlator turns an Event
// that repeats within 10 minutes into a count on the one already written (a patch), and
// bounds the Events of one object (a burst of 25, then one per 5 minutes). The
// controllers record an Event when something changes, not at each sync, so what repeats
// is an object that keeps failing, which stays among the most recent; the others only
// held memory: about 1.3 KB per object with an Event, up to 4096 objects, 5.3 MB
// (BenchmarkEventBroadcasterFootprint: 1305 heap bytes per object at 1000 objects with
// client-go's default, 374 with this one).
const eventCacheSize = 256

// newEventBroadcaster returns the Event broadcaster of one set of controllers.
func newEventBroadcaster(ctx context.Context) record.EventBroadcaster {
	return record.NewBroadcaster(record.WithContext(ctx),
		record.WithCorrelatorOptions(record.CorrelatorOptions{LRUCacheSize: eventCacheSize}))
}

package controllermanager

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"

	"github.com/app-controller/app-controller/pkg/controller/controllertest"
)

// sinkCall is one write of an Event: "create" or "patch", of the Event about object.
type sinkCall struct {
	op, object string
}

// recordingSink stands for the API server's Events: it sends each write on calls.
type recordingSink struct {
	calls chan sinkCall
}

func (s recordingSink) Create(e *corev1.Event) (*corev1.Event, error) {
	s.calls <- sinkCall{"create", e.InvolvedObject.Name}
	written := e.DeepCopy()
	written.ResourceVersion = "1"
	return written, nil
}

func (s recordingSink) Update(e *corev1.Event) (*corev1.Event, error) {
	s.calls <- sinkCall{"update", e.InvolvedObject.Name}
	return e, nil
}

func (s recordingSink) Patch(e *corev1.Event, _ []byte) (*corev1.Event, error) {
	s.calls <- sinkCall{"patch", e.InvolvedObject.Name}
	return e, nil
}

// eventObject is the object of an Event, named name.
func eventObject(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns",
		UID: types.UID("0b5f1e0c-1b9a-4c55-9a8e-" + name), ResourceVersion: "42"}}
}

// TestEventBroadcasterCache checks what the correlator's smaller cache keeps: an Event
// repeated at once is a count on the Event already written (a patch), and one repeated
// after eventCacheSize other objects had Events is written anew.
func TestEventBroadcasterCache(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	broadcaster := newEventBroadcaster(ctx)
	defer broadcaster.Shutdown()
	sink := recordingSink{calls: make(chan sinkCall, eventCacheSize+10)}
	broadcaster.StartRecordingToSink(sink)
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "test"})

	var want []sinkCall
	event := func(name string, op string) {
		recorder.Event(eventObject(name), corev1.EventTypeWarning, "SyncFailed", "Sync failed, will retry")
		want = append(want, sinkCall{op, name})
	}
	event("failing", "create")
	event("failing", "patch")
	for i := range eventCacheSize {
		event(fmt.Sprintf("other-%d", i), "create")
	}
	event("failing", "create")

	for i, w := range want {
		select {
		case got := <-sink.calls:
			if got != w {
				t.Fatalf("write %d: %+v, want %+v", i, got, w)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("write %d (%+v) never came", i, w)
		}
	}
}

// BenchmarkEventBroadcasterFootprint measures the heap the Event broadcaster keeps per
// object that had an Event, for 1000 objects with an Event each, with client-go's
// default correlator and with newEventBroadcaster's.
func BenchmarkEventBroadcasterFootprint(b *testing.B) {
	const objects = 1000
	for _, bc := range []struct {
		name string
		new  func(context.Context) record.EventBroadcaster
	}{
		{"client-go default", func(ctx context.Context) record.EventBroadcaster {
			return record.NewBroadcaster(record.WithContext(ctx))
		}},
		{"newEventBroadcaster", newEventBroadcaster},
	} {
		b.Run(bc.name, func(b *testing.B) {
			names := make([]*corev1.Pod, objects)
			for i := range names {
				names[i] = eventObject(fmt.Sprintf("app-%05d", i))
			}
			for b.Loop() {
				ctx, cancel := context.WithCancel(context.Background())
				before := controllertest.HeapInUse()
				broadcaster := bc.new(ctx)
				sink := recordingSink{calls: make(chan sinkCall, objects)}
				broadcaster.StartRecordingToSink(sink)
				recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "bench"})
				for _, o := range names {
					recorder.Event(o, corev1.EventTypeNormal, "Synced", "App synced successfully")
				}
				for range objects {
					<-sink.calls
				}
				b.ReportMetric(float64(controllertest.HeapInUse()-before)/objects, "heap-bytes/object")
				broadcaster.Shutdown()
				cancel()
			}
		})
	}
}

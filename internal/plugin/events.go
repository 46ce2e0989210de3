package plugin

import (
	"context"
	"fmt"
	"io"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/printers"
)

// maxEvents is how many of an App's Events status shows, the most recent ones.
const maxEvents = 10

// eventResource is the resource of core/v1 Events: it shows the Events written through
// events.k8s.io/v1 too, with the same fields.
var eventResource = corev1.SchemeGroupVersion.WithResource("events")

// appEvents returns the Events about the object of UID uid in namespace, the most
// recent last, at most maxEvents. The server selects them by involvedObject.uid; the
// selection is checked again here.
func appEvents(ctx context.Context, c Clients, namespace string, uid types.UID) ([]corev1.Event, error) {
	selector := fields.OneTermEqualSelector("involvedObject.uid", string(uid)).String()
	var events []corev1.Event
	client := c.Dynamic.Resource(eventResource).Namespace(namespace)
	err := paged(ctx, func(opts metav1.ListOptions) (string, error) {
		opts.FieldSelector = selector
		list, err := client.List(ctx, opts)
		if err != nil {
			return "", err
		}
		for _, u := range list.Items {
			var e corev1.Event
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &e); err != nil {
				return "", fmt.Errorf("decoding Event %s: %w", u.GetName(), err)
			}
			if e.InvolvedObject.UID == uid {
				events = append(events, e)
			}
		}
		return list.GetContinue(), nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing the Events of namespace %s about UID %s: %w", namespace, uid, err)
	}
	return recentEvents(events), nil
}

// recentEvents sorts events by when they last happened and returns the most recent
// maxEvents, the latest last (status and the dashboard show these).
func recentEvents(events []corev1.Event) []corev1.Event {
	sort.SliceStable(events, func(i, j int) bool { return lastSeen(&events[i]).Before(lastSeen(&events[j])) })
	if len(events) > maxEvents {
		events = events[len(events)-maxEvents:]
	}
	return events
}

// lastSeen is when e last happened: its last timestamp, else the last observation of
// its series, else its event time, else its creation.
func lastSeen(e *corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return e.Series.LastObservedTime.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

// firstSeen is when e first happened: its first timestamp, else its event time, else
// its creation.
func firstSeen(e *corev1.Event) time.Time {
	switch {
	case !e.FirstTimestamp.IsZero():
		return e.FirstTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

// eventAge is the AGE column of an Event as `kubectl describe` shows it: "5m", or
// "2m (x3 over 10m)" for an Event seen several times.
func eventAge(e *corev1.Event, now time.Time) string {
	count := e.Count
	if e.Series != nil && e.Series.Count > count {
		count = e.Series.Count
	}
	last := age(metav1.NewTime(lastSeen(e)), now)
	if count > 1 {
		return fmt.Sprintf("%s (x%d over %s)", last, count, age(metav1.NewTime(firstSeen(e)), now))
	}
	return last
}

// eventSource is the FROM column: the reporting controller, else the source component.
func eventSource(e *corev1.Event) string {
	switch {
	case e.ReportingController != "":
		return e.ReportingController
	case e.Source.Component != "":
		return e.Source.Component
	}
	return "<unknown>"
}

// startSection starts a section of status after a blank line: its title, then the note
// (why the section could not be read) or <none> in place of an empty table. It reports
// whether the table follows.
func startSection(w io.Writer, title, note string, rows int) bool {
	fmt.Fprintln(w)
	switch {
	case note != "":
		fmt.Fprintf(w, "%s:  %s\n", title, oneLine(note))
		return false
	case rows == 0:
		fmt.Fprintf(w, "%s:  <none>\n", title)
		return false
	}
	fmt.Fprintf(w, "%s:\n", title)
	return true
}

// printEvents writes the Events section of status, as `kubectl describe` does.
func printEvents(w io.Writer, events []corev1.Event, note string, now time.Time) error {
	if !startSection(w, "Events", note, len(events)) {
		return nil
	}
	tw := printers.GetNewTabWriter(w)
	fmt.Fprintln(tw, "  TYPE\tREASON\tAGE\tFROM\tMESSAGE")
	for i := range events {
		e := &events[i]
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", e.Type, e.Reason, eventAge(e, now), eventSource(e), oneLine(e.Message))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("writing the Events: %w", err)
	}
	return nil
}

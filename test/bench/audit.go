package bench

import (
	"sync"
	"time"

	"github.com/app-controller/app-controller/test/harness"
)

// write is one non-read request of an audited user, as the apiserver's audit log
// records it.
type write struct {
	user string
	// writer is who wrote: the user, or for the admin identity that the control plane's
	// components share, the component (see writer).
	writer string
	// kind is "VERB resource[/subresource]", e.g. "create deployments", "patch apps/status".
	kind string
	// code is the HTTP status code of the response.
	code int
	// at is when the apiserver completed the request.
	at time.Time
}

// parseAuditLine parses one line of the audit log (JSON format). ok is false for a line
// that records no request on a resource (non-resource URLs).
func parseAuditLine(line []byte) (write, bool, error) {
	ev, err := harness.ParseAuditEvent(line)
	if err != nil {
		return write{}, false, err
	}
	return auditWrite(ev)
}

// auditWrite is the write ev records; ok is false for a request on no resource.
func auditWrite(ev harness.AuditEvent) (write, bool, error) {
	if ev.Resource() == "" {
		return write{}, false, nil
	}
	return write{user: ev.User.Username, writer: writer(ev.User.Username, ev.UserAgent), kind: ev.Verb + " " + ev.Resource(), code: ev.Code(), at: ev.StageTimestamp}, true, nil
}

// auditLog reads the apiserver's audit log as it grows and keeps every write of the
// audited users.
type auditLog struct {
	log *harness.AuditLog

	mu     sync.Mutex
	writes []write
}

func newAuditLog(path string) *auditLog { return &auditLog{log: harness.NewAuditLog(path)} }

// read parses the lines appended since the last read; a partial last line is left for
// the next read.
func (a *auditLog) read() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.log.Read(func(ev harness.AuditEvent) error {
		if w, ok, _ := auditWrite(ev); ok {
			a.writes = append(a.writes, w)
		}
		return nil
	})
}

// writeCounts are writes counted by kind.
type writeCounts map[string]int

// total is the number of writes of every kind.
func (c writeCounts) total() int {
	n := 0
	for _, v := range c {
		n += v
	}
	return n
}

// events is the number of writes to events (core or events.k8s.io).
func (c writeCounts) events() int {
	n := 0
	for k, v := range c {
		if isEventKind(k) {
			n += v
		}
	}
	return n
}

// isEventKind tells whether a write kind writes an Event.
func isEventKind(kind string) bool {
	_, resource, _ := cutLast(kind, " ")
	return resource == "events"
}

func cutLast(s, sep string) (string, string, bool) {
	for i := len(s) - len(sep); i >= 0; i-- {
		if s[i:i+len(sep)] == sep {
			return s[:i], s[i+len(sep):], true
		}
	}
	return s, "", false
}

// count reads the log up to to (see all) and counts user's writes completed in
// [from, to).
func (a *auditLog) count(user string, from, to time.Time) (writeCounts, error) {
	writes, err := a.all(to)
	if err != nil {
		return nil, err
	}
	return countWrites(writes, user, from, to), nil
}

// all reads the log up to now, after waiting until a second past to (the apiserver
// writes an event after its response), and returns a copy of every write read so far.
func (a *auditLog) all(to time.Time) ([]write, error) {
	if wait := time.Until(to.Add(time.Second)); wait > 0 {
		time.Sleep(wait)
	}
	if err := a.read(); err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]write(nil), a.writes...), nil
}

// countWrites counts user's writes in [from, to) by kind.
func countWrites(writes []write, user string, from, to time.Time) writeCounts {
	c := writeCounts{}
	for _, w := range writes {
		if w.user == user && !w.at.Before(from) && w.at.Before(to) {
			c[w.kind]++
		}
	}
	return c
}

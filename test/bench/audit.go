package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// write is one non-read request of an audited user, as the apiserver's audit log
// records it.
type write struct {
	user string
	// kind is "VERB resource[/subresource]", e.g. "create deployments", "patch apps/status".
	kind string
	// code is the HTTP status code of the response.
	code int
	// at is when the apiserver completed the request.
	at time.Time
}

// auditEvent holds the fields of an audit.k8s.io/v1 Event the harness reads.
type auditEvent struct {
	Verb string `json:"verb"`
	User struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	StageTimestamp time.Time `json:"stageTimestamp"`
}

// parseAuditLine parses one line of the audit log (JSON format). ok is false for a line
// that records no request on a resource (non-resource URLs).
func parseAuditLine(line []byte) (write, bool, error) {
	var ev auditEvent
	if err := json.Unmarshal(line, &ev); err != nil {
		return write{}, false, fmt.Errorf("parsing an audit event: %w", err)
	}
	if ev.ObjectRef == nil || ev.ObjectRef.Resource == "" {
		return write{}, false, nil
	}
	kind := ev.Verb + " " + ev.ObjectRef.Resource
	if ev.ObjectRef.Subresource != "" {
		kind += "/" + ev.ObjectRef.Subresource
	}
	w := write{user: ev.User.Username, kind: kind, at: ev.StageTimestamp}
	if ev.ResponseStatus != nil {
		w.code = ev.ResponseStatus.Code
	}
	return w, true, nil
}

// auditLog reads the apiserver's audit log as it grows and keeps every write of the
// audited users.
type auditLog struct {
	path string

	mu     sync.Mutex
	offset int64
	writes []write
}

func newAuditLog(path string) *auditLog { return &auditLog{path: path} }

// read parses the lines appended since the last read; a partial last line is left for
// the next read.
func (a *auditLog) read() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	f, err := os.Open(a.path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("opening the audit log: %w", err)
	}
	defer f.Close()
	if _, err := f.Seek(a.offset, io.SeekStart); err != nil {
		return fmt.Errorf("reading the audit log: %w", err)
	}
	r := bufio.NewReaderSize(f, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if err == io.EOF {
			return nil // a partial line (no newline yet) is read again next time
		}
		if err != nil {
			return fmt.Errorf("reading the audit log: %w", err)
		}
		a.offset += int64(len(line))
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		w, ok, err := parseAuditLine(line)
		if err != nil {
			return err
		}
		if ok {
			a.writes = append(a.writes, w)
		}
	}
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

// count reads the log up to now (after a short wait: the apiserver writes an event after
// its response) and counts user's writes completed in [from, to).
func (a *auditLog) count(user string, from, to time.Time) (writeCounts, error) {
	if wait := time.Until(to.Add(time.Second)); wait > 0 {
		time.Sleep(wait)
	}
	if err := a.read(); err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return countWrites(a.writes, user, from, to), nil
}

// lastWrite returns the time of user's last write after from, or from if none.
func (a *auditLog) lastWrite(user string, from time.Time) (time.Time, error) {
	if err := a.read(); err != nil {
		return time.Time{}, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	last := from
	for _, w := range a.writes {
		if w.user == user && w.at.After(last) {
			last = w.at
		}
	}
	return last, nil
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

package harness

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// AuditEvent is the part of a kube-apiserver audit event (audit.k8s.io/v1, JSON) that
// the benchmark and the tests read.
type AuditEvent struct {
	Stage      string `json:"stage"`
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	UserAgent  string `json:"userAgent"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	ImpersonatedUser *struct {
		Username string `json:"username"`
	} `json:"impersonatedUser"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"responseStatus"`
	// RequestObject and ResponseObject are the bodies, logged at level Request and
	// RequestResponse only (localcluster.Options.AuditBodies).
	RequestObject   json.RawMessage `json:"requestObject,omitempty"`
	ResponseObject  json.RawMessage `json:"responseObject,omitempty"`
	RequestReceived time.Time       `json:"requestReceivedTimestamp"`
	StageTimestamp  time.Time       `json:"stageTimestamp"`
}

// ParseAuditEvent parses one line of the audit log.
func ParseAuditEvent(line []byte) (AuditEvent, error) {
	var ev AuditEvent
	if err := json.Unmarshal(line, &ev); err != nil {
		return AuditEvent{}, fmt.Errorf("parsing an audit event: %w", err)
	}
	return ev, nil
}

// Impersonated is the impersonated user of the request, "" if none.
func (ev AuditEvent) Impersonated() string {
	if ev.ImpersonatedUser == nil {
		return ""
	}
	return ev.ImpersonatedUser.Username
}

// IsWrite reports whether the request could change an object.
func (ev AuditEvent) IsWrite() bool {
	switch ev.Verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// Code is the response code, 0 if unknown.
func (ev AuditEvent) Code() int {
	if ev.ResponseStatus == nil {
		return 0
	}
	return ev.ResponseStatus.Code
}

// Resource is "resource[/subresource]", "" for a request on no resource.
func (ev AuditEvent) Resource() string {
	if ev.ObjectRef == nil {
		return ""
	}
	if ev.ObjectRef.Subresource != "" {
		return ev.ObjectRef.Resource + "/" + ev.ObjectRef.Subresource
	}
	return ev.ObjectRef.Resource
}

// AuditLog reads an API server's audit log as it grows.
type AuditLog struct {
	path   string
	offset int64
}

// NewAuditLog returns a reader of the audit log at path, from its start.
func NewAuditLog(path string) *AuditLog { return &AuditLog{path: path} }

// Read passes each event appended since the last Read to each, in order. A partial last
// line (the API server is writing it) is left for the next Read; a log not written yet
// holds no event. An error of each stops the read.
func (a *AuditLog) Read(each func(AuditEvent) error) error {
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
		if errors.Is(err, io.EOF) {
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
		ev, err := ParseAuditEvent(line)
		if err != nil {
			return err
		}
		if err := each(ev); err != nil {
			return err
		}
	}
}

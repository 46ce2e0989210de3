package soak

import (
	"context"
	"regexp"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// The controller runs in two shards of two instances each (leader election in each),
// as processes (fleet_process.go) or as the chart's pods (fleet_chart.go). A fleet
// starts them, lists the running ones, scrapes one, kills one, and keeps what their
// exits and logs said.
type fleet interface {
	// start starts the instances and returns once each shard has a leader.
	start(ctx context.Context) error
	// running returns the instances whose metrics can be read now.
	running() []instance
	// scrape reads an instance's /metrics.
	scrape(ctx context.Context, in instance) (map[string]*dto.MetricFamily, error)
	// kill kills an instance's process with SIGKILL; it restarts as its supervisor
	// (the kubelet, or the fleet's own for processes) restarts a crashed one.
	kill(ctx context.Context, in instance) error
	// users are the controller's users in the API server's audit log.
	users() []string
	// restarts are the exits of the controller's processes seen so far.
	restarts() []Restart
	// panics are the log lines of the controller's processes about a panic.
	panics() []string
	// stop stops what start started.
	stop()
}

// instance is one running controller process.
type instance struct {
	// name is the instance (the process's supervisor: a pod, or a process slot), shard
	// its shard.
	name, shard string
	// process names this process of the instance: a restarted instance gets a new one.
	process string
	// lease is the name of its shard's leader election Lease.
	lease string
}

// Restart is an exit of a controller process, and what caused it.
type Restart struct {
	Instance string    `json:"instance"`
	At       time.Time `json:"at"`
	// How says how it ended: an exit code, a signal, the pod's termination reason.
	How string `json:"how"`
	// LastLine is the last line of its log.
	LastLine string `json:"last_line,omitempty"`
	// Cause: "injected" (the soak killed it), "lease-lost" (its lease could not be
	// renewed for the renew deadline during an injected fault of the control plane and
	// it exited, as designed: docs/architecture.md), "evicted" (the kubelet evicted its
	// pod during the node-pressure fault), "upgraded" (a pod the helm-upgrade fault
	// replaced), or "unexpected".
	Cause string `json:"cause"`
}

// Restart causes.
const (
	causeInjected   = "injected"
	causeLeaseLost  = "lease-lost"
	causeUnexpected = "unexpected"
	// causeEvicted: the kubelet evicted its pod, as the node-pressure fault makes it.
	causeEvicted = "evicted"
	// causeUpgraded: a pod the helm upgrade replaced.
	causeUpgraded = "upgraded"
	// leaseLostLog is what a leader that lost its lease logs before it exits
	// (pkg/controllermanager/leaderelection.go).
	leaseLostLog = "leader election lost"
)

// panicLine matches a log line about a panic: Go's own, or client-go's
// "Observed a panic" of a recovered one.
var panicLine = regexp.MustCompile(`(^|[^a-z_])panic:|Observed a panic|reconcile panicked`)

// logScanner keeps the panic lines of the controller's logs and the last line of each
// process.
type logScanner struct {
	mu     sync.Mutex
	found  []string
	last   map[string]string // process -> last line
	killed map[string]bool   // processes the soak killed
	lost   map[string]bool   // processes that logged leaseLostLog
}

func newLogScanner() *logScanner {
	return &logScanner{last: map[string]string{}, killed: map[string]bool{}, lost: map[string]bool{}}
}

// line records a line of process's log.
func (s *logScanner) line(process, line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if panicLine.MatchString(line) && len(s.found) < 100 {
		s.found = append(s.found, process+": "+line)
	}
	if strings.TrimSpace(line) != "" {
		s.last[process] = line
	}
	if strings.Contains(line, leaseLostLog) {
		s.lost[process] = true
	}
}

// markKilled records that the soak killed process.
func (s *logScanner) markKilled(process string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.killed[process] = true
}

// cause says why process exited.
func (s *logScanner) cause(process string) (string, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	last := s.last[process]
	switch {
	case s.killed[process]:
		return causeInjected, last
	case s.lost[process]:
		return causeLeaseLost, last
	}
	return causeUnexpected, last
}

func (s *logScanner) panics() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.found...)
}

package compat

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// results are the outcome of each check of one run, written whole to a file after every
// change (so a run cut short leaves what it got to): a first line
// "#version<TAB>MINOR<TAB>SERVER-VERSION", then one line per check
// "CHECK<TAB>STATUS<TAB>MESSAGE", STATUS being PASS, FAIL or "-" (not run). hack/make.sh
// test-compat prints the files of every version as one matrix.
type results struct {
	mu     sync.Mutex
	path   string // "" when not asked for: nothing is written
	minor  string // the minor asked for, e.g. 1.34
	server string // the API server's version, once known
	checks []string
	status map[string]string
	msg    map[string]string
}

// newResults returns the results of the checks, all not run yet, written to path ("":
// not written).
func newResults(t *testing.T, path, minor string, checks []string) *results {
	t.Helper()
	r := &results{path: path, minor: minor, checks: checks, status: map[string]string{}, msg: map[string]string{}}
	if path != "" {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r.write(t)
	return r
}

// setServer records the API server's version.
func (r *results) setServer(t testing.TB, version string) {
	r.mu.Lock()
	r.server = version
	r.mu.Unlock()
	r.write(t)
}

// fail records the first failure of check.
func (r *results) fail(t testing.TB, check, msg string) {
	r.mu.Lock()
	if r.status[check] != "FAIL" {
		r.status[check], r.msg[check] = "FAIL", msg
	}
	r.mu.Unlock()
	r.write(t)
}

// pass records that check ran to its end; a failure recorded before stays.
func (r *results) pass(t testing.TB, check string) {
	r.mu.Lock()
	if r.status[check] == "" {
		r.status[check] = "PASS"
	}
	r.mu.Unlock()
	r.write(t)
}

// write rewrites the file; a failure to write fails the test, not a check.
func (r *results) write(t testing.TB) {
	if r.path == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "#version\t%s\t%s\n", r.minor, r.server)
	for _, c := range r.checks {
		status := r.status[c]
		if status == "" {
			status = "-"
		}
		fmt.Fprintf(&b, "%s\t%s\t%s\n", c, status, oneLine(r.msg[c]))
	}
	if err := os.WriteFile(r.path, []byte(b.String()), 0o644); err != nil {
		t.Errorf("writing the results: %v", err)
	}
}

// oneLine turns a message into one line without tabs, for a cell of the results file.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// recorder is the testing.TB of one check: what the check (or a framework helper it
// calls) reports as an error is recorded as the check's failure, then reported to the
// test as usual.
type recorder struct {
	testing.TB
	results *results
	check   string
}

func (r *recorder) Error(args ...any) {
	r.Helper()
	r.results.fail(r.TB, r.check, fmt.Sprint(args...))
	r.TB.Error(args...)
}

func (r *recorder) Errorf(format string, args ...any) {
	r.Helper()
	r.results.fail(r.TB, r.check, fmt.Sprintf(format, args...))
	r.TB.Errorf(format, args...)
}

func (r *recorder) Fatal(args ...any) {
	r.Helper()
	r.results.fail(r.TB, r.check, fmt.Sprint(args...))
	r.TB.Fatal(args...)
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.Helper()
	r.results.fail(r.TB, r.check, fmt.Sprintf(format, args...))
	r.TB.Fatalf(format, args...)
}

// run runs the check f with t (the test's own, or a subtest's) and records its outcome.
// A Fatal ends f; the outcome is still recorded.
func (r *results) run(t testing.TB, check string, f func(t testing.TB)) {
	t.Helper()
	rec := &recorder{TB: t, results: r, check: check}
	defer r.pass(t, check)
	f(rec)
}

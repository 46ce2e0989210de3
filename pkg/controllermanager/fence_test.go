package controllermanager

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// fakeLock is a resourcelock.Interface whose writes return err.
type fakeLock struct {
	resourcelock.Interface
	err   error
	delay time.Duration
	clock *time.Time
}

func (l *fakeLock) Identity() string { return "me" }

func (l *fakeLock) Create(context.Context, resourcelock.LeaderElectionRecord) error {
	*l.clock = l.clock.Add(l.delay)
	return l.err
}

func (l *fakeLock) Update(context.Context, resourcelock.LeaderElectionRecord) error {
	*l.clock = l.clock.Add(l.delay)
	return l.err
}

// TestLeaseFence: the fence opens on a successful renewal by this instance, counted from
// the start of the request, and closes once the renew deadline has passed since; failed
// renewals and releases (holder "") do not open it. Closed, it fails every request but
// reads.
func TestLeaseFence(t *testing.T) {
	const deadline = 4 * time.Second
	tests := []struct {
		name     string
		holder   string
		err      error
		delay    time.Duration // how long the renewal request takes
		after    time.Duration // time from the end of the renewal to the write
		create   bool
		wantHeld bool
	}{
		{name: "renewed just now", holder: "me", wantHeld: true},
		{name: "acquired by create", holder: "me", create: true, wantHeld: true},
		{name: "renewed within the deadline", holder: "me", after: deadline - time.Second, wantHeld: true},
		{name: "frozen past the deadline", holder: "me", after: deadline + time.Second},
		{name: "a slow renewal counts from its start", holder: "me", delay: 3 * time.Second, after: 2 * time.Second},
		{name: "renewal failed", holder: "me", err: errors.New("conflict")},
		{name: "release", holder: ""},
		{name: "someone else holds it", holder: "other"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := time.Unix(1000, 0)
			f := newLeaseFence(deadline)
			f.now = func() time.Time { return now }
			lock := f.lock(&fakeLock{err: tt.err, delay: tt.delay, clock: &now})
			ler := resourcelock.LeaderElectionRecord{HolderIdentity: tt.holder}
			if tt.create {
				_ = lock.Create(context.Background(), ler)
			} else {
				_ = lock.Update(context.Background(), ler)
			}
			now = now.Add(tt.after)
			if held, _ := f.held(); held != tt.wantHeld {
				t.Errorf("held = %v, want %v", held, tt.wantHeld)
			}

			var sent []string
			rt := f.roundTripper(roundTripperFunc(func(req *http.Request) (*http.Response, error) {
				sent = append(sent, req.Method)
				return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}, nil
			}))
			for _, method := range []string{http.MethodGet, http.MethodPatch, http.MethodPost, http.MethodPut, http.MethodDelete} {
				req, _ := http.NewRequest(method, "https://apiserver/apis/apps/v1/namespaces/ns/deployments/d", nil)
				resp, err := rt.RoundTrip(req)
				if resp != nil {
					resp.Body.Close()
				}
				wantRefused := method != http.MethodGet && !tt.wantHeld
				if refused := err != nil; refused != wantRefused {
					t.Errorf("%s refused = %v (%v), want %v", method, refused, err, wantRefused)
				}
				if err != nil && !strings.Contains(err.Error(), "another instance may lead") {
					t.Errorf("%s: error %q does not say why", method, err)
				}
			}
			if want := 1; tt.wantHeld {
				want = 5
				if len(sent) != want {
					t.Errorf("sent %v, want all 5 requests", sent)
				}
			} else if len(sent) != want {
				t.Errorf("sent %v, want only the GET", sent)
			}
		})
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

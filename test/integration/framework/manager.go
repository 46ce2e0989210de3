package framework

import (
	"context"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/app-controller/app-controller/pkg/controllermanager"
)

// managerStopTimeout bounds how long a stopping manager may take.
const managerStopTimeout = 30 * time.Second

// Manager is a controller-manager running in the test process, logging to the test.
type Manager struct {
	cancel context.CancelFunc
	done   chan error

	once sync.Once
	err  error
	// waited: the test called Stop or Wait, so it has seen err itself.
	waited bool
}

// StartManager runs controllermanager.RunWithConfig(cfg, opts) in the background until
// Stop or the end of the test. At the end of the test it is stopped, and the test fails
// if it returns an error the test did not collect with Stop or Wait, or if it does not
// stop.
func StartManager(t *testing.T, cfg *rest.Config, opts *controllermanager.Options) *Manager {
	t.Helper()
	logger, _ := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	m := &Manager{cancel: cancel, done: make(chan error, 1)}
	go func() { m.done <- controllermanager.RunWithConfig(ctx, cfg, opts) }()
	t.Cleanup(func() {
		waited := m.waited
		m.cancel()
		if err := m.wait(t); err != nil && !waited {
			t.Errorf("controller manager: %v", err)
		}
	})
	return m
}

// Stop stops the manager and returns what RunWithConfig returned. It may be called more
// than once.
func (m *Manager) Stop(t testing.TB) error {
	t.Helper()
	m.cancel()
	return m.Wait(t)
}

// Wait waits until RunWithConfig returns, and returns what it returned.
func (m *Manager) Wait(t testing.TB) error {
	t.Helper()
	m.waited = true
	return m.wait(t)
}

func (m *Manager) wait(t testing.TB) error {
	t.Helper()
	m.once.Do(func() {
		select {
		case m.err = <-m.done:
		case <-time.After(managerStopTimeout):
			t.Fatalf("the controller manager did not return within %s", managerStopTimeout)
		}
	})
	return m.err
}

package framework

import (
	"context"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	appctrl "github.com/app-controller/app-controller/pkg/controller/app"
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

// StartAppController runs the App controller (only) in the test process against cfg,
// with opts (nil: the defaults), until the end of the test (StartManager). It sets
// opts.Controllers and a shutdown timeout of 5 s.
func StartAppController(t *testing.T, cfg *rest.Config, opts *controllermanager.Options) *Manager {
	t.Helper()
	if opts == nil {
		opts = controllermanager.NewOptions()
	}
	opts.Controllers = []string{appctrl.ControllerName}
	opts.ShutdownTimeout = 5 * time.Second
	return StartManager(t, cfg, opts)
}

// UserConfig returns a client configuration of the test cluster as user, a member of
// system:masters: the API server's audit log records the requests under that name when
// the cluster audits it (localcluster.Options.AuditUsers). Its QPS (1000) and burst
// (2000) leave the client's own throttling out of what a test measures.
func UserConfig(t testing.TB, user string) *rest.Config {
	t.Helper()
	cfg, err := Cluster().UserConfig(user, "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 1000, 2000
	return cfg
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

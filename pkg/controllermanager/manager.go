// Package controllermanager runs the controllers of app-controller in one process, like
// kube-controller-manager: a registry of named controllers selected with --controllers,
// sharing clients, informer factories and an event recorder.
package controllermanager

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
)

// Run builds the client configuration from opts and runs the enabled controllers until
// ctx ends. It returns after every controller stopped.
func Run(ctx context.Context, opts *Options) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	cfg, err := BuildConfig(opts.Kubeconfig, opts.Master)
	if err != nil {
		return err
	}
	return RunWithConfig(ctx, cfg, opts)
}

// RunWithConfig runs the enabled controllers against cfg until ctx ends, as the leader
// when opts.LeaderElect is set, serving probes and metrics if their addresses are set.
func RunWithConfig(ctx context.Context, cfg *rest.Config, opts *Options) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	// Readiness: a standby is ready; a leader once its informers have synced.
	var leading, synced atomic.Bool
	ready := func() error {
		if leading.Load() && !synced.Load() {
			return errors.New("informer caches not synced yet")
		}
		return nil
	}
	serveCtx, stopServing := context.WithCancel(ctx)
	defer stopServing()
	if err := serve(serveCtx, "health probes", opts.HealthProbeBindAddress, probes(ready), nil); err != nil {
		return err
	}
	metrics, metricsTLS, err := metricsServer(cfg, opts)
	if err != nil {
		return err
	}
	if err := serve(serveCtx, "metrics", opts.MetricsBindAddress, metrics, metricsTLS); err != nil {
		return err
	}

	run := func(ctx context.Context, cfg *rest.Config) error {
		leading.Store(true)
		return runControllers(ctx, cfg, opts, func() { synced.Store(true) })
	}
	if !opts.LeaderElect {
		return run(ctx, cfg)
	}
	return runAsLeader(ctx, cfg, opts, run)
}

// runControllers builds the enabled controllers, starts the informers they asked for and
// runs the controllers until ctx ends; onSynced is called once every informer synced.
// With --watch-namespace each namespace gets its own informers and controllers (an
// informer watches one namespace or all).
func runControllers(ctx context.Context, cfg *rest.Config, opts *Options, onSynced func()) error {
	logger := klog.FromContext(ctx)
	namespaces := opts.WatchNamespaces
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	var sets []*controllerSet
	for _, ns := range namespaces {
		setCtx := ctx
		if ns != metav1.NamespaceAll {
			setCtx = klog.NewContext(ctx, klog.LoggerWithValues(logger, "watchNamespace", ns))
		}
		set, err := newControllerSet(setCtx, cfg, opts, ns)
		if err != nil {
			for _, built := range sets {
				built.cc.shutdown() // their event broadcasters run from the start
			}
			return err
		}
		sets = append(sets, set)
	}

	for _, set := range sets {
		set.cc.start(ctx)
		defer set.cc.shutdown()
		for _, c := range set.invalid {
			set.cc.recordDisabled(ctx, c.name, c.err)
		}
	}
	go func() {
		for _, set := range sets {
			if !set.cc.waitForCacheSync(ctx) {
				return
			}
		}
		onSynced()
	}()

	var wg sync.WaitGroup
	running := 0
	for _, set := range sets {
		for _, s := range set.runnables {
			ctx := klog.NewContext(set.ctx, klog.LoggerWithValues(klog.LoggerWithName(klog.FromContext(set.ctx), s.name), "controller", s.name))
			wg.Go(func() { s.r.Run(ctx, opts.Workers) })
			running++
		}
	}
	if running == 0 {
		logger.Info("No controller to run; serving probes and metrics until stopped")
		<-ctx.Done()
		return nil
	}
	wg.Wait()
	return nil
}

// controllerSet is the enabled controllers of one namespace (or of all), with the
// informers and clients they share.
type controllerSet struct {
	ctx       context.Context
	cc        *ControllerContext
	runnables []namedRunnable
	invalid   []invalidController
}

// namedRunnable is a controller to run, with its name.
type namedRunnable struct {
	name string
	r    Runnable
}

// newControllerSet builds the controller context of namespace ns and the enabled
// controllers on it.
func newControllerSet(ctx context.Context, cfg *rest.Config, opts *Options, ns string) (*controllerSet, error) {
	logger := klog.FromContext(ctx)
	cc, err := NewControllerContext(ctx, cfg, opts, ns)
	if err != nil {
		return nil, err
	}
	set := &controllerSet{ctx: ctx, cc: cc}
	for _, d := range descriptors {
		if !IsControllerEnabled(d.name, opts.Controllers) {
			logger.Info("Controller disabled", "controller", d.name)
			continue
		}
		r, err := d.init(klog.NewContext(ctx, klog.LoggerWithName(logger, d.name)), cc)
		if disabled := (*DisabledError)(nil); errors.As(err, &disabled) {
			if disabled.Err != nil {
				logger.Error(disabled.Err, "Controller disabled: its configuration is invalid; the other controllers run",
					"controller", d.name, "reason", disabled.Reason)
				set.invalid = append(set.invalid, invalidController{d.name, disabled})
				continue
			}
			logger.Info("Controller disabled", "controller", d.name, "reason", disabled.Reason)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("initializing the %s controller: %w", d.name, err)
		}
		set.runnables = append(set.runnables, namedRunnable{d.name, r})
	}
	return set, nil
}

// invalidController is a controller disabled by an invalid configuration.
type invalidController struct {
	name string
	err  *DisabledError
}

// ReasonControllerDisabled is the reason of the Warning Event recorded on the
// controller's own Pod when a controller is disabled by an invalid configuration.
const ReasonControllerDisabled = "ControllerDisabled"

// recordDisabled records a Warning Event on the controller's own Pod saying that the
// controller name is disabled and why. No object of the cluster is involved in a bad
// configuration file, so the Event goes to the Pod that read it, where `kubectl describe
// pod` and `kubectl events` show it; outside a pod (no POD_NAME or POD_NAMESPACE) it is
// only logged.
func (cc *ControllerContext) recordDisabled(ctx context.Context, name string, disabled *DisabledError) {
	logger := klog.FromContext(ctx)
	if cc.Options.PodName == "" || cc.Options.PodNamespace == "" {
		logger.Info("No Event recorded for the disabled controller: POD_NAME or POD_NAMESPACE is not set", "controller", name)
		return
	}
	pod := &corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: cc.Options.PodNamespace, Name: cc.Options.PodName}
	cc.EventRecorder.Eventf(pod, corev1.EventTypeWarning, ReasonControllerDisabled,
		"The %s controller is disabled, the others run: %s: %v", name, disabled.Reason, disabled.Err)
}

// BuildConfig returns the client configuration: from kubeconfig and master when either
// is given; else in-cluster when running in a pod; else $KUBECONFIG or ~/.kube/config.
func BuildConfig(kubeconfig, master string) (*rest.Config, error) {
	if kubeconfig == "" && master == "" && os.Getenv("KUBERNETES_SERVICE_HOST") != "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("building the in-cluster client configuration: %w", err)
		}
		return cfg, nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	overrides := &clientcmd.ConfigOverrides{}
	overrides.ClusterInfo.Server = master
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("building the client configuration from kubeconfig %q and master %q: %w", kubeconfig, master, err)
	}
	return cfg, nil
}

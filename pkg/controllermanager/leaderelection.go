package controllermanager

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/app-controller/app-controller/pkg/controller"

	// Leader election metrics (leader_election_master_status) on /metrics.
	_ "k8s.io/component-base/metrics/prometheus/clientgo/leaderelection"
)

// errLeadershipLost is returned when another instance took the lease: the process must
// exit rather than keep running as a second leader.
var errLeadershipLost = errors.New("leader election lost")

// RBAC of leader election (--leader-elect), in the namespace the shipped Deployment runs
// in, where its Lease lives: resourcelock.LeaseLock reads the Lease (get), creates it
// when missing (create), and acquires, renews and releases it by update. It never lists
// or watches Leases, and records no Events (no EventRecorder is configured).
//
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;create;update,namespace=app-controller-system

// runAsLeader runs run once this instance holds the lease opts.LeaderElectName in
// opts.LeaderElectNamespace, and until ctx ends or the lease is lost. On a graceful stop
// run finishes first (in-flight syncs included), then the lease is released so that a
// standby takes over at once. On a lost lease in-flight syncs are cancelled at once and
// it returns errLeadershipLost: the process exits, as kube-controller-manager does.
// run gets a copy of cfg whose writes a leaseFence refuses once the last renewal is
// older than the renew deadline, so that a leader resumed after a freeze writes nothing
// before it notices that it lost the lease.
func runAsLeader(ctx context.Context, cfg *rest.Config, opts *Options, run func(context.Context, *rest.Config) error) error {
	logger := klog.FromContext(ctx)
	client, err := kubernetes.NewForConfig(rest.AddUserAgent(cfg, "app-controller-leader-election"))
	if err != nil {
		return fmt.Errorf("building the leader election client: %w", err)
	}
	identity, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("getting the hostname for the leader election identity: %w", err)
	}
	identity += "_" + string(uuid.NewUUID())
	fence := newLeaseFence(opts.LeaderElectRenewDeadline)
	lock := fence.lock(&resourcelock.LeaseLock{
		LeaseMeta:  metaFor(opts.LeaderElectNamespace, opts.LeaderElectName),
		Client:     client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
	})
	fenced := rest.CopyConfig(cfg)
	fenced.Wrap(fence.roundTripper)

	// The elector's context ends after run returns, so the lease is held until the
	// controllers have stopped.
	electorCtx, stopElector := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElector()
	var started atomic.Bool
	var runErr error
	runDone := make(chan struct{})
	stopWaiting := context.AfterFunc(ctx, func() {
		if !started.Load() {
			stopElector() // still a standby: stop waiting for the lease
		}
	})
	defer stopWaiting()

	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   opts.LeaderElectLeaseDuration,
		RenewDeadline:   opts.LeaderElectRenewDeadline,
		RetryPeriod:     opts.LeaderElectRetryPeriod,
		ReleaseOnCancel: true,
		Name:            opts.LeaderElectName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leaderCtx context.Context) {
				started.Store(true)
				defer close(runDone)
				defer stopElector()
				logger.Info("Acquired the leader lease", "identity", identity)
				// A graceful stop (ctx) lets in-flight syncs finish while the lease is still
				// held; a lost lease (leaderCtx) cancels them at once.
				runCtx, cancel := context.WithCancel(controller.WithAbort(leaderCtx, leaderCtx))
				defer cancel()
				stop := context.AfterFunc(ctx, cancel)
				defer stop()
				runErr = run(runCtx, fenced)
			},
			OnStoppedLeading: func() {
				logger.Info("Released the leader lease", "identity", identity)
			},
			OnNewLeader: func(current string) {
				if current != identity {
					logger.Info("Another instance leads; standing by", "leader", current)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("configuring leader election: %w", err)
	}
	logger.Info("Waiting for the leader lease", "lease", klog.KRef(opts.LeaderElectNamespace, opts.LeaderElectName), "identity", identity)
	elector.Run(electorCtx)
	if !started.Load() {
		return nil // stopped while standing by
	}
	<-runDone
	if ctx.Err() == nil && runErr == nil {
		return errLeadershipLost
	}
	return runErr
}

// metaFor is the identity of the lease.
func metaFor(namespace, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: namespace, Name: name}
}

// inClusterNamespaceFile holds the namespace of the pod's service account.
const inClusterNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// defaultLeaderElectNamespace is the namespace of the lease when none is given: the
// pod's own namespace in a cluster, else "default".
func defaultLeaderElectNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	if data, err := os.ReadFile(inClusterNamespaceFile); err == nil {
		if ns := strings.TrimSpace(string(data)); ns != "" {
			return ns
		}
	}
	return "default"
}

// Default leader election timings, as kube-controller-manager's.
const (
	defaultLeaseDuration = 15 * time.Second
	defaultRenewDeadline = 10 * time.Second
	defaultRetryPeriod   = 2 * time.Second
)

package soak

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/app-controller/app-controller/internal/localcluster"
	"github.com/app-controller/app-controller/test/harness"
)

// The controller as processes on this machine (NodeKwok), with the flags the chart
// gives it (charts/app-controller/templates/deployment.yaml) and its memory limit's
// environment, each instance with a client certificate of its own (its user in the
// audit log). A process that exits is started again after a back-off, as the kubelet
// restarts a container.

const (
	// leaseNamespace holds the shards' Leases (the release namespace of the chart).
	leaseNamespace = "app-controller-system"
	// restartBackOff is how long an exited process waits before it starts again (the
	// kubelet's first back-off is 10 s).
	restartBackOff = 5 * time.Second
	// chartMemoryLimit is the chart's default memory limit, 512Mi.
	chartMemoryLimit = 512 << 20
)

// leaseName is the Lease of shard: the chart names it after the release.
func leaseName(shard string) string {
	if shard == shardA {
		return "app-controller"
	}
	return "app-controller-" + shard
}

type processFleet struct {
	cfg     *Config
	cluster *localcluster.Cluster
	kube    kubernetes.Interface
	logDir  string
	logs    *logScanner

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	slots   []*processSlot
	records []Restart
}

// processSlot is one instance: the process now running it and how to start another.
type processSlot struct {
	name, shard string
	kubeconfig  string
	starts      int
	proc        *harness.Process
	process     string
	metricsURL  string
}

func newProcessFleet(cfg *Config, cluster *localcluster.Cluster, kube kubernetes.Interface, logDir string) *processFleet {
	f := &processFleet{cfg: cfg, cluster: cluster, kube: kube, logDir: logDir, logs: newLogScanner()}
	for _, shard := range []string{shardA, shardB} {
		for i := range 2 {
			f.slots = append(f.slots, &processSlot{name: fmt.Sprintf("shard-%s-%d", shard, i), shard: shard})
		}
	}
	return f
}

func (f *processFleet) users() []string {
	out := make([]string, 0, len(f.slots))
	for _, s := range f.slots {
		out = append(out, "soak:"+s.name)
	}
	return out
}

func (f *processFleet) start(ctx context.Context) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: leaseNamespace}}
	if _, err := f.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", leaseNamespace, err)
	}
	for _, s := range f.slots {
		cfg, err := f.cluster.UserConfig("soak:"+s.name, "system:masters")
		if err != nil {
			return err
		}
		s.kubeconfig = filepath.Join(f.logDir, s.name+".kubeconfig")
		if err := localcluster.WriteKubeconfig(s.kubeconfig, cfg); err != nil {
			return err
		}
	}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	for _, s := range f.slots {
		if err := f.startProcess(s); err != nil {
			return err
		}
		f.wg.Go(func() { f.supervise(s) })
	}
	return waitLeaders(ctx, f.kube)
}

// args are the chart's flags for an instance of shard, with the addresses of this
// process.
func (f *processFleet) args(s *processSlot, metricsAddr, probeAddr string) []string {
	args := []string{"--kubeconfig=" + s.kubeconfig,
		"--workers=20", "--resync-period=30s", "--shutdown-timeout=30s", "--kube-api-qps=200", "--kube-api-burst=400", "--v=2",
		"--leader-elect", "--leader-elect-namespace=" + leaseNamespace, "--leader-elect-name=" + leaseName(s.shard),
		"--leader-elect-lease-duration=15s", "--leader-elect-renew-deadline=10s", "--leader-elect-retry-period=2s",
		"--health-probe-bind-address=" + probeAddr, "--metrics-bind-address=" + metricsAddr,
		"--app-selector=" + shardLabel + "=" + s.shard, "--ingress-catch-all-namespaces=*"}
	if s.shard == shardA {
		return append(args, "--controllers=*")
	}
	return append(args, "--controllers=app")
}

// startProcess starts a new process for slot s.
func (f *processFleet) startProcess(s *processSlot) error {
	metricsAddr, err := harness.FreeAddr()
	if err != nil {
		return err
	}
	probeAddr, err := harness.FreeAddr()
	if err != nil {
		return err
	}
	env := []string{"MEMORY_LIMIT=" + strconv.Itoa(chartMemoryLimit), "POD_NAMESPACE=" + leaseNamespace, "POD_NAME=" + s.name}
	p, err := harness.StartEnv(f.cfg.Controller, f.args(s, metricsAddr, probeAddr), env, filepath.Join(f.logDir, s.name+".log"))
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s.starts++
	s.proc, s.process, s.metricsURL = p, fmt.Sprintf("%s#%d", s.name, s.starts), "http://"+metricsAddr+"/metrics"
	return nil
}

// supervise restarts s's process whenever it exits, until the fleet stops, recording
// each exit.
func (f *processFleet) supervise(s *processSlot) {
	for {
		f.mu.Lock()
		p, process := s.proc, s.process
		f.mu.Unlock()
		select {
		case <-p.Done():
		case <-f.ctx.Done():
			return
		}
		for _, line := range p.Lines("") {
			f.logs.line(process, line)
		}
		cause, last := f.logs.cause(process)
		f.mu.Lock()
		f.records = append(f.records, Restart{Instance: process, At: time.Now(), How: fmt.Sprintf("exit code %d (%v)", p.ExitCode(), p.Exited()), LastLine: last, Cause: cause})
		f.mu.Unlock()
		select {
		case <-f.ctx.Done():
			return
		case <-time.After(restartBackOff):
		}
		for f.startProcess(s) != nil {
			select {
			case <-f.ctx.Done():
				return
			case <-time.After(restartBackOff):
			}
		}
	}
}

func (f *processFleet) running() []instance {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []instance
	for _, s := range f.slots {
		if s.proc != nil && s.proc.Exited() == nil {
			out = append(out, instance{name: s.name, shard: s.shard, process: s.process, lease: leaseName(s.shard)})
		}
	}
	return out
}

func (f *processFleet) slot(in instance) *processSlot {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.slots {
		if s.process == in.process {
			return s
		}
	}
	return nil
}

func (f *processFleet) scrape(ctx context.Context, in instance) (map[string]*dto.MetricFamily, error) {
	s := f.slot(in)
	if s == nil {
		return nil, fmt.Errorf("process %s is gone", in.process)
	}
	f.mu.Lock()
	url := s.metricsURL
	f.mu.Unlock()
	return harness.Scrape(ctx, url)
}

func (f *processFleet) kill(_ context.Context, in instance) error {
	s := f.slot(in)
	if s == nil {
		return fmt.Errorf("process %s is gone", in.process)
	}
	f.logs.markKilled(in.process)
	f.mu.Lock()
	p := s.proc
	f.mu.Unlock()
	return p.Signal(syscall.SIGKILL)
}

func (f *processFleet) restarts() []Restart {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Restart(nil), f.records...)
}

func (f *processFleet) panics() []string {
	f.mu.Lock()
	procs := make(map[string]*harness.Process)
	for _, s := range f.slots {
		if s.proc != nil {
			procs[s.process] = s.proc
		}
	}
	f.mu.Unlock()
	for process, p := range procs {
		if p.Exited() == nil {
			for _, line := range p.Lines("panic") {
				f.logs.line(process, line)
			}
		}
	}
	return f.logs.panics()
}

func (f *processFleet) stop() {
	if f.cancel == nil {
		return
	}
	f.cancel()
	f.wg.Wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.slots {
		if s.proc != nil {
			_ = s.proc.Stop(syscall.SIGTERM, 30*time.Second)
		}
	}
}

// waitLeaders waits until both shards' Leases have a holder.
func waitLeaders(ctx context.Context, kube kubernetes.Interface) error {
	deadline := time.Now().Add(3 * time.Minute)
	for _, shard := range []string{shardA, shardB} {
		for {
			lease, err := kube.CoordinationV1().Leases(leaseNamespace).Get(ctx, leaseName(shard), metav1.GetOptions{})
			if err == nil && lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "" {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("shard %s has no leader after 3 minutes (Lease %s/%s: %w)", shard, leaseNamespace, leaseName(shard), err)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Second):
			}
		}
	}
	return nil
}

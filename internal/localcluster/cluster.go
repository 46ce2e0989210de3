package localcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Options configure Start.
type Options struct {
	// BinDir holds etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok and
	// the kwok-stages directory (see BinDirFromEnv).
	BinDir string
	// KubeBinDir, if set, holds the kube-apiserver, kube-controller-manager and
	// kube-scheduler to run instead of BinDir's: another Kubernetes version's (make
	// test-compat builds them into bin/compat/MINOR; KubeBinDirFromEnv). etcd, kwok and
	// the real node's binaries still come from BinDir.
	KubeBinDir string
	// StateDir receives the certificates, etcd's data, one log per component
	// (logs/<name>.log) and the admin kubeconfig. It is created, and must be empty if it
	// exists. Stop removes it unless KeepState is set; a Start that fails keeps it, for
	// the logs.
	StateDir string
	// Out receives progress lines for humans; nil discards them.
	Out io.Writer
	// KeepState keeps StateDir after Stop, for debugging.
	KeepState bool
	// CRDDir, if set, holds CustomResourceDefinition YAML files to install (and wait for)
	// as soon as the API server is ready, before kube-controller-manager starts: its
	// garbage collector then knows the custom resources from the start, instead of
	// after its next 30 s discovery resync.
	CRDDir string
	// GatewayAPIDir, if set, is the directory of the Gateway API's standard CRDs
	// (GatewayAPICRDDir): every CRD there is installed with the CRDs of CRDDir.
	GatewayAPIDir string
	// GatewayAPI installs those CRDs from GatewayAPICRDDir when GatewayAPIDir is not
	// set.
	GatewayAPI bool
	// NodeCPUWeight, if set, is the real node's CPU weight as a number of the machine's
	// processes: when the node's processes (its daemons and pods, in its cgroup) and the
	// machine's others all want the CPU, the node gets as much as that many of them. The
	// kernel's default, one, suits a node beside a few processes; a node beside the many
	// of a whole make test, which the kernel does not group by session everywhere
	// (kernel.sched_autogroup_enabled=0, or processes outside the root cgroup), starves.
	NodeCPUWeight int
	// PodCapacity is the number of pods the cluster must have room for: Start creates
	// one kwok node per KwokNodePods pods (kwok-node-0, kwok-node-1, ...). Zero means
	// one node.
	PodCapacity int
	// AuditLog makes kube-apiserver write an audit log (JSON lines, one event a request,
	// at level Metadata) to Cluster.AuditLogPath: every write, and the lists and watches
	// of the app-controller API group, so tests can count on the server side who wrote
	// what (an impersonated user tells instances apart). See auditPolicy.
	AuditLog bool
	// AuditUsers, if set, turns the audit log on for the writes of these users only
	// (nothing else is recorded). Give each client to attribute its own user with
	// Cluster.UserConfig.
	AuditUsers []string
	// AuditBodies, if set, logs the writes of these resources with their bodies (the
	// soak reads each status.rollout the controller wrote, and each Deployment's
	// template and replicas): at level Request or RequestResponse, for AuditUsers only
	// when that is set. Every other write stays at Metadata: a body is a few KB, so
	// list only what a test reads.
	AuditBodies []AuditBody
	// NoAutoscalerController runs kube-controller-manager without its
	// HorizontalPodAutoscaler controller: a benchmark of Apps with spec.autoscaling on a
	// cluster without a metrics API measures the App controller's writes, not the
	// verdicts of autoscalers that cannot read a metric.
	NoAutoscalerController bool
	// Profiling serves kube-apiserver's /debug/pprof (to system:masters, like every
	// non-resource URL here), so that a benchmark can read where its CPU goes. Off by
	// default, as in production.
	Profiling bool
	// FeatureGates is kube-apiserver's --feature-gates, comma-separated NAME=BOOL (e.g.
	// ShardedListAndWatch=true), to serve an alpha API the cluster does not by default.
	FeatureGates string
	// EventTTL is how long kube-apiserver keeps an Event (--event-ttl), 0: its default,
	// an hour. A soak shorter than two TTLs sees every Event cache fill for its whole
	// run; a shorter TTL brings them to their steady size early in it.
	EventTTL time.Duration
	// Node is the kind of node: NodeKwok (the default, "") or NodeReal, one node that runs
	// pods for real (realnode.go; root only, see CheckRealNode). With NodeReal, kwok is
	// not started and PodCapacity is ignored.
	Node string
	// NodeFS, with NodeReal, is the size in bytes of a tmpfs that holds the kubelet's root
	// directory (its nodefs: the pods' volumes and writable data), 0: the state
	// directory's filesystem. With it the kubelet signals DiskPressure and evicts pods
	// when less than nodeFSEvictAt of it is free, and ends the pressure
	// nodePressurePeriod after it is over, so that Cluster.FillNodeFS makes a node-pressure
	// eviction without filling this machine's disk.
	NodeFS int64
}

// apiserverOptionArgs are kube-apiserver's flags that o asks for, after the ones every
// cluster has (the last occurrence of a flag wins).
func (o *Options) apiserverOptionArgs() []string {
	var args []string
	if o.Profiling {
		args = append(args, "--profiling=true")
	}
	if o.FeatureGates != "" {
		args = append(args, "--feature-gates="+o.FeatureGates)
	}
	if o.EventTTL > 0 {
		args = append(args, "--event-ttl="+o.EventTTL.String())
	}
	return args
}

// Cluster is a running control plane started by Start.
type Cluster struct {
	// Kubeconfig is the path of the admin kubeconfig inside StateDir.
	Kubeconfig string
	// Config is the admin client config (user in group system:masters). Copy it (with
	// rest.CopyConfig) before changing it.
	Config *rest.Config
	// StateDir is the directory holding the cluster's state.
	StateDir string
	// LogDir holds one log file per component, named <component>.log.
	LogDir string
	// AuditLogPath is kube-apiserver's audit log if Options.AuditLog or
	// Options.AuditUsers is set, else "".
	AuditLogPath string
	// Nodes are the names of the nodes: the kwok nodes Start created, or the real node.
	Nodes []string
	// Registry is the HOST:PORT of the real node's image registry (Options.Node
	// NodeReal): the same name pushes from this machine and pulls on the node. Empty for
	// kwok nodes.
	Registry string

	certs *certFiles
	// node is the real node, nil for kwok nodes.
	node *realNode

	opts Options
	out  io.Writer

	mu    sync.Mutex
	procs map[string]*process
	// started holds how each component was started and on which ports, for Restart;
	// daemons how each daemon of the real node was.
	started map[string]startedComponent
	daemons map[string]nodeDaemon
	// etcdURL is etcd's client URL.
	etcdURL string

	stopOnce sync.Once
	stopErr  error
}

// Timeouts of the start sequence. The machine may be busy (2 cores, tests compiling), so
// they are several times what a start takes on an idle machine. The API server's is the
// longest: its start is the heaviest (about 6 s alone) and a whole make test on 2 cores
// stretched a restart beyond 90 s.
const (
	etcdTimeout      = 30 * time.Second
	apiserverTimeout = 3 * time.Minute
	healthzTimeout   = 60 * time.Second
	kwokTimeout      = 30 * time.Second
	nodeReadyTimeout = 60 * time.Second
	saTimeout        = 60 * time.Second

	// stopGrace is how long a component has to exit after SIGTERM before SIGKILL.
	stopGrace = 5 * time.Second
)

// Start starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok,
// creates the kwok node kwok-node-0 (and more if Options.PodCapacity asks) and returns once the node is Ready and the default
// ServiceAccount exists. On failure it stops whatever it started and returns an error
// naming the component, with the end of its log; StateDir is then kept.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	begin := time.Now()
	if opts.BinDir == "" || opts.StateDir == "" {
		return nil, errors.New("starting the local cluster: Options.BinDir and Options.StateDir are required")
	}
	binDir, err := filepath.Abs(opts.BinDir)
	if err != nil {
		return nil, fmt.Errorf("starting the local cluster: %w", err)
	}
	stateDir, err := filepath.Abs(opts.StateDir)
	if err != nil {
		return nil, fmt.Errorf("starting the local cluster: %w", err)
	}
	if err := CheckBinDir(binDir); err != nil {
		return nil, err
	}
	if opts.KubeBinDir != "" {
		if opts.KubeBinDir, err = filepath.Abs(opts.KubeBinDir); err != nil {
			return nil, fmt.Errorf("starting the local cluster: %w", err)
		}
		if err := CheckKubeBinDir(opts.KubeBinDir); err != nil {
			return nil, err
		}
	}
	switch opts.Node {
	case "", NodeKwok:
		opts.Node = NodeKwok
	case NodeReal:
		if err := CheckRealNode(binDir); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("starting the local cluster: unknown node kind %q (want %s or %s)", opts.Node, NodeKwok, NodeReal)
	}
	stages, err := kwokStageFiles(filepath.Join(binDir, kwokStagesDir))
	if err != nil {
		return nil, err
	}
	if err := prepareStateDir(stateDir); err != nil {
		return nil, err
	}
	opts.BinDir, opts.StateDir = binDir, stateDir

	c := &Cluster{
		Kubeconfig: filepath.Join(stateDir, kubeconfigFile),
		StateDir:   stateDir,
		LogDir:     filepath.Join(stateDir, "logs"),
		opts:       opts,
		out:        opts.Out,
		procs:      map[string]*process{},
		started:    map[string]startedComponent{},
	}
	if opts.AuditLog || len(opts.AuditUsers) > 0 {
		c.AuditLogPath = filepath.Join(c.LogDir, auditLogFile)
	}
	if c.out == nil {
		c.out = io.Discard
	}
	if err := c.start(ctx, stages); err != nil {
		if errors.Is(ctx.Err(), context.Canceled) {
			// Interrupted by the caller: nothing to debug.
			return nil, errors.Join(fmt.Errorf("starting the local cluster: interrupted: %w", ctx.Err()), c.Stop())
		}
		// The logs explain the failure: keep them.
		if stopErr := c.stop(false); stopErr != nil {
			err = errors.Join(err, stopErr)
		}
		return nil, fmt.Errorf("%w\n(state and logs kept in %s)", err, stateDir)
	}
	c.printf("control plane ready in %.1fs; kubeconfig: %s\n", time.Since(begin).Seconds(), c.Kubeconfig)
	return c, nil
}

// prepareStateDir creates dir, refusing one that already has content: it will be removed
// by Stop, and a left-over etcd data directory would bring back an old cluster.
func prepareStateDir(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return fmt.Errorf("reading the state directory: %w", err)
	case len(entries) > 0:
		return fmt.Errorf("state directory %s is not empty (left from an earlier run?): remove it or use another", dir)
	}
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		return fmt.Errorf("creating the state directory: %w", err)
	}
	return nil
}

// start runs the start sequence.
func (c *Cluster) start(ctx context.Context, stages []string) error {
	t := time.Now()
	certs, err := writeCerts(filepath.Join(c.StateDir, "certs"))
	if err != nil {
		return err
	}
	c.certs = certs
	c.printf("certificates written (%.1fs)\n", time.Since(t).Seconds())

	probe, err := newProbeClient(certs.caPEM, certs.adminCert, certs.adminKey)
	if err != nil {
		return err
	}

	// etcd. Its data directory is reset before each attempt: a failed attempt may have
	// recorded a peer URL with a port that is no longer ours.
	etcdDataDir := filepath.Join(c.StateDir, "etcd")
	etcdPorts, err := c.startComponent(ctx, component{
		name:   etcdName,
		nPorts: 2,
		prepare: func() error {
			return os.RemoveAll(etcdDataDir)
		},
		args: func(ports []int) []string { return etcdArgs(etcdDataDir, ports[0], ports[1]) },
		ready: func(ctx context.Context, ports []int) error {
			return probeHTTP(ctx, probe, "http://"+hostPort(ports[0])+"/health")
		},
		timeout: etcdTimeout,
		address: func(ports []int) string { return hostPort(ports[0]) },
	})
	if err != nil {
		return err
	}

	// kube-apiserver, ready when /readyz answers the admin.
	etcdURL := "http://" + hostPort(etcdPorts[0])
	c.etcdURL = etcdURL
	auditArgs, err := c.auditArgs()
	if err != nil {
		return err
	}
	apiPorts, err := c.startComponent(ctx, component{
		name:   apiserverName,
		nPorts: 1,
		args: func(ports []int) []string {
			args := append(apiserverArgs(certs, filepath.Join(c.StateDir, "apiserver-certs"), etcdURL, ports[0]), auditArgs...)
			return append(args, c.opts.apiserverOptionArgs()...)
		},
		ready: func(ctx context.Context, ports []int) error {
			return probeHTTP(ctx, probe, "https://"+hostPort(ports[0])+"/readyz")
		},
		timeout: apiserverTimeout,
		address: func(ports []int) string { return "https://" + hostPort(ports[0]) },
	})
	if err != nil {
		return err
	}
	c.Config = adminRESTConfig("https://"+hostPort(apiPorts[0]), certs.caPEM, certs.adminCert, certs.adminKey)
	if err := writeKubeconfig(c.Kubeconfig, c.Config); err != nil {
		return err
	}
	if c.opts.CRDDir != "" {
		t := time.Now()
		if err := InstallCRDs(ctx, c.Config, c.opts.CRDDir); err != nil {
			return err
		}
		c.printf("CRDs of %s established (%.1fs)\n", c.opts.CRDDir, time.Since(t).Seconds())
	}
	if c.opts.GatewayAPI && c.opts.GatewayAPIDir == "" {
		if c.opts.GatewayAPIDir, err = GatewayAPICRDDir(ctx); err != nil {
			return err
		}
	}
	if c.opts.GatewayAPIDir != "" {
		t := time.Now()
		if err := InstallGatewayAPICRDs(ctx, c.Config, c.opts.GatewayAPIDir); err != nil {
			return err
		}
		c.printf("Gateway API CRDs of %s established (%.1fs)\n", c.opts.GatewayAPIDir, time.Since(t).Seconds())
	}

	// kube-controller-manager and kube-scheduler, started together.
	healthz := func(ctx context.Context, ports []int) error {
		return probeHTTP(ctx, probe, "https://"+hostPort(ports[0])+"/healthz")
	}
	address := func(ports []int) string { return hostPort(ports[0]) }
	var wg sync.WaitGroup
	var kcmErr, schedErr error
	wg.Go(func() {
		_, kcmErr = c.startComponent(ctx, component{
			name:   controllerManagerName,
			nPorts: 1,
			args: func(ports []int) []string {
				return controllerManagerArgs(certs, c.Kubeconfig, ports[0],
					controllerList(c.opts.Node == NodeReal && c.opts.NodeFS > 0, c.opts.NoAutoscalerController))
			},
			ready:   healthz,
			timeout: healthzTimeout,
			address: address,
		})
	})
	wg.Go(func() {
		_, schedErr = c.startComponent(ctx, component{
			name:    schedulerName,
			nPorts:  1,
			args:    func(ports []int) []string { return schedulerArgs(certs, c.Kubeconfig, ports[0]) },
			ready:   healthz,
			timeout: healthzTimeout,
			address: address,
		})
	})
	wg.Wait()
	if err := errors.Join(kcmErr, schedErr); err != nil {
		return err
	}

	if c.opts.Node == NodeReal {
		if err := c.startRealNode(ctx, apiPorts[0]); err != nil {
			return err
		}
		return c.waitDefaultServiceAccount(ctx)
	}

	// kwok, then its node.
	kwokWorkDir := filepath.Join(c.StateDir, "kwok")
	if err := os.MkdirAll(kwokWorkDir, 0o755); err != nil {
		return fmt.Errorf("creating kwok's work directory: %w", err)
	}
	_, err = c.startComponent(ctx, component{
		name:   kwokName,
		nPorts: 1,
		env:    kwokEnv(kwokWorkDir),
		args:   func(ports []int) []string { return kwokArgs(c.Kubeconfig, stages, ports[0]) },
		ready: func(ctx context.Context, ports []int) error {
			return probeHTTP(ctx, probe, "http://"+hostPort(ports[0])+"/healthz")
		},
		timeout: kwokTimeout,
		address: address,
	})
	if err != nil {
		return err
	}

	cfg := rest.CopyConfig(c.Config)
	cfg.QPS, cfg.Burst = 100, 200
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("making the admin client: %w", err)
	}
	t = time.Now()
	c.Nodes = NodeNames(c.opts.PodCapacity)
	for _, name := range c.Nodes {
		if err := CreateKwokNode(ctx, client, name); err != nil {
			return err
		}
	}
	for _, name := range c.Nodes {
		if err := WaitNodeReady(ctx, client, name, nodeReadyTimeout); err != nil {
			return c.withLog(kwokName, err)
		}
	}
	c.printf("%d node(s) Ready, room for %d pods (%.1fs)\n", len(c.Nodes), len(c.Nodes)*KwokNodePods, time.Since(t).Seconds())
	return c.waitDefaultServiceAccount(ctx)
}

// waitDefaultServiceAccount waits until kube-controller-manager has made the
// ServiceAccount default/default, which pods of the default namespace need.
func (c *Cluster) waitDefaultServiceAccount(ctx context.Context) error {
	client, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return fmt.Errorf("making the admin client: %w", err)
	}
	t := time.Now()
	err = wait.PollUntilContextTimeout(ctx, probeInterval, saTimeout, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		return c.withLog(controllerManagerName, fmt.Errorf("waiting for the ServiceAccount default/default: %w", err))
	}
	c.printf("ServiceAccount default/default exists (%.1fs)\n", time.Since(t).Seconds())
	return nil
}

// component describes how to start one component and tell when it is ready.
type component struct {
	name    string   // binary and log name
	path    string   // the binary, if not BinDir/name
	nPorts  int      // free ports it needs
	env     []string // extra environment
	prepare func() error
	args    func(ports []int) []string
	ready   func(ctx context.Context, ports []int) error
	timeout time.Duration
	address func(ports []int) string // for the progress line
}

// startComponent starts comp on fresh ports and waits until it is ready. If it exits
// because a port was taken in the meantime, it is started once more with new ports.
func (c *Cluster) startComponent(ctx context.Context, comp component) ([]int, error) {
	logPath := filepath.Join(c.LogDir, comp.name+".log")
	for attempt := 1; ; attempt++ {
		t := time.Now()
		ports, err := freePorts(comp.nPorts)
		if err != nil {
			return nil, fmt.Errorf("starting %s: %w", comp.name, err)
		}
		if comp.prepare != nil {
			if err := comp.prepare(); err != nil {
				return nil, fmt.Errorf("preparing %s: %w", comp.name, err)
			}
		}
		path := comp.path
		if path == "" {
			path = c.binary(comp.name)
		}
		p, err := startProcess(comp.name, path, comp.args(ports), comp.env, logPath)
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		c.procs[comp.name] = p
		c.started[comp.name] = startedComponent{component: comp, ports: ports}
		c.mu.Unlock()

		err = waitReady(ctx, p, comp.timeout, func(ctx context.Context) error { return comp.ready(ctx, ports) })
		if err == nil {
			c.printf("%s ready on %s (%.1fs, pid %d)\n", comp.name, comp.address(ports), time.Since(t).Seconds(), p.pid())
			return ports, nil
		}
		exitedByItself := p.exited()
		if stopErr := p.stop(stopGrace); stopErr != nil {
			err = errors.Join(err, stopErr)
		}
		if attempt == 1 && exitedByItself && isBindFailure(p.logTail()) {
			c.printf("%s could not bind its port; retrying with new ports\n", comp.name)
			continue
		}
		return nil, fmt.Errorf("starting %s: %w\nlast lines of %s:\n%s", comp.name, err, logPath, p.logTail())
	}
}

// binary returns the path of the component's binary: KubeBinDir's for the components
// it replaces, else BinDir's.
func (c *Cluster) binary(name string) string {
	if c.opts.KubeBinDir != "" && slices.Contains(controlPlaneBinaries, name) {
		return filepath.Join(c.opts.KubeBinDir, name)
	}
	return filepath.Join(c.opts.BinDir, name)
}

// withLog wraps err with the name and log tail of a component that seems at fault.
func (c *Cluster) withLog(name string, err error) error {
	logPath := filepath.Join(c.LogDir, name+".log")
	return fmt.Errorf("%w\nlast lines of %s:\n%s", err, logPath, tailFile(logPath, 30))
}

func (c *Cluster) printf(format string, args ...any) {
	fmt.Fprintf(c.out, format, args...)
}

// Stop stops the components in reverse start order (kwok, scheduler, controller-manager,
// apiserver, etcd), each with SIGTERM and, after a few seconds, SIGKILL, and returns
// once they are all gone. Then it removes StateDir unless Options.KeepState is set. It
// signals only the processes this Cluster started, by pid. Stop is idempotent.
func (c *Cluster) Stop() error {
	return c.stop(!c.opts.KeepState)
}

// stop stops the components and, if removeState, removes StateDir. Only the first call
// does anything; later ones return its result.
func (c *Cluster) stop(removeState bool) error {
	c.stopOnce.Do(func() {
		t := time.Now()
		var errs []error
		if err := c.stopRealNode(); err != nil {
			errs = append(errs, err)
		}
		for i := len(componentNames) - 1; i >= 0; i-- {
			c.mu.Lock()
			p := c.procs[componentNames[i]]
			c.mu.Unlock()
			if p == nil {
				continue
			}
			if err := p.stop(stopGrace); err != nil {
				errs = append(errs, err)
			}
		}
		if len(errs) == 0 {
			c.printf("control plane stopped (%.1fs)\n", time.Since(t).Seconds())
		}
		if !removeState {
			c.printf("state kept in %s\n", c.StateDir)
		} else if len(errs) == 0 {
			if err := os.RemoveAll(c.StateDir); err != nil {
				errs = append(errs, fmt.Errorf("removing the state directory: %w", err))
			}
		}
		if len(errs) > 0 {
			c.stopErr = fmt.Errorf("stopping the local cluster: %w", errors.Join(errs...))
		}
	})
	return c.stopErr
}

// RegistryAddress returns Registry: the real node's image registry, "" with kwok nodes.
func (c *Cluster) RegistryAddress() string { return c.Registry }

// PIDs returns the pid of each running component, keyed by component name.
func (c *Cluster) PIDs() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	pids := make(map[string]int, len(c.procs))
	for name, p := range c.procs {
		if !p.exited() {
			pids[name] = p.pid()
		}
	}
	return pids
}

// Exited returns an error if a component has exited since Start, nil while all run. It
// lets long-running users (the CLI's serve command) notice a crashed component.
func (c *Cluster) Exited() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, name := range componentNames {
		if p := c.procs[name]; p != nil && p.exited() {
			return c.withLog(name, p.exitError())
		}
	}
	return nil
}

package soak

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/app-controller/app-controller/internal/localcluster"
	"github.com/app-controller/app-controller/test/harness"
)

// The controller as the chart runs it on the real node (NodeReal): the image of `make
// image` pushed to the cluster's registry, one Helm release per shard with the chart's
// defaults (2 replicas, leader election, probes, limits) but the App selector. The
// kubelet restarts a container that exits. /metrics is read through `kubectl
// port-forward` to each pod; the logs through the API (kubectl logs).

const (
	// releaseA is the release of shard a (with the CRD, every controller), releaseB of
	// shard b (the App controller alone); both in leaseNamespace.
	releaseA = "app-controller"
	releaseB = "app-controller-b"
	// imageTag is the controller image's tag in the cluster's registry.
	imageTag = "soak"
	// controllerPodSelector selects the controller's pods (both releases).
	controllerPodSelector = "app.kubernetes.io/name=app-controller"
	// instanceLabel names a pod's release.
	instanceLabel = "app.kubernetes.io/instance"
	// metricsPort is the chart's metrics port.
	metricsPort = 8080
	// logPollInterval is how often the pods' logs are read.
	logPollInterval = 15 * time.Second
)

type chartFleet struct {
	cfg     *Config
	cluster *localcluster.Cluster
	kube    kubernetes.Interface
	logDir  string
	logs    *logScanner

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// logMu serializes the reads of the logs.
	logMu sync.Mutex

	// previous, if set, is the release the fleet is installed from, upgraded to this
	// tree's chart and image by upgrade.
	previous *harness.Release
	// prometheusURL is the fleet's Prometheus (fleet_prometheus.go), which both
	// releases query (analysis.prometheus.url).
	prometheusURL string

	mu   sync.Mutex
	pods map[string]*chartPod // by pod name
	// replaced are the pods an upgrade replaces: their exit is the upgrade's.
	replaced map[string]bool
	// killed are the container IDs the soak killed.
	killed  map[string]bool
	records []Restart
}

// chartPod is a controller pod: its current container, port-forward and log position.
type chartPod struct {
	name, shard string
	uid         string
	restarts    int32
	containerID string
	forward     *harness.PortForward
	// logSince is the timestamp of the last log line read of the current container.
	logSince time.Time
	logFile  *os.File
	gone     bool
}

func newChartFleet(cfg *Config, cluster *localcluster.Cluster, kube kubernetes.Interface, logDir string) *chartFleet {
	return &chartFleet{cfg: cfg, cluster: cluster, kube: kube, logDir: logDir, logs: newLogScanner(),
		pods: map[string]*chartPod{}, killed: map[string]bool{}, replaced: map[string]bool{}}
}

func (f *chartFleet) users() []string {
	return []string{"system:serviceaccount:" + leaseNamespace + ":" + releaseA, "system:serviceaccount:" + leaseNamespace + ":" + releaseB}
}

// run runs a command of the build (helm, imagebuild) against the cluster.
func (f *chartFleet) run(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(f.cfg.BinDir, name), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+f.cluster.Kubeconfig)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

func (f *chartFleet) start(ctx context.Context) error {
	repository := f.cluster.Registry + "/app-controller"
	if err := f.run(ctx, "imagebuild", "push", "--layout", f.cfg.ImageLayout, repository+":"+imageTag); err != nil {
		return fmt.Errorf("pushing the controller's image: %w", err)
	}
	chart := append([]string{f.cfg.Chart}, setValues("image.repository="+repository, "image.tag="+imageTag)...)
	if p := f.previous; p != nil {
		// The previous release's chart and image, as make release pushed them.
		chart = append([]string{"oci://" + f.cluster.Registry + "/charts/app-controller", "--version", p.ChartVersion, "--plain-http"},
			setValues("image.repository="+p.Repository, "image.tag="+p.Version)...)
	}
	var err error
	if f.prometheusURL, err = f.installPrometheus(ctx); err != nil {
		return err
	}
	if err := f.helm(ctx, "install", chart, "--create-namespace"); err != nil {
		return err
	}
	if err := waitLeaders(ctx, f.kube); err != nil {
		return err
	}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	if err := f.refresh(ctx); err != nil {
		return err
	}
	f.wg.Go(f.watch)
	return nil
}

// helm runs `helm verb` of both releases with chart (its reference and values), each
// with its shard's values (shard b: the App controller alone, no CRD), and waits.
func (f *chartFleet) helm(ctx context.Context, verb string, chart []string, extra ...string) error {
	for _, rel := range []struct {
		name   string
		values []string
	}{
		{releaseA, setValues("appSelector=" + shardLabel + "=" + shardA)},
		{releaseB, setValues("appSelector="+shardLabel+"="+shardB, "crds.enabled=false", "controllers={app}")},
	} {
		args := append([]string{verb, rel.name}, chart...)
		args = append(append(append(args, "-n", leaseNamespace, "--wait", "--timeout", "5m"), rel.values...), extra...)
		if f.prometheusURL != "" {
			args = append(args, setValues("analysis.prometheus.url="+f.prometheusURL)...)
		}
		if err := f.run(ctx, "helm", args...); err != nil {
			return err
		}
	}
	return nil
}

// setValues returns helm's flags that set each of values (KEY=VALUE).
func setValues(values ...string) []string {
	out := make([]string, 0, 2*len(values))
	for _, v := range values {
		out = append(out, "--set", v)
	}
	return out
}

// upgrade upgrades both releases from the previous release to this tree's chart and
// image (pushed by start), as a user upgrades: helm upgrade --wait, the chart's rollout
// (maxSurge 1, maxUnavailable 0) replacing the pods one at a time, the leaders handing
// over. The pods it replaces are recorded as replaced, their exits as the upgrade's.
func (f *chartFleet) upgrade(ctx context.Context) (string, error) {
	if f.previous == nil {
		return "", errors.New("no previous release to upgrade from (-upgrade-from)")
	}
	f.mu.Lock()
	for name, cp := range f.pods {
		if !cp.gone {
			f.replaced[name] = true
		}
	}
	n := len(f.replaced)
	f.mu.Unlock()
	start := time.Now()
	chart := append([]string{f.cfg.Chart}, setValues("image.repository="+f.cluster.Registry+"/app-controller", "image.tag="+imageTag)...)
	if err := f.helm(ctx, "upgrade", chart); err != nil {
		return "", err
	}
	return fmt.Sprintf("helm upgrade --wait of %s and %s from release %s (chart %s, image %s:%s) to this tree's chart and image (:%s): %.1fs, %d controller pods replaced",
		releaseA, releaseB, f.previous.Version, f.previous.ChartVersion, f.previous.Repository, f.previous.Version, imageTag, time.Since(start).Seconds(), n), nil
}

// watch follows the controller's pods until the fleet stops: their restarts, port-forwards and logs.
func (f *chartFleet) watch() {
	lastLogs := time.Time{}
	harness.Every(f.ctx, 2*time.Second, func() {
		_ = f.refresh(f.ctx)
		if time.Since(lastLogs) >= logPollInterval {
			f.readLogs(f.ctx)
			lastLogs = time.Now()
		}
	})
}

// refresh lists the controller's pods: it records the restarts of their containers,
// forgets the pods that are gone and opens a port-forward to each running one without.
func (f *chartFleet) refresh(ctx context.Context) error {
	list, err := f.kube.CoreV1().Pods(leaseNamespace).List(ctx, metav1.ListOptions{LabelSelector: controllerPodSelector})
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for i := range list.Items {
		p := &list.Items[i]
		seen[p.Name] = true
		shard := shardA
		if p.Labels[instanceLabel] == releaseB {
			shard = shardB
		}
		f.mu.Lock()
		cp := f.pods[p.Name]
		if cp == nil {
			cp = &chartPod{name: p.Name, shard: shard, uid: string(p.UID)}
			f.pods[p.Name] = cp
		}
		f.mu.Unlock()
		if p.Status.Phase == corev1.PodFailed && p.Status.Reason == "Evicted" {
			f.mu.Lock()
			if !cp.gone {
				cp.gone = true
				process := fmt.Sprintf("%s#%d", cp.name, cp.restarts)
				_, last := f.logs.cause(process)
				f.records = append(f.records, Restart{Instance: process, At: time.Now(), How: "evicted: " + p.Status.Message, LastLine: last, Cause: causeEvicted})
				if cp.forward != nil {
					cp.forward.Stop()
					cp.forward = nil
				}
			}
			f.mu.Unlock()
			continue
		}
		if len(p.Status.ContainerStatuses) == 0 {
			continue
		}
		cs := p.Status.ContainerStatuses[0]
		f.mu.Lock()
		restarted := cs.RestartCount > cp.restarts
		oldProcess := fmt.Sprintf("%s#%d", cp.name, cp.restarts)
		f.mu.Unlock()
		if restarted {
			f.readPrevious(ctx, cp, oldProcess)
			how := "restarted"
			if t := cs.LastTerminationState.Terminated; t != nil {
				how = fmt.Sprintf("exit code %d, %s", t.ExitCode, t.Reason)
			}
			f.mu.Lock()
			if f.killed[cp.containerID] {
				f.logs.markKilled(oldProcess)
			}
			cause, last := f.logs.cause(oldProcess)
			f.records = append(f.records, Restart{Instance: oldProcess, At: time.Now(), How: how, LastLine: last, Cause: cause})
			cp.restarts = cs.RestartCount
			cp.logSince = time.Time{}
			if cp.forward != nil {
				cp.forward.Stop()
				cp.forward = nil
			}
			f.mu.Unlock()
		}
		f.mu.Lock()
		cp.containerID = cs.ContainerID
		needForward := cs.State.Running != nil && p.DeletionTimestamp == nil && (cp.forward == nil || closed(cp.forward.Done()))
		f.mu.Unlock()
		if needForward {
			fw, err := harness.StartPortForward(filepath.Join(f.cfg.BinDir, "kubectl"), f.cluster.Kubeconfig, leaseNamespace, "pod/"+p.Name, metricsPort)
			f.mu.Lock()
			if err == nil {
				cp.forward = fw
			}
			f.mu.Unlock()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for name, cp := range f.pods {
		if !seen[name] && !cp.gone {
			cp.gone = true
			process := fmt.Sprintf("%s#%d", cp.name, cp.restarts)
			cause, last := f.logs.cause(process)
			if f.replaced[name] {
				cause = causeUpgraded
			}
			f.records = append(f.records, Restart{Instance: process, At: time.Now(), How: "pod deleted", LastLine: last, Cause: cause})
			if cp.forward != nil {
				cp.forward.Stop()
				cp.forward = nil
			}
		}
	}
	return nil
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// readLogs reads the new log lines of every live pod's current container.
func (f *chartFleet) readLogs(ctx context.Context) {
	f.mu.Lock()
	var pods []*chartPod
	for _, cp := range f.pods {
		if !cp.gone {
			pods = append(pods, cp)
		}
	}
	f.mu.Unlock()
	for _, cp := range pods {
		f.mu.Lock()
		process := fmt.Sprintf("%s#%d", cp.name, cp.restarts)
		f.mu.Unlock()
		f.readLog(ctx, cp, process, false)
	}
}

// readPrevious reads the rest of the log of a container that exited.
func (f *chartFleet) readPrevious(ctx context.Context, cp *chartPod, process string) {
	f.readLog(ctx, cp, process, true)
}

// readLog reads the lines of cp's container (the previous one with previous) logged
// after the last one read, into the pod's log file and the scanner.
func (f *chartFleet) readLog(ctx context.Context, cp *chartPod, process string, previous bool) {
	f.logMu.Lock()
	defer f.logMu.Unlock()
	f.mu.Lock()
	since := cp.logSince
	f.mu.Unlock()
	opts := &corev1.PodLogOptions{Timestamps: true, Previous: previous}
	if !since.IsZero() {
		opts.SinceTime = &metav1.Time{Time: since.Truncate(time.Second)}
	}
	stream, err := f.kube.CoreV1().Pods(leaseNamespace).GetLogs(cp.name, opts).Stream(ctx)
	if err != nil {
		return
	}
	defer stream.Close()
	f.mu.Lock()
	if cp.logFile == nil {
		cp.logFile, _ = os.OpenFile(filepath.Join(f.logDir, cp.name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	}
	file := cp.logFile
	f.mu.Unlock()
	s := bufio.NewScanner(stream)
	s.Buffer(make([]byte, 64<<10), 1<<20)
	last := since
	for s.Scan() {
		stamp, line, _ := strings.Cut(s.Text(), " ")
		at, err := time.Parse(time.RFC3339Nano, stamp)
		if err != nil || !at.After(since) {
			continue
		}
		last = at
		f.logs.line(process, line)
		if file != nil {
			fmt.Fprintf(file, "%s %s\n", process, line)
		}
	}
	f.mu.Lock()
	if last.After(cp.logSince) {
		cp.logSince = last
	}
	f.mu.Unlock()
}

func (f *chartFleet) running() []instance {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []instance
	for _, cp := range f.pods {
		if !cp.gone && cp.forward != nil && !closed(cp.forward.Done()) {
			out = append(out, instance{name: cp.name, shard: cp.shard, process: fmt.Sprintf("%s#%d", cp.name, cp.restarts), lease: leaseName(cp.shard)})
		}
	}
	return out
}

func (f *chartFleet) pod(in instance) *chartPod {
	f.mu.Lock()
	defer f.mu.Unlock()
	cp := f.pods[in.name]
	if cp == nil || cp.gone || fmt.Sprintf("%s#%d", cp.name, cp.restarts) != in.process {
		return nil
	}
	return cp
}

func (f *chartFleet) scrape(ctx context.Context, in instance) (map[string]*dto.MetricFamily, error) {
	cp := f.pod(in)
	if cp == nil {
		return nil, fmt.Errorf("process %s is gone", in.process)
	}
	f.mu.Lock()
	fw := cp.forward
	f.mu.Unlock()
	if fw == nil {
		return nil, fmt.Errorf("no port-forward to %s", in.name)
	}
	return harness.Scrape(ctx, fw.URL+"/metrics")
}

// kill kills the pod's container with SIGKILL through the node's containerd.
func (f *chartFleet) kill(ctx context.Context, in instance) error {
	cp := f.pod(in)
	if cp == nil {
		return fmt.Errorf("process %s is gone", in.process)
	}
	f.mu.Lock()
	id := cp.containerID
	f.killed[id] = true
	f.mu.Unlock()
	f.readLog(ctx, cp, in.process, false)
	return f.cluster.KillContainer(ctx, id)
}

func (f *chartFleet) restarts() []Restart {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Restart(nil), f.records...)
}

func (f *chartFleet) panics() []string {
	f.readLogs(context.Background())
	return f.logs.panics()
}

func (f *chartFleet) stop() {
	if f.cancel == nil {
		return
	}
	f.cancel()
	f.wg.Wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, cp := range f.pods {
		if cp.forward != nil {
			cp.forward.Stop()
		}
		if cp.logFile != nil {
			_ = cp.logFile.Close()
		}
	}
}

package localcluster

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Fault injection for the reliability tests and the soak: freezing, resuming and
// restarting a component or a daemon of the real node, compacting etcd, cutting every
// connection to the API server and killing a container of the real node. Each acts only
// on a process this Cluster started, through its handle, or on its own sockets and
// containers.

// Component names for Pause, Resume and Restart. Containerd, Kubelet and KubeProxy are
// the real node's daemons (Options.Node NodeReal).
const (
	Etcd              = etcdName
	APIServer         = apiserverName
	ControllerManager = controllerManagerName
	Scheduler         = schedulerName
	Kwok              = kwokName
	Containerd        = containerdName
	Kubelet           = kubeletName
	KubeProxy         = kubeProxyName
	// MetricsServer is the real node's metrics-server (metricsserver.go).
	MetricsServer = metricsServerName
)

// startedComponent is how a component was started, to start it again on the same ports.
type startedComponent struct {
	component
	ports []int
}

// running returns the running process of the component name.
func (c *Cluster) running(name string) (*process, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.procs[name]
	if p == nil {
		return nil, fmt.Errorf("no component %q in this cluster", name)
	}
	if p.exited() {
		return nil, c.withLog(name, p.exitError())
	}
	return p, nil
}

// Pause freezes the component name with SIGSTOP: it keeps its sockets open but answers
// nothing until Resume. A paused component still stops with Stop (its SIGKILL).
func (c *Cluster) Pause(name string) error {
	p, err := c.running(name)
	if err != nil {
		return fmt.Errorf("pausing %s: %w", name, err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return fmt.Errorf("pausing %s (pid %d): %w", name, p.pid(), err)
	}
	return nil
}

// Resume lets a component paused by Pause run again (SIGCONT).
func (c *Cluster) Resume(name string) error {
	p, err := c.running(name)
	if err != nil {
		return fmt.Errorf("resuming %s: %w", name, err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		return fmt.Errorf("resuming %s (pid %d): %w", name, p.pid(), err)
	}
	return nil
}

// Restart stops the component name (SIGTERM, then SIGKILL after a grace period) and
// starts it again with the same arguments and ports, returning once it is ready again.
// etcd keeps its data. The component's log gets the new process's output appended. A
// daemon of the real node restarts the same way: containerd leaves the containers
// running (their shims outlive it) and finds them again, the kubelet finds its pods.
func (c *Cluster) Restart(ctx context.Context, name string) error {
	return c.StopFor(ctx, name, 0)
}

// StopFor is Restart with the component stopped for down before it starts again: gone
// meanwhile, its clients' requests refused (metrics-server: the resource metrics API
// unavailable, the HorizontalPodAutoscalers without metrics).
func (c *Cluster) StopFor(ctx context.Context, name string, down time.Duration) error {
	c.mu.Lock()
	p, sc := c.procs[name], c.started[name]
	daemon, isDaemon := c.daemons[name]
	c.mu.Unlock()
	if p == nil || sc.args == nil && !isDaemon {
		return fmt.Errorf("restarting %s: no such component in this cluster", name)
	}
	_ = p.cmd.Process.Signal(syscall.SIGCONT) // a paused process cannot act on SIGTERM
	if err := p.stop(stopGrace); err != nil {
		return fmt.Errorf("restarting %s: %w", name, err)
	}
	if down > 0 {
		select {
		case <-ctx.Done():
		case <-time.After(down):
		}
	}
	var np *process
	var err error
	timeout, ready := sc.timeout, func(ctx context.Context) error { return sc.ready(ctx, sc.ports) }
	if isDaemon {
		timeout, ready = daemonRestartTimeout, daemon.ready
		np, err = c.startNodeProcess(name, daemon.argv) // records np in c.procs
	} else {
		path := sc.path
		if path == "" {
			path = c.binary(name) // as startComponent found it
		}
		np, err = startProcess(name, path, sc.args(sc.ports), sc.env, filepath.Join(c.LogDir, name+".log"))
	}
	if err != nil {
		return fmt.Errorf("restarting %s: %w", name, err)
	}
	c.mu.Lock()
	c.procs[name] = np
	c.mu.Unlock()
	if err := waitReady(ctx, np, timeout, ready); err != nil {
		return c.withLog(name, fmt.Errorf("restarting %s: %w", name, err))
	}
	return nil
}

// daemonRestartTimeout bounds the wait for a restarted daemon of the real node.
const daemonRestartTimeout = time.Minute

// CutAPIServerConnections destroys every TCP connection to kube-apiserver at once, as a
// network blip or a restarted load balancer would end them: `ss -K` (the kernel's
// sock_destroy, CONFIG_INET_DIAG_DESTROY) aborts the clients' sockets, whose peers get a
// reset. Every client's requests and watches fail and reconnect (informers resume their
// watches, or relist when their resource version is too old). The API server keeps
// running. It returns how many sockets were destroyed.
func (c *Cluster) CutAPIServerConnections(ctx context.Context) (int, error) {
	c.mu.Lock()
	sc, ok := c.started[apiserverName]
	c.mu.Unlock()
	if !ok || len(sc.ports) == 0 {
		return 0, errors.New("cutting the API server's connections: no API server in this cluster")
	}
	port := strconv.Itoa(sc.ports[0])
	out, err := exec.CommandContext(ctx, "ss", "-K", "-H", "-t", "-n", "dst", "127.0.0.1", "dport", "=", ":"+port).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("cutting the API server's connections (ss -K dport %s): %w: %s", port, err, bytes.TrimSpace(out))
	}
	destroyed := 0 // ss prints one line per destroyed socket
	for line := range strings.Lines(string(out)) {
		if strings.TrimSpace(line) != "" {
			destroyed++
		}
	}
	return destroyed, nil
}

// KillContainer kills the process of the real node's container id (a pod's
// containerStatuses[].containerID, with or without its containerd:// prefix) with
// SIGKILL, as the kernel's OOM killer or a crash ends it; the kubelet then restarts it
// as the pod's restartPolicy says. It uses containerd's ctr (Debian's containerd package)
// against the node's own containerd.
func (c *Cluster) KillContainer(ctx context.Context, id string) error {
	if c.node == nil {
		return errors.New("killing a container: this cluster has no real node")
	}
	id = strings.TrimPrefix(id, "containerd://")
	socket := filepath.Join(c.node.dir, "containerd", "containerd.sock")
	out, err := exec.CommandContext(ctx, "ctr", "--address", socket, "--namespace", "k8s.io", "tasks", "kill", "--signal", "SIGKILL", id).CombinedOutput()
	if err != nil {
		return fmt.Errorf("killing container %s (ctr tasks kill): %w: %s", id, err, bytes.TrimSpace(out))
	}
	return nil
}

// CompactEtcd compacts etcd's history up to its current revision, through etcd's JSON
// gateway, and returns that revision: a watch that resumes from an older revision is
// then answered 410 Gone (once the API server's watch cache no longer holds it either).
func (c *Cluster) CompactEtcd(ctx context.Context) (int64, error) {
	var rangeResp struct {
		Header struct {
			Revision string `json:"revision"`
		} `json:"header"`
	}
	key := base64.StdEncoding.EncodeToString([]byte("/registry/compact-probe"))
	if err := c.etcdCall(ctx, "/v3/kv/range", map[string]any{"key": key}, &rangeResp); err != nil {
		return 0, fmt.Errorf("reading etcd's revision: %w", err)
	}
	rev, err := strconv.ParseInt(rangeResp.Header.Revision, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("reading etcd's revision %q: %w", rangeResp.Header.Revision, err)
	}
	if err := c.etcdCall(ctx, "/v3/kv/compaction", map[string]any{"revision": strconv.FormatInt(rev, 10), "physical": true}, nil); err != nil {
		return 0, fmt.Errorf("compacting etcd at revision %d: %w", rev, err)
	}
	return rev, nil
}

// etcdCall posts req as JSON to etcd's gateway path and decodes the answer into resp.
func (c *Cluster) etcdCall(ctx context.Context, path string, req, resp any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, c.etcdURL+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	r.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(r)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return err
	}
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %s: %s", path, res.Status, bytes.TrimSpace(data))
	}
	if resp == nil {
		return nil
	}
	return json.Unmarshal(data, resp)
}

// nodeFSFill is the file FillNodeFS writes in the kubelet's root directory.
const nodeFSFill = "node-pressure-fill"

// FillNodeFS fills the real node's nodefs (the tmpfs of Options.NodeFS) to fraction of
// its size with a file, as a pod writing its disk full would, or with fraction 0 removes
// that file again. Above 1 - nodeFSEvictAt the kubelet signals DiskPressure, taints the
// node and evicts pods, one at each of its housekeeping passes, until enough is free;
// the pressure ends nodePressurePeriod after the file is gone.
func (c *Cluster) FillNodeFS(ctx context.Context, fraction float64) error {
	if c.node == nil || c.opts.NodeFS == 0 {
		return errors.New("filling the node's filesystem: this cluster has no real node with Options.NodeFS")
	}
	path := filepath.Join(c.node.kubeletRoot(), nodeFSFill)
	script := "rm -f " + path
	if fraction > 0 {
		script = fmt.Sprintf("fallocate -l %d %s", int64(fraction*float64(c.opts.NodeFS)), path)
	}
	mnt := fmt.Sprintf("--mount=/proc/%d/ns/mnt", c.node.holder.pid())
	out, err := exec.CommandContext(ctx, "nsenter", mnt, "--", "sh", "-c", script).CombinedOutput()
	if err != nil {
		return fmt.Errorf("filling the node's filesystem (%s): %w: %s", script, err, bytes.TrimSpace(out))
	}
	return nil
}

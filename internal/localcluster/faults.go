package localcluster

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// Fault injection for the reliability tests: freezing, resuming and restarting a
// component, and compacting etcd. Each acts only on a process this Cluster started,
// through its handle.

// Component names for Pause, Resume and Restart.
const (
	Etcd              = etcdName
	APIServer         = apiserverName
	ControllerManager = controllerManagerName
	Scheduler         = schedulerName
	Kwok              = kwokName
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
// etcd keeps its data. The component's log gets the new process's output appended.
func (c *Cluster) Restart(ctx context.Context, name string) error {
	c.mu.Lock()
	p, sc := c.procs[name], c.started[name]
	c.mu.Unlock()
	if p == nil {
		return fmt.Errorf("restarting %s: no such component in this cluster", name)
	}
	_ = p.cmd.Process.Signal(syscall.SIGCONT) // a paused process cannot act on SIGTERM
	if err := p.stop(stopGrace); err != nil {
		return fmt.Errorf("restarting %s: %w", name, err)
	}
	logPath := filepath.Join(c.LogDir, name+".log")
	np, err := startProcess(name, filepath.Join(c.opts.BinDir, name), sc.args(sc.ports), sc.env, logPath)
	if err != nil {
		return fmt.Errorf("restarting %s: %w", name, err)
	}
	c.mu.Lock()
	c.procs[name] = np
	c.mu.Unlock()
	if err := waitReady(ctx, np, sc.timeout, func(ctx context.Context) error { return sc.ready(ctx, sc.ports) }); err != nil {
		return c.withLog(name, fmt.Errorf("restarting %s: %w", name, err))
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

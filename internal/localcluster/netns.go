package localcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The real node's network. The node (containerd, the kubelet, kube-proxy and so every pod)
// lives in a network namespace of its own, joined to the host by one veth pair:
//
//	host namespace                          node namespace lcnode-N
//	lcnode-N  10.201.N.1/30  <--veth-->  eth0  10.201.N.2/30     (the node's InternalIP)
//	                                     cni0  10.244.0.1/24     (the pods' bridge)
//
// The node namespace has no default route and its pods are not masqueraded: nothing in it
// can reach anything but the node, its pods and the host end of the veth, and a FORWARD
// rule drops what pods send to the veth. The host gets `unreachable` routes for the pod and
// Service ranges, so that a mistaken request from the host fails here instead of leaving
// the machine. The apiserver reaches the kubelet at 10.201.N.2:10250 through the veth; the
// other way, the node reaches the apiserver and the image registry, which listen only on
// the host's loopback, through forwarders whose listeners live inside the node namespace
// (forwarder below).
const (
	nodeNetnsPrefix = "lcnode-"
	// nodeSubnetPrefix is the first two octets of the veth /30s; the third is the index N.
	nodeSubnetPrefix = "10.201."
	nodeIfName       = "eth0"
	// PodCIDR is the range of the real node's pods (host-local IPAM on the bridge cni0).
	PodCIDR    = "10.244.0.0/24"
	podsRange  = "10.244.0.0/16" // made unreachable from the host
	bridgeName = "cni0"
	// maxNodeNetworks bounds the search for a free index N.
	maxNodeNetworks = 250
)

// nodeNetwork is the network namespace of a real node and its veth pair.
type nodeNetwork struct {
	index  int
	name   string // namespace name, also the host end of the veth
	hostIP string
	nodeIP string
	// routesAdded are the host routes this network added (and removes).
	routesAdded []string
}

// nsPath is the namespace's file, for nsenter --net and setns.
func (n *nodeNetwork) nsPath() string { return filepath.Join("/run/netns", n.name) }

// setupNodeNetwork makes a network namespace lcnode-N with the lowest free N, its veth
// pair and addresses, the host's unreachable routes and the node's isolation rule.
// `ip netns add` fails when the name exists, which makes the choice of N atomic between
// clusters started at the same time.
func setupNodeNetwork(ctx context.Context) (*nodeNetwork, error) {
	var n *nodeNetwork
	for i := 1; i <= maxNodeNetworks && n == nil; i++ {
		name := fmt.Sprintf("%s%d", nodeNetnsPrefix, i)
		if _, err := os.Stat(filepath.Join("/run/netns", name)); err == nil {
			continue
		}
		if err := run(ctx, "ip", "netns", "add", name); err != nil {
			if strings.Contains(err.Error(), "File exists") {
				continue
			}
			return nil, fmt.Errorf("creating the node's network namespace: %w", err)
		}
		n = &nodeNetwork{
			index:  i,
			name:   name,
			hostIP: fmt.Sprintf("%s%d.1", nodeSubnetPrefix, i),
			nodeIP: fmt.Sprintf("%s%d.2", nodeSubnetPrefix, i),
		}
	}
	if n == nil {
		return nil, fmt.Errorf("no free node network namespace among %s1..%d", nodeNetnsPrefix, maxNodeNetworks)
	}
	if err := clearStaleHostLink(ctx, n.name); err != nil {
		return nil, errors.Join(err, n.teardown(ctx))
	}
	steps := [][]string{
		{"ip", "link", "add", n.name, "type", "veth", "peer", "name", nodeIfName, "netns", n.name}, //nolint:goconst // words of ip(8) command lines, not one value to name
		{"ip", "addr", "add", n.hostIP + "/30", "dev", n.name},
		{"ip", "link", "set", n.name, "up"}, //nolint:goconst // words of ip(8) command lines, not one value to name
		{"ip", "-n", n.name, "addr", "add", n.nodeIP + "/30", "dev", nodeIfName},
		{"ip", "-n", n.name, "link", "set", nodeIfName, "up"},
		{"ip", "-n", n.name, "link", "set", "lo", "up"},
	}
	for _, args := range steps {
		if err := run(ctx, args[0], args[1:]...); err != nil {
			return nil, errors.Join(fmt.Errorf("setting up the node's network: %w", err), n.teardown(ctx))
		}
	}
	for _, dst := range []string{podsRange, serviceClusterIPRange} {
		err := run(ctx, "ip", "route", "add", "unreachable", dst)
		switch {
		case err == nil:
			n.routesAdded = append(n.routesAdded, dst)
		case strings.Contains(err.Error(), "File exists"): // another local cluster's
		default:
			return nil, errors.Join(fmt.Errorf("making %s unreachable from the host: %w", dst, err), n.teardown(ctx))
		}
	}
	// Inside the node: forwarding for the bridge, bridged traffic through iptables (so
	// kube-proxy's rules see pod-to-Service traffic on the same bridge), and nothing
	// forwarded from the pods to the veth.
	sysctls := map[string]string{
		"net/ipv4/ip_forward":                 "1",
		"net/bridge/bridge-nf-call-iptables":  "1",
		"net/bridge/bridge-nf-call-ip6tables": "1",
	}
	if err := inNetns(n.nsPath(), func() error {
		for key, value := range sysctls {
			if err := os.WriteFile(filepath.Join("/proc/sys", key), []byte(value), 0o644); err != nil {
				return fmt.Errorf("setting %s in the node's namespace: %w", key, err)
			}
		}
		return nil
	}); err != nil {
		return nil, errors.Join(err, n.teardown(ctx))
	}
	if err := run(ctx, "nsenter", "--net="+n.nsPath(), "iptables", "-w", "-I", "FORWARD", "1",
		"-o", nodeIfName, "-m", "comment", "--comment", "localcluster: pods reach nothing outside the node", "-j", "DROP"); err != nil {
		return nil, errors.Join(fmt.Errorf("isolating the node's pods: %w", err), n.teardown(ctx))
	}
	return n, nil
}

// staleLinkWait bounds how long clearStaleHostLink waits for the kernel to remove the
// host end of a node network that another cluster has just torn down.
const staleLinkWait = 10 * time.Second

// clearStaleHostLink makes sure the host has no interface named name before the veth pair
// of that name is made. This cluster holds the namespace of that name (ip netns add
// succeeded), so such an interface is the host end of the namespace another cluster has
// just deleted: `ip netns delete` frees the name at once, while the kernel removes the
// namespace's interfaces a moment later, once its last reference is gone. It waits up
// to staleLinkWait for the kernel, then deletes the interface itself.
func clearStaleHostLink(ctx context.Context, name string) error {
	deadline := time.Now().Add(staleLinkWait)
	for {
		if run(ctx, "ip", "link", "show", "dev", name) != nil {
			return nil // no such interface
		}
		if time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the stale host interface %s to go: %w", name, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	if err := run(ctx, "ip", "link", "delete", name); err != nil && run(ctx, "ip", "link", "show", "dev", name) == nil {
		return fmt.Errorf("deleting the stale host interface %s of a torn-down node network: %w", name, err)
	}
	return nil
}

// teardown deletes the namespace (which deletes the veth pair, the bridge and every
// iptables rule in it) and the host routes this network added, unless another local
// cluster's node still needs them.
func (n *nodeNetwork) teardown(ctx context.Context) error {
	var errs []error
	if err := run(ctx, "ip", "netns", "delete", n.name); err != nil && !strings.Contains(err.Error(), "No such file") {
		errs = append(errs, fmt.Errorf("deleting the node's network namespace: %w", err))
	}
	if !otherNodeNetworks(n.name) {
		for _, dst := range n.routesAdded {
			if err := run(ctx, "ip", "route", "delete", "unreachable", dst); err != nil && !strings.Contains(err.Error(), "No such process") {
				errs = append(errs, fmt.Errorf("removing the host route to %s: %w", dst, err))
			}
		}
	}
	return errors.Join(errs...)
}

// otherNodeNetworks reports whether a node namespace other than self exists.
func otherNodeNetworks(self string) bool {
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), nodeNetnsPrefix) && e.Name() != self {
			return true
		}
	}
	return false
}

// run runs a command; the error holds its output.
func run(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// inNetns runs fn on an OS thread that has joined the network namespace at nsPath; the
// thread goes back to its own namespace afterwards (or, if it cannot, ends with fn's
// goroutine, so no other goroutine runs in the wrong namespace). Sockets opened by fn stay
// in nsPath's namespace after it returns.
func inNetns(nsPath string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		self, err := os.Open(fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), unix.Gettid()))
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("opening this thread's network namespace: %w", err)
			return
		}
		defer self.Close()
		target, err := os.Open(nsPath)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("opening the network namespace %s: %w", nsPath, err)
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("joining the network namespace %s: %w", nsPath, err)
			return
		}
		fnErr := fn()
		if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
			// Leave the thread locked: it exits with this goroutine.
			errc <- errors.Join(fnErr, fmt.Errorf("returning from the network namespace %s: %w", nsPath, err))
			return
		}
		runtime.UnlockOSThread()
		errc <- fnErr
	}()
	return <-errc
}

// forwarder accepts TCP connections on a listener inside the node's network namespace
// and relays each to a target on the host's loopback: the node's way to the apiserver and
// the registry, which listen on nothing but 127.0.0.1.
type forwarder struct {
	listener net.Listener
	target   string
	wg       sync.WaitGroup

	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

// forward listens on addr inside the namespace at nsPath and relays to target.
func forward(nsPath, addr, target string) (*forwarder, error) {
	var l net.Listener
	err := inNetns(nsPath, func() error {
		var err error
		l, err = net.Listen("tcp", addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listening on %s in the node's network namespace: %w", addr, err)
	}
	f := &forwarder{listener: l, target: target, conns: map[net.Conn]struct{}{}}
	f.wg.Go(f.serve)
	return f, nil
}

func (f *forwarder) serve() {
	for {
		in, err := f.listener.Accept()
		if err != nil {
			return // closed
		}
		f.wg.Go(func() { f.relay(in) })
	}
}

// relay copies between in and a new connection to the target until either side closes.
func (f *forwarder) relay(in net.Conn) {
	defer in.Close()
	out, err := net.DialTimeout("tcp", f.target, 10*time.Second)
	if err != nil {
		return
	}
	defer out.Close()
	if !f.track(in, out) {
		return
	}
	defer f.untrack(in, out)
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tcp, ok := dst.(*net.TCPConn); ok {
			_ = tcp.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(out, in)
	go pipe(in, out)
	<-done
	<-done
}

// track records open connections so that close can end them; it refuses once closed.
func (f *forwarder) track(conns ...net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conns == nil {
		return false
	}
	for _, c := range conns {
		f.conns[c] = struct{}{}
	}
	return true
}

func (f *forwarder) untrack(conns ...net.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range conns {
		delete(f.conns, c)
	}
}

// close stops accepting, ends every relayed connection and waits for the relays.
func (f *forwarder) close() {
	_ = f.listener.Close()
	f.mu.Lock()
	for c := range f.conns {
		_ = c.Close()
	}
	f.conns = nil
	f.mu.Unlock()
	f.wg.Wait()
}

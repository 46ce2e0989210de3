package localcluster

import (
	"fmt"
	"net"
	"strings"
	"sync"
)

// handedOut is every port freePorts returned in this process: the kernel may offer a
// port again as soon as its listener closes, and two components started at once (the
// controller-manager and the scheduler) were given the same one; the second failed to
// bind, and its readiness check, answered by the first, said it was ready.
var handedOut struct {
	sync.Mutex
	ports map[int]bool
}

// listenAnyPort listens on a port of 127.0.0.1 the kernel chooses (a test's fake
// offers ports again).
var listenAnyPort = func() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }

// freePorts returns n distinct TCP ports on 127.0.0.1 that were free a moment ago and
// that no earlier call in this process returned. All listeners stay open until every
// port is chosen, so the ports differ from each other; another process may still take
// one before the component binds it, which is why a component that fails to bind is
// started once more with new ports.
func freePorts(n int) ([]int, error) {
	handedOut.Lock()
	defer handedOut.Unlock()
	if handedOut.ports == nil {
		handedOut.ports = map[int]bool{}
	}
	listeners := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, n)
	// The kernel picks among about 28,000 ephemeral ports: a handful of tries more
	// than n finds new ones unless this process used most of them.
	for tries := 0; len(ports) < n; tries++ {
		if tries >= n+100 {
			return nil, fmt.Errorf("finding %d free ports on 127.0.0.1: the kernel offered only ports this process used before", n)
		}
		l, err := listenAnyPort()
		if err != nil {
			return nil, fmt.Errorf("finding a free port on 127.0.0.1: %w", err)
		}
		listeners = append(listeners, l) // held, so that the kernel offers another next
		if p := l.Addr().(*net.TCPAddr).Port; !handedOut.ports[p] {
			ports = append(ports, p)
		}
	}
	for _, p := range ports {
		handedOut.ports[p] = true
	}
	return ports, nil
}

// isBindFailure reports whether a component's log says it could not bind its port.
func isBindFailure(log string) bool {
	return strings.Contains(log, "address already in use")
}

// hostPort returns "127.0.0.1:port".
func hostPort(port int) string {
	return net.JoinHostPort(loopback, fmt.Sprint(port))
}

// loopback is the address every component binds to.
const loopback = "127.0.0.1"

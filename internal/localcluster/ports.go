package localcluster

import (
	"fmt"
	"net"
	"strings"
)

// freePorts returns n distinct TCP ports on 127.0.0.1 that were free a moment ago. All
// listeners stay open until every port is chosen, so the ports differ from each other;
// another process may still take one before the component binds it, which is why a
// component that fails to bind is started once more with new ports.
func freePorts(n int) ([]int, error) {
	listeners := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port on 127.0.0.1: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
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

package harness

import (
	"fmt"
	"net"
)

// FreeAddr returns a loopback address ("127.0.0.1:port") nothing listened on at the
// time of the call.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

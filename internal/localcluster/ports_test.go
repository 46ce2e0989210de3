package localcluster

import (
	"fmt"
	"net"
	"slices"
	"testing"
)

func TestFreePorts(t *testing.T) {
	for _, n := range []int{1, 2, 5} {
		ports, err := freePorts(n)
		if err != nil {
			t.Fatalf("freePorts(%d): %v", n, err)
		}
		if len(ports) != n {
			t.Fatalf("freePorts(%d) returned %d ports", n, len(ports))
		}
		seen := map[int]bool{}
		for _, p := range ports {
			if p <= 0 || p > 65535 {
				t.Errorf("freePorts(%d): port %d out of range", n, p)
			}
			if seen[p] {
				t.Errorf("freePorts(%d) returned port %d twice: %v", n, p, ports)
			}
			seen[p] = true
			// The port is free again once freePorts returns: we can bind it.
			l, err := net.Listen("tcp", hostPort(p))
			if err != nil {
				t.Errorf("freePorts(%d): port %d cannot be bound: %v", n, p, err)
				continue
			}
			_ = l.Close()
		}
	}
}

// offeredListener is a listener on a port a fake kernel offers.
type offeredListener struct{ port int }

func (l offeredListener) Accept() (net.Conn, error) { return nil, net.ErrClosed }
func (l offeredListener) Close() error              { return nil }
func (l offeredListener) Addr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: l.port}
}

// TestFreePortsNeverTwice: a port the kernel offers again once its listener closed is
// not handed out twice in a process (the controller-manager and the scheduler, started
// at once, were given the same port: the second's readiness check was answered by the
// first). The fake's ports are above the kernel's ephemeral range, which the process's
// other tests may have been given.
func TestFreePortsNeverTwice(t *testing.T) {
	offers := []int{65001, 65002, 65001, 65002, 65003, 65004}
	orig := listenAnyPort
	t.Cleanup(func() { listenAnyPort = orig })
	listenAnyPort = func() (net.Listener, error) {
		if len(offers) == 0 {
			return nil, fmt.Errorf("no more ports offered")
		}
		p := offers[0]
		offers = offers[1:]
		return offeredListener{port: p}, nil
	}
	first, err := freePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	second, err := freePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(first, []int{65001, 65002}) || !slices.Equal(second, []int{65003, 65004}) {
		t.Errorf("freePorts(2) twice: %v then %v; want [65001 65002] then [65003 65004]", first, second)
	}
	listenAnyPort = func() (net.Listener, error) { return offeredListener{port: 65001}, nil }
	if ports, err := freePorts(1); err == nil {
		t.Errorf("the kernel offering only a used port: %v, want an error", ports)
	}
}

func TestIsBindFailure(t *testing.T) {
	tests := []struct {
		name string
		log  string
		want bool
	}{
		{"apiserver", `E0101 failed to create listener: failed to listen on 127.0.0.1:6443: listen tcp 127.0.0.1:6443: bind: address already in use`, true},
		{"etcd", `{"level":"fatal","msg":"listener failed","error":"listen tcp 127.0.0.1:2380: bind: address already in use"}`, true},
		{"other failure", `error: unknown flag: --foo`, false},
		{"empty log", ``, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := isBindFailure(tt.log); got != tt.want {
				t.Errorf("isBindFailure() = %v, want %v", got, tt.want)
			}
		})
	}
}

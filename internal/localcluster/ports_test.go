package localcluster

import (
	"net"
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

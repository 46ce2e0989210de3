package installer_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/app-controller/app-controller/test/e2e/realnode"
)

// TestClusterDownLeavesNothing runs `localcluster up --node real` (make cluster-up
// NODE=real) with a pod on the node, then `localcluster down`: once after a normal run,
// once after the serve process was killed with SIGKILL (nothing stopped the node in
// order). Each time, nothing the node made is left: its network namespace (veth, bridge,
// iptables rules), cgroups, processes, mounts, the state directory with the registry's
// data.
func TestClusterDownLeavesNothing(t *testing.T) {
	bin := realnode.BinDir(t)
	for _, kill := range []bool{false, true} {
		state := filepath.Join(t.TempDir(), "state")
		up := exec.Command(filepath.Join(bin, "localcluster"), "up", "--bin-dir", bin, "--state-dir", state, "--node", "real")
		if out, err := up.CombinedOutput(); err != nil {
			t.Fatalf("localcluster up --node real: %v\n%s", err, out)
		}
		nodeName := strings.TrimSpace(readFile(t, filepath.Join(state, "cluster", "node", "name")))
		registry := strings.TrimSpace(readFile(t, filepath.Join(state, "registry")))
		kubectl := func(args ...string) string {
			cmd := exec.Command(filepath.Join(bin, "kubectl"), append([]string{"--kubeconfig", filepath.Join(state, "kubeconfig")}, args...)...)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			return string(out)
		}
		kubectl("run", "sleeper", "--image="+registry+"/agnhost:2.66.1", "--", "pause")
		kubectl("wait", "--for=condition=Ready", "pod/sleeper", "--timeout=2m")
		if kill {
			pid, err := strconv.Atoi(strings.TrimSpace(readFile(t, filepath.Join(state, "localcluster.pid"))))
			if err != nil {
				t.Fatal(err)
			}
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatalf("killing the serve process %d: %v", pid, err)
			}
			time.Sleep(time.Second)
		}
		down := exec.Command(filepath.Join(bin, "localcluster"), "down", "--state-dir", state)
		out, err := down.CombinedOutput()
		if err != nil {
			t.Fatalf("localcluster down: %v\n%s", err, out)
		}
		var left []string
		if _, err := os.Stat(filepath.Join("/run/netns", nodeName)); err == nil {
			left = append(left, "network namespace "+nodeName)
		}
		cgroups, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", nodeName))
		left = append(left, cgroups...)
		if _, err := os.Stat(state); err == nil {
			left = append(left, "state directory "+state)
		}
		mounts, _ := os.ReadFile("/proc/self/mountinfo")
		if strings.Contains(string(mounts), state) {
			left = append(left, "a mount under "+state)
		}
		if len(left) > 0 {
			t.Errorf("after localcluster down (serve killed: %v), left: %s", kill, strings.Join(left, ", "))
			continue
		}
		t.Logf("serve killed with SIGKILL: %v; localcluster down: %s; nothing of node %s left", kill, strings.TrimSpace(lastLine(string(out))), nodeName)
	}
}

func readFile(t testing.TB, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

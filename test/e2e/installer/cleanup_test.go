package installer_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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
// data. The node's network namespace and cgroups are known by their inodes, taken before
// the down: the clusters of other packages running meanwhile take the lowest free node
// name, so a namespace or cgroup of the same name after the down may be another's (a
// warm make test failed so, on a node network made again by another package).
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
		netns := filepath.Join("/run/netns", nodeName)
		cgroups, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", nodeName))
		made := stat(t, append([]string{netns}, cgroups...))
		down := exec.Command(filepath.Join(bin, "localcluster"), "down", "--state-dir", state)
		out, err := down.CombinedOutput()
		if err != nil {
			t.Fatalf("localcluster down: %v\n%s", err, out)
		}
		// A cgroup's inode is not given again soon; a namespace's may be (the lowest free
		// one): a namespace of the same name and inode is another cluster's when that
		// cluster has made the node's cgroups again.
		var left []string
		remade := false
		for path, before := range made {
			switch now, err := os.Stat(path); {
			case err != nil:
			case os.SameFile(now, before):
				left = append(left, path)
			case path != netns:
				remade = true
			}
		}
		if remade {
			left = slices.DeleteFunc(left, func(path string) bool { return path == netns })
		}
		if _, err := os.Stat(state); err == nil {
			left = append(left, "state directory "+state)
		}
		mounts, _ := os.ReadFile("/proc/self/mountinfo")
		if strings.Contains(string(mounts), state) {
			left = append(left, "a mount under "+state)
		}
		if len(left) > 0 {
			slices.Sort(left)
			t.Errorf("after localcluster down (serve killed: %v), left: %s; localcluster down printed:\n%s", kill, strings.Join(left, ", "), out)
			continue
		}
		t.Logf("serve killed with SIGKILL: %v; localcluster down: %s; nothing of node %s left", kill, strings.TrimSpace(lastLine(string(out))), nodeName)
	}
}

// stat returns the file information of each of paths, which must exist: os.SameFile
// then tells the same file from one removed and made again under its name.
func stat(t testing.TB, paths []string) map[string]os.FileInfo {
	t.Helper()
	infos := make(map[string]os.FileInfo, len(paths))
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			t.Fatalf("the real node made no %s: %v", p, err)
		}
		infos[p] = info
	}
	return infos
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

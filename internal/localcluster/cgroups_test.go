package localcluster

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestCgroupTreeWeight checks that a node's cgroup tree weighs as NodeCPUWeight
// processes (cpu.shares 1024 each in cgroup v1, cpu.weight 100 in v2), and as one, the
// kernel's default, without it. It needs root, as a real node does.
func TestCgroupTreeWeight(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("creating cgroups needs root")
	}
	for _, weight := range []int{0, 8} {
		tree, err := newCgroupTree(fmt.Sprintf("/lctest-%d-%d", os.Getpid(), weight), weight)
		if err != nil {
			t.Fatal(err)
		}
		mounts, _, err := cgroupMounts()
		if err != nil {
			t.Fatal(err)
		}
		file, one := tree.cpuWeightFile(mounts)
		got, err := os.ReadFile(file)
		if rmErr := tree.remove(); rmErr != nil {
			t.Error(rmErr)
		}
		if file == "" || os.IsNotExist(err) && tree.v2 {
			t.Skip("no cpu controller here")
		}
		if err != nil {
			t.Fatal(err)
		}
		// 0 leaves the kernel's default, one process: cpu.shares 1024, cpu.weight 100.
		if want := strconv.Itoa(one * max(weight, 1)); strings.TrimSpace(string(got)) != want {
			t.Errorf("NodeCPUWeight %d: %s reads %s, want %s", weight, file, strings.TrimSpace(string(got)), want)
		}
	}
}

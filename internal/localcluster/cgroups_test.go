package localcluster

import (
	"fmt"
	"os"
	"path/filepath"
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
	for _, tc := range []struct {
		weight                    int
		wantShares, wantCPUWeight string
	}{{0, "1024", "100"}, {8, "8192", "800"}} {
		tree, err := newCgroupTree(fmt.Sprintf("/lctest-%d-%d", os.Getpid(), tc.weight), tc.weight)
		if err != nil {
			t.Fatal(err)
		}
		mounts, _, err := cgroupMounts()
		if err != nil {
			t.Fatal(err)
		}
		file, want := "", ""
		for _, m := range mounts {
			switch {
			case tree.v2:
				file, want = filepath.Join(m.dir, tree.name, "cpu.weight"), tc.wantCPUWeight
			case m.cpu:
				file, want = filepath.Join(m.dir, tree.name, "cpu.shares"), tc.wantShares
			}
		}
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
		if strings.TrimSpace(string(got)) != want {
			t.Errorf("NodeCPUWeight %d: %s reads %s, want %s", tc.weight, file, strings.TrimSpace(string(got)), want)
		}
	}
}

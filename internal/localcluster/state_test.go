package localcluster

import (
	"bytes"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestPIDFile(t *testing.T) {
	tests := []struct {
		name    string
		content *string // nil: no file
		want    int
		wantErr string
	}{
		{name: "written by writePIDFile", want: 4242},
		{name: "trailing spaces", content: new(" 17 \n"), want: 17},
		{name: "missing", content: nil, wantErr: "reading the pid file"},
		{name: "not a number", content: new("abc\n"), wantErr: `holds "abc", not a process id`},
		{name: "zero", content: new("0"), wantErr: `holds "0", not a process id`},
		{name: "negative", content: new("-3"), wantErr: `holds "-3", not a process id`},
		{name: "empty", content: new(""), wantErr: `holds "", not a process id`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), pidFile)
			switch {
			case tt.want == 4242:
				if err := writePIDFile(path, 4242); err != nil {
					t.Fatal(err)
				}
			case tt.content != nil:
				if err := os.WriteFile(path, []byte(*tt.content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			got, err := readPIDFile(path)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("readPIDFile = %d, %v; want error with %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("readPIDFile = %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}

func TestPIDsFile(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    map[string]int
	}{
		{"written by writePIDs", "", map[string]int{"etcd": 10, "kube-apiserver": 11, "kwok": 12}},
		{"malformed lines skipped", "etcd 10\nkwok\nkube-scheduler x\nkube-apiserver -1\na b c\n\nkwok 12\n", map[string]int{"etcd": 10, "kwok": 12}},
		{"missing file", "-", map[string]int{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), pidsFile)
			switch tt.content {
			case "":
				if err := writePIDs(path, tt.want); err != nil {
					t.Fatal(err)
				}
				data, _ := os.ReadFile(path)
				if want := "etcd 10\nkube-apiserver 11\nkwok 12\n"; string(data) != want {
					t.Errorf("pids file = %q, want %q (sorted by name)", data, want)
				}
			case "-":
			default:
				if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if got := readPIDs(path); !maps.Equal(got, tt.want) {
				t.Errorf("readPIDs = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ready")
	for _, content := range []string{"first\n", "second\n"} {
		if err := writeFileAtomic(path, []byte(content)); err != nil {
			t.Fatal(err)
		}
		if data, _ := os.ReadFile(path); string(data) != content {
			t.Errorf("content = %q, want %q", data, content)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only the file (no temporary left)", len(entries))
	}
	err := writeFileAtomic(filepath.Join(dir, "missing", "file"), nil)
	if err == nil || !strings.Contains(err.Error(), "writing "+filepath.Join(dir, "missing", "file")) {
		t.Errorf("writing into a missing directory: error = %v", err)
	}
}

func TestStateDirClear(t *testing.T) {
	tests := []struct {
		name      string
		removeAll bool
		foreign   bool     // a file localcluster did not create is in the directory
		wantLeft  []string // entries left; nil: the directory itself is gone
		wantOut   string   // %s is the directory
	}{
		{name: "before a new serve: keeps the log", wantLeft: []string{logFile}},
		{name: "down: removes everything", removeAll: true},
		{name: "down: keeps files that are not ours", removeAll: true, foreign: true, wantLeft: []string{"mine.txt"},
			wantOut: "left %s in place: it holds files that localcluster did not create\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := stateDir(filepath.Join(t.TempDir(), "state"))
			if err := os.MkdirAll(d.path(filepath.Join(clusterDir, "etcd")), 0o755); err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{pidFile, logFile, readyFile, kubeconfigFile} {
				if err := os.WriteFile(d.path(name), []byte("x\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			// A pid that is not a live sleep: nothing to kill.
			if err := writePIDs(d.path(pidsFile), map[string]int{"sleep": os.Getpid()}); err != nil {
				t.Fatal(err)
			}
			if tt.foreign {
				if err := os.WriteFile(d.path("mine.txt"), nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			var out bytes.Buffer
			if err := d.clear(&out, tt.removeAll); err != nil {
				t.Fatal(err)
			}
			want := ""
			if tt.wantOut != "" {
				want = strings.ReplaceAll(tt.wantOut, "%s", string(d))
			}
			if out.String() != want {
				t.Errorf("output = %q, want %q", out.String(), want)
			}
			entries, err := os.ReadDir(string(d))
			if tt.wantLeft == nil {
				if !os.IsNotExist(err) {
					t.Errorf("state directory still exists (%v)", err)
				}
				return
			}
			var left []string
			for _, e := range entries {
				left = append(left, e.Name())
			}
			if !slices.Equal(left, tt.wantLeft) {
				t.Errorf("entries left = %v, want %v", left, tt.wantLeft)
			}
		})
	}
}

func TestLastRunOffset(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    int64
	}{
		{"one run", "=== t1 localcluster serve\nline\n", 0},
		{"two runs", "=== t1 localcluster serve\nline\n=== t2 localcluster serve\nmore\n", 31},
		{"no header", "line\n", 0},
		{"missing", "-", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), logFile)
			if tt.content != "-" {
				if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if got := lastRunOffset(path); got != tt.want {
				t.Errorf("lastRunOffset = %d, want %d", got, tt.want)
			}
		})
	}
}

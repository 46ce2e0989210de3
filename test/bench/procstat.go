package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat: 100 on Linux.
const clockTicks = 100

// procStats are a process's memory and CPU figures from /proc.
type procStats struct {
	// rssMB is VmRSS, the resident set now; peakMB is VmHWM, its peak; anonMB is RssAnon,
	// the part of the resident set that is anonymous memory (the Go heap, stacks), not
	// the executable's pages (MiB).
	rssMB, peakMB, anonMB float64
	// cpuSeconds is utime+stime, user and system CPU time so far.
	cpuSeconds float64
}

// readProcStats reads /proc/<pid>/status and /proc/<pid>/stat.
func readProcStats(pid int) (procStats, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return procStats{}, fmt.Errorf("reading the status of process %d: %w", pid, err)
	}
	s, err := parseProcStatus(status)
	if err != nil {
		return procStats{}, fmt.Errorf("process %d: %w", pid, err)
	}
	if s.cpuSeconds, err = readCPUSeconds(pid); err != nil {
		return procStats{}, err
	}
	return s, nil
}

// readCPUSeconds reads utime+stime of process pid from /proc/<pid>/stat, in seconds.
func readCPUSeconds(pid int) (float64, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("reading the stat of process %d: %w", pid, err)
	}
	cpu, err := parseProcStat(stat)
	if err != nil {
		return 0, fmt.Errorf("process %d: %w", pid, err)
	}
	return cpu, nil
}

// parseProcStatus returns VmRSS, VmHWM and RssAnon of a /proc/<pid>/status file, in MiB.
func parseProcStatus(data []byte) (procStats, error) {
	var s procStats
	fields := map[string]*float64{"VmRSS": &s.rssMB, "VmHWM": &s.peakMB, "RssAnon": &s.anonMB}
	found := 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		key, value, ok := strings.Cut(sc.Text(), ":")
		field := fields[key]
		if !ok || field == nil {
			continue
		}
		words := strings.Fields(value)
		if len(words) != 2 || words[1] != "kB" {
			return s, fmt.Errorf("unexpected %s line %q", key, sc.Text())
		}
		kb, err := strconv.ParseFloat(words[0], 64)
		if err != nil {
			return s, fmt.Errorf("parsing %s: %w", key, err)
		}
		*field = kb / 1024
		found++
	}
	if found != len(fields) {
		return s, fmt.Errorf("no VmRSS, VmHWM or RssAnon in /proc status")
	}
	return s, nil
}

// parseProcStat returns utime+stime of a /proc/<pid>/stat line, in seconds. The command
// name (field 2) may hold spaces: fields are counted after its closing parenthesis.
func parseProcStat(data []byte) (float64, error) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, fmt.Errorf("malformed /proc stat %q", data)
	}
	fields := strings.Fields(string(data[i+1:]))
	// After the name: state is field 3, utime field 14, stime field 15.
	if len(fields) < 13 {
		return 0, fmt.Errorf("short /proc stat %q", data)
	}
	utime, err := strconv.ParseUint(fields[11], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parsing utime: %w", err)
	}
	stime, err := strconv.ParseUint(fields[12], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parsing stime: %w", err)
	}
	return float64(utime+stime) / clockTicks, nil
}

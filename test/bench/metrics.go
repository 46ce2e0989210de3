package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// metricValue returns the value of the sample of metric whose labels include every
// label="value" pair of labels, from a Prometheus text exposition. found is false when
// no sample matches.
func metricValue(exposition []byte, metric string, labels map[string]string) (value float64, found bool, err error) {
	sc := bufio.NewScanner(bytes.NewReader(exposition))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' || !strings.HasPrefix(line, metric) {
			continue
		}
		rest := line[len(metric):]
		var labelText string
		switch {
		case strings.HasPrefix(rest, "{"):
			end := strings.Index(rest, "}")
			if end < 0 {
				return 0, false, fmt.Errorf("malformed sample %q", line)
			}
			labelText, rest = rest[1:end], rest[end+1:]
		case strings.HasPrefix(rest, " "):
		default:
			continue // another metric whose name starts with metric
		}
		if !hasLabels(labelText, labels) {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return 0, false, fmt.Errorf("malformed sample %q", line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return 0, false, fmt.Errorf("parsing sample %q: %w", line, err)
		}
		return v, true, nil
	}
	return 0, false, sc.Err()
}

// hasLabels tells whether the label text (`a="x",b="y"`) holds every pair of want.
func hasLabels(text string, want map[string]string) bool {
	for k, v := range want {
		if !strings.Contains(","+text+",", ","+k+"="+strconv.Quote(v)+",") {
			return false
		}
	}
	return true
}

package harness

import (
	"fmt"
	"io"
	"time"
)

// PrefixWriter writes each Write (a progress line of the local cluster, say) to W,
// prefixed with the time of day (UTC) and Prefix.
type PrefixWriter struct {
	W      io.Writer
	Prefix string
}

func (p PrefixWriter) Write(b []byte) (int, error) {
	if _, err := fmt.Fprintf(p.W, "%s %s%s", time.Now().UTC().Format(time.TimeOnly), p.Prefix, b); err != nil {
		return 0, err
	}
	return len(b), nil
}

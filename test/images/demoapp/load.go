package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// loadConfig is what `demoapp load` sends.
type loadConfig struct {
	url      string
	rps      int
	duration time.Duration
	timeout  time.Duration
	// host, when set, is the requests' Host (a --header Host:NAME), the rest headers.
	host    string
	headers http.Header
}

// total is the number of requests the load sends: rps a second for its duration.
func (c loadConfig) total() int {
	return int(math.Round(float64(c.rps) * c.duration.Seconds()))
}

// headersFlag collects repeated --header K:V flags.
type headersFlag []string

func (h *headersFlag) String() string { return strings.Join(*h, ", ") }

func (h *headersFlag) Set(v string) error {
	k, _, ok := strings.Cut(v, ":")
	if !ok || strings.TrimSpace(k) == "" {
		return fmt.Errorf("%q: want NAME:VALUE", v)
	}
	*h = append(*h, v)
	return nil
}

// parseLoad parses the flags of `demoapp load`.
func parseLoad(args []string) (loadConfig, error) {
	fs := flag.NewFlagSet("demoapp load", flag.ContinueOnError)
	c := loadConfig{headers: http.Header{}}
	fs.StringVar(&c.url, "url", "", "the URL to GET")
	fs.IntVar(&c.rps, "rps", 10, "requests a second")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "how long to send: rps*duration requests in all")
	fs.DurationVar(&c.timeout, "timeout", 5*time.Second, "each request's timeout; the load ends at most this long after duration")
	var headers headersFlag
	fs.Var(&headers, "header", "NAME:VALUE, a header of every request (Host:NAME sets the Host); repeat for each")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	switch {
	case c.url == "":
		return c, errors.New("--url is required")
	case c.rps < 1 || c.rps > 1000:
		return c, fmt.Errorf("--rps %d: want 1 to 1000", c.rps)
	case c.duration <= 0 || c.duration > time.Hour:
		return c, fmt.Errorf("--duration %s: want more than 0, at most 1h", c.duration)
	case c.timeout <= 0:
		return c, fmt.Errorf("--timeout %s: want more than 0", c.timeout)
	}
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ":")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if strings.EqualFold(k, "Host") {
			c.host = v
			continue
		}
		c.headers.Add(k, v)
	}
	return c, nil
}

// summary is what the load prints when it ends, as one line of JSON.
type summary struct {
	URL       string         `json:"url"`
	Requests  int            `json:"requests"`
	Codes     map[string]int `json:"codes"`
	Errors    int            `json:"errors"`
	LastError string         `json:"lastError,omitempty"`
	P50Ms     float64        `json:"p50Ms"`
	P90Ms     float64        `json:"p90Ms"`
	P99Ms     float64        `json:"p99Ms"`
	Seconds   float64        `json:"seconds"`
	// Times says when the requests of each answer but 200 (a status code, or "error")
	// were sent: the first and the last, UTC, to the millisecond, so that a test can
	// tell when they happened.
	Times map[string]span `json:"times,omitempty"`
}

// span is the first and last time of an answer, as 15:04:05.000.
type span struct {
	First string `json:"first"`
	Last  string `json:"last"`
}

// at records that a request sent at t got the answer key.
func (s *summary) at(key string, t time.Time) {
	if key == "200" {
		return
	}
	if s.Times == nil {
		s.Times = map[string]span{}
	}
	at := t.UTC().Format("15:04:05.000")
	sp, ok := s.Times[key]
	if !ok || at < sp.First {
		sp.First = at
	}
	if at > sp.Last {
		sp.Last = at
	}
	s.Times[key] = sp
}

// runLoad parses args, sends the load and writes its summary to out.
func runLoad(ctx context.Context, args []string, out io.Writer) error {
	c, err := parseLoad(args)
	if err != nil {
		return err
	}
	s := sendLoad(ctx, c, &http.Client{Timeout: c.timeout})
	line, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("encoding the summary: %w", err)
	}
	_, err = fmt.Fprintf(out, "%s\n", line)
	return err
}

// sendLoad sends c.total() GET requests to c.url, one every 1/rps seconds, each in its
// own goroutine with the client's timeout, and returns once every request has been
// answered or has failed: no more than c.total() requests, and no later than about
// c.duration+c.timeout. ctx ends it early (the requests not sent are not counted).
func sendLoad(ctx context.Context, c loadConfig, client *http.Client) summary {
	start := time.Now()
	s := summary{URL: c.url, Codes: map[string]int{}}
	var (
		mu        sync.Mutex
		latencies []time.Duration
		wg        sync.WaitGroup
	)
	send := func() {
		defer wg.Done()
		t := time.Now()
		code, err := get(ctx, client, c)
		took := time.Since(t)
		mu.Lock()
		defer mu.Unlock()
		s.Requests++
		if err != nil {
			s.Errors++
			s.LastError = err.Error()
			s.at("error", t)
			return
		}
		s.Codes[strconv.Itoa(code)]++
		s.at(strconv.Itoa(code), t)
		latencies = append(latencies, took)
	}
	ticker := time.NewTicker(time.Duration(float64(time.Second) / float64(c.rps)))
	defer ticker.Stop()
	for i := range c.total() {
		if i > 0 {
			select {
			case <-ticker.C:
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go send()
	}
	wg.Wait()
	slices.Sort(latencies)
	s.P50Ms, s.P90Ms, s.P99Ms = quantileMs(latencies, 0.5), quantileMs(latencies, 0.9), quantileMs(latencies, 0.99)
	s.Seconds = math.Round(time.Since(start).Seconds()*100) / 100
	return s
}

// get sends one request of the load and returns its status code, its body read whole.
func get(ctx context.Context, client *http.Client, c loadConfig) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
	if err != nil {
		return 0, err
	}
	req.Header = c.headers.Clone()
	if c.host != "" {
		req.Host = c.host
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0, fmt.Errorf("reading the answer: %w", err)
	}
	return resp.StatusCode, nil
}

// quantileMs returns the q-quantile of sorted latencies in milliseconds (the nearest
// rank), 0 for none.
func quantileMs(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	i = max(0, min(i, len(sorted)-1))
	return math.Round(float64(sorted[i].Microseconds())/10) / 100
}

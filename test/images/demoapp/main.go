// Command demoapp is the test image of the canary analysis tests: an HTTP server whose
// error rate and latency come from its environment, and the load generator that sends it
// requests from inside the cluster.
//
//	demoapp                      serve (ERROR_RATE, LATENCY_MS, PORT, VERSION, DRAIN_SECONDS,
//	                             BURN_MILLICORES, BURN_SECONDS, IDLE_SECONDS)
//	demoapp load --url URL --rps N --duration D [--header K:V]... [--timeout T]
//	demoapp pods-sd [--listen 127.0.0.1:9091]
//
// The server answers every path but /healthz and /metrics: 500 to a fraction ERROR_RATE
// of the requests (deterministically: the k-th request fails when floor(k*ERROR_RATE)
// grows, so exactly floor(n*ERROR_RATE) of the first n fail), after LATENCY_MS
// milliseconds, with its VERSION in the body. /healthz answers 200 at once (probes);
// /metrics exposes http_requests_total{code,method} and
// http_request_duration_seconds{code,method} of those answers. On SIGTERM it goes on
// answering for DRAIN_SECONDS (default 5) before it stops listening, as a pod must for
// its removal from its Services to reach the proxies first. With BURN_MILLICORES it burns
// that much CPU for BURN_SECONDS, then idles for IDLE_SECONDS, over and over (burn.go): a
// load that rises and falls without a request.
//
// The load generator sends N requests a second for D (so N*D requests, no more), each
// with a timeout, and prints a one-line JSON summary: the count of each status code, the
// errors, latency quantiles, and when the answers other than 200 came (the first and the
// last of each).
//
// pods-sd serves the cluster's pods as Prometheus's http_sd_configs targets, for the
// Prometheus of the end-to-end tests, whose Debian build has no kubernetes_sd_configs
// (podsd.go).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "demoapp:", err)
		os.Exit(1)
	}
}

// run runs the command of args until it ends or SIGINT or SIGTERM stops it.
func run(args []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch {
	case len(args) == 0:
		return serve(ctx, os.Getenv)
	case args[0] == "load":
		return runLoad(ctx, args[1:], os.Stdout)
	case args[0] == "pods-sd":
		return runPodsSD(ctx, args[1:])
	default:
		return fmt.Errorf("unknown command %q: want no command (serve), load or pods-sd", args[0])
	}
}

package plugin

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"runtime"
	"strconv"
	"time"

	"github.com/spf13/cobra"
)

// dashboardOptions are the flags of `kubectl app dashboard`.
type dashboardOptions struct {
	port          int
	address       string
	allNamespaces bool
	open          bool
}

// dashboardCommand returns `kubectl app dashboard`.
func (c *command) dashboardCommand() *cobra.Command {
	o := dashboardOptions{}
	cmd := &cobra.Command{
		Use:   "dashboard [--port 3100] [--address 127.0.0.1] [-A] [--open=false]",
		Short: "Serve a web UI of the Apps, their rollouts and their objects on 127.0.0.1",
		Long: `Serve a web UI of the Apps of the namespace (-n, else the kubeconfig's), or of every
namespace (-A), until interrupted: the list of Apps (Ready and why not, image, replicas,
the rollout's step and weight, autoscaler, hosts) with a filter and a search, and each
App's page: its objects as a tree (as kubectl app tree), the rollout's steps, the stable
and canary revisions and their pods with each pod's problem, the recent Events and the
revisions, with buttons for promote, abort, pause, resume, restart and rollback. A button
does exactly what the command of the same name does, with your kubeconfig's identity:
the dashboard can do what you can do with kubectl, and shows the API server's refusal
when it refuses. The pages follow the cluster through watches: a change shows within a
second.

The command prints the URL, with a token for this session, and opens it in a browser
where one is available (--open=false does not). The server answers only requests with
that token (then kept in a cookie) from its own pages. It listens on 127.0.0.1: with
--address set to another address, anyone who can reach it and gets the URL acts as you.`,
		Example: `  kubectl app dashboard
  kubectl app dashboard -A --port 8080
  kubectl app dashboard -n shop --open=false`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return c.runDashboard(cmd.Context(), o)
		},
	}
	cmd.Flags().IntVar(&o.port, "port", 3100, "The port to listen on; 0 picks a free one.")
	cmd.Flags().StringVar(&o.address, "address", "127.0.0.1", "The address to listen on; another than a loopback address exposes the dashboard (with your identity) to the network.")
	cmd.Flags().BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "Show the Apps of every namespace.")
	cmd.Flags().BoolVar(&o.open, "open", true, "Open the URL in a browser (xdg-open, open or start).")
	return cmd
}

// runDashboard serves the dashboard until ctx ends.
func (c *command) runDashboard(ctx context.Context, o dashboardOptions) error {
	clients, namespace, err := c.setup()
	if err != nil {
		return err
	}
	scope := "namespace " + namespace
	if o.allNamespaces {
		namespace, scope = "", "all namespaces"
	}
	ip := net.ParseIP(o.address)
	if ip == nil {
		return fmt.Errorf("--address %q is not an IP address", o.address)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cache, err := newDashCache(clients, namespace)
	if err != nil {
		return err
	}
	if err := cache.start(ctx); err != nil {
		return err
	}
	listener, err := net.Listen("tcp", net.JoinHostPort(o.address, strconv.Itoa(o.port)))
	if err != nil {
		return fmt.Errorf("listening on %s: %w", net.JoinHostPort(o.address, strconv.Itoa(o.port)), err)
	}
	port := listener.Addr().(*net.TCPAddr).Port
	var hosts map[string]bool
	if ip.IsLoopback() {
		hosts = loopbackHosts(o.address, port)
	} else {
		fmt.Fprintf(c.streams.ErrOut, "Warning: the dashboard listens on %s, not a loopback address: whoever reaches it with the URL below acts with your identity\n", o.address)
	}
	token, err := newToken()
	if err != nil {
		return err
	}
	s, err := newDashServer(clients, cache, token, port, hosts, scope, c.now)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: s.handler(), ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(listener) }()

	u := fmt.Sprintf("http://%s/?token=%s", net.JoinHostPort(o.address, strconv.Itoa(port)), token)
	fmt.Fprintf(c.streams.Out, "Serving the dashboard of the Apps of %s at\n  %s\nPress Ctrl-C to stop.\n", scope, u)
	if o.open {
		if err := openBrowser(u); err != nil {
			fmt.Fprintf(c.streams.ErrOut, "Warning: could not open a browser (%v): open the URL above\n", err)
		}
	}
	select {
	case err := <-done:
		return fmt.Errorf("serving the dashboard: %w", err)
	case <-ctx.Done():
	}
	shutdown, stop := context.WithTimeout(context.Background(), 5*time.Second)
	defer stop()
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("stopping the dashboard: %w", err)
	}
	return nil
}

// newToken returns a random session token.
func newToken() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("making the session token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// openBrowser opens u with the system's opener, without waiting for the browser.
func openBrowser(u string) error {
	var cmd *exec.Cmd
	switch runtime.GOOS {
	case "darwin":
		cmd = exec.Command("open", u)
	case "windows":
		cmd = exec.Command("rundll32", "url.dll,FileProtocolHandler", u)
	default:
		cmd = exec.Command("xdg-open", u)
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { _ = cmd.Wait() }()
	return nil
}

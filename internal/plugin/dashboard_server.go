package plugin

import (
	"bytes"
	"context"
	"crypto/subtle"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// The dashboard's server: pages rendered with html/template from the cache, the live
// updates as server-sent events, the actions as POSTs that call Act, and one small
// script and style sheet, all embedded. It answers only requests that carry the
// session's token (in the URL printed at the start, then in an HttpOnly SameSite=Strict
// cookie), name the server itself as Host, and come from its own pages (Origin): another
// page the browser has open cannot read it or make it act (no CORS headers, a strict
// Content-Security-Policy, no inline script).

//go:embed dashboard
var dashboardFiles embed.FS

// contentSecurityPolicy lets the pages load their own script and style sheet and talk to
// their own server, nothing else.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// Timing of the live updates.
const (
	// coalesce is how long a stream gathers changes before it renders them: a rollout's
	// step changes several objects at once.
	coalesce = 50 * time.Millisecond
	// treeInterval is the least time between two walks of an App's tree (BuildTree
	// lists every namespaced resource).
	treeInterval = 2 * time.Second
	// keepAlive is the interval of the comments that keep an idle stream open.
	keepAlive = 25 * time.Second
)

// dashServer serves the dashboard.
type dashServer struct {
	clients Clients
	cache   *dashCache
	tmpl    *template.Template
	now     func() time.Time
	// token is the session's secret; cookie is the name of the cookie that keeps it.
	token, cookie string
	// hosts are the Host values the server answers to; nil: any (bound to a
	// non-loopback address).
	hosts map[string]bool
	// scope says which namespaces the dashboard shows, for the page header.
	scope string
}

// newDashServer returns the server of cache, answering at port with token.
func newDashServer(clients Clients, c *dashCache, token string, port int, hosts map[string]bool, scope string, now func() time.Time) (*dashServer, error) {
	tmpl, err := template.New("dashboard").Funcs(template.FuncMap{
		"join":  strings.Join,
		"add":   func(a, b int) int { return a + b },
		"lower": strings.ToLower,
	}).ParseFS(dashboardFiles, "dashboard/*.html")
	if err != nil {
		return nil, fmt.Errorf("parsing the dashboard's templates: %w", err)
	}
	return &dashServer{
		clients: clients, cache: c, tmpl: tmpl, now: now, token: token, cookie: "kubectl-app-dashboard-" + strconv.Itoa(port),
		hosts: hosts, scope: scope,
	}, nil
}

// handler returns the server's routes behind its checks.
func (s *dashServer) handler() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(dashboardFiles, "dashboard/static")
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /{$}", s.listPage)
	mux.HandleFunc("GET /apps/{namespace}/{name}", s.appPage)
	mux.HandleFunc("GET /events/list", s.listStream)
	mux.HandleFunc("GET /events/apps/{namespace}/{name}", s.appStream)
	mux.HandleFunc("POST /apps/{namespace}/{name}/actions", s.action)
	return s.guard(mux)
}

// guard answers only requests to this server (Host), from its own pages (Origin), with
// the session's token; a request whose URL has the token gets the cookie and is sent to
// the same URL without it.
func (s *dashServer) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		if s.hosts != nil && !s.hosts[r.Host] {
			http.Error(w, "unexpected Host header: open the URL kubectl app dashboard printed", http.StatusForbidden)
			return
		}
		if origin := r.Header.Get("Origin"); origin != "" {
			if u, err := url.Parse(origin); err != nil || u.Host != r.Host || u.Scheme != "http" {
				http.Error(w, "cross-origin requests are refused", http.StatusForbidden)
				return
			}
		}
		if t := r.URL.Query().Get("token"); t != "" {
			if !s.validToken(t) {
				http.Error(w, "wrong token: open the URL kubectl app dashboard printed", http.StatusForbidden)
				return
			}
			http.SetCookie(w, &http.Cookie{Name: s.cookie, Value: s.token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
			q := r.URL.Query()
			q.Del("token")
			target := url.URL{Path: r.URL.Path, RawQuery: q.Encode()}
			http.Redirect(w, r, target.String(), http.StatusSeeOther)
			return
		}
		if c, err := r.Cookie(s.cookie); err != nil || !s.validToken(c.Value) {
			http.Error(w, "no session token: open the URL kubectl app dashboard printed (it ends in ?token=...)", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// validToken compares t with the session's token in constant time.
func (s *dashServer) validToken(t string) bool {
	return subtle.ConstantTimeCompare([]byte(t), []byte(s.token)) == 1
}

// render executes the template name with data into a string.
func (s *dashServer) render(name string, data any) (string, error) {
	var b bytes.Buffer
	if err := s.tmpl.ExecuteTemplate(&b, name, data); err != nil {
		return "", fmt.Errorf("rendering %s: %w", name, err)
	}
	return b.String(), nil
}

// page writes the page template name with data.
func (s *dashServer) page(w http.ResponseWriter, name string, data any) {
	html, err := s.render(name, data)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write([]byte(html))
}

// listPage is the list of Apps; its rows come with the stream.
func (s *dashServer) listPage(w http.ResponseWriter, _ *http.Request) {
	s.page(w, "list.html", map[string]any{"Scope": s.scope})
}

// appPage is an App's page, rendered from the cache; its tree comes with the stream.
func (s *dashServer) appPage(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	app, ok, err := s.cache.app(ns, name)
	data := map[string]any{"Scope": s.scope, "Namespace": ns, "Name": name}
	switch {
	case err != nil:
		data["Error"] = err.Error()
	case !ok:
		w.WriteHeader(http.StatusNotFound)
		data["Error"] = (&AppNotFoundError{Namespace: ns, Name: name}).Error() + " (or not in the namespaces this dashboard shows)"
	default:
		data["Detail"] = newDetailView(s.cache, app, s.now())
	}
	s.page(w, "app.html", data)
}

// sse is a server-sent event stream.
type sse struct {
	w http.ResponseWriter
	f http.Flusher
}

// startSSE starts the stream of the response.
func startSSE(w http.ResponseWriter) (*sse, error) {
	f, ok := w.(http.Flusher)
	if !ok {
		return nil, errors.New("the response cannot stream")
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	f.Flush()
	return &sse{w: w, f: f}, nil
}

// send writes the event name with data as JSON.
func (e *sse) send(name string, data any) error {
	payload, err := json.Marshal(data)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(e.w, "event: %s\ndata: %s\n\n", name, payload); err != nil {
		return err
	}
	e.f.Flush()
	return nil
}

// ping writes a comment that keeps the connection open.
func (e *sse) ping() error {
	if _, err := fmt.Fprint(e.w, ": ping\n\n"); err != nil {
		return err
	}
	e.f.Flush()
	return nil
}

// rowUpdate is an event of the list's stream: rows to insert or replace (by key, in
// order) and keys to remove.
type rowUpdate struct {
	Rows   []rowHTML `json:"rows,omitempty"`
	Remove []string  `json:"remove,omitempty"`
	// Snapshot: Rows are all the rows, the others go.
	Snapshot bool `json:"snapshot,omitempty"`
}

// rowHTML is a rendered row and its key.
type rowHTML struct {
	Key  string `json:"key"`
	HTML string `json:"html"`
}

// listStream sends every row, then the rows of the Apps that change.
func (s *dashServer) listStream(w http.ResponseWriter, r *http.Request) {
	sub, cancel := s.cache.hub.subscribe(func(c change) bool { return c.isApp })
	defer cancel()
	stream, err := startSSE(w)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	snapshot := rowUpdate{Snapshot: true}
	for _, app := range s.cache.appList() {
		html, err := s.render("row", newRowView(&app.App))
		if err != nil {
			return
		}
		snapshot.Rows = append(snapshot.Rows, rowHTML{Key: app.Namespace + "/" + app.Name, HTML: html})
	}
	if stream.send("rows", snapshot) != nil {
		return
	}
	s.follow(r.Context(), stream, sub, nil, func() error {
		var u rowUpdate
		for _, c := range sub.take() {
			key := c.namespace + "/" + c.app
			app, ok, err := s.cache.app(c.namespace, c.app)
			if err != nil || !ok {
				u.Remove = append(u.Remove, key)
				continue
			}
			html, err := s.render("row", newRowView(&app.App))
			if err != nil {
				return err
			}
			u.Rows = append(u.Rows, rowHTML{Key: key, HTML: html})
		}
		return stream.send("rows", u)
	})
}

// follow calls update, after coalesce, each time sub has changes, and sends each tree
// that trees hands over as event "tree" (a nil trees hands none), until the request ends
// or a write fails; it pings the client meanwhile.
func (s *dashServer) follow(ctx context.Context, stream *sse, sub *subscription, trees <-chan string, update func() error) {
	ping := time.NewTicker(keepAlive)
	defer ping.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ping.C:
			if stream.ping() != nil {
				return
			}
		case html := <-trees:
			if stream.send("tree", html) != nil {
				return
			}
		case <-sub.wake:
			select {
			case <-ctx.Done():
				return
			case <-time.After(coalesce):
			}
			if update() != nil {
				return
			}
		}
	}
}

// appStream sends an App's page each time something of it changes, and its tree (the
// walk of `kubectl app tree`) at most every treeInterval.
func (s *dashServer) appStream(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	sub, cancel := s.cache.hub.subscribe(func(c change) bool { return c.namespace == ns && c.app == name })
	defer cancel()
	stream, err := startSSE(w)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	ctx := r.Context()
	trees := make(chan string, 1)
	treeWanted := make(chan struct{}, 1)
	go s.walkTrees(ctx, ns, name, treeWanted, trees)
	treeWanted <- struct{}{}

	var last string
	sendDetail := func() error {
		app, ok, err := s.cache.app(ns, name)
		switch {
		case err != nil:
			return stream.send("gone", err.Error())
		case !ok:
			return stream.send("gone", (&AppNotFoundError{Namespace: ns, Name: name}).Error())
		}
		html, err := s.render("detail", newDetailView(s.cache, app, s.now()))
		if err != nil || html == last {
			return err
		}
		last = html
		return stream.send("detail", html)
	}
	if sendDetail() != nil {
		return
	}
	s.follow(ctx, stream, sub, trees, func() error {
		sub.take()
		if err := sendDetail(); err != nil {
			return err
		}
		select {
		case treeWanted <- struct{}{}:
		default:
		}
		return nil
	})
}

// walkTrees builds the tree of the App namespace/name each time one is wanted, at most
// every treeInterval, and hands the rendered tree to out until ctx ends.
func (s *dashServer) walkTrees(ctx context.Context, namespace, name string, wanted <-chan struct{}, out chan<- string) {
	var lastHTML string
	for {
		select {
		case <-ctx.Done():
			return
		case <-wanted:
		}
		start := time.Now()
		v := treeView{}
		tree, err := BuildTree(ctx, s.clients, namespace, name)
		if err != nil {
			v.Error = err.Error()
		} else {
			v.Root, v.Warnings = tree.Root, tree.Warnings
		}
		if ctx.Err() != nil {
			return
		}
		html, err := s.render("tree", v)
		if err == nil && html != lastHTML {
			lastHTML = html
			select {
			case out <- html:
			case <-ctx.Done():
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(start.Add(treeInterval))):
		}
	}
}

// actionResult is the answer to an action: the line the command prints, or the error
// it prints.
type actionResult struct {
	Message string `json:"message,omitempty"`
	Error   string `json:"error,omitempty"`
}

// action makes the write the form names (action, and revision for a rollback) on the
// App, with Act: exactly what the command of the same name does.
func (s *dashServer) action(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	w.Header().Set("Content-Type", "application/json")
	reply := func(code int, res actionResult) {
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(res)
	}
	// A form post from another site would need this header, which only a script of
	// this origin can set (CORS would have to allow it).
	if r.Header.Get("X-Requested-By") != "kubectl-app-dashboard" {
		reply(http.StatusForbidden, actionResult{Error: "error: missing X-Requested-By header"})
		return
	}
	if err := r.ParseForm(); err != nil {
		reply(http.StatusBadRequest, actionResult{Error: "error: " + err.Error()})
		return
	}
	a := Action{Kind: r.PostForm.Get("action")}
	if rev := r.PostForm.Get("revision"); rev != "" {
		n, err := strconv.ParseInt(rev, 10, 64)
		if err != nil {
			reply(http.StatusBadRequest, actionResult{Error: fmt.Sprintf("error: revision %q is not a number", rev)})
			return
		}
		a.Revision = n
	}
	line, err := Act(r.Context(), s.clients, ns, name, a, s.now())
	if err != nil {
		// The server's refusal keeps its code (403 for RBAC, 409 for the guard); the
		// plugin's own (no rollout to promote) is a conflict with the App's state.
		code := http.StatusConflict
		var status apierrors.APIStatus
		var notFound *AppNotFoundError
		switch {
		case errors.As(err, &status) && status.Status().Code >= 400:
			code = int(status.Status().Code)
		case errors.As(err, &notFound):
			code = http.StatusNotFound
		}
		reply(code, actionResult{Error: ErrorText(err)})
		return
	}
	reply(http.StatusOK, actionResult{Message: line})
}

// loopbackHosts returns the Host values of a server on the loopback address addr at
// port: the address, localhost and the other loopback names.
func loopbackHosts(addr string, port int) map[string]bool {
	p := strconv.Itoa(port)
	hosts := map[string]bool{}
	for _, h := range []string{addr, "localhost", "127.0.0.1", "::1"} {
		hosts[net.JoinHostPort(h, p)] = true
	}
	return hosts
}

package bench

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/app-controller/app-controller/internal/localcluster"
)

// With Config.Breakdown the apiserver's audit log also records the writes of the
// control plane's components, which share the admin identity, and the harness's own
// (creates of the product's Apps): the round then says who writes what per App, in the
// product and in the fastest floor loop, and second by second how the product's
// convergence went. The audit log costs the apiserver a little for every write it
// records, in the floor as in the product: a run with the breakdown is not compared
// with one without.

// Breakdown is who writes what during a round (Config.Breakdown).
type Breakdown struct {
	// ProductWritesPerApp and FloorWritesPerApp are every writer's writes per App from
	// the first create until the last App is Ready (product), and during the fastest
	// floor loop (floor), by writer (component) and "verb resource".
	ProductWritesPerApp map[string]map[string]float64 `json:"product_writes_per_app"`
	FloorWritesPerApp   map[string]map[string]float64 `json:"floor_writes_per_app"`
	// Timeline is the product's convergence second by second, from the first create.
	Timeline []TimelineSecond `json:"timeline"`
	// Controller is what the controller's metrics said at convergence.
	Controller *ControllerMetrics `json:"controller,omitempty"`
	// APIServerCPUProfiles are the API server's CPU profiles of the first
	// apiserverProfileSeconds of the fastest floor loop ("floor") and of the product's
	// convergence ("product"), to compare with
	// `go tool pprof -top -diff_base FLOOR bin/kube-apiserver PRODUCT`.
	APIServerCPUProfiles map[string]string `json:"apiserver_cpu_profiles,omitempty"`
}

// TimelineSecond counts what happened in one second of the product's convergence.
type TimelineSecond struct {
	// Second is the second since the first create: [Second, Second+1).
	Second int `json:"second"`
	// AppsCreated: the harness's App creates; ChildWrites: the controller's Deployment
	// and Service writes; StatusWrites: its App status writes; Events: its Events.
	AppsCreated  int `json:"apps_created"`
	ChildWrites  int `json:"child_writes"`
	StatusWrites int `json:"status_writes"`
	Events       int `json:"events"`
	// ControllerManager, Scheduler and Kwok are those components' writes (ReplicaSets,
	// pods, Deployment and ReplicaSet status, EndpointSlices, Events; bindings; pod
	// status).
	ControllerManager int `json:"controller_manager_writes"`
	Scheduler         int `json:"scheduler_writes"`
	Kwok              int `json:"kwok_writes"`
	// AppsReady: Apps first seen Ready at their generation in this second.
	AppsReady int `json:"apps_ready"`
	// QueueDepth is the controller's App queue depth, the deepest of this second's samples
	// (about one a second).
	QueueDepth float64 `json:"queue_depth"`
}

// The names of the bench's own writers in a breakdown: the controller and the floor
// loop.
const (
	writerProduct = "app-controller"
	writerFloor   = "floor"
)

// The names of the two runs a breakdown compares, as its tables and profiles name them.
const (
	partProduct = "product"
	partFloor   = "floor"
)

// writer names who made an audited write: the bench's own users by name, the
// components that share the admin identity by the first word of their user agent, and
// kube-controller-manager's controllers by the suffix client-go gives their user agent
// ("kube-controller-manager/v1.36.3 (linux/amd64) kubernetes/abc/deployment-controller").
func writer(user, agent string) string {
	switch user {
	case controllerUser:
		return writerProduct
	case floorUser:
		return writerFloor
	case localcluster.AdminUser:
	default:
		return user
	}
	name, _, _ := strings.Cut(agent, "/")
	if name == "kube-controller-manager" {
		if i := strings.LastIndexByte(agent, '/'); i >= 0 && strings.HasSuffix(agent[i+1:], "-controller") {
			return name + ":" + agent[i+1:]
		}
	}
	if name == "" {
		return "unknown"
	}
	return name
}

// writesByWriter counts the writes in [from, to) by writer and kind, per App of n.
func writesByWriter(writes []write, from, to time.Time, n int) map[string]map[string]float64 {
	counts := map[string]map[string]int{}
	for _, w := range writes {
		if w.at.Before(from) || !w.at.Before(to) {
			continue
		}
		if counts[w.writer] == nil {
			counts[w.writer] = map[string]int{}
		}
		counts[w.writer][w.kind]++
	}
	out := make(map[string]map[string]float64, len(counts))
	for who, kinds := range counts {
		out[who] = make(map[string]float64, len(kinds))
		for kind, c := range kinds {
			out[who][kind] = round2(float64(c) / float64(n))
		}
	}
	return out
}

// timeline buckets the writes and the Apps' Ready times in [start, end) by second.
func timeline(writes []write, ready []time.Time, start, end time.Time) []TimelineSecond {
	seconds := int(end.Sub(start)/time.Second) + 1
	t := make([]TimelineSecond, seconds)
	for i := range t {
		t[i].Second = i
	}
	bucket := func(at time.Time) *TimelineSecond {
		if at.Before(start) || !at.Before(end) {
			return nil
		}
		return &t[int(at.Sub(start)/time.Second)]
	}
	for _, w := range writes {
		s := bucket(w.at)
		if s == nil {
			continue
		}
		switch {
		case w.writer == writerProduct && isEventKind(w.kind):
			s.Events++
		case w.writer == writerProduct && strings.HasSuffix(w.kind, " apps/status"):
			s.StatusWrites++
		case w.writer == writerProduct:
			s.ChildWrites++
		case w.kind == "create apps":
			s.AppsCreated++
		case strings.HasPrefix(w.writer, "kube-controller-manager"):
			s.ControllerManager++
		case w.writer == "kube-scheduler":
			s.Scheduler++
		case w.writer == "kwok":
			s.Kwok++
		}
	}
	for _, at := range ready {
		if s := bucket(at); s != nil {
			s.AppsReady++
		}
	}
	return t
}

// table renders the breakdown for humans: writes per App by writer, then the timeline.
func (b *Breakdown) table() string {
	var sb strings.Builder
	for _, part := range []struct {
		name   string
		writes map[string]map[string]float64
	}{{partProduct, b.ProductWritesPerApp}, {partFloor, b.FloorWritesPerApp}} {
		fmt.Fprintf(&sb, "  writes per App, %s:\n", part.name)
		writers := make([]string, 0, len(part.writes))
		for who := range part.writes {
			writers = append(writers, who)
		}
		sort.Strings(writers)
		total := 0.0
		for _, who := range writers {
			sum := 0.0
			kinds := make([]string, 0, len(part.writes[who]))
			for _, kind := range sortedKeys(part.writes[who]) {
				sum += part.writes[who][kind]
				kinds = append(kinds, fmt.Sprintf("%s %.2f", kind, part.writes[who][kind]))
			}
			total += sum
			fmt.Fprintf(&sb, "    %-45s %6.2f  [%s]\n", who, sum, strings.Join(kinds, ", "))
		}
		fmt.Fprintf(&sb, "    %-45s %6.2f\n", "all writers", total)
	}
	if b.Controller != nil {
		sb.WriteString(b.Controller.table())
	}
	if floor, product := b.APIServerCPUProfiles[partFloor], b.APIServerCPUProfiles[partProduct]; floor != "" && product != "" {
		fmt.Fprintf(&sb, "  API server CPU profiles, first %ds: floor %s, product %s (go tool pprof -top -diff_base FLOOR bin/kube-apiserver PRODUCT)\n", apiserverProfileSeconds, floor, product)
	}
	sb.WriteString("  timeline (s: Apps created, controller child writes / status writes / Events, kube-controller-manager, scheduler, kwok writes; Apps Ready; App queue depth):\n")
	for _, s := range b.Timeline {
		fmt.Fprintf(&sb, "    %3d: %4d  %4d / %4d / %4d  %5d %4d %5d  %4d  %5.0f\n", s.Second, s.AppsCreated, s.ChildWrites, s.StatusWrites, s.Events, s.ControllerManager, s.Scheduler, s.Kwok, s.AppsReady, s.QueueDepth)
	}
	return sb.String()
}

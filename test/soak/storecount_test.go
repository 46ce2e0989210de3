package soak

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/component-base/metrics/testutil"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/podhealth"
)

// TestExcessQueries pins what the API is asked for each store: the factory's
// selection (pkg/controllermanager/context.go), the shard's for the Apps alone, and no
// count for a store whose selection the harness does not know.
func TestExcessQueries(t *testing.T) {
	managed := appv1.ManagedByLabel + "=" + appv1.ManagedByValue
	unmanaged := appv1.ManagedByLabel + "!=" + appv1.ManagedByValue
	for _, tc := range []struct {
		store, shard string
		want         storeQuery
		wantOK       bool
	}{
		{store: "managed/services", shard: shardB, wantOK: true, want: storeQuery{resource: schema.GroupResource{Resource: "services"}, labelSelector: managed}},
		{store: "managed/deployments.apps", shard: shardA, wantOK: true, want: storeQuery{resource: schema.GroupResource{Group: "apps", Resource: "deployments"}, labelSelector: managed}},
		{store: "managed-gateway/httproutes.gateway.networking.k8s.io", shard: shardA, wantOK: true,
			want: storeQuery{resource: schema.GroupResource{Group: "gateway.networking.k8s.io", Resource: "httproutes"}, labelSelector: managed}},
		{store: "unmanaged-metadata/horizontalpodautoscalers.autoscaling", shard: shardB, wantOK: true,
			want: storeQuery{resource: schema.GroupResource{Group: "autoscaling", Resource: "horizontalpodautoscalers"}, labelSelector: unmanaged}},
		{store: "kube/services", shard: shardA, wantOK: true, want: storeQuery{resource: schema.GroupResource{Resource: "services"}}},
		{store: "metadata/configmaps", shard: shardA, wantOK: true, want: storeQuery{resource: schema.GroupResource{Resource: "configmaps"}}},
		{store: "probe-events/events", shard: shardB, wantOK: true, want: storeQuery{resource: schema.GroupResource{Resource: "events"}, fieldSelector: podhealth.ProbeEventSelector}},
		{store: "apps/apps.appcontroller.k8s.io", shard: shardA, wantOK: true, want: storeQuery{resource: appsResource, labelSelector: "shard=a"}},
		{store: "apps/apps.appcontroller.k8s.io", shard: shardB, wantOK: true, want: storeQuery{resource: appsResource, labelSelector: "shard=b"}},
		{store: "apps/analysistemplates.appcontroller.k8s.io", shard: shardB, wantOK: true,
			want: storeQuery{resource: schema.GroupResource{Group: appv1.GroupName, Resource: "analysistemplates"}}},
		{store: "apps/apps.appcontroller.k8s.io", shard: "", wantOK: false},
		{store: "other/widgets.example.com", shard: shardA, wantOK: false},
		{store: "managed", shard: shardA, wantOK: false},
	} {
		got, ok := queryOf(tc.store, tc.shard)
		if ok != tc.wantOK || got != tc.want {
			t.Errorf("queryOf(%q, %q) = %v, %v; want %v, %v", tc.store, tc.shard, got, ok, tc.want, tc.wantOK)
		}
	}
}

// fakeMetadata answers the metadata lists of a count, two pages, and records them.
type fakeMetadata struct {
	mu    sync.Mutex
	lists []listCall
}

// listCall is a list the counter made: its resource, namespace and options.
type listCall struct {
	gvr       schema.GroupVersionResource
	namespace string
	opts      metav1.ListOptions
}

func (f *fakeMetadata) Resource(gvr schema.GroupVersionResource) metadata.Getter {
	return &fakeMetadataResource{f: f, gvr: gvr}
}

// fakeMetadataResource lists; its other methods (the embedded nil interface's) panic.
type fakeMetadataResource struct {
	metadata.ResourceInterface
	f         *fakeMetadata
	gvr       schema.GroupVersionResource
	namespace string
}

func (r *fakeMetadataResource) Namespace(ns string) metadata.ResourceInterface {
	return &fakeMetadataResource{f: r.f, gvr: r.gvr, namespace: ns}
}

func (r *fakeMetadataResource) List(_ context.Context, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
	r.f.mu.Lock()
	defer r.f.mu.Unlock()
	r.f.lists = append(r.f.lists, listCall{gvr: r.gvr, namespace: r.namespace, opts: opts})
	item := func(i int) metav1.PartialObjectMetadata {
		return metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprint(i)}}
	}
	if opts.Continue == "" {
		return &metav1.PartialObjectMetadataList{ListMeta: metav1.ListMeta{Continue: "next"}, Items: []metav1.PartialObjectMetadata{item(0), item(1)}}, nil
	}
	return &metav1.PartialObjectMetadataList{Items: []metav1.PartialObjectMetadata{item(2)}}, nil
}

// TestExcessAPICounter counts through a fake metadata client: every namespace, the
// query's selectors, from the watch cache (resourceVersion 0) then page by page, the
// core group's v1 and a named group's served version.
func TestExcessAPICounter(t *testing.T) {
	md := &fakeMetadata{}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Group: "autoscaling", Version: "v2", Kind: "HorizontalPodAutoscaler"}, meta.RESTScopeNamespace)
	c := &apiCounter{metadata: md, mapper: mapper}
	ctx := context.Background()

	services, _ := queryOf("managed/services", shardB)
	if n, err := c.count(ctx, services); err != nil || n != 3 {
		t.Fatalf("count(%v) = %d, %v; want 3 over two pages", services, n, err)
	}
	if len(md.lists) != 2 {
		t.Fatalf("%d lists, want 2 pages", len(md.lists))
	}
	first, next := md.lists[0], md.lists[1]
	if first.gvr != (schema.GroupVersionResource{Version: "v1", Resource: "services"}) || first.namespace != "" ||
		first.opts.LabelSelector != services.labelSelector || first.opts.ResourceVersion != "0" || first.opts.Limit != countPageSize {
		t.Errorf("first page %v in namespace %q with %+v; want every namespace's v1 services, the managed selector, resourceVersion 0", first.gvr, first.namespace, first.opts)
	}
	if next.opts.Continue != "next" || next.opts.ResourceVersion != "" || next.opts.LabelSelector != services.labelSelector {
		t.Errorf("next page with %+v; want the continue token without a resourceVersion, the same selector", next.opts)
	}

	md.lists = nil
	hpas, _ := queryOf("unmanaged-metadata/horizontalpodautoscalers.autoscaling", shardA)
	if _, err := c.count(ctx, hpas); err != nil {
		t.Fatalf("count(%v): %v", hpas, err)
	}
	if got := md.lists[0]; got.gvr != (schema.GroupVersionResource{Group: "autoscaling", Version: "v2", Resource: "horizontalpodautoscalers"}) || got.opts.LabelSelector != hpas.labelSelector {
		t.Errorf("listed %v with %+v, want the served autoscaling/v2 with the unmanaged selector", got.gvr, got.opts)
	}

	md.lists = nil
	events, _ := queryOf("probe-events/events", shardA)
	if _, err := c.count(ctx, events); err != nil {
		t.Fatalf("count(%v): %v", events, err)
	}
	if got := md.lists[0]; got.gvr != (schema.GroupVersionResource{Version: "v1", Resource: "events"}) || got.opts.FieldSelector != podhealth.ProbeEventSelector {
		t.Errorf("listed %v with %+v; want the core group's events with the probe Events' field selector", got.gvr, got.opts)
	}

	jobs := storeQuery{resource: schema.GroupResource{Group: "batch", Resource: "jobs"}}
	if _, err := c.count(ctx, jobs); err == nil || !strings.Contains(err.Error(), "counting jobs.batch") {
		t.Errorf("count of a resource the API does not serve: %v, want an error that says what it counted", err)
	}
}

// simulated is a controller fleet and its API server at a moment of a simulated run:
// the fleet (the sampler's) and the counter answer from the functions of t, the
// seconds since the start.
type simulated struct {
	t float64
	// instances are the instances running at t; stores what a process's stores hold
	// at t.
	instances func(t float64) []instance
	stores    func(process string, t float64) map[string]float64
	// api is the API's count of q at t.
	api func(q storeQuery, t float64) (int, error)

	mu     sync.Mutex
	counts map[storeQuery]int
}

func (s *simulated) start(context.Context) error { return nil }
func (s *simulated) running() []instance         { return s.instances(s.t) }
func (s *simulated) kill(context.Context, instance) error {
	return errors.New("a simulated fleet kills nothing")
}
func (s *simulated) users() []string     { return nil }
func (s *simulated) restarts() []Restart { return nil }
func (s *simulated) panics() []string    { return nil }
func (s *simulated) stop()               {}
func (s *simulated) scrape(_ context.Context, in instance) (map[string]*dto.MetricFamily, error) {
	var b strings.Builder
	b.WriteString("# TYPE leader_election_master_status gauge\n")
	fmt.Fprintf(&b, "leader_election_master_status{name=%q} 1\n", in.lease)
	b.WriteString("# TYPE app_controller_informer_store_objects gauge\n")
	for store, v := range s.stores(in.process, s.t) {
		factory, resource, _ := strings.Cut(store, "/")
		fmt.Fprintf(&b, "app_controller_informer_store_objects{factory=%q,resource=%q} %v\n", factory, resource, v)
	}
	return testutil.TextToMetricFamilies(strings.NewReader(b.String()))
}

func (s *simulated) count(_ context.Context, q storeQuery) (int, error) {
	s.mu.Lock()
	if s.counts == nil {
		s.counts = map[storeQuery]int{}
	}
	s.counts[q]++
	s.mu.Unlock()
	return s.api(q, s.t)
}

// newSampler makes the sampler of the simulated fleet and API, as run.go does with the
// fleet and the API counter.
func (s *simulated) newSampler() *sampler { return &sampler{fleet: s, counter: s} }

// TestSamplerCountsStores takes one sample of both shards' leaders: each query counted
// once for the processes whose stores ask it (the Apps once per shard), every counted
// store given its count, none for a store the harness cannot count or whose count
// failed.
func TestSamplerCountsStores(t *testing.T) {
	leaderA := instance{name: "shard-a-0", shard: shardA, process: "shard-a-0#1", lease: leaseName(shardA)}
	leaderB := instance{name: "shard-b-0", shard: shardB, process: "shard-b-0#1", lease: leaseName(shardB)}
	appsA, _ := queryOf("apps/apps.appcontroller.k8s.io", shardA)
	appsB, _ := queryOf("apps/apps.appcontroller.k8s.io", shardB)
	services, _ := queryOf("managed/services", shardA)
	kubeServices, _ := queryOf("kube/services", shardA)
	sim := &simulated{
		t:         600,
		instances: func(float64) []instance { return []instance{leaderA, leaderB} },
		stores: func(process string, _ float64) map[string]float64 {
			if process == leaderA.process {
				return map[string]float64{"apps/apps.appcontroller.k8s.io": 21, "managed/services": 41, "kube/services": 50, "other/widgets.example.com": 3}
			}
			return map[string]float64{"apps/apps.appcontroller.k8s.io": 19, "managed/services": 40}
		},
		api: func(q storeQuery, _ float64) (int, error) {
			switch q {
			case appsA:
				return 20, nil
			case appsB:
				return 19, nil
			case services:
				return 40, nil
			}
			return 0, errors.New("the API server is away")
		},
	}
	s := sim.newSampler()
	s.take(context.Background(), sim.t)
	if len(s.samples) != 2 {
		t.Fatalf("%d samples, want 2", len(s.samples))
	}
	for _, sample := range s.samples {
		want := map[string]float64{"apps/apps.appcontroller.k8s.io": 19, "managed/services": 40}
		if sample.Shard == shardA {
			want["apps/apps.appcontroller.k8s.io"] = 20
		}
		if fmt.Sprint(sample.StoresAPI) != fmt.Sprint(want) || sample.T != sim.t || !sample.Leader {
			t.Errorf("shard %s: counts %v at %v (leader %v), want %v at %v", sample.Shard, sample.StoresAPI, sample.T, sample.Leader, want, sim.t)
		}
	}
	if want := map[storeQuery]int{appsA: 1, appsB: 1, services: 1, kubeServices: 1}; fmt.Sprint(sim.counts) != fmt.Sprint(want) {
		t.Errorf("counts %v, want each query once: %v", sim.counts, want)
	}
	if s.countFails != 1 || !strings.Contains(s.countFailure, "away") {
		t.Errorf("%d counts failed (%q), want kube/services's", s.countFails, s.countFailure)
	}
}

// TestTrendStoreExcess samples shard b's leaders through a simulated hour like the
// 60-minute run that failed on `store:managed/services` (+52.5/h, a store of 35 to 45
// Services that follows the canaries in flight; its leader changed): a store that
// follows the API is not growing once judged on its excess, though its own size rises
// beyond the bound within each leader; a store whose excess grows by 20 an hour is; a
// store the harness cannot count is judged on its size; a count that fails leaves its
// sample out of the excess alone.
func TestTrendStoreExcess(t *testing.T) {
	const (
		run      = 60 * time.Minute
		interval = 10
		store    = "managed/services"
		other    = "other/widgets.example.com"
	)
	// Shard b's leaders (minutes): killed at 21 and 40.
	type lead struct {
		process  string
		from, to float64
	}
	leaders := []lead{{"shard-b-0#1", 0, 21}, {"shard-b-1#1", 21, 40}, {"shard-b-0#2", 40, 60}}
	leaderAt := func(t float64) lead {
		for _, l := range leaders {
			if t < l.to*60 {
				return l
			}
		}
		return leaders[len(leaders)-1]
	}
	// inFlight are the Services the store should hold at each sample: the Apps' and the
	// canaries' in flight, 35 to 45, a random walk that happened to rise over each
	// leader's time. skew is the API's count less inFlight at the count, a few hundred
	// ms later: an object created or deleted in between, a few in a burst.
	rng := rand.New(rand.NewPCG(52, 5))
	steps := int(run.Seconds()) / interval
	inFlight, skew := make([]float64, steps+1), make([]float64, steps+1)
	walk := 0.0
	for i := range inFlight {
		l := leaderAt(float64(i * interval))
		elapsed := (float64(i*interval)/60 - l.from) / (l.to - l.from)
		switch r := rng.Float64(); {
		case r < 0.15:
			walk = math.Min(walk+1, 2)
		case r < 0.3:
			walk = math.Max(walk-1, -2)
		}
		inFlight[i] = math.Max(35, math.Min(45, math.Round(35+10*elapsed+walk)))
		switch r := rng.Float64(); {
		case r < 0.1:
			skew[i] = 1
		case r < 0.2:
			skew[i] = -1
		case r < 0.22:
			skew[i] = 4
		case r < 0.24:
			skew[i] = -4
		}
	}
	index := func(t float64) int { return int(math.Round(t / interval)) }

	for _, tc := range []struct {
		name string
		// kept is how many objects the store holds beyond the API's at t, h hours
		// into its process.
		kept        func(h float64) float64
		wantGrowing bool
	}{
		{name: "follows the rollouts in flight", kept: func(float64) float64 { return 0 }},
		{name: "keeps 20 deleted Services an hour", kept: func(h float64) float64 { return math.Floor(20 * h) }, wantGrowing: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The API away for 30 s at minute 30.
			away := func(t float64) bool { return t >= 1800 && t < 1830 }
			sim := &simulated{
				instances: func(t float64) []instance {
					l := leaderAt(t)
					return []instance{{name: l.process[:len(l.process)-2], shard: shardB, process: l.process, lease: leaseName(shardB)}}
				},
				stores: func(process string, t float64) map[string]float64 {
					l := leaderAt(t)
					return map[string]float64{store: inFlight[index(t)] + tc.kept(t/3600-l.from/60), other: 5}
				},
				api: func(q storeQuery, t float64) (int, error) {
					if away(t) {
						return 0, errors.New("the API server is away")
					}
					return int(inFlight[index(t)] + skew[index(t)]), nil
				},
			}
			s := sim.newSampler()
			for i := 0; i <= steps; i++ {
				sim.t = float64(i * interval)
				s.take(context.Background(), sim.t)
			}
			if s.countFails != 3 {
				t.Errorf("%d counts failed, want the 3 samples while the API was away", s.countFails)
			}
			trendsOf := func(samples []Sample) map[string]Trend {
				out := map[string]Trend{}
				for _, tr := range trends(samples, run/3, run, 5*time.Minute) {
					out[tr.Series] = tr
				}
				return out
			}
			got := trendsOf(s.samples)
			excess, ok := got[seriesStoreExcess+store]
			if !ok {
				t.Fatalf("no %s%s among %v", seriesStoreExcess, store, got)
			}
			t.Logf("excess: %+v", excess)
			if excess.Growing != tc.wantGrowing {
				t.Errorf("%s growing = %v, want %v: %+v", excess.Series, excess.Growing, tc.wantGrowing, excess)
			}
			if excess.BoundPerHour != trendFloors[seriesStoreExcess] || excess.StoreMean < 35 || excess.StoreMean > 45+20 {
				t.Errorf("bound %v, store mean %v; want the floor %v, the store's own mean", excess.BoundPerHour, excess.StoreMean, trendFloors[seriesStoreExcess])
			}
			if _, ok := got[seriesStore+store]; ok {
				t.Errorf("%s judged on its size too, want its excess alone", store)
			}
			if o, ok := got[seriesStore+other]; !ok || o.Growing || o.Mean != 5 || o.StoreMean != 0 {
				t.Errorf("%s: %+v, want judged on its size, flat", other, o)
			}
			// The same samples without the counts: judged on its size, as the run
			// that failed was, the store grows beyond its bound.
			raw := make([]Sample, len(s.samples))
			for i, sample := range s.samples {
				raw[i] = sample
				raw[i].StoresAPI = nil
			}
			size, ok := trendsOf(raw)[seriesStore+store]
			t.Logf("size: %+v", size)
			if !ok || !size.Growing || size.N != excess.N+3 {
				t.Errorf("%s judged on its size: %+v; want growing, on the %d samples of the excess and the 3 without a count", store, size, excess.N)
			}
		})
	}
}

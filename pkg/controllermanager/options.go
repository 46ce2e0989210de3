package controllermanager

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/app-controller/app-controller/pkg/analysis"
	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
	"github.com/app-controller/app-controller/pkg/controller/app"
)

// Options are the settings of the controller-manager, set from flags.
type Options struct {
	// Kubeconfig and Master locate the API server. Neither set: in-cluster config when
	// running in a pod, else $KUBECONFIG or ~/.kube/config.
	Kubeconfig string
	Master     string
	// KubeAPIQPS and KubeAPIBurst limit the client's request rate.
	KubeAPIQPS   float64
	KubeAPIBurst int

	// Controllers selects controllers, kube-controller-manager style: "*" is every
	// controller, "foo" enables foo, "-foo" disables foo.
	Controllers []string
	// Workers is the number of concurrent syncs of each controller.
	Workers int
	// ResyncPeriod is how often informers replay their cache to the handlers.
	ResyncPeriod time.Duration
	// ShutdownTimeout bounds how long in-flight syncs may run after a stop signal.
	ShutdownTimeout time.Duration
	// AppContest paces the App controller's repairs of a child that another writer
	// keeps changing (no flag: the defaults of app.ContestPolicy; tests shorten them).
	AppContest app.ContestPolicy

	// IngressClass is the IngressClass of Ingresses created for annotated Services that
	// do not name one; empty means the cluster's default class.
	IngressClass string
	// WatchNamespaces limits every controller to the objects of these namespaces (none:
	// all): a namespace-scoped install, whose RBAC is a Role in each. Each namespace gets
	// its own informers and controllers in the process (an informer watches one
	// namespace or all). The node labeler, which writes cluster-scoped Nodes, is disabled
	// then.
	WatchNamespaces []string
	// AppSelector is a label selector: the App controller reconciles only the Apps it
	// selects ("": every App). Instances with disjoint selectors (and their own
	// --leader-elect-name) split the Apps between them.
	AppSelector string
	// DefaultGateway, NAMESPACE/NAME[/SECTION], is the Gateway that an App route without
	// parentRefs, tls and ingressClassName attaches to, as an HTTPRoute; empty: such a
	// route is an Ingress.
	DefaultGateway string
	// IngressSharedNamespaces may share Ingress hosts among themselves; every other
	// namespace holds the hosts it claimed first alone.
	IngressSharedNamespaces []string
	// IngressCatchAllNamespaces may have catch-all Ingress rules (a Service without
	// ingress/host); "*": every namespace.
	IngressCatchAllNamespaces []string
	// NodeLabelConfig is the path of the node labeler's rules; empty disables it. An
	// invalid file disables the node labeler alone (DisabledError.Err): the other
	// controllers run.
	NodeLabelConfig string
	// ConfigRolloutSecrets rolls the pods of an App when a Secret they reference
	// changes, as a ConfigMap does. Off, the App controller does not list or watch
	// Secrets (the ClusterRole needs no rights on them): a Secret's change rolls no pods,
	// and a missing Secret shows only in the pods' own status.
	ConfigRolloutSecrets bool

	// PrometheusURL is the Prometheus that answers the metric checks of canary
	// analysis; empty: none, and a rollout that asks for one is refused
	// (PrometheusNotConfigured). PrometheusCAFile, PrometheusInsecureSkipVerify and
	// PrometheusBearerTokenFile secure the connection; PrometheusQueryTimeout bounds a
	// query.
	PrometheusURL                string
	PrometheusCAFile             string
	PrometheusInsecureSkipVerify bool
	PrometheusBearerTokenFile    string
	PrometheusQueryTimeout       time.Duration
	// NotificationWebhookURLFile is a file holding the URL rollout notifications are
	// POSTed to (the Helm chart mounts it from a Secret); empty: none.
	// NotificationFormat is json or slack.
	NotificationWebhookURLFile string
	NotificationFormat         string

	// PodName and PodNamespace name the controller's own Pod, which gets the Events
	// about the controller-manager itself, such as a controller disabled by an invalid
	// configuration (no flag: the POD_NAME and POD_NAMESPACE environment variables, set
	// from the downward API). Either empty: those Events are not recorded, only logged.
	PodName, PodNamespace string

	// ServiceAccountName is the controller's own ServiceAccount, in PodNamespace (no
	// flag: the SERVICE_ACCOUNT_NAME environment variable, set from the downward API).
	// An App in that namespace may not run its pods as it: they would get the
	// controller's cluster-wide rights. Empty: no App is refused.
	ServiceAccountName string

	// LeaderElect makes instances elect one leader through a Lease; only the leader runs
	// the controllers.
	LeaderElect              bool
	LeaderElectNamespace     string
	LeaderElectName          string
	LeaderElectLeaseDuration time.Duration
	LeaderElectRenewDeadline time.Duration
	LeaderElectRetryPeriod   time.Duration

	// HealthProbeBindAddress serves /healthz and /readyz; empty or "0" disables it.
	HealthProbeBindAddress string
	// MetricsBindAddress serves Prometheus metrics on /metrics; empty or "0" disables it.
	MetricsBindAddress string
	// Profiling serves Go's profiles (net/http/pprof) on the metrics address under
	// /debug/pprof/, behind the same authentication and authorization as /metrics when
	// MetricsSecure is set (a user then needs get on the non-resource URL /debug/pprof/*).
	Profiling bool
	// MetricsSecure serves /metrics over HTTPS to authenticated, authorized bearer
	// tokens only (TokenReview and SubjectAccessReview).
	MetricsSecure bool
	// MetricsCertFile and MetricsKeyFile are the serving certificate and key of the
	// secure metrics endpoint; empty: a self-signed certificate made at start.
	MetricsCertFile, MetricsKeyFile string
}

// Defaults of the options that have no better home.
const (
	// DefaultKubeAPIQPS and DefaultKubeAPIBurst are the client's default rate limits.
	// A new App costs three writes of the Kubernetes client (Deployment, Service, Event):
	// at 50 QPS (the seed's default) 1000 new Apps took at least 60 s on the client side
	// alone, where the API server on 2 cores takes about 80-100 writes/s. 200 leaves the
	// API server's own flow control as the bound.
	DefaultKubeAPIQPS   = 200
	DefaultKubeAPIBurst = 400
	// DefaultResyncPeriod is how often informers replay their caches (seed: 30s).
	DefaultResyncPeriod = 30 * time.Second
	// DefaultWorkers is the default number of concurrent syncs of each controller. The
	// seed had 5; syncs wait on the apiserver, not the CPU, and `make bench` at 1000 Apps
	// on 2 cores converged in 1.19x the floor with 5 or 10 workers, 1.07x with 20 and
	// 1.09x with 40 (docs/performance.md, "Workers").
	DefaultWorkers = 20
)

// NewOptions returns the default options. Each default is defined once, beside what it
// tunes; flags show them as their defaults.
func NewOptions() *Options {
	return &Options{
		KubeAPIQPS:      DefaultKubeAPIQPS,
		KubeAPIBurst:    DefaultKubeAPIBurst,
		Controllers:     []string{"*"},
		Workers:         DefaultWorkers,
		ResyncPeriod:    DefaultResyncPeriod,
		ShutdownTimeout: controller.DefaultShutdownTimeout,

		IngressCatchAllNamespaces: []string{"*"},
		ConfigRolloutSecrets:      true,

		PrometheusQueryTimeout: analysis.DefaultQueryTimeout,
		NotificationFormat:     string(analysis.FormatJSON),

		PodName:      os.Getenv("POD_NAME"),
		PodNamespace: os.Getenv("POD_NAMESPACE"),

		ServiceAccountName: os.Getenv("SERVICE_ACCOUNT_NAME"),

		LeaderElectNamespace:     defaultLeaderElectNamespace(),
		LeaderElectName:          "app-controller",
		LeaderElectLeaseDuration: defaultLeaseDuration,
		LeaderElectRenewDeadline: defaultRenewDeadline,
		LeaderElectRetryPeriod:   defaultRetryPeriod,
	}
}

// AddFlags registers the options as flags of fs.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Path to a kubeconfig. Only required if out-of-cluster; defaults to $KUBECONFIG, then ~/.kube/config.")
	fs.StringVar(&o.Kubeconfig, "kubeConfig", o.Kubeconfig, "Deprecated spelling of --kubeconfig.")
	fs.StringVar(&o.Master, "master", o.Master, "The address of the Kubernetes API server. Overrides any value in kubeconfig. Only required if out-of-cluster.")
	fs.Float64Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS, "Queries per second the controllers may send to the API server.")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst, "Burst of queries the controllers may send to the API server.")
	fs.Var(newStringSliceValue(&o.Controllers), "controllers", fmt.Sprintf(
		"A list of controllers to enable. '*' enables all, 'foo' enables the controller named 'foo', '-foo' disables it. Controllers: %s.",
		strings.Join(KnownControllers(), ", ")))
	fs.IntVar(&o.Workers, "workers", o.Workers, "Number of objects each controller syncs concurrently.")
	fs.DurationVar(&o.ResyncPeriod, "resync-period", o.ResyncPeriod, "How often informers resync; every App is re-examined at each resync (no write when it is up to date).")
	fs.DurationVar(&o.ShutdownTimeout, "shutdown-timeout", o.ShutdownTimeout, "How long in-flight syncs may run after SIGINT or SIGTERM before they are cancelled.")
	fs.StringVar(&o.IngressClass, "ingress-class", o.IngressClass, "IngressClass of the Ingresses created for Services annotated ingress/http that set no ingress/class; empty: the cluster's default class.")
	fs.Var(newStringList(&o.IngressSharedNamespaces), "ingress-shared-namespaces", "Comma-separated namespaces that may share Ingress hosts among themselves; every other namespace holds the hosts it claimed first alone (a later claim from another namespace gets no Ingress and a HostConflict Warning).")
	fs.Var(newStringList(&o.IngressCatchAllNamespaces), "ingress-catch-all-namespaces", "Comma-separated namespaces whose Services may have a catch-all Ingress rule (annotation ingress/host unset); * for every namespace, empty for none.")
	fs.StringVar(&o.DefaultGateway, "default-gateway", o.DefaultGateway, "Gateway (NAMESPACE/NAME or NAMESPACE/NAME/LISTENER) that an App route without parentRefs, tls and ingressClassName attaches to as an HTTPRoute, where the cluster serves the Gateway API; empty: such a route is an Ingress.")
	fs.StringVar(&o.AppSelector, "app-selector", o.AppSelector, "Label selector of the Apps this instance reconciles (e.g. shard=a); empty: every App. Instances with disjoint selectors, each with its own --leader-elect-name, split the Apps between them.")
	fs.Var(&stringList{values: &o.WatchNamespaces, repeatable: true}, "watch-namespace", "Watch and reconcile only the objects of this namespace (a namespace-scoped install; its RBAC can be a Role there); repeat it, or separate namespaces with commas, for several; none: every namespace. The node labeler is disabled then.")
	fs.BoolVar(&o.ConfigRolloutSecrets, "config-rollout-secrets", o.ConfigRolloutSecrets, "Roll an App's pods when a Secret they reference changes, as for a ConfigMap. false: the App controller neither lists nor watches Secrets (its role needs no rights on them); a Secret's change then rolls no pods.")
	fs.StringVar(&o.PrometheusURL, "prometheus-url", o.PrometheusURL, "URL of the Prometheus that answers the metric checks of canary analysis (successRate, latency, query), e.g. http://prometheus.monitoring:9090; empty: a rollout that asks for one is aborted as it starts (PrometheusNotConfigured), and everything else works.")
	fs.StringVar(&o.PrometheusCAFile, "prometheus-ca-file", o.PrometheusCAFile, "PEM file of the certificate authorities that sign an https --prometheus-url's certificate; empty: the system's.")
	fs.BoolVar(&o.PrometheusInsecureSkipVerify, "prometheus-insecure-skip-verify", o.PrometheusInsecureSkipVerify, "Do not verify an https --prometheus-url's certificate (tests only).")
	fs.StringVar(&o.PrometheusBearerTokenFile, "prometheus-bearer-token-file", o.PrometheusBearerTokenFile, "File holding the bearer token sent to --prometheus-url, read at each query (the Helm chart mounts it from a Secret).")
	fs.DurationVar(&o.PrometheusQueryTimeout, "prometheus-query-timeout", o.PrometheusQueryTimeout, "Bound of one query of --prometheus-url, from 1s to 1m; a query that times out is an inconclusive measurement.")
	fs.StringVar(&o.NotificationWebhookURLFile, "notification-webhook-url-file", o.NotificationWebhookURLFile, "File holding the URL that rollout notifications (started, step, paused, aborted, promoted) are POSTed to, read at start (the Helm chart mounts it from a Secret); empty: none. A notification never holds a rollout.")
	fs.StringVar(&o.NotificationFormat, "notification-format", o.NotificationFormat, "Body of a rollout notification: json (event, namespace, app, reason, message, time) or slack ({\"text\": ...}, Slack's incoming webhooks and compatibles).")
	fs.StringVar(&o.NodeLabelConfig, "node-label-config", o.NodeLabelConfig, "Path of the node labeler's rules (YAML). Without it the node labeler is disabled.")
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect, "Elect a leader among the instances through a Lease; only the leader runs the controllers. Use it when running more than one replica.")
	fs.StringVar(&o.LeaderElectNamespace, "leader-elect-namespace", o.LeaderElectNamespace, "Namespace of the leader election Lease (default: the pod's namespace, else default).")
	fs.StringVar(&o.LeaderElectNamespace, "leader-elect-resource-namespace", o.LeaderElectNamespace, "kube-controller-manager's spelling of --leader-elect-namespace.")
	fs.StringVar(&o.LeaderElectName, "leader-elect-name", o.LeaderElectName, "Name of the leader election Lease.")
	fs.StringVar(&o.LeaderElectName, "leader-elect-resource-name", o.LeaderElectName, "kube-controller-manager's spelling of --leader-elect-name.")
	fs.DurationVar(&o.LeaderElectLeaseDuration, "leader-elect-lease-duration", o.LeaderElectLeaseDuration, "How long a standby waits before taking over a lease that is not renewed.")
	fs.DurationVar(&o.LeaderElectRenewDeadline, "leader-elect-renew-deadline", o.LeaderElectRenewDeadline, "How long the leader tries to renew its lease before giving up leadership.")
	fs.DurationVar(&o.LeaderElectRetryPeriod, "leader-elect-retry-period", o.LeaderElectRetryPeriod, "How often instances try to acquire or renew the lease.")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", o.HealthProbeBindAddress, "Address to serve /healthz and /readyz on, e.g. :8081; empty or 0 disables it.")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, "Address to serve Prometheus /metrics on, e.g. :8080; empty or 0 disables it.")
	fs.BoolVar(&o.Profiling, "profiling", o.Profiling, "Serve Go's profiles (heap, CPU, goroutines) under /debug/pprof/ on --metrics-bind-address, like kube-controller-manager's --profiling (off by default here: a profile shows the contents of the caches).")
	fs.BoolVar(&o.MetricsSecure, "metrics-secure", o.MetricsSecure, "Serve /metrics over HTTPS, only to bearer tokens the API server authenticates (TokenReview) for users allowed to get the non-resource URL /metrics (SubjectAccessReview).")
	fs.StringVar(&o.MetricsCertFile, "metrics-tls-cert-file", o.MetricsCertFile, "Serving certificate of --metrics-secure (PEM); empty: a self-signed certificate made at start.")
	fs.StringVar(&o.MetricsKeyFile, "metrics-tls-private-key-file", o.MetricsKeyFile, "Private key of --metrics-tls-cert-file (PEM).")
}

// Validate checks the options.
func (o *Options) Validate() error {
	if o.Workers < 1 {
		return fmt.Errorf("--workers must be at least 1, got %d", o.Workers)
	}
	if o.ResyncPeriod < 0 {
		return fmt.Errorf("--resync-period must not be negative, got %s", o.ResyncPeriod)
	}
	if o.KubeAPIQPS <= 0 || o.KubeAPIBurst <= 0 {
		return fmt.Errorf("--kube-api-qps and --kube-api-burst must be positive")
	}
	if o.LeaderElect {
		if o.LeaderElectNamespace == "" || o.LeaderElectName == "" {
			return fmt.Errorf("--leader-elect needs --leader-elect-namespace and --leader-elect-name")
		}
		if o.LeaderElectRetryPeriod <= 0 || o.LeaderElectRetryPeriod >= o.LeaderElectRenewDeadline || o.LeaderElectRenewDeadline >= o.LeaderElectLeaseDuration {
			return fmt.Errorf("leader election timings must satisfy 0 < --leader-elect-retry-period (%s) < --leader-elect-renew-deadline (%s) < --leader-elect-lease-duration (%s)",
				o.LeaderElectRetryPeriod, o.LeaderElectRenewDeadline, o.LeaderElectLeaseDuration)
		}
	}
	seen := map[string]bool{}
	for _, ns := range o.WatchNamespaces {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return fmt.Errorf("--watch-namespace %q: %s", ns, strings.Join(errs, "; "))
		}
		if seen[ns] {
			return fmt.Errorf("--watch-namespace %q is given twice", ns)
		}
		seen[ns] = true
	}
	if _, err := labels.Parse(o.AppSelector); err != nil {
		return fmt.Errorf("--app-selector %q: %w", o.AppSelector, err)
	}
	if _, err := o.defaultGateway(); err != nil {
		return err
	}
	if err := o.validateAnalysis(); err != nil {
		return err
	}
	return validateControllers(o.Controllers)
}

// defaultGateway parses --default-gateway; nil when it is empty.
func (o *Options) defaultGateway() (*appv1.GatewayRef, error) {
	if o.DefaultGateway == "" {
		return nil, nil
	}
	parts := strings.Split(o.DefaultGateway, "/")
	if len(parts) < 2 || len(parts) > 3 {
		return nil, fmt.Errorf("--default-gateway %q: want NAMESPACE/NAME or NAMESPACE/NAME/LISTENER", o.DefaultGateway)
	}
	for i, part := range parts {
		errs := validation.IsDNS1123Subdomain(part)
		if i == 0 {
			errs = validation.IsDNS1123Label(part)
		}
		if len(errs) > 0 {
			return nil, fmt.Errorf("--default-gateway %q: %q: %s", o.DefaultGateway, part, strings.Join(errs, "; "))
		}
	}
	ref := &appv1.GatewayRef{Namespace: parts[0], Name: parts[1]}
	if len(parts) == 3 {
		ref.SectionName = parts[2]
	}
	return ref, nil
}

// stringSliceValue is a flag.Value holding a comma-separated list.
type stringSliceValue struct {
	value   *[]string
	changed bool
}

func newStringSliceValue(p *[]string) *stringSliceValue { return &stringSliceValue{value: p} }

// Set replaces the default on first use and appends after that, so that both
// --controllers=a,b and --controllers=a --controllers=b work.
func (s *stringSliceValue) Set(v string) error {
	var items []string
	for _, item := range strings.Split(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			items = append(items, item)
		}
	}
	if !s.changed {
		*s.value = items
		s.changed = true
	} else {
		*s.value = append(*s.value, items...)
	}
	return nil
}

func (s *stringSliceValue) String() string {
	if s == nil || s.value == nil {
		return ""
	}
	return strings.Join(*s.value, ",")
}

// stringList is a flag.Value of comma-separated strings; empty means none. With
// repeatable, each use of the flag adds its values (the flag may be repeated); else the
// last use sets them.
type stringList struct {
	values     *[]string
	repeatable bool
}

func newStringList(values *[]string) *stringList { return &stringList{values: values} }

// String returns the values, comma-separated.
func (l *stringList) String() string {
	if l == nil || l.values == nil {
		return ""
	}
	return strings.Join(*l.values, ",")
}

// Set sets (or, if repeatable, adds) the comma-separated values of s; "" sets none (an
// empty, non-nil list).
func (l *stringList) Set(s string) error {
	if !l.repeatable || *l.values == nil {
		*l.values = []string{}
	}
	for v := range strings.SplitSeq(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			*l.values = append(*l.values, v)
		}
	}
	return nil
}

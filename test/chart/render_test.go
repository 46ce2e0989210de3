package chart

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/app-controller/app-controller/pkg/controller/nodelabel"
)

// The ci/ values files the tests render (and helm-lint lints).
const (
	oneControllerValues  = "ci/one-controller-values.yaml"
	serviceMonitorValues = "ci/servicemonitor-values.yaml"
	// secureMetricsValues turns on --metrics-secure with a ServiceMonitor.
	secureMetricsValues = "ci/servicemonitor-secure-values.yaml"
	digestValues        = "ci/digest-values.yaml"
)

func render(t *testing.T, opts Options) *Rendering {
	t.Helper()
	r, err := Render(opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// find returns the rendered object, failing the test if it is missing.
func find(t *testing.T, r *Rendering, kind, name string) *unstructured.Unstructured {
	t.Helper()
	obj := r.Find(kind, name)
	if obj == nil {
		t.Fatalf("no %s %s rendered; got %v", kind, name, names(r.Objects))
	}
	return obj
}

// names returns "Kind/name" of objs, sorted.
func names(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, obj := range objs {
		out = append(out, obj.GetKind()+"/"+obj.GetName())
	}
	slices.Sort(out)
	return out
}

func nested(t *testing.T, obj *unstructured.Unstructured, fields ...string) any {
	t.Helper()
	v, found, err := unstructured.NestedFieldNoCopy(obj.Object, fields...)
	if err != nil || !found {
		t.Fatalf("%s %s: no %s (%v)", obj.GetKind(), obj.GetName(), strings.Join(fields, "."), err)
	}
	return v
}

// container returns the manager container of the rendered Deployment.
func container(t *testing.T, d *unstructured.Unstructured) map[string]any {
	t.Helper()
	containers := nested(t, d, "spec", "template", "spec", "containers").([]any)
	if len(containers) != 1 {
		t.Fatalf("Deployment %s has %d containers, want 1", d.GetName(), len(containers))
	}
	return containers[0].(map[string]any)
}

func args(t *testing.T, d *unstructured.Unstructured) []string {
	t.Helper()
	var out []string
	for _, a := range container(t, d)["args"].([]any) {
		out = append(out, a.(string))
	}
	return out
}

// TestLint lints the chart as helm lint --strict does, for Kubernetes 1.36, with the
// default values and the ci/ files that need no extra capability.
func TestLint(t *testing.T) {
	dir, err := Dir()
	if err != nil {
		t.Fatal(err)
	}
	kubeVersion, err := chartutil.ParseKubeVersion(KubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{"", oneControllerValues, digestValues} {
		t.Run("values="+file, func(t *testing.T) {
			vals, err := Values(Options{ValuesFile: file})
			if err != nil {
				t.Fatal(err)
			}
			lint := action.NewLint()
			lint.Strict = true
			lint.Namespace = "app-controller-system"
			lint.KubeVersion = kubeVersion
			res := lint.Run([]string{dir}, vals)
			for _, msg := range res.Messages {
				t.Logf("lint: %s", msg)
			}
			for _, err := range res.Errors {
				t.Errorf("lint: %v", err)
			}
			if res.TotalChartsLinted != 1 {
				t.Errorf("linted %d charts, want 1", res.TotalChartsLinted)
			}
		})
	}
}

// TestChartMetadata checks that the chart loads and declares its version and appVersion.
func TestChartMetadata(t *testing.T) {
	chrt, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if err := chrt.Validate(); err != nil {
		t.Error(err)
	}
	if chrt.Metadata.AppVersion == "" || chrt.Metadata.Version == "" {
		t.Errorf("version %q, appVersion %q: both must be set", chrt.Metadata.Version, chrt.Metadata.AppVersion)
	}
	if chrt.Schema == nil {
		t.Error("the chart has no values.schema.json")
	}
	// kubeVersion admits the supported minors (docs/compatibility.md), the local control
	// plane's (stamped with its version) and a provider's build of them, and refuses the
	// minor before the oldest supported.
	for _, v := range []string{"v1.34.0", "v1.34.4", "v1.35.4", "v1.36.3", KubeVersion, "v1.37.2-gke.1100", "v1.38.0"} {
		if !chartutil.IsCompatibleRange(chrt.Metadata.KubeVersion, v) {
			t.Errorf("kubeVersion %q refuses Kubernetes %s", chrt.Metadata.KubeVersion, v)
		}
	}
	for _, v := range []string{"v1.33.9", "v1.33.9-eks.1"} {
		if chartutil.IsCompatibleRange(chrt.Metadata.KubeVersion, v) {
			t.Errorf("kubeVersion %q admits Kubernetes %s, older than the oldest supported (1.34)", chrt.Metadata.KubeVersion, v)
		}
	}
}

// TestDefaultRenderingIsConfigDefault renders the default values and compares them with
// config/default: the same objects (but the namespace, which helm install
// --create-namespace makes), the same ClusterRole and Role rules as config/rbac/role.yaml,
// the same CRD as config/crd (plus the keep annotation), the same Deployment as
// config/manager/manager.yaml but for labels and the image.
func TestDefaultRenderingIsConfigDefault(t *testing.T) {
	r := render(t, Options{})
	config, err := ConfigObjects()
	if err != nil {
		t.Fatal(err)
	}
	var want []*unstructured.Unstructured
	for _, obj := range config {
		if obj.GetKind() != "Namespace" {
			want = append(want, obj)
		}
	}
	if diff := cmp.Diff(names(want), names(r.Objects)); diff != "" {
		t.Errorf("objects rendered with the default values differ from config/default's (-config +chart):\n%s", diff)
	}

	for _, cfg := range want {
		chart := r.Find(cfg.GetKind(), cfg.GetName())
		if chart == nil {
			continue // reported above
		}
		if cfg.GetNamespace() != "" && chart.GetNamespace() != "app-controller-system" {
			t.Errorf("%s %s: namespace %q, want the release namespace", cfg.GetKind(), cfg.GetName(), chart.GetNamespace())
		}
		t.Run(cfg.GetKind()+"/"+cfg.GetName(), func(t *testing.T) {
			switch cfg.GetKind() {
			case "ClusterRole", "Role":
				if diff := cmp.Diff(nested(t, cfg, "rules"), nested(t, chart, "rules")); diff != "" {
					t.Errorf("rules differ from config/rbac (-config +chart):\n%s", diff)
				}
				for key, value := range cfg.GetLabels() {
					if strings.HasPrefix(key, "rbac.authorization.k8s.io/") && chart.GetLabels()[key] != value {
						t.Errorf("label %s = %q, want %q", key, chart.GetLabels()[key], value)
					}
				}
			case "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
				// The same policy, the ServiceAccount's username (release app-controller in
				// app-controller-system) included.
				if diff := cmp.Diff(nested(t, cfg, "spec"), nested(t, chart, "spec")); diff != "" {
					t.Errorf("spec differs from config/admission (-config +chart):\n%s", diff)
				}
			case "FlowSchema":
				// The same schema, for the release's ServiceAccount (app-controller in
				// app-controller-system).
				if diff := cmp.Diff(nested(t, cfg, "spec"), nested(t, chart, "spec")); diff != "" {
					t.Errorf("spec differs from config/flowcontrol (-config +chart):\n%s", diff)
				}
			case "CustomResourceDefinition":
				if diff := cmp.Diff(nested(t, cfg, "spec"), nested(t, chart, "spec")); diff != "" {
					t.Errorf("spec differs from config/crd (-config +chart):\n%s", diff)
				}
				if got := chart.GetAnnotations()["helm.sh/resource-policy"]; got != "keep" {
					t.Errorf("annotation helm.sh/resource-policy = %q, want keep", got)
				}
			case "Deployment":
				if got, want := container(t, chart)["image"], "app-controller:0.1.0"; got != want {
					t.Errorf("image = %v, want %s (repository:appVersion)", got, want)
				}
				if diff := cmp.Diff(deploymentShape(t, cfg), deploymentShape(t, chart)); diff != "" {
					t.Errorf("Deployment differs from config/manager/manager.yaml (-config +chart):\n%s", diff)
				}
			case "PodDisruptionBudget":
				if diff := cmp.Diff(nested(t, cfg, "spec", "maxUnavailable"), nested(t, chart, "spec", "maxUnavailable")); diff != "" {
					t.Errorf("maxUnavailable differs (-config +chart):\n%s", diff)
				}
			case "Service":
				if diff := cmp.Diff(nested(t, cfg, "spec", "ports"), nested(t, chart, "spec", "ports")); diff != "" {
					t.Errorf("ports differ (-config +chart):\n%s", diff)
				}
			}
		})
	}

	// Every selector of the chart selects the Deployment's pods.
	podLabels := find(t, r, "Deployment", "app-controller").Object["spec"].(map[string]any)["template"].(map[string]any)["metadata"].(map[string]any)["labels"].(map[string]any)
	for _, sel := range []struct {
		kind, name string
		path       []string
	}{
		{"Deployment", "app-controller", []string{"spec", "selector", "matchLabels"}},
		{"PodDisruptionBudget", "app-controller", []string{"spec", "selector", "matchLabels"}},
		{"Service", "app-controller-metrics", []string{"spec", "selector"}},
	} {
		for key, value := range nested(t, find(t, r, sel.kind, sel.name), sel.path...).(map[string]any) {
			if podLabels[key] != value {
				t.Errorf("%s %s selects %s=%v, which the pods do not carry", sel.kind, sel.name, key, value)
			}
		}
	}
	for _, want := range []string{"kubectl -n app-controller-system get deploy,pods", "kubectl get apps -A", "kind: App", "keeps the App CRD"} {
		if !strings.Contains(r.Notes, want) {
			t.Errorf("NOTES.txt lacks %q:\n%s", want, r.Notes)
		}
	}
}

// deploymentShape returns the spec of Deployment d without what legitimately differs
// between config/manager and the chart: labels, selectors and the image.
func deploymentShape(t *testing.T, d *unstructured.Unstructured) map[string]any {
	t.Helper()
	spec := d.DeepCopy().Object["spec"].(map[string]any)
	delete(spec, "selector")
	template := spec["template"].(map[string]any)
	delete(template, "metadata")
	pod := template["spec"].(map[string]any)
	for _, c := range pod["topologySpreadConstraints"].([]any) {
		delete(c.(map[string]any), "labelSelector")
	}
	for _, c := range pod["containers"].([]any) {
		delete(c.(map[string]any), "image")
	}
	return spec
}

// TestCIValues renders each values file of ci/ and checks what it changes.
func TestCIValues(t *testing.T) {
	tests := []struct {
		file        string
		apiVersions []string
		check       func(t *testing.T, r *Rendering)
	}{
		{file: oneControllerValues, check: func(t *testing.T, r *Rendering) {
			d := find(t, r, "Deployment", "app-controller")
			got := args(t, d)
			for _, want := range []string{"--controllers=nodelabel", "--node-label-config=/etc/app-controller/nodelabel/rules.yaml", "--logging-format=json", "--v=4"} {
				if !slices.Contains(got, want) {
					t.Errorf("args %v lack %s", got, want)
				}
			}
			if slices.ContainsFunc(got, func(a string) bool { return strings.HasPrefix(a, "--leader-elect") }) {
				t.Errorf("args %v: leader election is off, want no --leader-elect*", got)
			}
			if n := nested(t, d, "spec", "replicas"); fmt.Sprint(n) != "1" {
				t.Errorf("replicas = %v, want 1", n)
			}
			for _, kind := range []string{"Role", "RoleBinding", "PodDisruptionBudget"} {
				if obj := r.Find(kind, "app-controller"); obj != nil {
					t.Errorf("%s rendered, want none (one replica, no leader election)", kind)
				}
			}
			cm := find(t, r, "ConfigMap", "app-controller-node-label-rules")
			rules := nested(t, cm, "data", "rules.yaml").(string)
			cfg, err := nodelabel.ParseConfig([]byte(rules))
			if err != nil {
				t.Fatalf("the ConfigMap's rules.yaml is not a valid --node-label-config: %v\n%s", err, rules)
			}
			if len(cfg.Rules) != 1 || cfg.Rules[0].Name != "kwok-nodes" || cfg.Rules[0].Labels["node.example.com/joined-via"] != "kwok" {
				t.Errorf("rules = %+v, want the rule kwok-nodes of the values file", cfg.Rules)
			}
			volumes := nested(t, d, "spec", "template", "spec", "volumes").([]any)
			if cmName := volumes[0].(map[string]any)["configMap"].(map[string]any)["name"]; cmName != cm.GetName() {
				t.Errorf("volume mounts ConfigMap %v, want %s", cmName, cm.GetName())
			}
			if d.Object["spec"].(map[string]any)["template"].(map[string]any)["metadata"].(map[string]any)["annotations"].(map[string]any)["checksum/node-label-rules"] == nil {
				t.Error("no checksum/node-label-rules annotation: new rules would not roll the pods")
			}
		}},
		{file: serviceMonitorValues, apiVersions: []string{ServiceMonitorAPI}, check: func(t *testing.T, r *Rendering) {
			sm := find(t, r, "ServiceMonitor", "app-controller")
			if got := sm.GetLabels()["release"]; got != "kube-prometheus-stack" {
				t.Errorf("ServiceMonitor label release = %q, want kube-prometheus-stack", got)
			}
			endpoint := nested(t, sm, "spec", "endpoints").([]any)[0].(map[string]any)
			if endpoint["port"] != "metrics" || endpoint["interval"] != "15s" {
				t.Errorf("endpoint = %v, want port metrics every 15s", endpoint)
			}
			svc := find(t, r, "Service", "app-controller-metrics")
			for key, value := range nested(t, sm, "spec", "selector", "matchLabels").(map[string]any) {
				if svc.GetLabels()[key] != value {
					t.Errorf("ServiceMonitor selects %s=%v, which the metrics Service does not carry", key, value)
				}
			}
		}},
		{file: secureMetricsValues, apiVersions: []string{ServiceMonitorAPI}, check: func(t *testing.T, r *Rendering) {
			if got := args(t, find(t, r, "Deployment", "app-controller")); !slices.Contains(got, "--metrics-secure") {
				t.Errorf("args %v lack --metrics-secure", got)
			}
			endpoint := nested(t, find(t, r, "ServiceMonitor", "app-controller"), "spec", "endpoints").([]any)[0].(map[string]any)
			want := map[string]any{
				"port": "metrics", "path": "/metrics", "interval": "30s", "scrapeTimeout": "10s",
				"scheme":          "https",
				"bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token",
				"tlsConfig":       map[string]any{"insecureSkipVerify": true},
			}
			if diff := cmp.Diff(want, endpoint); diff != "" {
				t.Errorf("ServiceMonitor endpoint (-want +got):\n%s", diff)
			}
			reader := find(t, r, "ClusterRole", "app-controller-metrics-reader")
			wantRules := []any{map[string]any{"nonResourceURLs": []any{"/metrics"}, "verbs": []any{"get"}}}
			if diff := cmp.Diff(wantRules, nested(t, reader, "rules")); diff != "" {
				t.Errorf("metrics reader rules (-want +got):\n%s", diff)
			}
			// The controller must be allowed the TokenReviews and SubjectAccessReviews
			// that --metrics-secure makes.
			rules := nested(t, find(t, r, "ClusterRole", "app-controller"), "rules").([]any)
			for _, resource := range []string{"tokenreviews", "subjectaccessreviews"} {
				allowed := false
				for _, rule := range rules {
					m := rule.(map[string]any)
					resources, _ := m["resources"].([]any)
					verbs, _ := m["verbs"].([]any)
					if slices.Contains(resources, any(resource)) && slices.Contains(verbs, any("create")) {
						allowed = true
					}
				}
				if !allowed {
					t.Errorf("the controller's ClusterRole does not allow create %s", resource)
				}
			}
		}},
		{file: digestValues, check: func(t *testing.T, r *Rendering) {
			d := find(t, r, "Deployment", "app-controller")
			c := container(t, d)
			const image = "registry.example.com/platform/app-controller@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
			if c["image"] != image || c["imagePullPolicy"] != "Always" {
				t.Errorf("image %v (%v), want %s (Always): the digest wins over the tag", c["image"], c["imagePullPolicy"], image)
			}
			pod := nested(t, d, "spec", "template", "spec").(map[string]any)
			want := map[string]any{
				"imagePullSecrets": []any{map[string]any{"name": "registry-example-com"}},
				"nodeSelector":     map[string]any{"node-role.kubernetes.io/platform": ""},
				"tolerations":      []any{map[string]any{"key": "dedicated", "operator": "Equal", "value": "platform", "effect": "NoSchedule"}},
			}
			for field, value := range want {
				if diff := cmp.Diff(value, pod[field]); diff != "" {
					t.Errorf("pod %s (-want +got):\n%s", field, diff)
				}
			}
			if got := nested(t, d, "spec", "template", "metadata", "annotations", "example.com/team"); got != "platform" {
				t.Errorf("pod annotation example.com/team = %v, want platform", got)
			}
			if !slices.Contains(args(t, d), "--ingress-class=nginx") {
				t.Errorf("args %v lack --ingress-class=nginx", args(t, d))
			}
			crd := find(t, r, "CustomResourceDefinition", "apps.appcontroller.k8s.io")
			if _, found := crd.GetAnnotations()["helm.sh/resource-policy"]; found {
				t.Error("crds.keep=false, but the CRD has helm.sh/resource-policy")
			}
			if !strings.Contains(r.Notes, "deletes the App CRD") {
				t.Errorf("NOTES.txt does not warn that uninstall deletes the CRD:\n%s", r.Notes)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			tt.check(t, render(t, Options{ValuesFile: tt.file, APIVersions: tt.apiVersions}))
		})
	}
}

// TestRefusedCombinations renders values the schema accepts but the chart refuses, with
// the reason.
func TestRefusedCombinations(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"ServiceMonitor without its API", Options{ValuesFile: serviceMonitorValues}, "serves no monitoring.coreos.com/v1 ServiceMonitor"},
		{"ServiceMonitor without the metrics Service", Options{
			APIVersions: []string{ServiceMonitorAPI},
			Values:      map[string]any{"metrics": map[string]any{"service": map[string]any{"enabled": false}, "serviceMonitor": map[string]any{"enabled": true}}},
		}, "needs metrics.service.enabled=true"},
		{"two replicas without leader election", Options{Values: map[string]any{"leaderElection": map[string]any{"enabled": false}}}, "replicaCount=2 needs leaderElection.enabled=true"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Render(tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one saying %q", err, tt.want)
			}
		})
	}
}

// TestOtherValues checks values the ci/ files leave alone.
func TestOtherValues(t *testing.T) {
	tests := []struct {
		name  string
		opts  Options
		check func(t *testing.T, r *Rendering)
	}{
		{"crds.enabled=false renders no CRD", Options{Values: map[string]any{"crds": map[string]any{"enabled": false}}}, func(t *testing.T, r *Rendering) {
			if r.Find("CustomResourceDefinition", "apps.appcontroller.k8s.io") != nil {
				t.Error("CRD rendered")
			}
		}},
		{"watchNamespace: a Role there, no cluster-wide rights on namespaced objects, no Nodes", Options{Values: map[string]any{"watchNamespace": "team-a"}}, func(t *testing.T, r *Rendering) {
			var args []string
			for _, a := range container(t, find(t, r, "Deployment", "app-controller"))["args"].([]any) {
				args = append(args, a.(string))
			}
			if !slices.Contains(args, "--watch-namespace=team-a") {
				t.Errorf("args %q lack --watch-namespace=team-a", args)
			}
			role := find(t, r, "Role", "app-controller-watched")
			if role.GetNamespace() != "team-a" {
				t.Errorf("Role in namespace %q, want team-a", role.GetNamespace())
			}
			binding := find(t, r, "RoleBinding", "app-controller-watched")
			if subject := nested(t, binding, "subjects").([]any)[0].(map[string]any); subject["name"] != "app-controller" || binding.GetNamespace() != "team-a" {
				t.Errorf("RoleBinding %v in %q", subject, binding.GetNamespace())
			}
			cluster := ruleResources(t, find(t, r, "ClusterRole", "app-controller"))
			if slices.Contains(cluster, "apps") || slices.Contains(cluster, "secrets") || slices.Contains(cluster, "nodes") {
				t.Errorf("the ClusterRole still grants %q", cluster)
			}
			ns := ruleResources(t, role)
			for _, want := range []string{"apps", "deployments", "services", "secrets", "ingresses", "horizontalpodautoscalers"} {
				if !slices.Contains(ns, want) {
					t.Errorf("the Role lacks %s: %q", want, ns)
				}
			}
			if slices.Contains(ns, "nodes") {
				t.Errorf("the Role grants nodes")
			}
		}},
		{"watchNamespaces: a Role in each, --watch-namespace once each (watchNamespace too, not twice)", Options{Values: map[string]any{
			"watchNamespaces": []any{"team-a", "team-b"}, "watchNamespace": "team-b"}}, func(t *testing.T, r *Rendering) {
			var args []string
			for _, a := range container(t, find(t, r, "Deployment", "app-controller"))["args"].([]any) {
				if strings.HasPrefix(a.(string), "--watch-namespace") {
					args = append(args, a.(string))
				}
			}
			if want := []string{"--watch-namespace=team-a", "--watch-namespace=team-b"}; !slices.Equal(args, want) {
				t.Errorf("args %q, want %q", args, want)
			}
			var roles, bindings []string
			for _, obj := range r.Objects {
				switch {
				case obj.GetKind() == "Role" && obj.GetName() == "app-controller-watched":
					roles = append(roles, obj.GetNamespace())
				case obj.GetKind() == "RoleBinding" && obj.GetName() == "app-controller-watched":
					bindings = append(bindings, obj.GetNamespace())
				}
			}
			slices.Sort(roles)
			slices.Sort(bindings)
			if want := []string{"team-a", "team-b"}; !slices.Equal(roles, want) || !slices.Equal(bindings, want) {
				t.Errorf("Roles in %q and RoleBindings in %q, want each in %q", roles, bindings, want)
			}
		}},
		{"configRollout.secrets=false: --config-rollout-secrets=false, and the roles grant nothing on Secrets, the rest as by default", Options{Values: map[string]any{
			"configRollout": map[string]any{"secrets": false}}}, func(t *testing.T, r *Rendering) {
			if got := args(t, find(t, r, "Deployment", "app-controller")); !slices.Contains(got, "--config-rollout-secrets=false") {
				t.Errorf("args %q lack --config-rollout-secrets=false", got)
			}
			// The default rules, "secrets" taken out of each (and a rule left with no
			// resource dropped).
			var want []any
			for _, rule := range nested(t, find(t, render(t, Options{}), "ClusterRole", "app-controller"), "rules").([]any) {
				rule := rule.(map[string]any)
				var resources []any
				for _, res := range rule["resources"].([]any) {
					if res != "secrets" {
						resources = append(resources, res)
					}
				}
				if len(resources) > 0 {
					rule["resources"] = resources
					want = append(want, rule)
				}
			}
			got := nested(t, find(t, r, "ClusterRole", "app-controller"), "rules")
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("ClusterRole rules (-default without secrets +got):\n%s", diff)
			}
			watched := render(t, Options{Values: map[string]any{"configRollout": map[string]any{"secrets": false}, "watchNamespace": "team-a"}})
			if res := ruleResources(t, find(t, watched, "Role", "app-controller-watched")); slices.Contains(res, "secrets") || !slices.Contains(res, "configmaps") {
				t.Errorf("with watchNamespace, the Role grants %q: want configmaps, not secrets", res)
			}
		}},
		{"configRollout.secrets by default: Secrets watched, no flag", Options{}, func(t *testing.T, r *Rendering) {
			if got := args(t, find(t, r, "Deployment", "app-controller")); slices.ContainsFunc(got, func(a string) bool { return strings.HasPrefix(a, "--config-rollout-secrets") }) {
				t.Errorf("args %q set --config-rollout-secrets", got)
			}
			if res := ruleResources(t, find(t, r, "ClusterRole", "app-controller")); !slices.Contains(res, "secrets") {
				t.Errorf("the ClusterRole grants %q, no secrets", res)
			}
		}},
		{"image.tag overrides appVersion", Options{Values: map[string]any{"image": map[string]any{"tag": "v9"}}}, func(t *testing.T, r *Rendering) {
			if got := container(t, find(t, r, "Deployment", "app-controller"))["image"]; got != "app-controller:v9" {
				t.Errorf("image = %v, want app-controller:v9", got)
			}
		}},
		{"another release name prefixes every name", Options{ReleaseName: "platform", Namespace: "ops"}, func(t *testing.T, r *Rendering) {
			b := find(t, r, "ClusterRoleBinding", "platform-app-controller")
			subject := nested(t, b, "subjects").([]any)[0].(map[string]any)
			if subject["name"] != "platform-app-controller" || subject["namespace"] != "ops" {
				t.Errorf("binding subject = %v, want the ServiceAccount ops/platform-app-controller", subject)
			}
			find(t, r, "ServiceAccount", "platform-app-controller")
			find(t, r, "ClusterRole", "platform-app-controller-view")
			if got := nested(t, find(t, r, "Deployment", "platform-app-controller"), "spec", "template", "spec", "serviceAccountName"); got != "platform-app-controller" {
				t.Errorf("serviceAccountName = %v", got)
			}
		}},
		{"metrics.secure with a Secret's token: authorization instead of bearerTokenFile", Options{
			APIVersions: []string{ServiceMonitorAPI},
			Values: map[string]any{"metrics": map[string]any{"secure": true, "serviceMonitor": map[string]any{
				"enabled":       true,
				"authorization": map[string]any{"type": "Bearer", "credentials": map[string]any{"name": "prometheus-token", "key": "token"}},
				"tlsConfig":     map[string]any{"insecureSkipVerify": false, "serverName": "app-controller-metrics.app-controller-system.svc"},
			}}},
		}, func(t *testing.T, r *Rendering) {
			endpoint := nested(t, find(t, r, "ServiceMonitor", "app-controller"), "spec", "endpoints").([]any)[0].(map[string]any)
			if _, ok := endpoint["bearerTokenFile"]; ok {
				t.Errorf("endpoint %v has bearerTokenFile and authorization", endpoint)
			}
			want := map[string]any{"type": "Bearer", "credentials": map[string]any{"name": "prometheus-token", "key": "token"}}
			if diff := cmp.Diff(want, endpoint["authorization"]); diff != "" {
				t.Errorf("authorization (-want +got):\n%s", diff)
			}
			wantTLS := map[string]any{"insecureSkipVerify": false, "serverName": "app-controller-metrics.app-controller-system.svc"}
			if diff := cmp.Diff(wantTLS, endpoint["tlsConfig"]); diff != "" {
				t.Errorf("tlsConfig (-want +got):\n%s", diff)
			}
		}},
		{"metrics.secure off: plain HTTP scrape, no metrics reader", Options{
			APIVersions: []string{ServiceMonitorAPI},
			Values:      map[string]any{"metrics": map[string]any{"serviceMonitor": map[string]any{"enabled": true}}},
		}, func(t *testing.T, r *Rendering) {
			endpoint := nested(t, find(t, r, "ServiceMonitor", "app-controller"), "spec", "endpoints").([]any)[0].(map[string]any)
			for _, key := range []string{"scheme", "bearerTokenFile", "authorization", "tlsConfig"} {
				if _, ok := endpoint[key]; ok {
					t.Errorf("endpoint %v has %s without metrics.secure", endpoint, key)
				}
			}
			if slices.Contains(args(t, find(t, r, "Deployment", "app-controller")), "--metrics-secure") {
				t.Error("--metrics-secure without metrics.secure")
			}
			if r.Find("ClusterRole", "app-controller-metrics-reader") != nil {
				t.Error("metrics reader ClusterRole without metrics.secure")
			}
		}},
		{"leader election timings", Options{Values: map[string]any{"leaderElection": map[string]any{"leaseDuration": "30s", "renewDeadline": "20s", "retryPeriod": "4s"}}}, func(t *testing.T, r *Rendering) {
			got := args(t, find(t, r, "Deployment", "app-controller"))
			for _, want := range []string{"--leader-elect", "--leader-elect-lease-duration=30s", "--leader-elect-renew-deadline=20s", "--leader-elect-retry-period=4s"} {
				if !slices.Contains(got, want) {
					t.Errorf("args %v lack %s", got, want)
				}
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.check(t, render(t, tt.opts)) })
	}
}

// ruleResources returns the resources of every rule of a rendered role, in order.
func ruleResources(t *testing.T, role *unstructured.Unstructured) []string {
	t.Helper()
	var out []string
	for _, rule := range nested(t, role, "rules").([]any) {
		for _, res := range rule.(map[string]any)["resources"].([]any) {
			out = append(out, res.(string))
		}
	}
	return out
}

// TestSchemaRefusesBadValues renders values the schema must refuse, one from a values
// file: the error names the offending key.
func TestSchemaRefusesBadValues(t *testing.T) {
	badFile := filepath.Join(t.TempDir(), "bad-values.yaml")
	if err := os.WriteFile(badFile, []byte("image:\n  repository: example.com/app-controller\n  tags: v1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		opts Options
		want []string
	}{
		{"unknown key in a values file", Options{ValuesFile: badFile}, []string{"image", "tags"}},
		{"unknown top-level key", Options{Values: map[string]any{"replicas": 3}}, []string{"replicas"}},
		{"unknown nested key", Options{Values: map[string]any{"metrics": map[string]any{"serviceMonitor": map[string]any{"enable": true}}}}, []string{"serviceMonitor", "enable"}},
		{"wrong type", Options{Values: map[string]any{"replicaCount": "two"}}, []string{"replicaCount"}},
		{"authorization without a Secret key", Options{Values: map[string]any{"metrics": map[string]any{"serviceMonitor": map[string]any{"authorization": map[string]any{"credentials": map[string]any{"name": "s"}}}}}}, []string{"key"}},
		{"metrics.secure not a boolean", Options{Values: map[string]any{"metrics": map[string]any{"secure": "yes"}}}, []string{"secure"}},
		{"not a duration", Options{Values: map[string]any{"leaderElection": map[string]any{"leaseDuration": "15"}}}, []string{"leaseDuration"}},
		{"bad digest", Options{Values: map[string]any{"image": map[string]any{"digest": "latest"}}}, []string{"digest"}},
		{"unknown log format", Options{Values: map[string]any{"logging": map[string]any{"format": "xml"}}}, []string{"format"}},
		{"node label rule without labels", Options{Values: map[string]any{"nodeLabelRules": []any{map[string]any{"name": "r", "match": map[string]any{"nameRegex": "x"}}}}}, []string{"labels"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Render(tt.opts)
			if err == nil {
				t.Fatal("rendered, want refused by values.schema.json")
			}
			if !strings.Contains(err.Error(), "schema") {
				t.Errorf("err = %v, want a schema error", err)
			}
			for _, want := range tt.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("err = %v, want it to name %q", err, want)
				}
			}
		})
	}
}

package chart

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"helm.sh/helm/v3/pkg/action"
	helmchart "helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/app-controller/app-controller/internal/localcluster"
)

// KubeVersion is the Kubernetes version the chart is rendered and linted for: the local
// control plane's. Helm's own default is far older.
const KubeVersion = "v1.37.2"

// ServiceMonitorAPI is the capability the chart's ServiceMonitor needs.
const ServiceMonitorAPI = "monitoring.coreos.com/v1/ServiceMonitor"

// Dir returns the chart's directory, charts/app-controller of the repository.
func Dir() (string, error) {
	root, err := localcluster.RepoRoot()
	if err != nil {
		return "", fmt.Errorf("locating the chart: %w", err)
	}
	return filepath.Join(root, "charts", "app-controller"), nil
}

// Load loads the chart from Dir.
func Load() (*helmchart.Chart, error) {
	dir, err := Dir()
	if err != nil {
		return nil, err
	}
	chrt, err := loader.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("loading the chart: %w", err)
	}
	return chrt, nil
}

// Options are what a rendering depends on, besides the chart.
type Options struct {
	// ReleaseName and Namespace default to app-controller and app-controller-system.
	ReleaseName, Namespace string
	// ValuesFile, relative to the chart's directory (ci/x-values.yaml) unless absolute,
	// if any.
	ValuesFile string
	// Values are merged over ValuesFile's, as helm --set-json would.
	Values map[string]any
	// APIVersions are capabilities the cluster is assumed to serve, besides the built-in.
	APIVersions []string
}

// Rendering is a rendered chart: its manifest, its notes and its objects.
type Rendering struct {
	Manifest string
	Notes    string
	Objects  []*unstructured.Unstructured
}

// Find returns the rendered object of that kind and name, or nil.
func (r *Rendering) Find(kind, name string) *unstructured.Unstructured {
	for _, obj := range r.Objects {
		if obj.GetKind() == kind && obj.GetName() == name {
			return obj
		}
	}
	return nil
}

// Values reads opts' values file and merges opts.Values over it.
func Values(opts Options) (map[string]any, error) {
	vals := map[string]any{}
	if opts.ValuesFile != "" {
		dir, err := Dir()
		if err != nil {
			return nil, err
		}
		path := opts.ValuesFile
		if !filepath.IsAbs(path) {
			path = filepath.Join(dir, path)
		}
		vals, err = chartutil.ReadValuesFile(path)
		if err != nil {
			return nil, fmt.Errorf("reading values file %s: %w", opts.ValuesFile, err)
		}
	}
	return merge(vals, opts.Values), nil
}

// merge merges src into dst, recursively for maps, and returns dst.
func merge(dst, src map[string]any) map[string]any {
	for k, v := range src {
		if sub, ok := v.(map[string]any); ok {
			if d, ok := dst[k].(map[string]any); ok {
				dst[k] = merge(d, sub)
				continue
			}
		}
		dst[k] = v
	}
	return dst
}

// Render renders the chart as helm template does (client only, no cluster), for
// KubeVersion, validating the values against values.schema.json.
func Render(opts Options) (*Rendering, error) {
	chrt, err := Load()
	if err != nil {
		return nil, err
	}
	vals, err := Values(opts)
	if err != nil {
		return nil, err
	}
	kubeVersion, err := chartutil.ParseKubeVersion(KubeVersion)
	if err != nil {
		return nil, err
	}
	install := action.NewInstall(&action.Configuration{})
	install.DryRun, install.ClientOnly, install.Replace = true, true, true
	install.ReleaseName = defaultString(opts.ReleaseName, "app-controller")
	install.Namespace = defaultString(opts.Namespace, "app-controller-system")
	install.KubeVersion = kubeVersion
	install.APIVersions = opts.APIVersions
	rel, err := install.Run(chrt, vals)
	if err != nil {
		return nil, fmt.Errorf("rendering the chart: %w", err)
	}
	objs, err := Decode([]byte(rel.Manifest))
	if err != nil {
		return nil, fmt.Errorf("decoding the rendered manifest: %w", err)
	}
	return &Rendering{Manifest: rel.Manifest, Notes: rel.Info.Notes, Objects: objs}, nil
}

// Decode splits a multi-document YAML manifest into its objects.
func Decode(manifest []byte) ([]*unstructured.Unstructured, error) {
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifest), 4096)
	var objs []*unstructured.Unstructured
	for {
		obj := &unstructured.Unstructured{}
		if err := decoder.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, err
		}
		if len(obj.Object) > 0 {
			objs = append(objs, obj)
		}
	}
}

func defaultString(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

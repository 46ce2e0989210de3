package chart

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/app-controller/app-controller/internal/localcluster"
)

// ConfigObjects returns the objects of config/default as kustomize assembles them from
// config/crd, config/rbac, config/admission and config/manager: every YAML file there but the
// kustomizations (kustomize only adds the namespace and the part-of label).
func ConfigObjects() ([]*unstructured.Unstructured, error) {
	root, err := localcluster.RepoRoot()
	if err != nil {
		return nil, fmt.Errorf("locating config/: %w", err)
	}
	var objs []*unstructured.Unstructured
	for _, pattern := range []string{"config/crd/bases/*.yaml", "config/rbac/*.yaml", "config/admission/*.yaml", "config/manager/*.yaml", "config/flowcontrol/*.yaml"} {
		files, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			return nil, err
		}
		for _, file := range files {
			if filepath.Base(file) == "kustomization.yaml" {
				continue
			}
			data, err := os.ReadFile(file)
			if err != nil {
				return nil, fmt.Errorf("reading %s: %w", file, err)
			}
			decoded, err := Decode(data)
			if err != nil {
				return nil, fmt.Errorf("decoding %s: %w", file, err)
			}
			objs = append(objs, decoded...)
		}
	}
	return objs, nil
}

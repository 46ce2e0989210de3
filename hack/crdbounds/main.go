// Command crdbounds bounds, in a CRD that controller-gen wrote, every list, string and
// map under an App's spec that has no bound yet: the fields of Kubernetes types the App
// embeds (affinity, probes, security contexts, env sources...), which carry no
// validation markers of their own. Without bounds one namespace could grow the
// controller's caches (each App and its Deployment) until it is killed for memory, and
// CEL rules over unbounded lists cost more than the API server allows. make generate
// runs it after controller-gen:
//
//	go run ./hack/crdbounds config/crd/bases/appcontroller.k8s.io_apps.yaml
//
// The bounds are sized for real use (docs/security.md, "Bounds"): a list holds at most
// defaultMaxItems items, a string defaultMaxLength bytes and a map defaultMaxProperties
// entries, except where overrides says otherwise. A bound the markers set is kept.
//
// It also makes required, anywhere in the schema, each key of a list of type map that
// is neither required nor defaulted: the API server refuses such a CRD ("this property
// is in x-kubernetes-list-map-keys, so it must have a default or be a required
// property"), and k8s.io/api marks some keys +optional (since v0.37.0
// DeploymentCondition.type, the key of the App's status.deploymentStatus.conditions).
package main

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

const (
	defaultMaxItems      = 64
	defaultMaxLength     = 4096
	defaultMaxProperties = 64
	// intOrStringMaxLength bounds the string form of int-or-string values.
	intOrStringMaxLength = 64
)

// The OpenAPI keywords of the bounds.
const (
	maxItems      = "maxItems"
	maxLength     = "maxLength"
	maxProperties = "maxProperties"
)

// override bounds the schema at a path under spec ("deploymentTemplate.env[].value"; "[]"
// is a list's item, "{}" a map's value). Paths end-match: "args[]" bounds every args
// item.
type override struct {
	suffix string
	bound  string // maxItems, maxLength or maxProperties
	value  int64
}

var overrides = []override{
	// A command line or a script given as an argument ("sh -c ...") may be long.
	{"command", maxItems, 256},
	{"args", maxItems, 256},
	{"command[]", maxLength, 32768},
	{"args[]", maxLength, 32768},
	{"exec.command", maxItems, 256},
	{"exec.command[]", maxLength, 32768},
	// An environment variable may hold a certificate or a small config file.
	{"env", maxItems, 256},
	{"env[].value", maxLength, 32768},
	// An annotation may hold a template or a JSON document.
	{"podAnnotations{}", maxLength, 65536},
	{"annotations{}", maxLength, 65536},
	// Keys of a ConfigMap or Secret projected into a volume.
	{"configMap.items", maxItems, 256},
	{"secret.items", maxItems, 256},
	// Resource names: cpu, memory, ephemeral-storage, hugepages-*, extended resources.
	{"resources.limits", maxProperties, 16},
	{"resources.requests", maxProperties, 16},
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: crdbounds CRD.yaml")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintf(os.Stderr, "crdbounds: %v\n", err)
		os.Exit(1)
	}
}

func run(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	header := ""
	if bytes.HasPrefix(data, []byte("---\n")) {
		header = "---\n"
	}
	var crd map[string]any
	if err := yaml.Unmarshal(data, &crd); err != nil {
		return fmt.Errorf("decoding %s: %w", path, err)
	}
	versions, _ := dig(crd, "spec", "versions").([]any)
	if len(versions) == 0 {
		return fmt.Errorf("%s: no spec.versions", path)
	}
	for _, v := range versions {
		spec, ok := dig(v, "schema", "openAPIV3Schema", "properties", "spec").(map[string]any)
		if !ok {
			return fmt.Errorf("%s: a version without properties.spec", path)
		}
		bound(spec, "")
		if root, ok := dig(v, "schema", "openAPIV3Schema").(map[string]any); ok {
			requireMapKeys(root)
		}
	}
	out, err := yaml.Marshal(crd)
	if err != nil {
		return err
	}
	return os.WriteFile(path, append([]byte(header), out...), 0o644)
}

// bound sets the missing bounds of schema s at path and below.
func bound(s map[string]any, path string) {
	if s["x-kubernetes-int-or-string"] == true {
		// A quantity, a port or a percentage: short. Bounding it keeps the CEL rules that
		// parse quantities (requests within limits) within the cost budget.
		setDefault(s, path, maxLength, intOrStringMaxLength)
		return
	}
	switch s["type"] {
	case "array":
		setDefault(s, path, maxItems, defaultMaxItems)
		if items, ok := s["items"].(map[string]any); ok {
			bound(items, path+"[]")
		}
	case "string":
		// Enums and formats (quantities, dates) bound themselves.
		if _, enum := s["enum"]; !enum && s["format"] == nil {
			setDefault(s, path, maxLength, defaultMaxLength)
		}
	case "object":
		if props, ok := s["properties"].(map[string]any); ok {
			for name, p := range props {
				if ps, ok := p.(map[string]any); ok {
					bound(ps, strings.TrimPrefix(path+"."+name, "."))
				}
			}
		}
		if ap, ok := s["additionalProperties"].(map[string]any); ok {
			setDefault(s, path, maxProperties, defaultMaxProperties)
			bound(ap, path+"{}")
		}
	}
}

// requireMapKeys adds to the required properties of the items of every list of type map
// at or below schema s each of its keys that is neither required nor defaulted.
func requireMapKeys(s map[string]any) {
	items, _ := s["items"].(map[string]any)
	if keys, ok := s["x-kubernetes-list-map-keys"].([]any); ok && s["x-kubernetes-list-type"] == "map" && items != nil {
		required, _ := items["required"].([]any)
		for _, k := range keys {
			prop, _ := dig(items, "properties", fmt.Sprint(k)).(map[string]any)
			if prop == nil || prop["default"] != nil || slices.Contains(required, k) {
				continue
			}
			required = append(required, k)
		}
		if len(required) > 0 {
			slices.SortFunc(required, func(a, b any) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
			items["required"] = required
		}
	}
	for _, key := range []string{"items", "additionalProperties"} {
		if sub, ok := s[key].(map[string]any); ok {
			requireMapKeys(sub)
		}
	}
	if props, ok := s["properties"].(map[string]any); ok {
		for _, p := range props {
			if ps, ok := p.(map[string]any); ok {
				requireMapKeys(ps)
			}
		}
	}
}

// setDefault sets s[key] to the override for path or def, unless a marker set it.
func setDefault(s map[string]any, path, key string, def int64) {
	if _, set := s[key]; set {
		return
	}
	for _, o := range overrides {
		if o.bound == key && (path == o.suffix || strings.HasSuffix(path, "."+o.suffix)) {
			s[key] = o.value
			return
		}
	}
	s[key] = def
}

func dig(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

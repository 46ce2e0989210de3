package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
)

// AppliedConfigHashAnnotation records, on an object written with server-side apply, a
// hash of the apply configuration that was last applied. A changed configuration changes
// the hash, so fields dropped from the configuration are re-applied (and so removed)
// even though the live object still "contains" everything the new configuration sets.
const AppliedConfigHashAnnotation = "appcontroller.k8s.io/applied-config-hash"

// ConfigHash returns a stable hash of an apply configuration (or any value that
// marshals to JSON). Map keys marshal sorted and struct fields in order, so equal
// configurations hash equally.
func ConfigHash(config any) (string, error) {
	data, err := json.Marshal(config)
	if err != nil {
		return "", fmt.Errorf("marshalling apply configuration: %w", err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:10]), nil
}

// WithAppliedHash sets the AppliedConfigHashAnnotation of an apply configuration to the
// ConfigHash of the rest of it, and returns it.
func WithAppliedHash[T interface {
	WithAnnotations(map[string]string) T
}](config T) (T, error) {
	hash, err := ConfigHash(config)
	if err != nil {
		var none T
		return none, err
	}
	return config.WithAnnotations(map[string]string{AppliedConfigHashAnnotation: hash}), nil
}

// UpToDate reports whether the live object already holds every field that the desired
// apply configuration sets, with the same value. When it does, applying the
// configuration would change nothing, so the write is skipped. Include the
// AppliedConfigHashAnnotation in desired so that a changed configuration is applied
// even when it only removes fields.
//
// Lists of objects that all carry a "uid" or a "name" are matched by that key, as the
// API merges them; other lists must match element by element.
func UpToDate(live, desired any) (bool, error) {
	l, err := toJSONValue(live)
	if err != nil {
		return false, fmt.Errorf("converting the live object: %w", err)
	}
	d, err := toJSONValue(desired)
	if err != nil {
		return false, fmt.Errorf("converting the desired configuration: %w", err)
	}
	if m, ok := d.(map[string]any); ok {
		// Objects from informers carry no type meta; the kind is known by construction.
		delete(m, "apiVersion")
		delete(m, "kind")
	}
	return covers(d, l), nil
}

// toJSONValue converts v to its generic JSON form, so that typed objects and apply
// configurations compare field by field.
func toJSONValue(v any) (any, error) {
	var out any
	err := Convert(v, &out)
	return out, err
}

// covers reports whether live holds everything desired holds.
func covers(desired, live any) bool {
	switch d := desired.(type) {
	case map[string]any:
		l, ok := live.(map[string]any)
		if !ok {
			return len(d) == 0 && live == nil
		}
		for k, dv := range d {
			lv, found := l[k]
			if !found {
				if isEmpty(dv) {
					continue
				}
				return false
			}
			if !covers(dv, lv) {
				return false
			}
		}
		return true
	case []any:
		l, ok := live.([]any)
		if !ok {
			return len(d) == 0 && live == nil
		}
		if key := listMapKey(d); key != "" {
			for _, de := range d {
				dm := de.(map[string]any)
				le, found := findByKey(l, key, dm[key])
				if !found || !covers(dm, le) {
					return false
				}
			}
			return true
		}
		if len(d) != len(l) {
			return false
		}
		for i := range d {
			if !covers(d[i], l[i]) {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(desired, live)
	}
}

// listMapKey returns "uid" or "name" when every element of list is an object carrying
// that key, and "" otherwise.
func listMapKey(list []any) string {
	for _, key := range []string{"uid", "name"} {
		all := len(list) > 0
		for _, e := range list {
			m, ok := e.(map[string]any)
			if !ok {
				all = false
				break
			}
			if _, ok := m[key]; !ok {
				all = false
				break
			}
		}
		if all {
			return key
		}
	}
	return ""
}

// findByKey returns the element of list whose key field equals value.
func findByKey(list []any, key string, value any) (any, bool) {
	for _, e := range list {
		if m, ok := e.(map[string]any); ok && reflect.DeepEqual(m[key], value) {
			return m, true
		}
	}
	return nil, false
}

// isEmpty reports whether v is an empty object or list, or a zero scalar (false, 0,
// ""), which an absent field matches: the API server drops a zero value of a field
// marked omitempty (a volume mount's readOnly: false, a minReadySeconds of 0), and
// comparing it as a difference would make the controller write on every sync.
func isEmpty(v any) bool {
	switch t := v.(type) {
	case map[string]any:
		return len(t) == 0
	case []any:
		return len(t) == 0
	case bool:
		return !t
	case float64:
		return t == 0
	case string:
		return t == ""
	}
	return false
}

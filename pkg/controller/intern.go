package controller

import (
	"reflect"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Objects decoded from a watch share nothing: every cached Deployment holds its own copy
// of "app.kubernetes.io/managed-by", "IfNotPresent", "/dev/termination-log", its
// namespace, its image. ShareStrings makes the strings that recur across objects one
// copy each, so a cache holds per object only what is the object's own.
//
// The copies live in a table of two generations: a string is looked up in the current
// one, then in the previous one (and moved to the current one); when the current one is
// full it becomes the previous one. A string that no object brought for a whole
// generation drops out, so the table stays bounded (2 x internGeneration strings of at
// most maxSharedLen bytes) however many objects come and go, and the strings in use stay
// in it. (The unique package would not do: its canonical copy is freed at the next
// garbage collection once no Handle is held, so objects decoded after it would get a new
// copy.)

// maxSharedLen bounds the strings worth sharing: longer ones (a pod's last termination
// message, a large annotation) are rarely repeated.
const maxSharedLen = 256

// internGeneration is the number of strings of a generation of the table.
const internGeneration = 8192

// internTable is the table of shared strings.
type internTable struct {
	mu                sync.Mutex
	current, previous map[string]string
}

var shared = &internTable{current: make(map[string]string)}

// share returns the table's copy of s, adding s (a copy of it, so as not to hold the
// buffer it may be part of) when it is not there.
func (t *internTable) share(s string) string {
	if s == "" || len(s) > maxSharedLen {
		return s
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, ok := t.current[s]; ok {
		return c
	}
	c, ok := t.previous[s]
	if !ok {
		c = strings.Clone(s)
	}
	if len(t.current) >= internGeneration {
		t.previous, t.current = t.current, make(map[string]string, internGeneration)
	}
	t.current[c] = c
	return c
}

// ShareStrings is an informer transform that replaces the strings of obj that recur
// across objects by shared copies: every string field, map key and value, and slice
// element, except the metadata that is the object's own (name, generateName, uid,
// resourceVersion), which would only fill the table. Compose it after the transforms that
// drop fields.
func ShareStrings(obj interface{}) (interface{}, error) {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return obj, nil
	}
	shareValue(v.Elem())
	return obj, nil
}

var objectMetaType = reflect.TypeFor[metav1.ObjectMeta]()

// ownMetaFields are the ObjectMeta fields left alone: one value per object.
var ownMetaFields = map[string]bool{"Name": true, "GenerateName": true, "UID": true, "ResourceVersion": true}

// shareValue shares the strings under v, which must be addressable (settable).
func shareValue(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		if v.CanSet() {
			v.SetString(shared.share(v.String()))
		}
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			shareValue(v.Elem())
		}
	case reflect.Struct:
		t := v.Type()
		for i := range v.NumField() {
			if !t.Field(i).IsExported() {
				continue
			}
			if t == objectMetaType && ownMetaFields[t.Field(i).Name] {
				continue
			}
			shareValue(v.Field(i))
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return // bytes ([]byte, RawExtension data): not strings
		}
		for i := range v.Len() {
			shareValue(v.Index(i))
		}
	case reflect.Array:
		for i := range v.Len() {
			shareValue(v.Index(i))
		}
	case reflect.Map:
		shareMap(v)
	}
}

// shareMap shares the keys and values of a map of strings (labels, annotations,
// selectors) by rebuilding it; other maps are walked value by value.
func shareMap(v reflect.Value) {
	if v.IsNil() || v.Len() == 0 {
		return
	}
	t := v.Type()
	if t.Key().Kind() == reflect.String && t.Elem().Kind() == reflect.String {
		if !v.CanSet() {
			return
		}
		m := reflect.MakeMapWithSize(t, v.Len())
		for it := v.MapRange(); it.Next(); {
			k := reflect.New(t.Key()).Elem()
			k.SetString(shared.share(it.Key().String()))
			e := reflect.New(t.Elem()).Elem()
			e.SetString(shared.share(it.Value().String()))
			m.SetMapIndex(k, e)
		}
		v.Set(m)
		return
	}
	for it := v.MapRange(); it.Next(); {
		// Map values are not addressable: copy, share, store back.
		e := reflect.New(t.Elem()).Elem()
		e.Set(it.Value())
		shareValue(e)
		v.SetMapIndex(it.Key(), e)
	}
}

// CompactObject is the transform of the informers that keep whole objects:
// StripManagedFields, then ShareStrings.
func CompactObject(obj interface{}) (interface{}, error) {
	obj, err := StripManagedFields(obj)
	if err != nil {
		return nil, err
	}
	return ShareStrings(obj)
}

// Compose returns the transform that applies each of transforms in order.
func Compose(transforms ...func(interface{}) (interface{}, error)) func(interface{}) (interface{}, error) {
	return func(obj interface{}) (interface{}, error) {
		for _, t := range transforms {
			var err error
			if obj, err = t(obj); err != nil {
				return nil, err
			}
		}
		return obj, nil
	}
}

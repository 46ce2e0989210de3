package controller

import (
	"strings"
	"testing"
	"unsafe"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// sameString reports whether a and b are one copy in memory.
func sameString(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

// decoded returns two Deployments decoded apart from the same bytes, as a watch hands
// them out: equal, with no string in common.
func decoded(t *testing.T) (*appsv1.Deployment, *appsv1.Deployment) {
	t.Helper()
	raw, err := managedDeployment(t).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var a, b appsv1.Deployment
	if err := a.Unmarshal(raw); err != nil {
		t.Fatal(err)
	}
	if err := b.Unmarshal(raw); err != nil {
		t.Fatal(err)
	}
	return &a, &b
}

func TestShareStrings(t *testing.T) {
	a, b := decoded(t)
	want := a.DeepCopy()
	for _, d := range []*appsv1.Deployment{a, b} {
		if _, err := CompactObject(d); err != nil {
			t.Fatal(err)
		}
	}
	want.ManagedFields = nil
	if !equality.Semantic.DeepEqual(want, a) {
		t.Fatalf("CompactObject changed more than managedFields:\nwant %+v\ngot  %+v", want, a)
	}
	ca, cb := a.Spec.Template.Spec.Containers[0], b.Spec.Template.Spec.Containers[0]
	label, annotation, selector := firstKey(a.Labels), firstKey(a.Annotations), firstKey(a.Spec.Selector.MatchLabels)
	shared := map[string][2]string{
		"namespace":              {a.Namespace, b.Namespace},
		"image":                  {ca.Image, cb.Image},
		"terminationMessagePath": {ca.TerminationMessagePath, cb.TerminationMessagePath},
		"strategy type":          {string(a.Spec.Strategy.Type), string(b.Spec.Strategy.Type)},
		"owner reference kind":   {a.OwnerReferences[0].Kind, b.OwnerReferences[0].Kind},
		"owner reference name":   {a.OwnerReferences[0].Name, b.OwnerReferences[0].Name},
		"managed-by label value": {a.Labels["app.kubernetes.io/managed-by"], b.Labels["app.kubernetes.io/managed-by"]},
		"selector value":         {a.Spec.Selector.MatchLabels[selector], b.Spec.Selector.MatchLabels[selector]},
		"a label key":            {label, sameKey(b.Labels, label)},
		"an annotation value":    {a.Annotations[annotation], b.Annotations[annotation]},
	}
	for what, s := range shared {
		if s[0] == "" {
			t.Errorf("%s: empty in testdata/managed-deployment.yaml", what)
		} else if !sameString(s[0], s[1]) {
			t.Errorf("%s %q: two copies, want one", what, s[0])
		}
	}
	// The object's own metadata is left alone: sharing it would only fill the table.
	if sameString(a.Name, b.Name) || sameString(a.ResourceVersion, b.ResourceVersion) || sameString(string(a.UID), string(b.UID)) {
		t.Error("name, resourceVersion or uid shared: want them left as decoded")
	}
}

func firstKey(m map[string]string) string {
	for k := range m {
		return k
	}
	return ""
}

// sameKey returns the key of m equal to k: m's own copy of it.
func sameKey(m map[string]string, k string) string {
	for key := range m {
		if key == k {
			return key
		}
	}
	return ""
}

// TestShareStringsKinds covers the kinds of value the walk meets: named string types,
// pointers, interfaces, slices of strings, maps of structs, bytes, long strings.
func TestShareStringsKinds(t *testing.T) {
	type inner struct{ S string }
	type object struct {
		Kind    corev1.ServiceType
		Ptr     *string
		Iface   any
		List    []string
		Structs map[string]inner
		Bytes   []byte
		Long    string
		Port    intstr.IntOrString
		Qty     resource.Quantity
	}
	long := strings.Repeat("x", maxSharedLen+1)
	mk := func() *object {
		p := strings.Clone("pointer")
		return &object{
			Kind: corev1.ServiceType(strings.Clone("ClusterIP")), Ptr: &p, Iface: &inner{S: strings.Clone("iface")},
			List: []string{strings.Clone("a")}, Structs: map[string]inner{"k": {S: strings.Clone("value")}},
			Bytes: []byte("raw"), Long: strings.Clone(long), Port: intstr.FromString(strings.Clone("http")),
			Qty: resource.MustParse("100m"),
		}
	}
	a, b := mk(), mk()
	want := mk()
	for _, o := range []*object{a, b} {
		if _, err := ShareStrings(o); err != nil {
			t.Fatal(err)
		}
	}
	if !equality.Semantic.DeepEqual(want, a) {
		t.Fatalf("ShareStrings changed values:\nwant %+v\ngot  %+v", want, a)
	}
	for what, s := range map[string][2]string{
		"named string type": {string(a.Kind), string(b.Kind)},
		"pointer":           {*a.Ptr, *b.Ptr},
		"interface":         {a.Iface.(*inner).S, b.Iface.(*inner).S},
		"slice element":     {a.List[0], b.List[0]},
		"map of structs":    {a.Structs["k"].S, b.Structs["k"].S},
		"IntOrString":       {a.Port.StrVal, b.Port.StrVal},
	} {
		if !sameString(s[0], s[1]) {
			t.Errorf("%s %q: two copies, want one", what, s[0])
		}
	}
	if sameString(a.Long, b.Long) {
		t.Error("a string longer than maxSharedLen was shared")
	}
	type withPrivate struct{ private string }
	pa, pb := &withPrivate{strings.Clone("private")}, &withPrivate{strings.Clone("private")}
	_, _ = ShareStrings(pa)
	_, _ = ShareStrings(pb)
	if sameString(pa.private, pb.private) {
		t.Error("an unexported field was touched")
	}
	// Not a pointer, nil, a tombstone: returned as is.
	for _, obj := range []interface{}{nil, "s", (*appsv1.Deployment)(nil)} {
		if got, err := ShareStrings(obj); err != nil || got != obj {
			t.Errorf("ShareStrings(%#v) = %#v, %v", obj, got, err)
		}
	}
}

// TestInternTableBounded: the table keeps at most two generations, keeps the strings in
// use across generations, and lets go of the others.
func TestInternTableBounded(t *testing.T) {
	table := &internTable{current: make(map[string]string)}
	inUse := table.share(strings.Clone("in-use"))
	table.share("used once")
	for i := range 5 * internGeneration {
		table.share(strings.Repeat("x", i%300) + string(rune('a'+i%26)) + strings.Repeat("y", i/300))
		if i%1000 == 0 {
			if got := table.share(strings.Clone("in-use")); !sameString(got, inUse) {
				t.Fatalf("after %d other strings, a string in use got a new copy", i)
			}
		}
		if n := len(table.current) + len(table.previous); n > 2*internGeneration {
			t.Fatalf("the table holds %d strings, want at most %d", n, 2*internGeneration)
		}
	}
	if table.current["used once"] != "" || table.previous["used once"] != "" {
		t.Error("a string no object brought for two generations is still in the table")
	}
	long := strings.Repeat("z", maxSharedLen+1)
	if got := table.share(long); !sameString(got, long) || table.current[long] != "" {
		t.Error("a string longer than maxSharedLen was added to the table")
	}
}

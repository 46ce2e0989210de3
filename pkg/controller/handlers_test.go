package controller

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// TestHandlers checks that Handlers get the objects of their type, out of their
// tombstone for a deletion with what was delivered, and nothing else.
func TestHandlers(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	other := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}}
	tombstone := cache.DeletedFinalStateUnknown{Key: "n1", Obj: node}
	var got []string
	h := Handlers[*corev1.Node]{
		Add:    func(_ klog.Logger, n *corev1.Node) { got = append(got, "add "+n.Name) },
		Update: func(_ klog.Logger, old, cur *corev1.Node) { got = append(got, "update "+old.Name+" "+cur.Name) },
		Delete: func(_ klog.Logger, n *corev1.Node, delivered interface{}) {
			got = append(got, "delete "+n.Name)
			if _, ok := delivered.(cache.DeletedFinalStateUnknown); ok {
				got = append(got, "delivered tombstone")
			}
		},
	}.Funcs(klog.Background())
	h.OnAdd(node, false)
	h.OnAdd(&corev1.Pod{}, false)
	h.OnUpdate(node, other)
	h.OnUpdate(&corev1.Pod{}, other)
	h.OnUpdate(node, &corev1.Pod{})
	h.OnDelete(node)
	h.OnDelete(tombstone)
	h.OnDelete(&corev1.Pod{})
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "x", Obj: "garbage"})
	want := []string{"add n1", "update n1 n2", "delete n1", "delete n1", "delivered tombstone"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("handled %q, want %q", got, want)
	}

	none := Handlers[*corev1.Node]{}.Funcs(klog.Background())
	if none.AddFunc != nil || none.UpdateFunc != nil || none.DeleteFunc != nil {
		t.Errorf("Handlers without handlers gave funcs: %+v", none)
	}
}

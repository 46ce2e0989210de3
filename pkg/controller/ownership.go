package controller

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
)

// OwnerReference makes owner, of kind gvk, the controller of a child, with
// blockOwnerDeletion, so that garbage collection deletes the child with its owner (and
// foreground deletion of the owner waits for it).
func OwnerReference(owner metav1.Object, gvk schema.GroupVersionKind) *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().
		WithAPIVersion(gvk.GroupVersion().String()).
		WithKind(gvk.Kind).
		WithName(owner.GetName()).
		WithUID(owner.GetUID()).
		WithController(true).
		WithBlockOwnerDeletion(true)
}

// ControllerOfKind returns obj's controller reference if it points to an object of kind
// gvk, else nil.
func ControllerOfKind(obj metav1.Object, gvk schema.GroupVersionKind) *metav1.OwnerReference {
	ref := metav1.GetControllerOfNoCopy(obj)
	if ref == nil || ref.Kind != gvk.Kind || ref.APIVersion != gvk.GroupVersion().String() {
		return nil
	}
	return ref
}

// SameController reports whether two controller references (either may be nil) point to
// the same owner.
func SameController(a, b *metav1.OwnerReference) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.UID == b.UID
}

// IsControlledBy reports whether obj's controller is owner, UID included: a new object
// with the owner's name is another owner.
func IsControlledBy(obj, owner metav1.Object) bool {
	ref := metav1.GetControllerOfNoCopy(obj)
	return ref != nil && ref.UID == owner.GetUID()
}

// ResolveControllerRef returns the owner that ref points to, looked up by name with get
// (a lister), if ref is of kind gvk and the owner found has ref's UID. Otherwise (no
// reference, another kind, owner gone or replaced by a namesake) it returns the zero T
// and false.
func ResolveControllerRef[T metav1.Object](ref *metav1.OwnerReference, gvk schema.GroupVersionKind, get func(name string) (T, error)) (T, bool) {
	var zero T
	if ref == nil || ref.Kind != gvk.Kind || ref.APIVersion != gvk.GroupVersion().String() {
		return zero, false
	}
	owner, err := get(ref.Name)
	if err != nil || owner.GetUID() != ref.UID {
		return zero, false
	}
	return owner, true
}

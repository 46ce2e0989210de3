package controller

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/tools/cache"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// ManagedSelector selects the objects labelled as managed by app-controller.
func ManagedSelector() labels.Selector {
	return labels.SelectorFromSet(labels.Set{appv1.ManagedByLabel: appv1.ManagedByValue})
}

// UnmanagedSelector selects the objects not labelled as managed by app-controller:
// together with ManagedSelector it covers every object exactly once.
func UnmanagedSelector() labels.Selector {
	req, err := labels.NewRequirement(appv1.ManagedByLabel, selection.NotEquals, []string{appv1.ManagedByValue})
	if err != nil {
		panic(fmt.Sprintf("building the unmanaged selector: %v", err)) // constant input
	}
	return labels.NewSelector().Add(*req)
}

// StripManagedFields is an informer transform that drops metadata.managedFields, which
// no controller here reads, to keep the caches small. It leaves tombstones and objects
// without metadata as they are.
func StripManagedFields(obj interface{}) (interface{}, error) {
	if acc, ok := obj.(metav1.ObjectMetaAccessor); ok {
		acc.GetObjectMeta().SetManagedFields(nil)
	}
	return obj, nil
}

// replicasFields is the fieldsV1 of a managedFields entry that owns spec.replicas alone.
const replicasFields = `{"f:spec":{"f:replicas":{}}}`

// StripManagedFieldsButReplicas is StripManagedFields for the cache of objects whose
// replica count may change hands (the App's Deployments, docs/autoscaling.md): of
// metadata.managedFields it keeps only the entries that own spec.replicas, their
// fieldsV1 cut down to that field (a few dozen bytes an object), so that
// OwnsReplicasAlone still tells who holds the count.
func StripManagedFieldsButReplicas(obj interface{}) (interface{}, error) {
	acc, ok := obj.(metav1.ObjectMetaAccessor)
	if !ok {
		return obj, nil
	}
	meta := acc.GetObjectMeta()
	var kept []metav1.ManagedFieldsEntry
	for _, e := range meta.GetManagedFields() {
		if !ownsReplicas(e) {
			continue
		}
		e.FieldsV1 = metav1.NewFieldsV1(replicasFields)
		e.Time = nil
		kept = append(kept, e)
	}
	meta.SetManagedFields(kept)
	return obj, nil
}

// OwnsReplicasAlone reports whether field manager manager alone owns spec.replicas of
// obj, through server-side apply (an Apply entry of the object itself, not of a
// subresource), as obj's managedFields say, whole or as StripManagedFieldsButReplicas
// keeps them. A manager that owns the field alone and applies without it resets it to
// its default; once another manager shares it, or has taken it (an autoscaler's update
// of the scale subresource), leaving it out changes nothing.
func OwnsReplicasAlone(obj metav1.Object, manager string) bool {
	owns := false
	for _, e := range obj.GetManagedFields() {
		if !ownsReplicas(e) {
			continue
		}
		if e.Manager != manager || e.Operation != metav1.ManagedFieldsOperationApply || e.Subresource != "" {
			return false
		}
		owns = true
	}
	return owns
}

// ownsReplicas reports whether the managedFields entry e owns spec.replicas.
func ownsReplicas(e metav1.ManagedFieldsEntry) bool {
	if e.FieldsV1 == nil {
		return false
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(e.FieldsV1.GetRawBytes(), &fields); err != nil {
		return false
	}
	var spec map[string]json.RawMessage
	if err := json.Unmarshal(fields["f:spec"], &spec); err != nil {
		return false
	}
	_, found := spec["f:replicas"]
	return found
}

// StripWriteRecords is an informer transform that drops what records how an object was
// written, which no controller here reads: metadata.managedFields, and the annotation in
// which a client-side `kubectl apply` keeps the whole object as last applied
// (corev1.LastAppliedConfigAnnotation; as large as the object's spec). It is for the
// caches of objects that users write (Apps, their Services): the controllers write only
// with server-side apply and patches, never with an update of a cached object, so what
// the cache leaves out is never written back. It leaves tombstones and objects without
// metadata as they are.
func StripWriteRecords(obj interface{}) (interface{}, error) {
	if acc, ok := obj.(metav1.ObjectMetaAccessor); ok {
		meta := acc.GetObjectMeta()
		meta.SetManagedFields(nil)
		if annotations := meta.GetAnnotations(); annotations != nil {
			if _, ok := annotations[corev1.LastAppliedConfigAnnotation]; ok {
				delete(annotations, corev1.LastAppliedConfigAnnotation)
				if len(annotations) == 0 {
					meta.SetAnnotations(nil)
				}
			}
		}
	}
	return obj, nil
}

// ObjectFromTombstone returns obj, or the last known state of the object inside a
// cache.DeletedFinalStateUnknown tombstone. It returns nil when obj is neither an object
// with metadata nor a tombstone holding one.
func ObjectFromTombstone(obj interface{}) metav1.Object {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	o, ok := obj.(metav1.Object)
	if !ok {
		return nil
	}
	return o
}

// StripToIdentity is an informer transform for metadata-only informers that are used
// to know which names are taken and by whom: it drops managedFields and annotations,
// keeping name, namespace, UID, resourceVersion, labels and owner references.
func StripToIdentity(obj interface{}) (interface{}, error) {
	if acc, ok := obj.(metav1.ObjectMetaAccessor); ok {
		meta := acc.GetObjectMeta()
		meta.SetManagedFields(nil)
		meta.SetAnnotations(nil)
	}
	return obj, nil
}

// StripToVersion is an informer transform for metadata-only informers that are used to
// know whether an object exists and when it changes: it keeps name, namespace, UID,
// resourceVersion and the controller reference (whether a controller made it: the
// copies of ConfigMaps and Secrets an App owns), and drops the rest of the metadata.
func StripToVersion(obj interface{}) (interface{}, error) {
	if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
		out := &metav1.PartialObjectMetadata{
			TypeMeta: m.TypeMeta,
			ObjectMeta: metav1.ObjectMeta{
				Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
			},
		}
		if ref := metav1.GetControllerOfNoCopy(m); ref != nil {
			out.OwnerReferences = []metav1.OwnerReference{*ref}
		}
		return out, nil
	}
	return obj, nil
}

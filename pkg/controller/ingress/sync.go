package ingress

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
)

// syncService makes the Ingress of the Service named key match what the Service asks
// for. It is level-triggered: whatever event queued the Service, it compares the desired
// Ingress with the cached one and writes only when they differ. It never writes to an
// Ingress the Service does not control.
func (c *Controller) syncService(ctx context.Context, key cache.ObjectName) (controller.Result, error) {
	logger := klog.FromContext(ctx)
	svc, err := c.serviceLister.Services(key.Namespace).Get(key.Name)
	switch {
	case apierrors.IsNotFound(err):
		logger.V(4).Info("Service no longer exists")
		return controller.Result{}, nil
	case err != nil:
		return controller.Result{}, fmt.Errorf("reading Service %s from the cache: %w", key, err)
	}
	if svc.DeletionTimestamp != nil {
		// The garbage collector deletes the Ingress; recreating it would fight it.
		return controller.Result{}, nil
	}

	current, err := c.getIngress(key)
	if err != nil {
		return controller.Result{}, fmt.Errorf("reading Ingress %s from the cache: %w", key, err)
	}
	controlled := current != nil && isControlledBy(current, svc)

	if !wantsIngress(svc) {
		if controlled {
			return controller.Result{}, c.removeIngress(ctx, svc, current, fmt.Sprintf("annotation %s is no longer \"true\"", AnnotationHTTP))
		}
		return controller.Result{}, nil
	}
	if current != nil && !controlled {
		logger.V(2).Info("Ingress name held by an Ingress the Service does not control", "ingress", klog.KObj(current))
		c.recorder.Eventf(svc, corev1.EventTypeWarning, ErrResourceExists, MessageResourceExists, svc.Name)
		return controller.Result{}, nil
	}

	if msg, reason, err := c.claimRefusal(svc); err != nil {
		return controller.Result{}, err
	} else if msg != "" {
		logger.V(2).Info("Service may not have its Ingress", "reason", reason, "message", msg)
		c.recorder.Event(svc, corev1.EventTypeWarning, reason, msg)
		if controlled {
			return controller.Result{}, c.removeIngress(ctx, svc, current, msg)
		}
		return controller.Result{}, nil
	}

	desired, err := c.desiredIngress(svc)
	var invalid *invalidServiceError
	switch {
	case errors.As(err, &invalid):
		// Retrying cannot help; a change of the Service queues it again.
		logger.V(2).Info("Service cannot have an Ingress", "reason", invalid.reason, "message", invalid.msg)
		c.recorder.Event(svc, corev1.EventTypeWarning, invalid.reason, invalid.msg)
		return controller.Result{}, nil
	case err != nil:
		return controller.Result{}, fmt.Errorf("building the Ingress of Service %s: %w", key, err)
	}

	if controlled {
		upToDate, err := controller.UpToDate(current, desired)
		if err != nil {
			return controller.Result{}, fmt.Errorf("comparing Ingress %s with the desired state: %w", key, err)
		}
		if upToDate {
			return controller.Result{}, nil
		}
	}
	return controller.Result{}, c.applyIngress(ctx, svc, desired, controlled)
}

// claimRefusal says why svc may not have the Ingress it asks for, with the Event reason:
// its host is held by another namespace, or it asks for a catch-all rule where none is
// allowed. "" when it may.
func (c *Controller) claimRefusal(svc *corev1.Service) (string, string, error) {
	if host, ok := claimedHost(svc); ok {
		msg, err := c.hostRefusal(svc, host)
		return msg, ReasonHostConflict, err
	}
	if svc.Annotations[AnnotationHost] == "" {
		return c.catchAllRefusal(svc), ReasonCatchAllRefused, nil
	}
	return "", "", nil // an invalid host: desiredIngress says so
}

// desiredIngress returns the apply configuration of the Ingress svc asks for, or an
// invalidServiceError saying why it cannot have one.
func (c *Controller) desiredIngress(svc *corev1.Service) (*networkingv1ac.IngressApplyConfiguration, error) {
	return DesiredIngress(svc, c.ingressClass)
}

// applyIngress writes desired with server-side apply. exists tells whether the cache
// holds the Ingress, controlled by svc: then the apply is forced, taking back fields that
// someone else changed. Otherwise it is not forced, so that an Ingress which the cache
// has not seen yet is not taken over: a conflict then is checked against the live object.
func (c *Controller) applyIngress(ctx context.Context, svc *corev1.Service, desired *networkingv1ac.IngressApplyConfiguration, exists bool) error {
	logger := klog.FromContext(ctx)
	client := c.kubeClient.NetworkingV1().Ingresses(svc.Namespace)
	applied, err := client.Apply(ctx, desired, metav1.ApplyOptions{FieldManager: appv1.FieldManager, Force: exists})
	if err != nil {
		switch {
		case apierrors.IsInvalid(err):
			// Retrying the same Ingress cannot succeed; a change of the Service queues it.
			c.recorder.Eventf(svc, corev1.EventTypeWarning, ReasonIngressRejected, "The API server rejected Ingress %q: %v", svc.Name, err)
			return nil
		case !exists && apierrors.IsConflict(err):
			live, getErr := client.Get(ctx, svc.Name, metav1.GetOptions{})
			if getErr == nil && !isControlledBy(live, svc) {
				c.recorder.Eventf(svc, corev1.EventTypeWarning, ErrResourceExists, MessageResourceExists, svc.Name)
				return nil
			}
		}
		return fmt.Errorf("applying Ingress %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	applied.SetManagedFields(nil)
	c.ingresses.Mutation(applied)

	if exists {
		logger.V(2).Info("Updated Ingress", "ingress", klog.KObj(applied))
		c.recorder.Eventf(svc, corev1.EventTypeNormal, ReasonIngressUpdated, "Updated Ingress %q", svc.Name)
	} else {
		logger.V(2).Info("Created Ingress", "ingress", klog.KObj(applied))
		c.recorder.Eventf(svc, corev1.EventTypeNormal, ReasonIngressCreated, "Created Ingress %q", svc.Name)
	}
	return nil
}

// removeIngress deletes ing, which svc controls, because svc no longer asks for an
// Ingress. The UID precondition makes sure that an Ingress created since under the same
// name is never deleted.
func (c *Controller) removeIngress(ctx context.Context, svc *corev1.Service, ing *networkingv1.Ingress, why string) error {
	uid := ing.UID
	err := c.kubeClient.NetworkingV1().Ingresses(ing.Namespace).Delete(ctx, ing.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &uid},
	})
	switch {
	case apierrors.IsNotFound(err):
		c.ingresses.Deleting(ing) // already gone: the informer has yet to say so
		return nil
	case apierrors.IsConflict(err):
		return nil // replaced by an Ingress that is not the Service's
	case err != nil:
		return fmt.Errorf("deleting Ingress %s/%s: %w", ing.Namespace, ing.Name, err)
	}
	// Until the informer delivers the deletion, a sync no longer sees the Ingress.
	c.ingresses.Deleting(ing)
	klog.FromContext(ctx).V(2).Info("Deleted Ingress", "ingress", klog.KObj(ing))
	c.recorder.Eventf(svc, corev1.EventTypeNormal, ReasonIngressDeleted, "Deleted Ingress %q: %s", ing.Name, why)
	return nil
}

// isControlledBy reports whether ing's controller is svc (UID included).
func isControlledBy(ing *networkingv1.Ingress, svc *corev1.Service) bool {
	ref := metav1.GetControllerOfNoCopy(ing)
	return ref != nil && ref.Kind == serviceKind.Kind && ref.UID == svc.UID
}

package controller

import (
	"fmt"

	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// Handlers are the handlers of an informer's events for objects of type T; a nil one
// ignores its events.
type Handlers[T any] struct {
	Add    func(logger klog.Logger, obj T)
	Update func(logger klog.Logger, old, cur T)
	// Delete gets the deleted object, out of its tombstone, and what the informer
	// delivered (the tombstone itself, as WriteCache.Deleted takes it).
	Delete func(logger klog.Logger, obj T, delivered interface{})
}

// Funcs returns the handlers as an informer's, logging with logger: an object that is
// not a T (a tombstone's object, for a deletion) is dropped.
func (h Handlers[T]) Funcs(logger klog.Logger) cache.ResourceEventHandlerFuncs {
	var funcs cache.ResourceEventHandlerFuncs
	if h.Add != nil {
		funcs.AddFunc = func(obj interface{}) {
			if o, ok := obj.(T); ok {
				h.Add(logger, o)
			}
		}
	}
	if h.Update != nil {
		funcs.UpdateFunc = func(old, cur interface{}) {
			o, ok1 := old.(T)
			c, ok2 := cur.(T)
			if ok1 && ok2 {
				h.Update(logger, o, c)
			}
		}
	}
	if h.Delete != nil {
		funcs.DeleteFunc = func(obj interface{}) {
			if o, ok := ObjectFromTombstone(obj).(T); ok {
				h.Delete(logger, o, obj)
			}
		}
	}
	return funcs
}

// AddEventHandler adds handler to informer, its logger logger; kind names the informer's
// objects in the error.
func AddEventHandler(informer cache.SharedInformer, logger klog.Logger, kind string, handler cache.ResourceEventHandler) error {
	if _, err := informer.AddEventHandlerWithOptions(handler, cache.HandlerOptions{Logger: &logger}); err != nil {
		return fmt.Errorf("adding the %s event handler: %w", kind, err)
	}
	return nil
}

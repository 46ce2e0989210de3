// Package controller holds what every controller of app-controller shares:
//
//   - Loop (loop.go): the worker loop. A controller supplies its sync function, which
//     returns an error and a Result (RequeueAfter: when to sync again), and its
//     RetryPolicy (how many attempts, what giving up does, whether a resync retries);
//     the queue, the workers, the SyncFailed Event and the graceful stop (RunWorkers,
//     workers.go) live here once. metrics.go holds the reconcile metrics it records
//     for every controller (controller-runtime's names).
//   - Own writes (writecache.go): WriteCache, the informer cache plus the controller's
//     own writes until its informer catches up; every controller reads through one.
//   - Informers (informers.go): the selectors of managed and unmanaged objects, the
//     informer transforms that keep caches small, and ObjectFromTombstone for delete
//     events.
//   - Ownership (ownership.go): the controller owner reference of children, resolving a
//     controller reference to its owner (UID checked).
//   - Writes (apply.go): UpToDate, whether a server-side apply would change anything,
//     with the applied-configuration hash annotation.
//   - Conversion (convert.go): Convert, between API types, apply configurations and
//     generic JSON.
//
// Each controller lives in its own package (app, ingress, nodelabel) with only its own
// logic: handlers, sync, desired state and status. controllertest holds their shared
// unit-test fixtures.
package controller

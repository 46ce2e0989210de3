package app

const (
	// ControllerName names the controller in --controllers, the workqueue and logs.
	ControllerName = "app"

	// DefaultWorkers is the default number of concurrent syncs of each controller. The
	// seed had 5; syncs wait on the apiserver, not the CPU, and `make bench` at 1000 Apps
	// on 2 cores converged in 1.19x the floor with 5 or 10 workers, 1.07x with 20 and
	// 1.09x with 40 (docs/performance.md, "Workers").
	DefaultWorkers = 20
	// MaxRetries is how many times in a row a failing App is retried with backoff before
	// the controller reports ReconcileFailed and waits for the next resync or change
	// (seed: 10).
	MaxRetries = 10

	// claimIndex indexes Apps by the child names they claim, "Kind/namespace/name".
	claimIndex = "app.appcontroller.k8s.io/claim"
	// controllerIndex indexes children by the UID of their controlling App.
	controllerIndex = "app.appcontroller.k8s.io/controller-uid"
)

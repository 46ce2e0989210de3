package app

const (
	// ControllerName names the controller in --controllers, the workqueue and logs.
	ControllerName = "app"

	// DefaultWorkers is the default number of concurrent syncs (seed: 5).
	DefaultWorkers = 5
	// MaxRetries is how many times in a row a failing App is retried with backoff before
	// the controller reports ReconcileFailed and waits for the next resync or change
	// (seed: 10).
	MaxRetries = 10

	// claimIndex indexes Apps by the child names they claim, "Kind/namespace/name".
	claimIndex = "app.appcontroller.k8s.io/claim"
	// controllerIndex indexes children by the UID of their controlling App.
	controllerIndex = "app.appcontroller.k8s.io/controller-uid"
)

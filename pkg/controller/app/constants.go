package app

import (
	"k8s.io/apimachinery/pkg/runtime/schema"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

const (
	// ControllerName names the controller in --controllers, the workqueue and logs.
	ControllerName = "app"

	// MaxRetries is how many times in a row a failing App is retried with backoff before
	// the controller reports ReconcileFailed and waits for the next resync or change
	// (seed: 10).
	MaxRetries = 10
)

// appKind is the kind of the owner of every child.
var appKind = schema.GroupVersion(appv1.GroupVersion).WithKind("App")

package app

import appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"

// The labels every child of an App carries, and those that select its pods. A leaf of
// the sync's walk: it calls nothing else of the package.

// selectorLabels are the labels that select an App's pods: they name the App, so two
// Apps never select each other's pods.
func selectorLabels(app *appv1.App) map[string]string {
	return map[string]string{
		appv1.NameLabel:     app.Name,
		appv1.InstanceLabel: app.Name,
	}
}

// childLabels are the labels of an App's Deployment, Service and pods.
func childLabels(app *appv1.App) map[string]string {
	l := selectorLabels(app)
	l[appv1.ManagedByLabel] = appv1.ManagedByValue
	return l
}

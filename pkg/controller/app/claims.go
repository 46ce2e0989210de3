package app

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
)

// Child names are claimed by Apps and held by objects. The App informer indexes the
// names each App claims (claimIndex: each kind of child says which, appChild.claim),
// the child informers index the children by the App that controls them
// (controllerIndex); when several Apps claim one name, the oldest wins it (nameWinner).
const (
	// claimIndex indexes Apps by the child names they claim, "Kind/namespace/name".
	claimIndex = "app.appcontroller.k8s.io/claim"
	// controllerIndex indexes children by the UID of their controlling App.
	controllerIndex = "app.appcontroller.k8s.io/controller-uid"
)

// nameWinner returns the App that wins the child name claim ("Kind/namespace/name",
// appChild.claim) that app's spec gives a child: the oldest of app and the other Apps
// of the App cache apps that claim that name; app itself when claim is "" (a name no
// other App can claim).
func nameWinner(apps cache.Indexer, app *appv1.App, claim string) *appv1.App {
	if claim == "" {
		return app
	}
	return oldestApp(append(claimants(apps, claim), app))
}

// claimants returns the Apps of the App cache apps whose spec names the child claim
// ("Kind/namespace/name").
func claimants(apps cache.Indexer, claim string) []*appv1.App {
	objs, err := apps.ByIndex(claimIndex, claim)
	if err != nil {
		return nil
	}
	out := make([]*appv1.App, 0, len(objs))
	for _, obj := range objs {
		if app, ok := obj.(*appv1.App); ok {
			out = append(out, app)
		}
	}
	return out
}

// claimKey is the claim index key of a child name; "" when name is "" (no child).
func claimKey(kind, namespace, name string) string {
	if name == "" {
		return ""
	}
	return kind + "/" + namespace + "/" + name
}

// claimKeys returns the child names app claims, as claim index keys: each kind's claim,
// once (the PodDisruptionBudget claims the Deployment's name).
func (c *Controller) claimKeys(app *appv1.App) []string {
	var keys []string
	for _, child := range c.children {
		if k := child.claim(app); k != "" && !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	return keys
}

// indexByClaim is the claim index function of the App informer.
func (c *Controller) indexByClaim(obj interface{}) ([]string, error) {
	app, ok := obj.(*appv1.App)
	if !ok {
		return nil, nil
	}
	return c.claimKeys(app), nil
}

// indexByControllerUID indexes children by the UID of the App that controls them.
func indexByControllerUID(obj interface{}) ([]string, error) {
	o, ok := obj.(metav1.Object)
	if !ok {
		return nil, nil
	}
	ref := controller.ControllerOfKind(o, appKind)
	if ref == nil {
		return nil, nil
	}
	return []string{string(ref.UID)}, nil
}

// oldestApp returns the App that wins a contested child name: the oldest, with the name
// breaking ties, so that every App computes the same winner.
func oldestApp(apps []*appv1.App) *appv1.App {
	if len(apps) == 0 {
		return nil
	}
	return slices.MinFunc(apps, func(a, b *appv1.App) int {
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			if a.CreationTimestamp.Before(&b.CreationTimestamp) {
				return -1
			}
			return 1
		}
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
}

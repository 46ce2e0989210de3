package app

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
	"github.com/app-controller/app-controller/pkg/rollout"
)

// The templates of the rollouts' checks (AnalysisTemplate, ClusterAnalysisTemplate:
// rolloutanalysis.go resolves them): a template's change queues the Apps in a rollout
// whose checks refer to it, so that a template created late ends the wait of a check
// at once, and one deleted holds the check at once.

// templateIndex indexes the Apps in a canary rollout (status.rollout.canary set, not
// aborted) by the templates their checks refer to: "AnalysisTemplate/namespace/name"
// and "ClusterAnalysisTemplate//name". An App not in a rollout has no key, so that the
// index holds only the Apps a template's change concerns (at most the Apps in a rollout
// times their checks), and costs an App without checks nothing but the look at its
// status.
const templateIndex = "app.appcontroller.k8s.io/analysis-template"

// indexByTemplate is the templateIndex function.
func indexByTemplate(obj interface{}) ([]string, error) {
	app, ok := obj.(*appv1.App)
	if !ok {
		return nil, nil
	}
	// A blue-green rollout's checks before the switch are its switch stage's.
	s, _ := rollout.Strategy(app.Spec.Rollout)
	if s == nil {
		return nil, nil
	}
	if r := app.Status.Rollout; r == nil || r.Canary == nil || r.Phase == appv1.RolloutAborted {
		return nil, nil
	}
	var keys []string
	add := func(checks []appv1.AnalysisCheck) {
		for i := range checks {
			if ref := checks[i].TemplateRef; ref != nil {
				keys = append(keys, templateKey(ref.Kind, app.Namespace, ref.Name))
			}
		}
	}
	for i := range s.Steps {
		if a := s.Steps[i].Analysis; a != nil {
			add(a.Checks)
		}
	}
	if s.Analysis != nil {
		add(s.Analysis.Checks)
	}
	return keys, nil
}

// templateKey is the templateIndex key of the template of kind and name; namespace is
// dropped for a ClusterAnalysisTemplate.
func templateKey(kind appv1.AnalysisTemplateKind, namespace, name string) string {
	if kind == "" {
		kind = appv1.AnalysisTemplateKindNamespaced
	}
	if kind == appv1.AnalysisTemplateKindCluster {
		namespace = ""
	}
	return string(kind) + "/" + namespace + "/" + name
}

// templateHandler returns the event handler of the informer of templates of kind: it
// queues the Apps in a rollout whose checks refer to a template that was added,
// changed (a new generation: its spec) or deleted.
func (c *Controller) templateHandler(logger klog.Logger, kind appv1.AnalysisTemplateKind) cache.ResourceEventHandler {
	changed := func(what string, obj metav1.Object) {
		if obj == nil {
			return
		}
		c.enqueueReferrers(logger, templateIndex, templateKey(kind, obj.GetNamespace(), obj.GetName()),
			"Referenced "+string(kind)+" "+what, "template", obj.GetName())
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) { changed("added", controller.ObjectFromTombstone(obj)) },
		UpdateFunc: func(old, cur interface{}) {
			o, n := controller.ObjectFromTombstone(old), controller.ObjectFromTombstone(cur)
			if o == nil || n == nil || o.GetGeneration() == n.GetGeneration() {
				return // periodic resync, or a change of its metadata only
			}
			changed("changed", n)
		},
		DeleteFunc: func(obj interface{}) { changed("deleted", controller.ObjectFromTombstone(obj)) },
	}
}

package app

import (
	"context"
	"fmt"

	policyv1 "k8s.io/api/policy/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
)

// An App's PodDisruptionBudget (spec.disruptionBudget) protects its pods from
// voluntary disruptions. It is named as the Deployment, so the App that wins the
// Deployment's name wins the budget's: it claims the Deployment's name.

// budgetChild is the App's PodDisruptionBudget.
type budgetChild struct {
	*childReconciler[*policyv1.PodDisruptionBudget, *policyv1ac.PodDisruptionBudgetApplyConfiguration]
	c *Controller
}

// newBudgetChild wires the PodDisruptionBudget informers.
func newBudgetChild(c *Controller, inf Informers, _ Options) (appChild, error) {
	k, err := newChildReconciler(c, "PodDisruptionBudget", inf.DisruptionBudgets.Informer(), inf.UnmanagedDisruptionBudgets.Informer(),
		func(ns string) childAPI[*policyv1.PodDisruptionBudget, *policyv1ac.PodDisruptionBudgetApplyConfiguration] {
			return c.kubeClient.PolicyV1().PodDisruptionBudgets(ns)
		}, policyv1ac.PodDisruptionBudget)
	if err != nil {
		return nil, err
	}
	return &budgetChild{childReconciler: k, c: c}, nil
}

func (b *budgetChild) claim(app *appv1.App) string {
	if t := app.Spec.DeploymentTemplate; t != nil && app.Spec.DisruptionBudget != nil {
		return claimKey("Deployment", app.Namespace, t.Name)
	}
	return ""
}

// sync writes the PodDisruptionBudget app asks for and reports its name in
// status.disruptionBudget.
func (b *budgetChild) sync(ctx context.Context, app *appv1.App, _ *syncInput) (childOutcome, error) {
	desired, err := DesiredDisruptionBudget(app)
	if err != nil {
		return childOutcome{}, fmt.Errorf("building the PodDisruptionBudget of App %s/%s: %w", app.Namespace, app.Name, err)
	}
	name := ""
	if desired != nil {
		name = app.Spec.DeploymentTemplate.Name
	}
	res, err := b.reconcile(ctx, app, name, desired, b.c.nameWinner(app, b.claim(app)))
	out := res.outcome()
	out.report = func(status *appv1.AppStatus) {
		status.DisruptionBudget = ""
		if res.obj != nil {
			status.DisruptionBudget = res.name
		}
	}
	return out, err
}

// DesiredDisruptionBudget returns the apply configuration of the PodDisruptionBudget
// that app wants, named as its Deployment and selecting its pods, or nil when app asks
// for none.
func DesiredDisruptionBudget(app *appv1.App) (*policyv1ac.PodDisruptionBudgetApplyConfiguration, error) {
	b, t := app.Spec.DisruptionBudget, app.Spec.DeploymentTemplate
	if b == nil || t == nil {
		return nil, nil
	}
	spec := policyv1ac.PodDisruptionBudgetSpec().
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(selectorLabels(app)))
	if b.MinAvailable != nil {
		spec.WithMinAvailable(*b.MinAvailable)
	}
	if b.MaxUnavailable != nil {
		spec.WithMaxUnavailable(*b.MaxUnavailable)
	}
	pdb := policyv1ac.PodDisruptionBudget(t.Name, app.Namespace).
		WithLabels(childLabels(app)).
		WithOwnerReferences(controller.OwnerReference(app, appKind)).
		WithSpec(spec)
	return controller.WithAppliedHash(pdb)
}

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
}

// newBudgetChild wires the PodDisruptionBudget informers.
func newBudgetChild(c *Controller, inf Informers, _ Options) (appChild, error) {
	k, err := newChildReconciler[*policyv1.PodDisruptionBudget](c, "PodDisruptionBudget", inf.DisruptionBudgets.Informer(),
		inf.UnmanagedDisruptionBudgets.Informer(), c.kubeClient.PolicyV1().PodDisruptionBudgets, policyv1ac.PodDisruptionBudget)
	return &budgetChild{k}, err
}

// budgetName is the name of the PodDisruptionBudget app asks for, its Deployment's;
// "" for none.
func budgetName(app *appv1.App) string {
	if t := app.Spec.DeploymentTemplate; t != nil && app.Spec.DisruptionBudget != nil {
		return t.Name
	}
	return ""
}

func (b *budgetChild) claim(app *appv1.App) string {
	return claimKey("Deployment", app.Namespace, budgetName(app))
}

// sync writes the PodDisruptionBudget app asks for and reports its name in
// status.disruptionBudget.
func (b *budgetChild) sync(ctx context.Context, app *appv1.App, _ *syncInput) (childOutcome, error) {
	desired, err := DesiredDisruptionBudget(app)
	if err != nil {
		return childOutcome{}, fmt.Errorf("building the PodDisruptionBudget of App %s/%s: %w", app.Namespace, app.Name, err)
	}
	res, err := b.reconcile(ctx, app, budgetName(app), desired, b.claim(app))
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

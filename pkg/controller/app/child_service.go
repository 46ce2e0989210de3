package app

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
	"github.com/app-controller/app-controller/pkg/rollout"
)

// An App's Service (spec.serviceTemplate) selects its pods: named as the template says,
// claimed by name (the oldest App that names it wins it). Its ports and selector are
// the App's alone (serviceExclusivePatch).

// serviceChild is the App's Service.
type serviceChild struct {
	*childReconciler[*corev1.Service, *corev1ac.ServiceApplyConfiguration]
}

// newServiceChild wires the Service informers. The Service's ports and selector are
// the App's alone (serviceExclusivePatch).
func newServiceChild(c *Controller, inf Informers, _ Options) (appChild, error) {
	k, err := newChildReconciler[*corev1.Service](c, "Service", inf.Services.Informer(), inf.UnmanagedServices.Informer(),
		c.kubeClient.CoreV1().Services, corev1ac.Service)
	if k != nil {
		k.exclusivePatch = serviceExclusivePatch
	}
	c.services = &serviceChild{k}
	return c.services, err
}

// serviceName is the name of the Service app asks for; "" for none.
func serviceName(app *appv1.App) string {
	if t := app.Spec.ServiceTemplate; t != nil {
		return t.Name
	}
	return ""
}

func (s *serviceChild) claim(app *appv1.App) string {
	return claimKey("Service", app.Namespace, serviceName(app))
}

// sync writes the Service app asks for and reports it: its status in
// status.serviceStatus, and in Ready's message that it selects the App's pods.
// During a blue-green rollout it selects the pods the plan makes active
// (withActiveSelector).
func (s *serviceChild) sync(ctx context.Context, app *appv1.App, in *syncInput) (childOutcome, error) {
	desired, err := DesiredService(app)
	if err != nil {
		return childOutcome{}, fmt.Errorf("building the Service of App %s/%s: %w", app.Namespace, app.Name, err)
	}
	desired, planned, err := withActiveSelector(desired, in.rollout)
	if err != nil {
		return childOutcome{}, fmt.Errorf("building the Service of App %s/%s: %w", app.Namespace, app.Name, err)
	}
	if !planned && in.rollout != nil && app.Spec.Rollout.BlueGreen != nil {
		planned = s.activeNarrowed(app)
	}
	res, err := s.reconcileWith(ctx, app, serviceName(app), desired, s.claim(app), reconcileOptions{planned: planned})
	return serviceOutcome(res), err
}

// serviceOutcome is what the App's status reads of res, the App's Service.
func serviceOutcome(res childResult[*corev1.Service]) childOutcome {
	out := res.outcome()
	if res.name != "" && res.obj != nil {
		out.readyNote = fmt.Sprintf("Service %q selects the App's pods", res.name)
	}
	out.report = func(status *appv1.AppStatus) {
		status.ServiceStatus = nil
		if res.obj != nil {
			status.ServiceStatus = res.obj.Status.DeepCopy()
		}
	}
	return out
}

// DesiredService returns the apply configuration of the Service that app wants, or nil when
// app has no serviceTemplate. The Service selects the App's pods, on the ports of
// servicePorts.
func DesiredService(app *appv1.App) (*corev1ac.ServiceApplyConfiguration, error) {
	t := app.Spec.ServiceTemplate
	if t == nil {
		return nil, nil
	}
	serviceType := t.Type
	if serviceType == "" {
		serviceType = corev1.ServiceTypeClusterIP
	}
	spec := corev1ac.ServiceSpec().
		WithType(serviceType).
		WithSelector(selectorLabels(app))
	for _, p := range servicePorts(app) {
		port := corev1ac.ServicePort().
			WithName(p.name).
			WithProtocol(p.protocol).
			WithPort(p.port).
			WithTargetPort(p.targetPort)
		if p.nodePort != nil {
			port.WithNodePort(*p.nodePort)
		}
		spec.WithPorts(port)
	}
	if t.SessionAffinity != "" {
		spec.WithSessionAffinity(t.SessionAffinity)
	}
	// The App's own labels are set last: they win over serviceTemplate.labels (which the
	// schema already forbids to set them).
	labels := make(map[string]string, len(t.Labels)+3)
	maps.Copy(labels, appv1.LabelMap(t.Labels))
	maps.Copy(labels, childLabels(app))
	s := corev1ac.Service(t.Name, app.Namespace).
		WithLabels(labels).
		WithOwnerReferences(controller.OwnerReference(app, appKind)).
		WithSpec(spec)
	if len(t.Annotations) > 0 {
		s.WithAnnotations(t.Annotations)
	}

	return controller.WithAppliedHash(s)
}

// serviceExclusivePatch is the exclusivePatch of Services: a Service's ports and
// selector decide where its traffic goes, so the App owns them alone. Server-side apply keeps a port or selector key that someone else
// added; worse, a port edited by hand becomes a second port with the App's port name,
// and every later apply is invalid. The patch replaces both with the App's, guarded by
// the resourceVersion, keeping the node ports already allocated.
func serviceExclusivePatch(live *corev1.Service, desired *corev1ac.ServiceApplyConfiguration) ([]byte, error) {
	want := &corev1.Service{}
	if err := controller.Convert(desired, want); err != nil {
		return nil, err
	}
	ports := make([]corev1.ServicePort, len(want.Spec.Ports))
	portsMatch := len(live.Spec.Ports) == len(want.Spec.Ports)
	for i, p := range want.Spec.Ports {
		ports[i] = p
		found := false
		for _, l := range live.Spec.Ports {
			if l.Name == p.Name && l.Port == p.Port && l.Protocol == p.Protocol {
				ports[i].NodePort = l.NodePort
				found = found || l.TargetPort == p.TargetPort
			}
		}
		portsMatch = portsMatch && found
	}
	if portsMatch && maps.Equal(live.Spec.Selector, want.Spec.Selector) {
		return nil, nil
	}
	return json.Marshal([]map[string]any{
		{"op": "test", "path": "/metadata/resourceVersion", "value": live.ResourceVersion},
		patchAdd("/spec/selector", want.Spec.Selector),
		patchAdd("/spec/ports", ports),
	})
}

// A blue-green rollout (spec.rollout.blueGreen) runs through the canary's sync
// (rolloutsync.go) with the engine's blue-green machine and plan (pkg/rollout,
// bluegreen.go). What is the App's Service's own: as the active Service it selects the
// stable pods or the preview's as the plan says (Plan.Active: withActiveSelector), and
// the sync observes whether its switch is in effect (rolloutobserve.go:
// activeOnPreview); the preview Service is child_preview.go.

// activeSelector returns the selector of app's Service as cached; nil when there is
// none of the App's.
func (s *serviceChild) activeSelector(app *appv1.App) map[string]string {
	name := serviceName(app)
	if s == nil || name == "" {
		return nil
	}
	holder, err := s.lookup(app, name)
	if err != nil || holder.managed == nil || !holder.ours {
		return nil
	}
	return holder.managed.Spec.Selector
}

// activeNarrowed reports whether app's Service, as cached, selects the stable or the
// preview pods alone (a blue-green rollout's selector): its way back to all the pods is
// a step of the rollout too.
func (s *serviceChild) activeNarrowed(app *appv1.App) bool {
	sel := s.activeSelector(app)
	_, stable := sel[appsv1.DefaultDeploymentUniqueLabelKey]
	_, preview := sel[appv1.TrackLabel]
	return stable || preview
}

// withActiveSelector narrows the selector of the App's Service desired to the pods the
// plan p makes active: the stable ones by their pod-template-hash, or the preview's by
// the track label (its applied hash computed again). It reports whether it did: the
// write is then a step of the rollout.
func withActiveSelector(desired *corev1ac.ServiceApplyConfiguration, p *rolloutPlan) (*corev1ac.ServiceApplyConfiguration, bool, error) {
	if desired == nil || desired.Spec == nil || p == nil {
		return desired, false, nil
	}
	switch {
	case p.Active == rollout.ActiveStable && p.StableHash != "":
		desired.Spec.WithSelector(map[string]string{appsv1.DefaultDeploymentUniqueLabelKey: p.StableHash})
	case p.Active == rollout.ActivePreview:
		desired.Spec.WithSelector(map[string]string{appv1.TrackLabel: appv1.TrackCanary})
	default:
		return desired, false, nil
	}
	delete(desired.Annotations, controller.AppliedConfigHashAnnotation)
	desired, err := controller.WithAppliedHash(desired)
	return desired, true, err
}

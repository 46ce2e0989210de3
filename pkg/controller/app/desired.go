package app

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/controller"
)

const (
	// defaultReplicas applies when an App was stored without the schema default.
	defaultReplicas int32 = 1
	// defaultServicePort is the seed's Service port, also the schema default.
	defaultServicePort int32 = 8080
)

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

// appKind is the kind of the owner of every child.
var appKind = appv1.SchemeGroupVersion.WithKind("App")

// DesiredDeployment returns the apply configuration of the Deployment that app wants, with
// exactly the fields the controller owns, or nil when app has no deploymentTemplate.
func DesiredDeployment(app *appv1.App) (*appsv1ac.DeploymentApplyConfiguration, error) {
	t := app.Spec.DeploymentTemplate
	if t == nil {
		return nil, nil
	}
	container := corev1ac.Container().
		WithName(appv1.ContainerName).
		WithImage(t.Image)
	if t.ContainerPort != nil {
		container.WithPorts(corev1ac.ContainerPort().
			WithName(appv1.PortName).
			WithContainerPort(*t.ContainerPort).
			WithProtocol(corev1.ProtocolTCP))
	}
	if len(t.Command) > 0 {
		container.WithCommand(t.Command...)
	}
	if len(t.Args) > 0 {
		container.WithArgs(t.Args...)
	}
	for i := range t.Env {
		env := &corev1ac.EnvVarApplyConfiguration{}
		if err := controller.Convert(&t.Env[i], env); err != nil {
			return nil, fmt.Errorf("converting env %q: %w", t.Env[i].Name, err)
		}
		container.WithEnv(env)
	}
	if t.Resources != nil {
		resources := &corev1ac.ResourceRequirementsApplyConfiguration{}
		if err := controller.Convert(t.Resources, resources); err != nil {
			return nil, fmt.Errorf("converting resources: %w", err)
		}
		container.WithResources(resources)
	}

	replicas := defaultReplicas
	if t.Replicas != nil {
		replicas = *t.Replicas
	}
	d := appsv1ac.Deployment(t.Name, app.Namespace).
		WithLabels(childLabels(app)).
		WithOwnerReferences(controller.OwnerReference(app, appKind)).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(replicas).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(selectorLabels(app))).
			WithTemplate(corev1ac.PodTemplateSpec().
				WithLabels(childLabels(app)).
				WithSpec(corev1ac.PodSpec().WithContainers(container))))

	hash, err := controller.ConfigHash(d)
	if err != nil {
		return nil, err
	}
	return d.WithAnnotations(map[string]string{controller.AppliedConfigHashAnnotation: hash}), nil
}

// DesiredService returns the apply configuration of the Service that app wants, or nil when
// app has no serviceTemplate. The Service selects the App's pods; its target port is
// serviceTemplate.targetPort, else the container port, else the Service port.
func DesiredService(app *appv1.App) (*corev1ac.ServiceApplyConfiguration, error) {
	t := app.Spec.ServiceTemplate
	if t == nil {
		return nil, nil
	}
	port := t.Port
	if port == 0 {
		port = defaultServicePort
	}
	targetPort := port
	switch {
	case t.TargetPort != nil:
		targetPort = *t.TargetPort
	case app.Spec.DeploymentTemplate != nil && app.Spec.DeploymentTemplate.ContainerPort != nil:
		targetPort = *app.Spec.DeploymentTemplate.ContainerPort
	}
	serviceType := t.Type
	if serviceType == "" {
		serviceType = corev1.ServiceTypeClusterIP
	}
	s := corev1ac.Service(t.Name, app.Namespace).
		WithLabels(childLabels(app)).
		WithOwnerReferences(controller.OwnerReference(app, appKind)).
		WithSpec(corev1ac.ServiceSpec().
			WithType(serviceType).
			WithSelector(selectorLabels(app)).
			WithPorts(corev1ac.ServicePort().
				WithName(appv1.PortName).
				WithProtocol(corev1.ProtocolTCP).
				WithPort(port).
				WithTargetPort(intstr.FromInt32(targetPort))))

	hash, err := controller.ConfigHash(s)
	if err != nil {
		return nil, err
	}
	return s.WithAnnotations(map[string]string{controller.AppliedConfigHashAnnotation: hash}), nil
}

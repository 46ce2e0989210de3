// Package appfixture holds the Apps the tests and the benchmark build: NewApp, as a
// user writes one, and WithEveryField, an App that sets every field, with
// EveryFieldDiffs to check its children. It does not import the testing package, so
// the benchmark's binary does not link it.
package appfixture

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// NewApp returns an App as a user writes it: a Deployment NAME-deploy of image with
// replicas, and a Service NAME-svc, everything else left to the schema's defaults.
func NewApp(namespace, name, image string, replicas int32) *appv1.App {
	return &appv1.App{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: appv1.AppSpec{
			DeploymentTemplate: &appv1.DeploymentTemplate{Name: name + "-deploy", Image: image, Replicas: &replicas},
			ServiceTemplate:    &appv1.ServiceTemplate{Name: name + "-svc"},
		},
	}
}

// WithAutoscaling sets app's spec.autoscaling: from minReplicas to maxReplicas at an
// average CPU utilization of cpuPercent, and gives the App's container the CPU request
// cpuRequest, which a utilization target needs. It returns app.
func WithAutoscaling(app *appv1.App, minReplicas, maxReplicas, cpuPercent int32, cpuRequest string) *appv1.App {
	app.Spec.Autoscaling = &appv1.Autoscaling{
		MinReplicas: &minReplicas,
		MaxReplicas: maxReplicas,
		CPU:         &appv1.ResourceTarget{AverageUtilization: &cpuPercent},
	}
	app.Spec.DeploymentTemplate.Resources = &appv1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpuRequest)},
	}
	return app
}

// CanaryStrategy is a canary rollout of three steps: setWeight 25, a pause until
// promoted, setWeight 100, with every delay and deadline the schema defaults.
func CanaryStrategy() *appv1.CanaryStrategy {
	return &appv1.CanaryStrategy{
		Steps: []appv1.CanaryStep{
			{SetWeight: ptr.To[int32](25)}, {Pause: &appv1.CanaryPause{}}, {SetWeight: ptr.To[int32](100)},
		},
		ScaleDownDelaySeconds: ptr.To[int32](30), AbortScaleDownDelaySeconds: ptr.To[int32](30),
		ProgressDeadlineSeconds: ptr.To[int32](600), ReadyDeadlineSeconds: ptr.To[int32](120), RollbackWindow: ptr.To[int32](3),
	}
}

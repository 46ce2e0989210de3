package controllermanager

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/app-controller/app-controller/pkg/controller/app"
)

const appControllerName = app.ControllerName

// startAppController builds the App controller.
func startAppController(ctx context.Context, cc *ControllerContext) (Runnable, error) {
	unmanagedDeployments, err := cc.unmanagedMetadataInformer(appsv1.SchemeGroupVersion.WithResource("deployments"))
	if err != nil {
		return nil, err
	}
	unmanagedServices, err := cc.unmanagedMetadataInformer(corev1.SchemeGroupVersion.WithResource("services"))
	if err != nil {
		return nil, err
	}
	return app.NewController(ctx, cc.KubeClient, cc.AppClient, app.Informers{
		Apps:                 cc.AppInformers.Appcontroller().V1().Apps(),
		Deployments:          cc.ManagedInformers.Apps().V1().Deployments(),
		Services:             cc.ManagedInformers.Core().V1().Services(),
		UnmanagedDeployments: unmanagedDeployments,
		UnmanagedServices:    unmanagedServices,
	}, cc.EventRecorder, app.Options{ShutdownTimeout: cc.Options.ShutdownTimeout})
}

package controllermanager

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/klog/v2"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayinformersv1 "sigs.k8s.io/gateway-api/pkg/client/informers/externalversions/apis/v1"

	"github.com/app-controller/app-controller/pkg/controller"
	"github.com/app-controller/app-controller/pkg/controller/app"
	"github.com/app-controller/app-controller/pkg/controller/ingress"
	"github.com/app-controller/app-controller/pkg/controller/nodelabel"
	"github.com/app-controller/app-controller/pkg/podhealth"
)

const (
	appControllerName       = app.ControllerName
	ingressControllerName   = ingress.ControllerName
	nodeLabelControllerName = nodelabel.ControllerName
)

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
	pods := cc.ManagedInformers.Core().V1().Pods()
	if err := pods.Informer().SetTransform(podhealth.TrimPod); err != nil {
		return nil, fmt.Errorf("setting the transform of the pod informer: %w", err)
	}
	unmanagedBudgets, err := cc.unmanagedMetadataInformer(policyv1.SchemeGroupVersion.WithResource("poddisruptionbudgets"))
	if err != nil {
		return nil, err
	}
	unmanagedIngresses, err := cc.unmanagedMetadataInformer(networkingv1.SchemeGroupVersion.WithResource("ingresses"))
	if err != nil {
		return nil, err
	}
	configMaps, err := cc.versionInformer(corev1.SchemeGroupVersion.WithResource("configmaps"))
	if err != nil {
		return nil, err
	}
	// Without --config-rollout-secrets no Secret informer: nothing lists or watches them.
	var secrets informers.GenericInformer
	if cc.Options.ConfigRolloutSecrets {
		if secrets, err = cc.versionInformer(corev1.SchemeGroupVersion.WithResource("secrets")); err != nil {
			return nil, err
		}
	} else {
		klog.FromContext(ctx).Info("Secret-driven rollouts are off (--config-rollout-secrets=false): Secrets are not watched, a change of one rolls no pods")
	}
	var httpRoutes gatewayinformersv1.HTTPRouteInformer
	var unmanagedHTTPRoutes informers.GenericInformer
	if cc.GatewayAPI {
		httpRoutes = cc.ManagedGatewayInformers.Gateway().V1().HTTPRoutes()
		if unmanagedHTTPRoutes, err = cc.unmanagedMetadataInformer(schema.GroupVersion(gatewayv1.GroupVersion).WithResource("httproutes")); err != nil {
			return nil, err
		}
	} else {
		klog.FromContext(ctx).Info("The cluster serves no Gateway API HTTPRoutes: App routes with parentRefs are refused (GatewayAPIUnavailable)", "groupVersion", gatewayv1.GroupVersion)
	}
	defaultGateway, err := cc.Options.defaultGateway()
	if err != nil {
		return nil, err
	}
	deployments := cc.ManagedInformers.Apps().V1().Deployments()
	// The App controller reads who owns a Deployment's replica count (docs/autoscaling.md).
	if err := deployments.Informer().SetTransform(controller.StripManagedFieldsButReplicas); err != nil {
		return nil, fmt.Errorf("setting the transform of the Deployment informer: %w", err)
	}
	unmanagedAutoscalers, err := cc.unmanagedMetadataInformer(autoscalingv2.SchemeGroupVersion.WithResource("horizontalpodautoscalers"))
	if err != nil {
		return nil, err
	}
	revisions := cc.ManagedInformers.Apps().V1().ControllerRevisions()
	if err := revisions.Informer().SetTransform(app.TrimRevision); err != nil {
		return nil, fmt.Errorf("setting the transform of the ControllerRevision informer: %w", err)
	}
	analyzer, err := cc.Options.analyzer()
	if err != nil {
		return nil, err
	}
	notifier, err := cc.Options.notifier()
	if err != nil {
		return nil, err
	}
	if analyzer.Prometheus == nil {
		klog.FromContext(ctx).Info("No Prometheus (--prometheus-url): a rollout that asks for a metric check is aborted as it starts (PrometheusNotConfigured)")
	}
	analysisTemplates, clusterAnalysisTemplates := cc.templateInformers(ctx)
	return app.NewController(ctx, cc.KubeClient, cc.AppClient, app.Informers{
		Apps:                       cc.AppInformers.Appcontroller().V1().Apps(),
		Deployments:                deployments,
		Services:                   cc.ManagedInformers.Core().V1().Services(),
		UnmanagedDeployments:       unmanagedDeployments,
		UnmanagedServices:          unmanagedServices,
		Pods:                       pods,
		ProbeEvents:                cc.ProbeEventInformers.Core().V1().Events(),
		ConfigMaps:                 configMaps,
		Secrets:                    secrets,
		Revisions:                  revisions,
		DisruptionBudgets:          cc.ManagedInformers.Policy().V1().PodDisruptionBudgets(),
		UnmanagedDisruptionBudgets: unmanagedBudgets,
		Ingresses:                  cc.ManagedInformers.Networking().V1().Ingresses(),
		UnmanagedIngresses:         unmanagedIngresses,
		HTTPRoutes:                 httpRoutes,
		UnmanagedHTTPRoutes:        unmanagedHTTPRoutes,
		Autoscalers:                cc.ManagedInformers.Autoscaling().V2().HorizontalPodAutoscalers(),
		UnmanagedAutoscalers:       unmanagedAutoscalers,
		AnalysisTemplates:          analysisTemplates,
		ClusterAnalysisTemplates:   clusterAnalysisTemplates,
	}, cc.EventRecorder, app.Options{ShutdownTimeout: cc.Options.ShutdownTimeout, Contest: cc.Options.AppContest,
		OwnServiceAccount: ownServiceAccount(cc.Options), SharedNamespaces: cc.Options.IngressSharedNamespaces,
		GatewayClient: cc.GatewayClient, DefaultGateway: defaultGateway, QueueName: cc.queueName(app.ControllerName),
		Analyzer: analyzer, Notifier: notifier})
}

// startIngressController builds the Service->Ingress controller, which watches every
// Service and every Ingress.
func startIngressController(ctx context.Context, cc *ControllerContext) (Runnable, error) {
	inf := ingress.Informers{
		Services:  cc.KubeInformers.Core().V1().Services(),
		Ingresses: cc.KubeInformers.Networking().V1().Ingresses(),
	}
	// This controller alone uses the informer of every Service.
	if err := inf.Services.Informer().SetTransform(ingress.TrimService); err != nil {
		return nil, fmt.Errorf("setting the transform of the Service informer: %w", err)
	}
	if cc.GatewayAPI {
		inf.HTTPRoutes = cc.ManagedGatewayInformers.Gateway().V1().HTTPRoutes()
	}
	return ingress.NewController(ctx, cc.KubeClient, inf, cc.EventRecorder, ingress.Options{IngressClass: cc.Options.IngressClass, ShutdownTimeout: cc.Options.ShutdownTimeout,
		SharedNamespaces: cc.Options.IngressSharedNamespaces, CatchAllNamespaces: cc.Options.IngressCatchAllNamespaces,
		QueueName: cc.queueName(ingress.ControllerName)})
}

// startNodeLabelController builds the node labeler from the --node-label-config file.
// Without a file it has nothing to do and is reported disabled (it watches nothing). An
// unreadable or invalid file disables the node labeler alone, with an error naming the
// rule and the field (logged, and an Event on the controller's Pod) and the gauge
// app_controller_node_label_config_valid at 0: the other controllers run. Nodes keep
// the labels the labeler applied until a valid file is loaded (a restart).
func startNodeLabelController(ctx context.Context, cc *ControllerContext) (Runnable, error) {
	if cc.Options.NodeLabelConfig == "" {
		return nil, &DisabledError{Reason: "no --node-label-config given"}
	}
	if len(cc.Options.WatchNamespaces) > 0 {
		return nil, &DisabledError{Reason: "--watch-namespace: Nodes are cluster-scoped, a namespace-scoped install does not label them"}
	}
	config, err := nodelabel.LoadConfig(cc.Options.NodeLabelConfig)
	nodelabel.RecordConfigValid(err == nil)
	if err != nil {
		return nil, &DisabledError{Reason: "invalid --node-label-config", Err: err}
	}
	klog.FromContext(ctx).Info("Loaded node label config", "path", cc.Options.NodeLabelConfig, "rules", len(config.Rules))
	return nodelabel.NewController(ctx, cc.KubeClient, cc.KubeInformers.Core().V1().Nodes(),
		config, cc.EventRecorder, nodelabel.Options{ShutdownTimeout: cc.Options.ShutdownTimeout})
}

// ownServiceAccount returns the controller's own ServiceAccount, which Apps may not run
// their pods as, or the zero name when it is not known (outside a pod).
func ownServiceAccount(o *Options) types.NamespacedName {
	if o.PodNamespace == "" || o.ServiceAccountName == "" {
		return types.NamespacedName{}
	}
	return types.NamespacedName{Namespace: o.PodNamespace, Name: o.ServiceAccountName}
}

package controllermanager

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/testutil"
	gatewayfake "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/fake"
	gatewayinformers "sigs.k8s.io/gateway-api/pkg/client/informers/externalversions"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	appfake "github.com/app-controller/app-controller/pkg/generated/clientset/versioned/fake"
	appinformers "github.com/app-controller/app-controller/pkg/generated/informers/externalversions"
)

const storeObjectsHeader = `# HELP app_controller_informer_store_objects [ALPHA] Objects in the cache of each started shared informer, by informer factory and resource (resource.group), counted at scrape time; the caches of several --watch-namespace are added up
# TYPE app_controller_informer_store_objects gauge
`

// storeContext is a ControllerContext on fake clients holding deployments Deployments,
// apps Apps and configMaps ConfigMaps (metadata only) in namespace ns, whose Deployment,
// App and ConfigMap informers are started and synced, as a controller's InitFunc and
// ControllerContext.start leave them; the Service informer is asked for but not started.
func storeContext(t *testing.T, ns string, deployments, apps, configMaps int) (*ControllerContext, *kubefake.Clientset) {
	t.Helper()
	var kubeObjects, appObjects, metadataObjects []runtime.Object
	for i := range deployments {
		kubeObjects = append(kubeObjects, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("d%d", i)}})
	}
	for i := range apps {
		appObjects = append(appObjects, &appv1.App{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("a%d", i)}})
	}
	for i := range configMaps {
		metadataObjects = append(metadataObjects, &metav1.PartialObjectMetadata{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("c%d", i)},
		})
	}
	kube := kubefake.NewClientset(kubeObjects...)
	scheme := runtime.NewScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	metadata := metadatafake.NewSimpleMetadataClient(scheme, metadataObjects...)
	cc := &ControllerContext{
		KubeInformers:              informers.NewSharedInformerFactory(kube, 0),
		ManagedInformers:           informers.NewSharedInformerFactory(kube, 0),
		ProbeEventInformers:        informers.NewSharedInformerFactory(kube, 0),
		AppInformers:               appinformers.NewSharedInformerFactory(appfake.NewClientset(appObjects...), 0),
		ManagedGatewayInformers:    gatewayinformers.NewSharedInformerFactory(gatewayfake.NewClientset(), 0),
		UnmanagedMetadataInformers: metadatainformer.NewSharedInformerFactory(metadata, 0),
		MetadataInformers:          metadatainformer.NewSharedInformerFactory(metadata, 0),
	}
	cc.ManagedInformers.Apps().V1().Deployments().Informer()
	cc.AppInformers.Appcontroller().V1().Apps().Informer()
	cc.MetadataInformers.ForResource(corev1.SchemeGroupVersion.WithResource("configmaps")).Informer()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cc.ManagedInformers.Start(ctx.Done())
	cc.AppInformers.Start(ctx.Done())
	cc.MetadataInformers.Start(ctx.Done())
	cc.ManagedInformers.WaitForCacheSync(ctx.Done())
	cc.AppInformers.WaitForCacheSync(ctx.Done())
	cc.MetadataInformers.WaitForCacheSync(ctx.Done())
	// Asked for after the start: not started, so not counted.
	cc.KubeInformers.Core().V1().Services().Informer()
	return cc, kube
}

// TestInformerStoreObjects checks app_controller_informer_store_objects: one series per
// started informer, named by factory and resource, following its cache as objects come
// and go, the caches of two contexts (two --watch-namespace) added up, and gone once a
// context shuts down.
func TestInformerStoreObjects(t *testing.T) {
	registry := metrics.NewKubeRegistry()
	collector := &storeCollector{stores: map[*ControllerContext][]informerStore{}}
	registry.CustomMustRegister(collector)
	expect := func(what string, series ...string) {
		t.Helper()
		want := ""
		if len(series) > 0 {
			want = storeObjectsHeader + strings.Join(series, "\n") + "\n"
		}
		if err := testutil.GatherAndCompare(registry, strings.NewReader(want), "app_controller_informer_store_objects"); err != nil {
			t.Errorf("%s: %v", what, err)
		}
	}

	// stores are the series of the three informers storeContext starts, with their
	// object counts in storeContext's order.
	stores := func(deployments, apps, configMaps int) []string {
		return []string{
			fmt.Sprintf(`app_controller_informer_store_objects{factory="apps",resource="apps.appcontroller.k8s.io"} %d`, apps),
			fmt.Sprintf(`app_controller_informer_store_objects{factory="managed",resource="deployments.apps"} %d`, deployments),
			fmt.Sprintf(`app_controller_informer_store_objects{factory="metadata",resource="configmaps"} %d`, configMaps),
		}
	}

	a, kube := storeContext(t, "team-a", 3, 2, 1)
	collector.add(a, a.startedStores())
	expect("one context", stores(3, 2, 1)...)

	if err := kube.AppsV1().Deployments("team-a").Delete(context.Background(), "d0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deployments := a.ManagedInformers.Apps().V1().Deployments().Informer().GetStore()
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return len(deployments.ListKeys()) == 2, nil
	}); err != nil {
		t.Fatalf("the Deployment informer still holds %d objects", len(deployments.ListKeys()))
	}
	expect("a Deployment deleted", stores(2, 2, 1)...)

	b, _ := storeContext(t, "team-b", 1, 5, 0)
	collector.add(b, b.startedStores())
	expect("two contexts added up", stores(3, 7, 1)...)

	collector.remove(a)
	expect("the first context shut down", stores(1, 5, 0)...)
	collector.remove(b)
	expect("every context shut down")
}

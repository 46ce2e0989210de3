package cluster

import (
	"context"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	chart "github.com/app-controller/app-controller/test/chart"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// installServiceMonitorCRD installs a stand-in for the Prometheus Operator's
// ServiceMonitor CRD (monitoring.coreos.com/v1, any fields), so that the API server can
// take a ServiceMonitor. It stays until the control plane stops.
func installServiceMonitorCRD(t *testing.T) {
	t.Helper()
	client, err := apiextensionsclient.NewForConfig(framework.Config(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "servicemonitors.monitoring.coreos.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "monitoring.coreos.com",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "servicemonitors", Singular: "servicemonitor", Kind: "ServiceMonitor", ListKind: "ServiceMonitorList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: new(true),
				}},
			}},
		},
	}
	if _, err := client.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, func() (bool, error) {
		got, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range got.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
}

// TestServerSideDryRun renders the chart with the default values and with each ci/ file
// and has the API server take every object in a server-side dry run: the schemas of the
// built-in types and of the CRDs, defaulting and admission all accept them.
func TestServerSideDryRun(t *testing.T) {
	installServiceMonitorCRD(t)
	a := newApplier(t)
	ctx := context.Background()
	for _, tt := range []struct {
		file        string
		apiVersions []string
		wantKinds   []string
	}{
		{file: "", wantKinds: []string{"CustomResourceDefinition", "Deployment", "PodDisruptionBudget", "Service"}},
		{file: "ci/one-controller-values.yaml", wantKinds: []string{"ConfigMap"}},
		{file: "ci/servicemonitor-values.yaml", apiVersions: []string{chart.ServiceMonitorAPI}, wantKinds: []string{"ServiceMonitor"}},
		{file: "ci/digest-values.yaml", wantKinds: []string{"Deployment"}},
	} {
		t.Run("values="+tt.file, func(t *testing.T) {
			ns := framework.Namespace(t)
			r, err := chart.Render(chart.Options{Namespace: ns, ValuesFile: tt.file, APIVersions: tt.apiVersions})
			if err != nil {
				t.Fatal(err)
			}
			kinds := map[string]bool{}
			for _, obj := range r.Objects {
				kinds[obj.GetKind()] = true
				if _, err := a.apply(ctx, obj, ns, true); err != nil {
					t.Error(err)
				}
			}
			for _, kind := range tt.wantKinds {
				if !kinds[kind] {
					t.Errorf("no %s rendered", kind)
				}
			}
			t.Logf("%d objects taken in a dry run", len(r.Objects))
		})
	}
}

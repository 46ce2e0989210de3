package localcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
)

// crdEstablishTimeout bounds the wait for the CRDs to be Established.
const crdEstablishTimeout = 60 * time.Second

// InstallCRDs creates or updates every CustomResourceDefinition in the *.yaml files of
// dir and waits until all of them are Established.
func InstallCRDs(ctx context.Context, cfg *rest.Config, dir string) error {
	crds, err := ReadCRDs(dir)
	if err != nil {
		return err
	}
	return installCRDs(ctx, cfg, crds)
}

// InstallCRDFiles creates or updates every CustomResourceDefinition of files and waits
// until all of them are Established (for a directory that holds other manifests too).
func InstallCRDFiles(ctx context.Context, cfg *rest.Config, files []string) error {
	crds, err := readCRDFiles(files)
	if err != nil {
		return err
	}
	if len(crds) == 0 {
		return fmt.Errorf("no CustomResourceDefinitions in %v", files)
	}
	return installCRDs(ctx, cfg, crds)
}

// InstallGatewayAPICRDs installs the Gateway API's standard CRDs from dir
// (GatewayAPICRDDir) and waits until they are Established.
func InstallGatewayAPICRDs(ctx context.Context, cfg *rest.Config, dir string) error {
	files, err := gatewayAPICRDFiles(dir)
	if err != nil {
		return err
	}
	crds, err := readCRDFiles(files)
	if err != nil {
		return err
	}
	return installCRDs(ctx, cfg, crds)
}

// installCRDs creates or updates crds and waits until all of them are Established.
func installCRDs(ctx context.Context, cfg *rest.Config, crds []*apiextensionsv1.CustomResourceDefinition) error {
	client, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("making an apiextensions client: %w", err)
	}
	api := client.ApiextensionsV1().CustomResourceDefinitions()
	for _, crd := range crds {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			existing, err := api.Get(ctx, crd.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				_, err = api.Create(ctx, crd, metav1.CreateOptions{})
				return err
			}
			if err != nil {
				return err
			}
			update := crd.DeepCopy()
			update.ResourceVersion = existing.ResourceVersion
			_, err = api.Update(ctx, update, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("installing CRD %s: %w", crd.Name, err)
		}
	}
	for _, crd := range crds {
		var last string
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, crdEstablishTimeout, true, func(ctx context.Context) (bool, error) {
			got, err := api.Get(ctx, crd.Name, metav1.GetOptions{})
			if err != nil {
				last = err.Error()
				return false, nil
			}
			for _, c := range got.Status.Conditions {
				if c.Type == apiextensionsv1.Established {
					last = fmt.Sprintf("Established=%s: %s", c.Status, c.Message)
					return c.Status == apiextensionsv1.ConditionTrue, nil
				}
				if c.Type == apiextensionsv1.NamesAccepted && c.Status == apiextensionsv1.ConditionFalse {
					return false, fmt.Errorf("names not accepted: %s", c.Message)
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("waiting for CRD %s to be Established (last seen: %s): %w", crd.Name, last, err)
		}
	}
	return nil
}

// ReadCRDs decodes the CustomResourceDefinitions in the *.yaml files of dir (several
// documents per file allowed), sorted by file name.
func ReadCRDs(dir string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, fmt.Errorf("listing CRD files: %w", err)
	}
	sort.Strings(files)
	crds, err := readCRDFiles(files)
	if err != nil {
		return nil, err
	}
	if len(crds) == 0 {
		return nil, fmt.Errorf("no CustomResourceDefinitions in %s/*.yaml", dir)
	}
	return crds, nil
}

// readCRDFiles decodes the CustomResourceDefinitions in files.
func readCRDFiles(files []string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, file := range files {
		f, err := os.Open(file)
		if err != nil {
			return nil, fmt.Errorf("reading CRDs: %w", err)
		}
		decoder := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
		for {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			err := decoder.Decode(crd)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				_ = f.Close()
				return nil, fmt.Errorf("decoding %s: %w", file, err)
			}
			if crd.Kind == "" && crd.Name == "" {
				continue // an empty document
			}
			if crd.Kind != "CustomResourceDefinition" || !strings.HasPrefix(crd.APIVersion, apiextensionsv1.GroupName+"/") {
				_ = f.Close()
				return nil, fmt.Errorf("%s: %s %q is not an apiextensions.k8s.io CustomResourceDefinition", file, crd.Kind, crd.Name)
			}
			crds = append(crds, crd)
		}
		_ = f.Close()
	}
	return crds, nil
}

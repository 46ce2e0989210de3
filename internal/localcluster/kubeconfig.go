package localcluster

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// kubeconfigName is the name of the cluster, user and context in the admin kubeconfig.
const kubeconfigName = "localcluster"

// adminRESTConfig returns a config that talks to the apiserver at host as the admin.
func adminRESTConfig(host string, caPEM, certPEM, keyPEM []byte) *rest.Config {
	return &rest.Config{
		Host: host,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   caPEM,
			CertData: certPEM,
			KeyData:  keyPEM,
		},
	}
}

// writeKubeconfig writes a self-contained kubeconfig (certificates embedded) for cfg.
func writeKubeconfig(path string, cfg *rest.Config) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters[kubeconfigName] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthorityData: cfg.CAData,
	}
	kc.AuthInfos[kubeconfigName] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData,
		ClientKeyData:         cfg.KeyData,
	}
	kc.Contexts[kubeconfigName] = &clientcmdapi.Context{
		Cluster:  kubeconfigName,
		AuthInfo: kubeconfigName,
	}
	kc.CurrentContext = kubeconfigName
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("writing the admin kubeconfig: %w", err)
	}
	return nil
}

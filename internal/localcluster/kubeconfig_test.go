package localcluster

import (
	"bytes"
	"path/filepath"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

func TestWriteKubeconfig(t *testing.T) {
	files, err := writeCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	want := adminRESTConfig("https://127.0.0.1:40003", files.caPEM, files.adminCert, files.adminKey)
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := writeKubeconfig(path, want); err != nil {
		t.Fatal(err)
	}
	got, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatalf("loading the kubeconfig: %v", err)
	}
	if got.Host != want.Host {
		t.Errorf("Host = %q, want %q", got.Host, want.Host)
	}
	if !bytes.Equal(got.CAData, want.CAData) || !bytes.Equal(got.CertData, want.CertData) || !bytes.Equal(got.KeyData, want.KeyData) {
		t.Error("the kubeconfig does not carry the CA, client certificate and key")
	}
}

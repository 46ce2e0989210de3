package localcluster

import (
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

func TestWriteCerts(t *testing.T) {
	dir := t.TempDir()
	files, err := writeCerts(filepath.Join(dir, "certs"))
	if err != nil {
		t.Fatalf("writeCerts: %v", err)
	}
	roots, err := cert.NewPool(files.CACert)
	if err != nil {
		t.Fatalf("loading the CA: %v", err)
	}
	load := func(t *testing.T, certFile, keyFile string) *x509.Certificate {
		t.Helper()
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			t.Fatalf("certificate and key do not match: %v", err)
		}
		c, err := x509.ParseCertificate(pair.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	t.Run("CA is a CA", func(t *testing.T) {
		ca := load(t, files.CACert, files.CAKey)
		if !ca.IsCA || ca.KeyUsage&x509.KeyUsageCertSign == 0 {
			t.Errorf("CA certificate: IsCA=%v, KeyUsage=%v", ca.IsCA, ca.KeyUsage)
		}
	})

	serving := load(t, files.ServingCert, files.ServingKey)
	servingTests := []struct {
		name    string
		dnsName string
		wantErr bool
	}{
		{"loopback IPv4", "127.0.0.1", false},
		{"loopback IPv6", "::1", false},
		{"localhost", "localhost", false},
		{"kubernetes.default", "kubernetes.default", false},
		{"in-cluster FQDN", "kubernetes.default.svc.cluster.local", false},
		{"kubernetes Service IP", "10.96.0.1", false},
		{"unrelated name", "example.com", true},
		{"unrelated IP", "10.0.0.1", true},
	}
	for _, tt := range servingTests {
		t.Run("serving cert for "+tt.name, func(t *testing.T) {
			_, err := serving.Verify(x509.VerifyOptions{
				DNSName:   tt.dnsName,
				Roots:     roots,
				KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			})
			if (err != nil) != tt.wantErr {
				t.Errorf("Verify(%s) error = %v, wantErr %v", tt.dnsName, err, tt.wantErr)
			}
		})
	}

	t.Run("admin cert is a system:masters client cert", func(t *testing.T) {
		admin := load(t, files.AdminCert, files.AdminKey)
		if _, err := admin.Verify(x509.VerifyOptions{
			Roots:     roots,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}); err != nil {
			t.Errorf("admin certificate does not verify as a client certificate: %v", err)
		}
		if !slices.Contains(admin.Subject.Organization, "system:masters") {
			t.Errorf("admin certificate organizations = %v, want system:masters", admin.Subject.Organization)
		}
		if admin.Subject.CommonName == "" {
			t.Error("admin certificate has no common name (the user name)")
		}
		if _, err := admin.Verify(x509.VerifyOptions{
			Roots:     roots,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		}); err == nil {
			t.Error("admin certificate verifies as a server certificate, want client only")
		}
	})

	t.Run("front-proxy client cert is of its own CA", func(t *testing.T) {
		proxy := load(t, files.FrontProxyClientCert, files.FrontProxyClientKey)
		if proxy.Subject.CommonName != "front-proxy-client" {
			t.Errorf("front-proxy client certificate CN = %q, want front-proxy-client", proxy.Subject.CommonName)
		}
		proxyRoots, err := cert.NewPool(files.FrontProxyCACert)
		if err != nil {
			t.Fatal(err)
		}
		client := x509.VerifyOptions{KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
		client.Roots = proxyRoots
		if _, err := proxy.Verify(client); err != nil {
			t.Errorf("front-proxy client certificate does not verify against the front-proxy CA: %v", err)
		}
		client.Roots = roots
		if _, err := proxy.Verify(client); err == nil {
			t.Error("front-proxy client certificate verifies against the cluster's CA, want its own CA only")
		}
		admin := load(t, files.AdminCert, files.AdminKey)
		client.Roots = proxyRoots
		if _, err := admin.Verify(client); err == nil {
			t.Error("the admin certificate verifies against the front-proxy CA: it could pass for the apiserver")
		}
	})

	t.Run("service-account key pair is RSA and matches", func(t *testing.T) {
		priv, err := keyutil.PrivateKeyFromFile(files.ServiceAccountPrivateKey)
		if err != nil {
			t.Fatal(err)
		}
		rsaPriv, ok := priv.(*rsa.PrivateKey)
		if !ok {
			t.Fatalf("service-account private key is %T, want *rsa.PrivateKey", priv)
		}
		if rsaPriv.N.BitLen() < 2048 {
			t.Errorf("service-account key has %d bits, want >= 2048", rsaPriv.N.BitLen())
		}
		pubs, err := keyutil.PublicKeysFromFile(files.ServiceAccountPublicKey)
		if err != nil {
			t.Fatal(err)
		}
		if len(pubs) != 1 || !rsaPriv.PublicKey.Equal(pubs[0]) {
			t.Errorf("service-account public key does not match the private key")
		}
	})

	t.Run("private keys are not world-readable", func(t *testing.T) {
		for _, f := range []string{files.CAKey, files.ServingKey, files.AdminKey, files.ServiceAccountPrivateKey, files.FrontProxyClientKey} {
			info, err := os.Stat(f)
			if err != nil {
				t.Fatal(err)
			}
			if info.Mode().Perm()&0o077 != 0 {
				t.Errorf("%s has mode %v", filepath.Base(f), info.Mode().Perm())
			}
		}
	})
}

func TestCertsFromDifferentCAsDoNotVerify(t *testing.T) {
	a, err := writeCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b, err := writeCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rootsA, err := cert.NewPool(a.CACert)
	if err != nil {
		t.Fatal(err)
	}
	certsB, err := cert.CertsFromFile(b.ServingCert)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := certsB[0].Verify(x509.VerifyOptions{DNSName: "127.0.0.1", Roots: rootsA}); err == nil {
		t.Error("a serving certificate of another CA verifies")
	}
}

package localcluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/util/keyutil"
)

// servingDNSNames and servingIPs are the names the apiserver serving certificate is valid
// for. The same certificate serves the controller-manager's and scheduler's health ports.
var (
	servingDNSNames = []string{
		"localhost",
		"kubernetes",
		"kubernetes.default",
		"kubernetes.default.svc",
		"kubernetes.default.svc.cluster.local",
	}
	servingIPs = []net.IP{
		net.ParseIP("127.0.0.1"),
		net.IPv6loopback,
		net.ParseIP("10.96.0.1"), // first address of --service-cluster-ip-range
	}
)

// AdminUser is the user of the admin client certificate, which the control plane's
// components (kube-controller-manager, kube-scheduler, kwok) and Cluster.Config share:
// the audit log tells them apart by user agent.
const AdminUser = adminUser

// adminUser and adminGroup identify the admin client certificate.
const (
	adminUser  = "localcluster-admin"
	adminGroup = "system:masters"
)

// frontProxyClient is the common name of the apiserver's client certificate for the
// aggregation layer (--proxy-client-cert-file): an extension API server such as
// metrics-server believes the user that the apiserver names in the request's headers
// only from a client with this name, signed by the front-proxy CA. The CA is its own,
// as kubeadm makes it: a client certificate of the cluster's CA cannot pass for the
// apiserver.
const frontProxyClient = "front-proxy-client"

// keyPair is a certificate with its private key.
type keyPair struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// CertPEM returns the certificate PEM-encoded.
func (kp keyPair) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: kp.Cert.Raw})
}

// KeyPEM returns the private key PEM-encoded.
func (kp keyPair) KeyPEM() ([]byte, error) {
	return keyutil.MarshalPrivateKeyToPEM(kp.Key)
}

// certFiles are the certificate and key files written by writeCerts, plus the PEM data
// the admin kubeconfig embeds.
type certFiles struct {
	CACert, CAKey              string
	ServingCert, ServingKey    string
	AdminCert, AdminKey        string
	ServiceAccountPrivateKey   string
	ServiceAccountPublicKey    string
	FrontProxyCACert           string
	FrontProxyClientCert       string
	FrontProxyClientKey        string
	caPEM, adminCert, adminKey []byte
}

// writeCerts makes a CA, a serving certificate for the apiserver, an admin client
// certificate, an RSA service-account key pair, and the front-proxy CA with the
// apiserver's client certificate for the aggregation layer, and writes them into dir.
func writeCerts(dir string) (*certFiles, error) {
	now := time.Now()
	ca, err := newCA("localcluster-ca", now)
	if err != nil {
		return nil, fmt.Errorf("making the CA: %w", err)
	}
	serving, err := newServingCert(ca, "kube-apiserver", servingDNSNames, servingIPs, now)
	if err != nil {
		return nil, fmt.Errorf("making the apiserver serving certificate: %w", err)
	}
	admin, err := newClientCert(ca, adminUser, []string{adminGroup}, now)
	if err != nil {
		return nil, fmt.Errorf("making the admin client certificate: %w", err)
	}
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("making the service-account key: %w", err)
	}
	frontProxyCA, err := newCA("localcluster-front-proxy-ca", now)
	if err != nil {
		return nil, fmt.Errorf("making the front-proxy CA: %w", err)
	}
	frontProxy, err := newClientCert(frontProxyCA, frontProxyClient, nil, now)
	if err != nil {
		return nil, fmt.Errorf("making the front-proxy client certificate: %w", err)
	}

	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating the certificate directory: %w", err)
	}
	files := &certFiles{
		CACert:                   filepath.Join(dir, "ca.crt"),
		CAKey:                    filepath.Join(dir, "ca.key"),
		ServingCert:              filepath.Join(dir, "apiserver.crt"),
		ServingKey:               filepath.Join(dir, "apiserver.key"),
		AdminCert:                filepath.Join(dir, "admin.crt"),
		AdminKey:                 filepath.Join(dir, "admin.key"),
		ServiceAccountPrivateKey: filepath.Join(dir, "sa.key"),
		ServiceAccountPublicKey:  filepath.Join(dir, "sa.pub"),
		FrontProxyCACert:         filepath.Join(dir, "front-proxy-ca.crt"),
		FrontProxyClientCert:     filepath.Join(dir, "front-proxy-client.crt"),
		FrontProxyClientKey:      filepath.Join(dir, "front-proxy-client.key"),
	}
	files.caPEM = ca.CertPEM()
	files.adminCert = admin.CertPEM()
	if files.adminKey, err = admin.KeyPEM(); err != nil {
		return nil, fmt.Errorf("encoding the admin key: %w", err)
	}
	saPrivPEM, err := keyutil.MarshalPrivateKeyToPEM(saKey)
	if err != nil {
		return nil, fmt.Errorf("encoding the service-account key: %w", err)
	}
	saPubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("encoding the service-account public key: %w", err)
	}

	writes := []struct {
		path string
		data func() ([]byte, error)
	}{
		{files.CACert, func() ([]byte, error) { return files.caPEM, nil }},
		{files.CAKey, ca.KeyPEM},
		{files.ServingCert, func() ([]byte, error) { return serving.CertPEM(), nil }},
		{files.ServingKey, serving.KeyPEM},
		{files.AdminCert, func() ([]byte, error) { return files.adminCert, nil }},
		{files.AdminKey, func() ([]byte, error) { return files.adminKey, nil }},
		{files.ServiceAccountPrivateKey, func() ([]byte, error) { return saPrivPEM, nil }},
		{files.ServiceAccountPublicKey, func() ([]byte, error) {
			return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPubDER}), nil
		}},
		{files.FrontProxyCACert, func() ([]byte, error) { return frontProxyCA.CertPEM(), nil }},
		{files.FrontProxyClientCert, func() ([]byte, error) { return frontProxy.CertPEM(), nil }},
		{files.FrontProxyClientKey, frontProxy.KeyPEM},
	}
	for _, w := range writes {
		data, err := w.data()
		if err != nil {
			return nil, fmt.Errorf("encoding %s: %w", filepath.Base(w.path), err)
		}
		if err := os.WriteFile(w.path, data, 0o600); err != nil {
			return nil, fmt.Errorf("writing %s: %w", filepath.Base(w.path), err)
		}
	}
	return files, nil
}

// newCA returns a self-signed CA certificate valid for ten years.
func newCA(commonName string, now time.Time) (keyPair, error) {
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	return signCert(tmpl, keyPair{})
}

// newServingCert returns a server certificate signed by ca for the given names and IPs.
func newServingCert(ca keyPair, commonName string, dnsNames []string, ips []net.IP, now time.Time) (keyPair, error) {
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: commonName},
		NotBefore:   now.Add(-time.Hour),
		NotAfter:    now.Add(365 * 24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    dnsNames,
		IPAddresses: ips,
	}
	return signCert(tmpl, ca)
}

// newClientCert returns a client certificate signed by ca. Kubernetes takes the user
// name from the common name and the groups from the organizations.
func newClientCert(ca keyPair, user string, groups []string, now time.Time) (keyPair, error) {
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: user, Organization: groups},
		NotBefore:   now.Add(-time.Hour),
		NotAfter:    now.Add(365 * 24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	return signCert(tmpl, ca)
}

// signCert makes a fresh ECDSA P-256 key and signs tmpl with parent, or self-signs it
// when parent has no certificate.
func signCert(tmpl *x509.Certificate, parent keyPair) (keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return keyPair{}, fmt.Errorf("generating key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return keyPair{}, fmt.Errorf("generating serial number: %w", err)
	}
	tmpl.SerialNumber = serial
	parentCert, signer := tmpl, crypto.Signer(key)
	if parent.Cert != nil {
		parentCert, signer = parent.Cert, parent.Key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parentCert, key.Public(), signer)
	if err != nil {
		return keyPair{}, fmt.Errorf("signing certificate %q: %w", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return keyPair{}, fmt.Errorf("parsing certificate %q: %w", tmpl.Subject.CommonName, err)
	}
	return keyPair{Cert: cert, Key: key}, nil
}

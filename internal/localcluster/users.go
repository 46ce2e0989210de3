package localcluster

import (
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/keyutil"
)

// UserConfig returns a client config that authenticates to the cluster's apiserver as
// user, member of groups, with a client certificate signed by the cluster's CA and made
// now. Requests of distinct users are told apart in the apiserver's audit log (see
// Options.AuditUsers); a user in the group system:masters may do anything.
func (c *Cluster) UserConfig(user string, groups ...string) (*rest.Config, error) {
	if c.certs == nil {
		return nil, errors.New("making a user's client config: the cluster has no certificates")
	}
	ca, err := loadKeyPair(c.certs.CACert, c.certs.CAKey)
	if err != nil {
		return nil, fmt.Errorf("making a client certificate for %s: %w", user, err)
	}
	kp, err := newClientCert(ca, user, groups, time.Now())
	if err != nil {
		return nil, fmt.Errorf("making a client certificate for %s: %w", user, err)
	}
	keyPEM, err := kp.KeyPEM()
	if err != nil {
		return nil, fmt.Errorf("encoding the key of %s: %w", user, err)
	}
	return adminRESTConfig(c.Config.Host, c.certs.caPEM, kp.CertPEM(), keyPEM), nil
}

// WriteKubeconfig writes a self-contained kubeconfig (certificates embedded) for cfg, a
// config returned by Cluster.UserConfig or Cluster.Config, to path.
func WriteKubeconfig(path string, cfg *rest.Config) error {
	return writeKubeconfig(path, cfg)
}

// loadKeyPair reads a PEM certificate and its PEM private key.
func loadKeyPair(certFile, keyFile string) (keyPair, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return keyPair{}, fmt.Errorf("reading the CA certificate: %w", err)
	}
	block, _ := pem.Decode(certPEM)
	if block == nil {
		return keyPair{}, fmt.Errorf("no PEM block in %s", certFile)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return keyPair{}, fmt.Errorf("parsing %s: %w", certFile, err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return keyPair{}, fmt.Errorf("reading the CA key: %w", err)
	}
	key, err := keyutil.ParsePrivateKeyPEM(keyPEM)
	if err != nil {
		return keyPair{}, fmt.Errorf("parsing %s: %w", keyFile, err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return keyPair{}, fmt.Errorf("the key of %s cannot sign", keyFile)
	}
	return keyPair{Cert: cert, Key: signer}, nil
}

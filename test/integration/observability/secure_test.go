package observability

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/cert"
	"sigs.k8s.io/yaml"

	"github.com/app-controller/app-controller/pkg/controllermanager"
	"github.com/app-controller/app-controller/test/integration/framework"
)

// TestSecureMetrics runs the manager with --metrics-secure and a given certificate, and
// checks that /metrics answers over HTTPS to a ServiceAccount bound to the shipped
// metrics reader ClusterRole (200), and refuses no token (401), a token the API server
// does not know (401) and a ServiceAccount without the permission (403).
func TestSecureMetrics(t *testing.T) {
	ctx := context.Background()
	kube := framework.Client(t)
	ns := framework.Namespace(t)

	// The shipped ClusterRole, under a name of this test's.
	data, err := os.ReadFile("../../../config/prometheus/metrics_reader_role.yaml")
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.UnmarshalStrict(data, role); err != nil {
		t.Fatal(err)
	}
	role.Name = ns + "-metrics-reader"
	if _, err := kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.RbacV1().ClusterRoles().Delete(context.Background(), role.Name, metav1.DeleteOptions{})
	})
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: "reader"}},
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
	})
	token := func(name string) string {
		t.Helper()
		if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tr, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: new(int64(600))},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	reader, other := token("reader"), token("other")

	// A serving certificate of the test's, so that the client verifies the server.
	certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey("localhost", nil, []string{"localhost"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(certPEM) {
		t.Fatal("bad test certificate")
	}

	addr := framework.FreeAddr(t)
	opts := controllermanager.NewOptions()
	opts.MetricsBindAddress = addr
	opts.MetricsSecure = true
	opts.MetricsCertFile, opts.MetricsKeyFile = certFile, keyFile
	framework.StartAppController(t, framework.Config(t), opts)

	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "localhost", MinVersion: tls.VersionTLS12}}}
	get := func(bearer string) (int, string, error) {
		req, err := http.NewRequest(http.MethodGet, "https://"+addr+"/metrics", nil)
		if err != nil {
			return 0, "", err
		}
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), err
	}
	// The server is up once it answers at all.
	framework.Eventually(t, converge, func() (bool, error) {
		_, _, err := get("")
		return err == nil, nil
	})

	tests := []struct {
		name     string
		token    string
		want     int
		wantBody string
	}{
		{name: "token allowed", token: reader, want: http.StatusOK, wantBody: "controller_runtime_reconcile_total"},
		{name: "no token", want: http.StatusUnauthorized},
		{name: "unknown token", token: "not-a-token", want: http.StatusUnauthorized},
		{name: "token without the permission", token: other, want: http.StatusForbidden, wantBody: "system:serviceaccount:" + ns + ":other"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body, err := get(tt.token)
			if err != nil {
				t.Fatal(err)
			}
			if code != tt.want || !strings.Contains(body, tt.wantBody) {
				t.Errorf("GET /metrics: %d, want %d with %q; body: %.300s", code, tt.want, tt.wantBody, body)
			}
		})
	}

	// Plain HTTP is not served.
	if resp, err := http.Get("http://" + addr + "/metrics"); err == nil {
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("plain HTTP /metrics answered 200")
		}
	}
}

package controllermanager

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/cert"
	"k8s.io/klog/v2"
)

// RBAC of --metrics-secure: the controller asks the API server who a scraper's bearer
// token belongs to (TokenReview) and whether that user may get /metrics
// (SubjectAccessReview), as kube-controller-manager's delegated authentication and
// authorization do.
//
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// metricsTLSConfig returns the TLS configuration of the secure metrics endpoint: the
// certificate and key files if given, else a self-signed certificate made in memory.
func metricsTLSConfig(certFile, keyFile string) (*tls.Config, error) {
	var certPEM, keyPEM []byte
	var err error
	switch {
	case certFile != "" && keyFile != "":
		if certPEM, err = os.ReadFile(certFile); err != nil {
			return nil, fmt.Errorf("reading the metrics certificate: %w", err)
		}
		if keyPEM, err = os.ReadFile(keyFile); err != nil {
			return nil, fmt.Errorf("reading the metrics private key: %w", err)
		}
	case certFile != "" || keyFile != "":
		return nil, fmt.Errorf("--metrics-tls-cert-file and --metrics-tls-private-key-file go together")
	default:
		host, _ := os.Hostname()
		if certPEM, keyPEM, err = cert.GenerateSelfSignedCertKey(host, nil, []string{"localhost"}); err != nil {
			return nil, fmt.Errorf("generating a self-signed metrics certificate: %w", err)
		}
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("loading the metrics certificate: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, nil
}

// authorizeMetrics serves next only to requests whose bearer token the API server
// authenticates (TokenReview) for a user allowed to get the request's non-resource path
// (SubjectAccessReview, e.g. a ClusterRole with nonResourceURLs: ["/metrics"], verbs:
// ["get"]): no or an unknown token gets 401, a user without the permission 403.
func authorizeMetrics(client kubernetes.Interface, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		logger := klog.FromContext(r.Context())
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || strings.TrimSpace(token) == "" {
			http.Error(w, "Unauthorized: a bearer token is required", http.StatusUnauthorized)
			return
		}
		review, err := client.AuthenticationV1().TokenReviews().Create(r.Context(), &authenticationv1.TokenReview{
			Spec: authenticationv1.TokenReviewSpec{Token: strings.TrimSpace(token)},
		}, metav1.CreateOptions{})
		if err != nil {
			logger.Error(err, "Authenticating a metrics request failed")
			http.Error(w, "Authentication failed", http.StatusInternalServerError)
			return
		}
		if !review.Status.Authenticated {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		user := review.Status.User
		extra := map[string]authorizationv1.ExtraValue{}
		for k, v := range user.Extra {
			extra[k] = authorizationv1.ExtraValue(v)
		}
		verb := strings.ToLower(r.Method)
		sar, err := client.AuthorizationV1().SubjectAccessReviews().Create(r.Context(), &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{
				User: user.Username, UID: user.UID, Groups: user.Groups, Extra: extra,
				NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: r.URL.Path, Verb: verb},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			logger.Error(err, "Authorizing a metrics request failed", "user", user.Username)
			http.Error(w, "Authorization failed", http.StatusInternalServerError)
			return
		}
		if !sar.Status.Allowed {
			http.Error(w, fmt.Sprintf("Forbidden: user %q may not %s %s", user.Username, verb, r.URL.Path), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

package controllermanager

import (
	"net/http"
	"net/http/httptest"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
)

// TestAuthorizeMetrics checks the answers of the secure metrics endpoint for each kind
// of caller, and what it asks the API server.
func TestAuthorizeMetrics(t *testing.T) {
	tests := []struct {
		name     string
		header   string
		want     int
		wantSARs int
	}{
		{name: "no header", want: http.StatusUnauthorized},
		{name: "not a bearer token", header: "Basic dXNlcjpwdw==", want: http.StatusUnauthorized},
		{name: "unknown token", header: "Bearer unknown", want: http.StatusUnauthorized},
		{name: "user without the permission", header: "Bearer denied", want: http.StatusForbidden, wantSARs: 1},
		{name: "allowed user", header: "Bearer allowed", want: http.StatusOK, wantSARs: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset()
			client.PrependReactor("create", "tokenreviews", func(action core.Action) (bool, runtime.Object, error) {
				review := action.(core.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
				if review.Spec.Token == "allowed" || review.Spec.Token == "denied" {
					review.Status = authenticationv1.TokenReviewStatus{Authenticated: true,
						User: authenticationv1.UserInfo{Username: review.Spec.Token, Groups: []string{"g"}}}
				}
				return true, review, nil
			})
			var sars []*authorizationv1.SubjectAccessReview
			client.PrependReactor("create", "subjectaccessreviews", func(action core.Action) (bool, runtime.Object, error) {
				sar := action.(core.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
				sars = append(sars, sar)
				sar.Status.Allowed = sar.Spec.User == "allowed"
				return true, sar, nil
			})
			handler := authorizeMetrics(client, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				_, _ = w.Write([]byte("metrics"))
			}))
			req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
			if tt.header != "" {
				req.Header.Set("Authorization", tt.header)
			}
			rec := httptest.NewRecorder()
			handler.ServeHTTP(rec, req)
			if rec.Code != tt.want {
				t.Errorf("status %d, want %d (%s)", rec.Code, tt.want, rec.Body)
			}
			if len(sars) != tt.wantSARs {
				t.Fatalf("%d SubjectAccessReviews, want %d", len(sars), tt.wantSARs)
			}
			for _, sar := range sars {
				attrs := sar.Spec.NonResourceAttributes
				if attrs == nil || attrs.Path != "/metrics" || attrs.Verb != "get" || len(sar.Spec.Groups) != 1 {
					t.Errorf("SubjectAccessReview spec %+v, want get /metrics for the user and its groups", sar.Spec)
				}
			}
		})
	}
}

// TestMetricsTLSConfig checks the self-signed default and the given files.
func TestMetricsTLSConfig(t *testing.T) {
	cfg, err := metricsTLSConfig("", "")
	if err != nil || len(cfg.Certificates) != 1 {
		t.Fatalf("self-signed: %v, %+v", err, cfg)
	}
	if _, err := metricsTLSConfig("cert.pem", ""); err == nil {
		t.Error("a certificate without its key was accepted")
	}
	if _, err := metricsTLSConfig("/nonexistent/cert.pem", "/nonexistent/key.pem"); err == nil {
		t.Error("missing files were accepted")
	}
}

package analysis

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"k8s.io/utils/ptr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// WebhookRequest is the JSON body a webhook check POSTs: what the gate is asked about.
type WebhookRequest struct {
	Namespace string `json:"namespace"`
	App       string `json:"app"`
	Check     string `json:"check"`
	// Revision is the canary's revision, Step the rollout's step (from 0).
	Revision string `json:"revision"`
	Step     int32  `json:"step"`
}

// callWebhook makes one measurement of a webhook check: a call, and its retries while
// the answer is not 2xx. 2xx passes; anything else fails.
func (a *Analyzer) callWebhook(ctx context.Context, c *appv1.AnalysisCheck, t Target) Measurement {
	w := c.Webhook
	body, err := json.Marshal(WebhookRequest{Namespace: t.Namespace, App: t.App, Check: c.Name, Revision: t.Revision, Step: t.Step})
	if err != nil {
		return Measurement{Phase: appv1.AnalysisError, Message: fmt.Sprintf("check %s: encoding the webhook's body: %v", c.Name, err)}
	}
	client := http.DefaultClient
	if a != nil && a.HTTP != nil {
		client = a.HTTP
	}
	timeout := time.Duration(ptr.Deref(w.TimeoutSeconds, 10)) * time.Second
	calls := 1 + int(ptr.Deref(w.Retries, 2))
	var last string
	for i := range calls {
		if i > 0 && ctx.Err() != nil {
			break
		}
		code, err := post(ctx, client, w.URL, body, timeout)
		switch {
		case err != nil:
			last = err.Error()
		case code >= 200 && code < 300:
			return Measurement{Phase: appv1.AnalysisPassed, Value: fmt.Sprintf("HTTP %d", code), Threshold: "2xx", Query: w.URL,
				Message: fmt.Sprintf("webhook %s answered %d", c.Name, code)}
		default:
			last = fmt.Sprintf("HTTP %d", code)
		}
	}
	return Measurement{Phase: appv1.AnalysisFailed, Value: last, Threshold: "2xx", Query: w.URL,
		Message: fmt.Sprintf("webhook %s answered %s (%d calls)", c.Name, last, calls)}
}

// post POSTs body to url within timeout and returns the answer's status code.
func post(ctx context.Context, client *http.Client, url string, body []byte, timeout time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("building the request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("calling %s: %w", url, err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

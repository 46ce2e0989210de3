package plugin

import (
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// APIError is an error the API server returned to a write; the plugin prints it as
// kubectl does, not as "error: ...".
type APIError struct {
	Err error
}

// Error returns the server's error.
func (e *APIError) Error() string { return e.Err.Error() }

// Unwrap returns the server's error.
func (e *APIError) Unwrap() error { return e.Err }

// kubectlMessage formats err as kubectl's error handler does (cmdutil.CheckErr): an
// invalid object lists its causes ("The App "x" is invalid: field: message"), another
// server error says its reason ("Error from server (AlreadyExists): ..."), anything else
// is "error: ...". The message ends with a newline.
func kubectlMessage(err error) string {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return fmt.Sprintf("error: %v\n", err)
	}
	s := status.Status()
	if s.Reason == metav1.StatusReasonInvalid {
		prefix := "The request is invalid"
		if d := s.Details; d != nil {
			prefix = fmt.Sprintf("The %s %q is invalid", d.Kind, d.Name)
		}
		var causes []string
		if s.Details != nil {
			for _, c := range s.Details.Causes {
				if c.Field == "" {
					causes = append(causes, c.Message)
				} else {
					causes = append(causes, fmt.Sprintf("%s: %s", c.Field, c.Message))
				}
			}
		}
		switch len(causes) {
		case 0:
			return fmt.Sprintf("%s: %s\n", prefix, s.Message)
		case 1:
			return fmt.Sprintf("%s: %s\n", prefix, causes[0])
		}
		var b strings.Builder
		fmt.Fprintf(&b, "%s: \n", prefix)
		for _, c := range causes {
			fmt.Fprintf(&b, "* %s\n", c)
		}
		return b.String()
	}
	switch {
	case s.Reason == metav1.StatusReasonUnauthorized:
		return fmt.Sprintf("error: You must be logged in to the server (%s)\n", s.Message)
	case s.Reason != "":
		return fmt.Sprintf("Error from server (%s): %s\n", s.Reason, s.Message)
	}
	return fmt.Sprintf("Error from server: %s\n", s.Message)
}

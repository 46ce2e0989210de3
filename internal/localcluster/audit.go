package localcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// auditPolicyFile and auditLogFile are the audit policy (in StateDir) and the audit log
// (in LogDir) written when Options.AuditUsers is set.
const (
	auditPolicyFile = "audit-policy.yaml"
	auditLogFile    = "audit.log"
)

// auditPolicy returns an audit policy that records, at the Metadata level and only once
// the response is complete, every request of users that is not a read (get, list,
// watch), and nothing else.
func auditPolicy(users []string) string {
	var sb strings.Builder
	sb.WriteString("apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived, ResponseStarted]\nrules:\n")
	sb.WriteString("- level: None\n  verbs: [get, list, watch]\n")
	sb.WriteString("- level: Metadata\n  users:\n")
	for _, u := range users {
		fmt.Fprintf(&sb, "  - %q\n", u)
	}
	sb.WriteString("- level: None\n")
	return sb.String()
}

// writeAuditPolicy writes the audit policy of users into stateDir and returns the
// apiserver flags that enable it with a log file in logDir (no rotation within a run).
func writeAuditPolicy(stateDir, logDir string, users []string) ([]string, error) {
	policy := filepath.Join(stateDir, auditPolicyFile)
	if err := os.WriteFile(policy, []byte(auditPolicy(users)), 0o600); err != nil {
		return nil, fmt.Errorf("writing the audit policy: %w", err)
	}
	return []string{
		"--audit-policy-file=" + policy,
		"--audit-log-path=" + filepath.Join(logDir, auditLogFile),
		"--audit-log-format=json",
		"--audit-log-maxsize=10240",
		"--audit-log-maxbackup=1",
	}, nil
}

package localcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// auditPolicyFile and auditLogFile are the audit policy (in StateDir) and the audit log
// (in LogDir) written when Options.AuditLog or Options.AuditUsers is set.
const (
	auditPolicyFile = "audit-policy.yaml"
	auditLogFile    = "audit.log"
)

// auditPolicy returns the audit policy of the local apiserver. It logs at level Metadata
// (who, what, which object, the response code) every write once complete. Without users,
// it also logs the lists and watches of the app-controller API group (a relist after a
// 410 Gone shows as a list or a watch list), a watch as soon as it started
// (ResponseStarted) and again when it ends. With users, only those users' writes are
// logged (the benchmark counts each client's writes apart). The writes of bodies'
// resources are logged with their bodies, at the level each asks. Nothing else is logged.
func auditPolicy(users []string, bodies []AuditBody) string {
	var sb strings.Builder
	sb.WriteString("apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n")
	// Rules match in order: the writes logged with their bodies come first.
	for _, b := range bodies {
		fmt.Fprintf(&sb, "- level: %s\n  verbs: [create, update, patch, delete, deletecollection]\n  omitStages: [ResponseStarted]\n", b.Level)
		writeUsers(&sb, users)
		fmt.Fprintf(&sb, "  resources:\n  - group: %q\n    resources:\n", b.Group)
		for _, r := range b.Resources {
			fmt.Fprintf(&sb, "    - %q\n", r)
		}
	}
	sb.WriteString("- level: Metadata\n  verbs: [create, update, patch, delete, deletecollection]\n  omitStages: [ResponseStarted]\n")
	if len(users) > 0 {
		writeUsers(&sb, users)
	} else {
		sb.WriteString("- level: Metadata\n  verbs: [list, watch]\n  resources:\n  - group: appcontroller.k8s.io\n")
	}
	sb.WriteString("- level: None\n")
	return sb.String()
}

// AuditBody names resources of an API group whose writes the audit log records with
// their bodies (Options.AuditBodies).
type AuditBody struct {
	// Group is the API group ("" for the core group); Resources its resources, a
	// subresource as "apps/status".
	Group     string
	Resources []string
	// Level is AuditLevelRequest (the request's body) or AuditLevelRequestResponse
	// (also the object the API server answered: the object as written, whatever the
	// patch).
	Level string
}

// The audit levels of an AuditBody.
const (
	AuditLevelRequest         = "Request"
	AuditLevelRequestResponse = "RequestResponse"
)

// writeUsers writes the users of a rule of the audit policy.
func writeUsers(sb *strings.Builder, users []string) {
	if len(users) == 0 {
		return
	}
	sb.WriteString("  users:\n")
	for _, u := range users {
		fmt.Fprintf(sb, "  - %q\n", u)
	}
}

// auditArgs writes the audit policy into StateDir and returns kube-apiserver's audit
// flags, with the log at Cluster.AuditLogPath (no rotation within a run), or nothing when
// neither Options.AuditLog nor Options.AuditUsers asks for a log.
func (c *Cluster) auditArgs() ([]string, error) {
	if c.AuditLogPath == "" {
		return nil, nil
	}
	policy := filepath.Join(c.StateDir, auditPolicyFile)
	if err := os.WriteFile(policy, []byte(auditPolicy(c.opts.AuditUsers, c.opts.AuditBodies)), 0o600); err != nil {
		return nil, fmt.Errorf("writing the audit policy: %w", err)
	}
	return []string{
		"--audit-policy-file=" + policy,
		"--audit-log-path=" + c.AuditLogPath,
		"--audit-log-format=json",
		"--audit-log-mode=blocking",
		"--audit-log-maxsize=10240",
		"--audit-log-maxbackup=1",
	}, nil
}

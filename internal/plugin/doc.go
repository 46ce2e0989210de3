// Package plugin is the logic of the kubectl plugin `kubectl app` (binary kubectl-app):
//
//   - tree: the objects an App owns, found by walking ownerReferences (by UID) through
//     every namespaced resource that discovery reports as listable, with a health word
//     for each computed by kstatus;
//   - status: a compact health summary whose exit code tells scripts whether the App is
//     Ready;
//   - list: the Apps of a namespace, or of all, with their Ready condition;
//   - promote, abort, pause, resume, restart, rollback: the writes of Act;
//   - dashboard: a web UI of all of these, served on 127.0.0.1 from informers
//     (dashboard*.go, the templates and assets of dashboard/), whose buttons call Act.
//
// Everything here takes its API clients (Clients) and an io.Writer, so it runs against
// fake clients in unit tests; cmd/kubectl-app only wires flags and exit codes.
package plugin

package nodelabel

import (
	"time"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

const (
	// ControllerName names the controller in --controllers, the workqueue and logs.
	ControllerName = "nodelabel"

	// FieldManager is the server-side apply field manager of the labels the node labeler
	// sets. The API server tracks which labels it owns: those it stops applying are
	// removed, and labels that other managers set are never touched.
	FieldManager = appv1.FieldManager + "-nodelabel"

	// MaxRetryDelay caps the backoff of a failing node (seed: a 30s retry delay).
	MaxRetryDelay = 30 * time.Second
	// BaseRetryDelay is the delay before the first retry of a failing node; it doubles on
	// each failure in a row, up to MaxRetryDelay.
	BaseRetryDelay = 500 * time.Millisecond
)

// Event reasons. Every Event is recorded on the Node.
const (
	// ReasonLabelsApplied is the reason of the Normal event emitted when the labeler
	// changed the labels it sets on a node.
	ReasonLabelsApplied = "LabelsApplied"
	// ReasonLabelsRemoved is the reason of the Normal event emitted when a node stopped
	// matching every rule and the labeler removed all the labels it had set.
	ReasonLabelsRemoved = "LabelsRemoved"
	// ReasonLabelConflict is the reason of the Warning event emitted when a label a rule
	// sets is already set to another value by someone else. That label is left alone.
	ReasonLabelConflict = "LabelConflict"
	// ReasonRuleConflict is the reason of the Warning event emitted when two rules that
	// match a node set a label to different values; the first rule in the file wins.
	ReasonRuleConflict = "RuleConflict"
)

package app

import (
	"context"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
	"github.com/app-controller/app-controller/pkg/rollout"
)

// What every kind of child of an App is to the sync (sync.go runs them, each file
// child_*.go is one): an appChild, the syncInput it reads (with the plan of a canary
// rollout, rolloutPlan) and the childOutcome it returns, which the status reads.

// appChild is one kind of child of an App. Its file says, once: the child's name, how
// its desired object is built, which App wins the name, and what the App's status says
// of it (childOutcome).
type appChild interface {
	// claim returns the claim index key ("Kind/namespace/name") of the name app gives
	// this child: the oldest App that claims it wins it (childReconciler.reconcile,
	// claims.go). "" when no other App can claim it (the route is named as its App) or
	// app asks for no such child.
	claim(app *appv1.App) string
	// sync makes app's child of this kind what app asks for, given what the steps before
	// the children computed (in), and says what it found. It runs in parallel with the
	// other kinds' sync: it reads in and the caches, never another child's outcome.
	sync(ctx context.Context, app *appv1.App, in *syncInput) (childOutcome, error)
}

// syncInput is what syncApp computes before the children, for any child to read. A
// child whose desired state depends on another step (the config hash, the live
// Deployment, its rollout) reads it here; a new dependency is a field here, computed in
// input.
type syncInput struct {
	// selector are the labels that select the App's pods.
	selector map[string]string
	// config is the state of the ConfigMaps and Secrets the pods reference (config.go).
	config podConfig
	// live is the Deployment the App controls under the name its spec gives, as cached
	// (nil: none yet); deploymentRollout(live) tells how far its rollout is.
	live *appsv1.Deployment
	// hashes are the config hashes the App's Deployment carries (config.go).
	hashes configHashes
	// copies is what the sync knows of the copies of the pods' config, with
	// spec.rollout.versionedConfig (configcopy.go); nil without.
	copies *configCopies
	// rollout is the plan of the App's canary rollout (rolloutsync.go): the stable
	// Deployment's template and replicas, the canary Deployment's, the HTTPRoute's
	// weights; nil when the App has none.
	rollout *rolloutPlan
}

// rolloutPlan is what the children are in the App's rollout state: the engine's plan
// (the replicas of each side, the HTTPRoute's weights) and the pod templates the
// Deployments run (rolloutversion.go).
type rolloutPlan struct {
	rollout.Plan
	// state is the rollout state the plan is of, as the App's status carries it; notes
	// are the Events and metrics of its transition when the sync's status write carries
	// it (deferRollout), told once that write is made.
	state *appv1.RolloutStatus
	notes []rollout.Note
	// stableTemplate is the pod template of the stable Deployment: the stable version's.
	// holdStable: it could not be built (the stable revision is gone), and the stable
	// Deployment is left as it is.
	stableTemplate *corev1ac.PodTemplateSpecApplyConfiguration
	holdStable     bool
	// canaryTemplate is the pod template of the canary Deployment when the plan has
	// CanaryReplicas: the rollout's version's (child_canary.go builds the Deployment).
	canaryTemplate *corev1ac.PodTemplateSpecApplyConfiguration
}

// childOutcome is what syncing one kind of child found, in the terms of the App's status.
type childOutcome struct {
	// name is the name the App wants for the child; "" when it asks for none.
	name string
	// obj is the child the App controls under name, nil if none.
	obj metav1.Object
	// conflict says why the name is not the App's (NamesAccepted=False, and the
	// ErrResourceExists Event naming name); "" when it is.
	conflict string
	// changed tells whether the sync wrote to the API server (the Synced Event).
	changed bool
	// rollout marks the App's Deployment: its rollout is what Progressing and Ready
	// report, and its pods' problems what Ready names (status.go, pods.go).
	rollout bool
	// readyNote, if not empty, is added to Ready's message when the App is Ready.
	readyNote string
	// conditions are the child's own conditions (none: it has none, or leaves them as they
	// are). A condition that is False, or Unknown and gatesReady, keeps the App from Ready.
	conditions []childCondition
	// recheck, if not 0, is when what the child reports changes by itself (a grace that
	// ends): the sync runs again then.
	recheck time.Duration
	// report sets the status fields that describe the child (status.serviceStatus,
	// status.route), to their zero value when there is no child.
	report func(status *appv1.AppStatus)
}

// childCondition is a condition of the App that a child reports (RouteAccepted).
type childCondition struct {
	conditionType string
	// status "" removes the condition: the App asks for no such child.
	status          metav1.ConditionStatus
	reason, message string
	// warn emits a Warning Event with the reason and message when the condition does not
	// say them yet: the user must act.
	warn bool
	// informational: Unknown does not keep the App from Ready (an autoscaler that has
	// not reported yet).
	informational bool
}

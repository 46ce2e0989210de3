package v1

import "time"

// What users and tools read on an App and its children: condition types and reasons,
// Event reasons and messages, labels and the field manager. They live beside the types
// so that clients (the kubectl plugin, tests, other controllers) never link the
// controller.

// Condition types of App.status.conditions. Ready, Reconciling and Stalled follow the
// kstatus conventions, so `kubectl wait --for=condition=Ready`, Flux and Argo CD read an
// App's health without custom code.
const (
	// ConditionReady is True when the Deployment is available at the App's current
	// generation with every replica updated, and the Service exists.
	ConditionReady = "Ready"
	// ConditionProgressing is True while the Deployment rolls out.
	ConditionProgressing = "Progressing"
	// ConditionNamesAccepted is False when a child's name is held by something else.
	ConditionNamesAccepted = "NamesAccepted"
	// ConditionReconciling is the kstatus "abnormal-true" twin of Progressing: present
	// and True only while the App is rolling out.
	ConditionReconciling = "Reconciling"
	// ConditionStalled is present and True only when the App cannot make progress without
	// someone acting: a name conflict, a rollout past its deadline, an exhausted retry
	// budget. kstatus reports such an App as Failed.
	ConditionStalled = "Stalled"
	// ConditionContested is present and True only while another writer keeps changing a
	// field of a child that the App owns (say an autoscaler scaling the Deployment of an
	// App that sets replicas): the controller restored the child several times in a row
	// and now waits longer and longer between repairs. Its message names the other field
	// manager. It is removed once the child needed no repair for a while (2 minutes by
	// default).
	ConditionContested = "Contested"
	// ConditionRouteAccepted, present only when the App has a route, is True when its
	// Ingress routes every host, or every Gateway accepted its HTTPRoute; False when a
	// host is held by another namespace (reason HostConflict), the API server refused
	// the Ingress or HTTPRoute (RouteRefused), a Gateway refused the HTTPRoute
	// (GatewayRefused) or the cluster serves no Gateway API (GatewayAPIUnavailable);
	// Unknown while a Gateway has not answered (RoutePending). An App whose route is not
	// accepted is not Ready.
	ConditionRouteAccepted = "RouteAccepted"
	// ConditionScalingActive, present only when the App has spec.autoscaling, says
	// whether its HorizontalPodAutoscaler scales the Deployment: True when it computes a
	// replica count from the pods' metrics (AutoscalerActive); Unknown until it first
	// does, and while it has failed to for less than AutoscalerGrace (AutoscalerPending:
	// a new pod has no metrics for its first scrapes); False when a utilization target
	// names a resource a container does not request (MissingResourceRequest, at once),
	// or when the autoscaler has been unable to compute a count (AutoscalerInactive) or
	// to change the Deployment's (AutoscalerUnableToScale) for AutoscalerGrace. False
	// makes the App not Ready and Stalled (kstatus Failed, Argo CD Degraded); Unknown
	// leaves Ready as it is.
	ConditionScalingActive = "ScalingActive"
	// ConditionScalingLimited, present and True only while the HorizontalPodAutoscaler
	// of spec.autoscaling wants more pods than autoscaling.maxReplicas
	// (MaxReplicasReached): the load is above the target at the maximum. The App stays
	// Ready.
	ConditionScalingLimited = "ScalingLimited"
)

// AutoscalerGrace is how long the HorizontalPodAutoscaler of an App may fail to compute
// a replica count, or to scale, before the App's ScalingActive is False: metrics-server
// has a new pod's figures after two scrapes (15 to 60 s), and a rollout's new pods have
// none at first (argo-cd #6287 reads such an autoscaler Degraded at once).
const AutoscalerGrace = time.Minute

// Reasons of the App's conditions.
const (
	// ReasonAvailable: the Deployment is available and up to date (Ready=True).
	ReasonAvailable = "Available"
	// ReasonRollingOut: the Deployment is rolling out (Progressing=True).
	ReasonRollingOut = "RollingOut"
	// ReasonRolloutComplete: the last rollout finished (Progressing=False).
	ReasonRolloutComplete = "RolloutComplete"
	// ReasonProgressDeadlineExceeded: the rollout exceeded its progress deadline
	// (Stalled=True).
	ReasonProgressDeadlineExceeded = "ProgressDeadlineExceeded"
	// ReasonDeploymentUnavailable: the Deployment does not have its minimum of available
	// replicas (Ready=False).
	ReasonDeploymentUnavailable = "DeploymentUnavailable"
	// ReasonNameConflict: a child's name is held by an object the App does not control,
	// or claimed by an older App (NamesAccepted=False, Stalled=True).
	ReasonNameConflict = "NameConflict"
	// ReasonNoNameConflict: every child name is held by this App (NamesAccepted=True).
	ReasonNoNameConflict = "NoConflicts"
	// ReasonDeleting: the App is being deleted.
	ReasonDeleting = "Deleting"
	// ReasonReconcileFailed: the App's retry budget ran out (Ready=False, Stalled=True);
	// also the reason of the Warning Event that says so. The App is retried at the next
	// resync or change.
	ReasonReconcileFailed = "ReconcileFailed"
	// ReasonCompetingWriter: another field manager keeps changing a child (Contested=True).
	ReasonCompetingWriter = "CompetingWriter"
	// ReasonServiceAccountRefused: the App, in the controller's namespace, would run its
	// pods as the controller's own ServiceAccount, with its cluster-wide rights (Ready
	// False, Stalled True; also the reason of the Warning Event). Its children are left
	// as they are.
	ReasonServiceAccountRefused = "ServiceAccountRefused"
	// ReasonRouted: the route's Ingress routes every host (RouteAccepted=True).
	ReasonRouted = "Routed"
	// ReasonHostConflict: a host of the route is held by another namespace
	// (RouteAccepted=False; also the Warning Event's reason).
	ReasonHostConflict = "HostConflict"
	// ReasonRouteRefused: the API server refused the route's Ingress; the message names
	// the field (RouteAccepted=False).
	ReasonRouteRefused = "RouteRefused"
	// ReasonGatewayRefused: a Gateway did not accept the route's HTTPRoute, or could
	// not resolve its backend (its Accepted or ResolvedRefs condition is False); the
	// message names the Gateway and quotes its condition (RouteAccepted=False).
	ReasonGatewayRefused = "GatewayRefused"
	// ReasonRoutePending: the route's HTTPRoute waits for a Gateway's controller to
	// answer (RouteAccepted=Unknown).
	ReasonRoutePending = "RoutePending"
	// ReasonGatewayAPIUnavailable: the route asks for an HTTPRoute, but the cluster did
	// not serve gateway.networking.k8s.io/v1 HTTPRoutes when the controller started
	// (RouteAccepted=False).
	ReasonGatewayAPIUnavailable = "GatewayAPIUnavailable"

	// ReasonRolloutProgressing: a canary rollout (spec.rollout) runs its steps (Ready
	// False, Progressing and Reconciling True; kstatus InProgress).
	ReasonRolloutProgressing = "RolloutProgressing"
	// ReasonRolloutPaused: a canary rollout waits at a pause step or was paused by
	// `kubectl app pause` (Ready False, Progressing and Reconciling True: kstatus
	// InProgress, never Current; Argo CD Suspended).
	ReasonRolloutPaused = "RolloutPaused"
	// ReasonRolloutPromoting: a canary rollout passed its last step; the stable
	// Deployment rolls to the new pod template (Ready False, Progressing and Reconciling
	// True).
	ReasonRolloutPromoting = "RolloutPromoting"
	// ReasonRolloutAborted: a canary rollout was aborted, and all traffic went back to
	// the stable pods (Ready False, Stalled True: kstatus Failed, Argo CD Degraded); the
	// message says why, naming the canary pod and container. Also the reason of the
	// Warning Event that says so.
	ReasonRolloutAborted = "RolloutAborted"
	// ReasonAbortRequested: status.rollout.abortReason of a rollout aborted by `kubectl
	// app abort`.
	ReasonAbortRequested = "AbortRequested"
	// ReasonAnalysisFailed: status.rollout.abortReason of a rollout aborted by a check of
	// its analysis that failed beyond its failureLimit; the message names the check, the
	// value and the threshold.
	ReasonAnalysisFailed = "AnalysisFailed"
	// ReasonAnalysisInconclusive: status.rollout.abortReason of a rollout whose analysis
	// stayed inconclusive (no data, too few requests) until progressDeadlineSeconds.
	ReasonAnalysisInconclusive = "AnalysisInconclusive"
	// ReasonPrometheusNotConfigured: status.rollout.abortReason of a rollout that asks
	// for metric checks (successRate, latency, query) when the controller has no
	// --prometheus-url: it is aborted as it starts (Ready=False, Stalled, a Warning
	// Event), and the message says so.
	ReasonPrometheusNotConfigured = "PrometheusNotConfigured"
	// ReasonAnalysisTemplateNotFound: a check of the rollout's current step refers to an
	// AnalysisTemplate or ClusterAnalysisTemplate that does not exist (Ready=False and
	// Progressing=True with this reason, the message naming the template; also the
	// reason of the Warning Event and of the check's status). The step holds until the
	// template is created, and the rollout aborts at progressDeadlineSeconds
	// (AnalysisInconclusive) if it is not.
	ReasonAnalysisTemplateNotFound = "AnalysisTemplateNotFound"
	// ReasonAnalysisTemplateInvalid: a check gives its template an argument the template
	// does not declare, or none to one without a default, or the template's query cannot
	// be filled in; held and reported as ReasonAnalysisTemplateNotFound is.
	ReasonAnalysisTemplateInvalid = "AnalysisTemplateInvalid"
)

// Reasons of Ready=False (and of Reconciling or Stalled) that name a problem of the App's
// pods, read from their status: the message names the pod and the container. See
// pkg/podhealth for how a pod's status maps to them and docs/reference/api.md for when they make
// the App Stalled.
const (
	// ReasonImagePullFailed: a container's image cannot be pulled (the kubelet's
	// ErrImagePull, ImagePullBackOff, InvalidImageName, ErrImageNeverPull).
	ReasonImagePullFailed = "ImagePullFailed"
	// ReasonContainerConfigError: a container cannot be created from its spec (the
	// kubelet's CreateContainerConfigError, say a missing ConfigMap or Secret key, or
	// CreateContainerError).
	ReasonContainerConfigError = "ContainerConfigError"
	// ReasonCrashLoopBackOff: a container keeps exiting; the message has its last exit
	// code, its restart count and its termination message.
	ReasonCrashLoopBackOff = "CrashLoopBackOff"
	// ReasonOOMKilled: a container was killed for using more memory than its limit.
	ReasonOOMKilled = "OOMKilled"
	// ReasonContainerNotReady: a container runs but its readiness (or startup) probe has
	// not passed 20 s after it started (podhealth.NotReadyGrace).
	ReasonContainerNotReady = "ContainerNotReady"
	// ReasonUnschedulable: the scheduler cannot place a pod; the message is the
	// scheduler's (say "0/1 nodes are available: 1 Insufficient cpu.").
	ReasonUnschedulable = "Unschedulable"
	// ReasonConfigNotFound: a ConfigMap or Secret that the pods reference (not marked
	// optional) does not exist; the pods wait for it. Also the reason of the Warning
	// Event emitted when it goes missing.
	ReasonConfigNotFound = "ConfigNotFound"
)

// Reasons about spec.autoscaling that the API server cannot check (docs/autoscaling.md).
const (
	// ReasonMissingResourceRequest: a utilization target of spec.autoscaling (cpu or
	// memory averageUtilization, a percentage of what the containers request) names a
	// resource that a container of the App's pods does not request, so the
	// HorizontalPodAutoscaler cannot compute it and does not scale. The message names the
	// container and the resource (ScalingActive=False; also a Warning Event). A request
	// the namespace's LimitRange gives the pods is not in the App: the autoscaler's own
	// ScalingActive=True then wins.
	ReasonMissingResourceRequest = "MissingResourceRequest"
	// ReasonAutoscalerActive: the HorizontalPodAutoscaler computes a replica count from
	// the pods' metrics (ScalingActive=True).
	ReasonAutoscalerActive = "AutoscalerActive"
	// ReasonAutoscalerPending: the HorizontalPodAutoscaler has not computed a replica
	// count yet, or has failed to for less than AutoscalerGrace; the message quotes its
	// reason (ScalingActive=Unknown).
	ReasonAutoscalerPending = "AutoscalerPending"
	// ReasonAutoscalerInactive: the HorizontalPodAutoscaler has not been able to compute
	// a replica count for AutoscalerGrace (its ScalingActive=False: no metrics API, no
	// metrics for the pods, the Deployment scaled to 0); the message quotes its reason and
	// message (ScalingActive=False, Ready=False, Stalled=True; also a Warning Event).
	ReasonAutoscalerInactive = "AutoscalerInactive"
	// ReasonAutoscalerUnableToScale: the HorizontalPodAutoscaler has not been able to
	// read or change the Deployment's scale for AutoscalerGrace (its AbleToScale=False:
	// FailedGetScale, FailedUpdateScale); the message quotes it (ScalingActive=False,
	// Ready=False, Stalled=True; also a Warning Event).
	ReasonAutoscalerUnableToScale = "AutoscalerUnableToScale"
	// ReasonMaxReplicasReached: the HorizontalPodAutoscaler wants more pods than
	// autoscaling.maxReplicas (its ScalingLimited=True, TooManyReplicas):
	// ScalingLimited=True.
	ReasonMaxReplicasReached = "MaxReplicasReached"
)

// Event reasons and messages of Events about an App. The first four are the seed's.
const (
	// EventReasonSynced is the reason of the Normal Event emitted when a sync changed a
	// child.
	EventReasonSynced = "Synced"
	// EventMessageSynced is the message of the EventReasonSynced Event.
	EventMessageSynced = "App synced successfully"
	// EventReasonResourceExists is the reason of the Warning Event emitted when a child's
	// name is held by an object the App does not control.
	EventReasonResourceExists = "ErrResourceExists"
	// EventMessageResourceExists is the message of the EventReasonResourceExists Event;
	// %q is the name.
	EventMessageResourceExists = "Resource %q already exists and is not managed by App"
	// EventReasonPruned is the reason of the Normal Event emitted when a child the App no
	// longer wants (renamed or removed template) is deleted.
	EventReasonPruned = "Pruned"
	// EventReasonContested is the reason of the Warning Event emitted when a child
	// becomes contested (see ConditionContested); its message names the other field
	// manager.
	EventReasonContested = "Contested"

	// EventReasonRolloutStarted is the reason of the Normal Event emitted when a change
	// of the pod template starts a canary rollout (or restarts one toward a newer
	// change).
	EventReasonRolloutStarted = "RolloutStarted"
	// EventReasonRolloutStep is the reason of the Normal Event emitted when a canary
	// rollout completes a step.
	EventReasonRolloutStep = "RolloutStep"
	// EventReasonRolloutPaused is the reason of the Normal Event emitted when `kubectl
	// app pause` paused a rollout; EventReasonRolloutResumed when it goes on.
	EventReasonRolloutPaused  = "RolloutPaused"
	EventReasonRolloutResumed = "RolloutResumed"
	// EventReasonRolloutPromoted is the reason of the Normal Event emitted when the new
	// pod template became the stable one.
	EventReasonRolloutPromoted = "RolloutPromoted"
	// EventReasonRolloutRolledBack is the reason of the Normal Event emitted when a change
	// back to the stable pod template, or to a recent one (rollbackWindow), went at once,
	// without the steps.
	EventReasonRolloutRolledBack = "RolloutRolledBack"
	// EventReasonRolloutRequestIgnored is the reason of the Warning Event emitted when a
	// `kubectl app` request names a rollout or a step that is not the current one.
	EventReasonRolloutRequestIgnored = "RolloutRequestIgnored"

	// EventReasonAutoscalingRemoved is the reason of the Normal Event emitted when the
	// HorizontalPodAutoscaler of a removed spec.autoscaling is deleted; its message says
	// what becomes of the Deployment's replicas ("replicas 8 -> 2
	// (deploymentTemplate.replicas)" or "replicas stay at 8").
	EventReasonAutoscalingRemoved = "AutoscalingRemoved"
)

// Labels, names and the field manager of an App's children.
const (
	// NameLabel is set to "app" on every child and pod of an App; with InstanceLabel it
	// forms the App's selector, so the Services of two Apps never select each other's
	// pods.
	NameLabel = "app.kubernetes.io/name"
	// InstanceLabel is set to the App's name on every child and pod of an App.
	InstanceLabel = "app.kubernetes.io/instance"
	// ManagedByLabel marks the objects that app-controller creates and manages, with the
	// value ManagedByValue (App children and the Ingresses of annotated Services).
	ManagedByLabel = "app.kubernetes.io/managed-by"
	// ManagedByValue is the value of ManagedByLabel on managed objects.
	ManagedByValue = "app-controller"
	// FieldManager is the server-side apply field manager of every write app-controller
	// makes (the node labeler uses FieldManager + "-nodelabel"), and its Event source.
	FieldManager = "app-controller"

	// ContainerName is the name of the container of an App's pods (the seed's name).
	ContainerName = "app-deploy-container"
	// PortName names the container port and the Service port of an App.
	PortName = "http"

	// ConfigHashAnnotation, on the pod template of an App's Deployment, is a hash of the
	// versions of the ConfigMaps and Secrets its pods reference when they were rolled
	// for them; on the Deployment itself, the hash of the versions the controller last
	// saw. When a referenced object changes, the two differ and the pods roll.
	ConfigHashAnnotation = "appcontroller.k8s.io/config-hash"
	// ChangeCauseAnnotation on an App says why its spec changed (as on a Deployment); it
	// is copied to the App's revision and shown by `kubectl app history`.
	ChangeCauseAnnotation = "kubernetes.io/change-cause"
	// RestartedAtAnnotation on a pod template rolls its pods when it changes: `kubectl
	// rollout restart` and `kubectl app restart` set it to the time of the restart. On an
	// App with spec.rollout, `kubectl app restart` sets it on the App instead, and the
	// controller copies it into the pod template: the restart is a canary rollout.
	RestartedAtAnnotation = "kubectl.kubernetes.io/restartedAt"
	// RolloutRequestAnnotation on an App is a request of `kubectl app promote`, `abort`,
	// `pause` or `resume` to the App's canary rollout: a RolloutRequest as JSON.
	RolloutRequestAnnotation = "appcontroller.k8s.io/rollout-request"
	// TrackLabel is set to TrackCanary on the canary Deployment of a rollout, in its
	// selector and on its pods; the stable pods do not carry it (adding it would roll
	// them). The App's Service selects both.
	TrackLabel = "appcontroller.k8s.io/track"
	// TrackCanary is the value of TrackLabel on the canary's pods.
	TrackCanary = "canary"
	// CanarySuffix is added to the names of the App's Deployment and Service to name the
	// canary Deployment and, with an HTTPRoute, the Service that selects the canary pods.
	CanarySuffix = "-canary"
	// StableSuffix is added to the name of the App's Service to name, with an HTTPRoute,
	// the Service that selects only the stable pods during a rollout.
	StableSuffix = "-stable"
	// RevisionDataKey is the key of an App revision's data that holds the App's spec:
	// ControllerRevision.data is {"spec": {...}}, without spec.revisionHistoryLimit.
	RevisionDataKey = "spec"
)

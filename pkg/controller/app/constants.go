package app

// Event reasons and messages. The first four are the ones seed users already know.
const (
	// SuccessSynced is the reason of the Normal event emitted when a sync changed a child.
	SuccessSynced = "Synced"
	// MessageResourceSynced is the message of the SuccessSynced event.
	MessageResourceSynced = "App synced successfully"
	// ErrResourceExists is the reason of the Warning event emitted when a child's name is
	// held by an object the App does not control.
	ErrResourceExists = "ErrResourceExists"
	// MessageResourceExists is the message of the ErrResourceExists event; %q is the name.
	MessageResourceExists = "Resource %q already exists and is not managed by App"

	// ReasonSyncFailed is the reason of the Warning event emitted on the first failure of
	// a streak of failed syncs.
	ReasonSyncFailed = "SyncFailed"
	// ReasonReconcileFailed is the reason of the Warning event, and of the Ready and
	// Stalled conditions, when an App's retry budget ran out.
	ReasonReconcileFailed = "ReconcileFailed"
	// ReasonPruned is the reason of the Normal event emitted when a child the App no longer
	// wants (renamed or removed template) is deleted.
	ReasonPruned = "Pruned"
)

// Condition types of App.status.conditions.
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
)

// Condition reasons.
const (
	ReasonAvailable                = "Available"
	ReasonRollingOut               = "RollingOut"
	ReasonRolloutComplete          = "RolloutComplete"
	ReasonProgressDeadlineExceeded = "ProgressDeadlineExceeded"
	ReasonDeploymentUnavailable    = "DeploymentUnavailable"
	ReasonNameConflict             = "NameConflict"
	ReasonNamesAccepted            = "NoConflicts"
	ReasonDeleting                 = "Deleting"
)

// Labels on every child and pod of an App. The selector uses NameLabel and
// InstanceLabel, so the Services of two Apps never select each other's pods.
const (
	NameLabel     = "app.kubernetes.io/name"
	InstanceLabel = "app.kubernetes.io/instance"
)

const (
	// ControllerName names the controller in --controllers, the workqueue and logs.
	ControllerName = "app"

	// ContainerName is the name of the container of an App's pods (the seed's name).
	ContainerName = "app-deploy-container"
	// PortName names the container port and the Service port.
	PortName = "http"

	// DefaultWorkers is the default number of concurrent syncs (seed: 5).
	DefaultWorkers = 5
	// MaxRetries is how many times in a row a failing App is retried with backoff before
	// the controller reports ReconcileFailed and waits for the next resync or change
	// (seed: 10).
	MaxRetries = 10

	// claimIndex indexes Apps by the child names they claim, "Kind/namespace/name".
	claimIndex = "app.appcontroller.k8s.io/claim"
	// controllerIndex indexes children by the UID of their controlling App.
	controllerIndex = "app.appcontroller.k8s.io/controller-uid"
)

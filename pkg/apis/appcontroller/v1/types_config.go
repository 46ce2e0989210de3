package v1

// Config that belongs to a version (spec.rollout.versionedConfig): the names users and
// tools read on the copies the controller makes of an App's ConfigMaps and Secrets, and
// on the App. docs/progressive-delivery.md, "Config that belongs to a version".

const (
	// ConfigCopyOfAnnotation, on an immutable copy of a ConfigMap or Secret that an
	// App's pods read (named NAME-HASH after its data), is the name of the object it
	// copies, in the same namespace and of the same kind.
	ConfigCopyOfAnnotation = "appcontroller.k8s.io/config-copy-of"
	// ConfigCopiesAnnotation, on a ControllerRevision of an App with versionedConfig, is
	// the config hash of the last version of that revision that ran as the stable one
	// (or that it started with): a rollback to the revision brings back its copies.
	ConfigCopiesAnnotation = "appcontroller.k8s.io/config-copies"

	// ConditionConfigVersioned, present only with spec.rollout.versionedConfig, says
	// which referenced ConfigMaps and Secrets each version reads a copy of. It is True:
	// the copies never keep the App from Ready, and what is not copied is read directly,
	// as without versionedConfig.
	ConditionConfigVersioned = "ConfigVersioned"
	// ReasonConfigCopied: every referenced ConfigMap and Secret that exists is copied
	// (ConfigVersioned=True).
	ReasonConfigCopied = "ConfigCopied"
	// ReasonSecretsNotCopied: the controller does not read Secrets
	// (--config-rollout-secrets=false, the chart's configRollout.secrets false): the
	// pods read the Secrets they reference directly, shared by every version; the
	// ConfigMaps are copied (ConfigVersioned=True, with a Warning Event).
	ReasonSecretsNotCopied = "SecretsNotCopied"
)

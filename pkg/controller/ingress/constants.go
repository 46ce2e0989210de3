package ingress

// Annotations on a Service that the controller reads. AnnotationHTTP is the seed's.
const (
	// AnnotationHTTP set to "true" asks for an Ingress routing to the Service. Any other
	// value, or none, means no Ingress: the one the Service controls is deleted.
	AnnotationHTTP = "ingress/http"
	// AnnotationHost is the host the Ingress rule matches; unset or empty: every host.
	AnnotationHost = "ingress/host"
	// AnnotationPath is the path prefix routed to the Service; unset or empty: "/".
	AnnotationPath = "ingress/path"
	// AnnotationClass is the IngressClass of the Ingress; unset or empty: the controller's
	// --ingress-class, else the cluster's default class.
	AnnotationClass = "ingress/class"
	// AnnotationPort names the Service port the Ingress routes to, by name or number
	// (an App's metrics or gRPC port beside its HTTP port); unset or empty: the first TCP
	// port.
	AnnotationPort = "ingress/port"
	// AnnotationTLSSecret names the Secret (in the Service's namespace) that holds the
	// certificate of ingress/host: the Ingress terminates TLS for the host with it. With
	// AnnotationIssuer or AnnotationClusterIssuer, cert-manager issues it into that
	// Secret. Requires ingress/host.
	AnnotationTLSSecret = "ingress/tls-secret"
	// AnnotationIssuer and AnnotationClusterIssuer name the cert-manager Issuer (in the
	// Service's namespace) or ClusterIssuer that issues the certificate of
	// ingress/tls-secret: the Ingress carries cert-manager's ingress-shim annotation
	// (cert-manager.io/issuer or cert-manager.io/cluster-issuer). At most one of the two.
	AnnotationIssuer        = "ingress/issuer"
	AnnotationClusterIssuer = "ingress/cluster-issuer"
)

// The annotations cert-manager's ingress-shim reads on an Ingress.
const (
	certManagerIssuer        = "cert-manager.io/issuer"
	certManagerClusterIssuer = "cert-manager.io/cluster-issuer"
)

// Event reasons. Every Event is recorded on the Service.
const (
	// ReasonIngressCreated is the reason of the Normal event emitted when the controller
	// created a Service's Ingress.
	ReasonIngressCreated = "IngressCreated"
	// ReasonIngressUpdated is the reason of the Normal event emitted when the controller
	// changed a Service's Ingress back to what the Service asks for.
	ReasonIngressUpdated = "IngressUpdated"
	// ReasonIngressDeleted is the reason of the Normal event emitted when the controller
	// deleted the Ingress of a Service that no longer asks for one.
	ReasonIngressDeleted = "IngressDeleted"
	// ErrResourceExists is the reason of the Warning event emitted when the Ingress name
	// is held by an Ingress the Service does not control. That Ingress is left alone.
	ErrResourceExists = "ErrResourceExists"
	// MessageResourceExists is the message of the ErrResourceExists event; %q is the name.
	MessageResourceExists = "Ingress %q already exists and is not controlled by this Service; leaving it alone"
	// ReasonInvalidAnnotation is the reason of the Warning event emitted when an ingress/*
	// annotation has a value an Ingress cannot hold. Nothing is written until it is fixed.
	ReasonInvalidAnnotation = "InvalidAnnotation"
	// ReasonHostConflict is the reason of the Warning event emitted when the Service's
	// host is held by another namespace (hosts.go): it gets no Ingress for it.
	ReasonHostConflict = "HostConflict"
	// ReasonCatchAllRefused is the reason of the Warning event emitted when a Service
	// without ingress/host asks for a catch-all rule in a namespace that may not have
	// one (--ingress-catch-all-namespaces).
	ReasonCatchAllRefused = "CatchAllRefused"
	// ReasonNoServicePort is the reason of the Warning event emitted when a Service that
	// asks for an Ingress has no TCP port to route to (no port at all, or only UDP or
	// SCTP ports: an Ingress carries HTTP over TCP). Nothing is written until it has one.
	ReasonNoServicePort = "NoServicePort"
	// ReasonUnsupportedServiceType is the reason of the Warning event emitted when a
	// Service of type ExternalName asks for an Ingress: it has no endpoints in the
	// cluster to route to. Nothing is written.
	ReasonUnsupportedServiceType = "UnsupportedServiceType"
	// ReasonIngressRejected is the reason of the Warning event emitted when the API server
	// rejects the Ingress as invalid. It is not retried until the Service changes.
	ReasonIngressRejected = "IngressRejected"
)

const (
	// ControllerName names the controller in --controllers, the workqueue and logs.
	ControllerName = "ingress"

	// MaxRetries is how many times in a row a failing Service is retried with backoff
	// before the controller gives up until the Service or its Ingress changes (seed: 10).
	MaxRetries = 10

	// defaultPath is the seed's path: everything.
	defaultPath = "/"
)

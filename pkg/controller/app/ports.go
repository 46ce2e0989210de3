package app

import (
	corev1 "k8s.io/api/core/v1"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// The ports of an App's Service and of its container, as the API describes them. A leaf
// of the sync's walk: it calls nothing else of the package.

// defaultServicePort is the seed's Service port, also the schema default.
const defaultServicePort int32 = 8080

// firstServicePort returns the number and the name of the first port of the Service t
// describes (port and portName), defaults applied; the ports of t.Ports follow it.
func firstServicePort(t *appv1.ServiceTemplate) (int32, string) {
	port, name := t.Port, t.PortName
	if port == 0 {
		port = defaultServicePort
	}
	if name == "" {
		name = appv1.PortName
	}
	return port, name
}

// protocolOrTCP returns p, or TCP when it is empty.
func protocolOrTCP(p corev1.Protocol) corev1.Protocol {
	if p == "" {
		return corev1.ProtocolTCP
	}
	return p
}

// portProtocol is the protocol of the App's container port and Service port:
// serviceTemplate.protocol, else TCP.
func portProtocol(app *appv1.App) corev1.Protocol {
	if t := app.Spec.ServiceTemplate; t != nil && t.Protocol != "" {
		return t.Protocol
	}
	return corev1.ProtocolTCP
}

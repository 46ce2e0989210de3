package app

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// The ports of an App's Service and of its container, as the API describes them. A leaf
// of the sync's walk: it calls nothing else of the package.

// defaultServicePort is the seed's Service port, also the schema default.
const defaultServicePort int32 = 8080

// servicePort is a port of the App's Service, defaults applied.
type servicePort struct {
	name       string
	port       int32
	protocol   corev1.Protocol
	targetPort intstr.IntOrString
	nodePort   *int32
}

// servicePorts returns the ports of the Service app asks for, in order, defaults
// applied; nil without serviceTemplate. The first is port, portName, protocol,
// targetPort (else deploymentTemplate.containerPort, else port) and nodePort; then the
// ports of serviceTemplate.ports, each targetPort defaulting to its port.
func servicePorts(app *appv1.App) []servicePort {
	t := app.Spec.ServiceTemplate
	if t == nil {
		return nil
	}
	port, name := firstServicePort(t)
	target := port
	switch {
	case t.TargetPort != nil:
		target = *t.TargetPort
	case app.Spec.DeploymentTemplate != nil && app.Spec.DeploymentTemplate.ContainerPort != nil:
		target = *app.Spec.DeploymentTemplate.ContainerPort
	}
	ports := []servicePort{{name: name, port: port, protocol: portProtocol(app), targetPort: intstr.FromInt32(target), nodePort: t.NodePort}}
	for _, p := range t.Ports {
		target := intstr.FromInt32(p.Port)
		if p.TargetPort != nil {
			target = *p.TargetPort
		}
		ports = append(ports, servicePort{name: p.Name, port: p.Port, protocol: protocolOrTCP(p.Protocol), targetPort: target, nodePort: p.NodePort})
	}
	return ports
}

// findServicePort returns the port of ports that want names, by name or number, or an
// error naming field and the ports there are.
func findServicePort(ports []servicePort, want intstr.IntOrString, field string) (servicePort, error) {
	have := make([]string, 0, len(ports))
	for _, p := range ports {
		if want.Type == intstr.Int && p.port == want.IntVal || want.Type == intstr.String && p.name == want.StrVal {
			return p, nil
		}
		have = append(have, fmt.Sprintf("%s %d", p.name, p.port))
	}
	what := fmt.Sprintf("no port named %q", want.StrVal)
	if want.Type == intstr.Int {
		what = fmt.Sprintf("no port %d", want.IntVal)
	}
	return servicePort{}, fmt.Errorf("%s: the App's Service has %s (its ports: %s): name one of them, or add it to serviceTemplate.ports",
		field, what, strings.Join(have, ", "))
}

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

package app

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

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
// applied; nil without serviceTemplate. The first port is port, portName, protocol,
// targetPort (else deploymentTemplate.containerPort, else port) and nodePort; the ports
// of serviceTemplate.ports follow, each targetPort defaulting to its port. An entry of
// ports that restates the first port (restatedFirst) is the first port: ports is then
// the whole list, as in a Service, and that entry's fields fill the first port's, its
// targetPort defaulting as the first port's does.
func servicePorts(app *appv1.App) []servicePort {
	t := app.Spec.ServiceTemplate
	if t == nil {
		return nil
	}
	port, name := firstServicePort(t)
	first := servicePort{name: name, port: port, protocol: portProtocol(app), nodePort: t.NodePort}
	rest := t.Ports
	var target *intstr.IntOrString
	if i := restatedFirst(t); i >= 0 {
		e := t.Ports[i]
		first.name, first.port, target = e.Name, e.Port, e.TargetPort
		if e.NodePort != nil {
			first.nodePort = e.NodePort
		}
		rest = slices.Delete(slices.Clone(t.Ports), i, i+1)
	}
	switch {
	case target != nil:
		first.targetPort = *target
	case t.TargetPort != nil:
		first.targetPort = intstr.FromInt32(*t.TargetPort)
	case app.Spec.DeploymentTemplate != nil && app.Spec.DeploymentTemplate.ContainerPort != nil:
		first.targetPort = intstr.FromInt32(*app.Spec.DeploymentTemplate.ContainerPort)
	default:
		first.targetPort = intstr.FromInt32(first.port)
	}
	ports := []servicePort{first}
	for _, p := range rest {
		target := intstr.FromInt32(p.Port)
		if p.TargetPort != nil {
			target = *p.TargetPort
		}
		ports = append(ports, servicePort{name: p.Name, port: p.Port, protocol: protocolOrTCP(p.Protocol), targetPort: target, nodePort: p.NodePort})
	}
	return ports
}

// restatedFirst returns the index of the entry of t.Ports that restates the first port,
// or -1 when none does: the entry named as the first port (portName, http by default),
// else the entry with its number and protocol (port, 8080 by default, and protocol, TCP
// by default). The schema refuses an entry whose other fields contradict the first
// port's (types.go).
func restatedFirst(t *appv1.ServiceTemplate) int {
	port, name := firstServicePort(t)
	if i := slices.IndexFunc(t.Ports, func(p appv1.ServicePort) bool { return p.Name == name }); i >= 0 {
		return i
	}
	protocol := protocolOrTCP(t.Protocol)
	return slices.IndexFunc(t.Ports, func(p appv1.ServicePort) bool { return p.Port == port && protocolOrTCP(p.Protocol) == protocol })
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
// describes by port and portName, defaults applied (an entry of t.Ports may restate it:
// servicePorts).
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

// portProtocol is the protocol of the App's container port and of its Service's first
// port: serviceTemplate.protocol, else that of the entry of serviceTemplate.ports that
// restates the first port, else TCP.
func portProtocol(app *appv1.App) corev1.Protocol {
	t := app.Spec.ServiceTemplate
	switch {
	case t == nil:
		return corev1.ProtocolTCP
	case t.Protocol != "":
		return t.Protocol
	}
	if i := restatedFirst(t); i >= 0 {
		return protocolOrTCP(t.Ports[i].Protocol)
	}
	return corev1.ProtocolTCP
}

// containerPorts returns the ports of app's container, in order: deploymentTemplate's
// containerPort, named as the Service's first port's target (appv1.PortName) with its
// protocol (portProtocol), then those of deploymentTemplate.ports, TCP by default.
func containerPorts(app *appv1.App) []*corev1ac.ContainerPortApplyConfiguration {
	t := app.Spec.DeploymentTemplate
	var out []*corev1ac.ContainerPortApplyConfiguration
	if t.ContainerPort != nil {
		out = append(out, corev1ac.ContainerPort().
			WithName(appv1.PortName).
			WithContainerPort(*t.ContainerPort).
			WithProtocol(portProtocol(app)))
	}
	for _, p := range t.Ports {
		out = append(out, corev1ac.ContainerPort().
			WithName(p.Name).
			WithContainerPort(p.ContainerPort).
			WithProtocol(protocolOrTCP(p.Protocol)))
	}
	return out
}
